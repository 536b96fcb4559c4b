#include "hypervisor/local/backend.h"

#include <map>
#include <string>

#include "hypervisor/backend_constructors.h"
#include "hypervisor/local/domain.h"
#include "hypervisor/local/event_channels.h"
#include "hypervisor/local/grants.h"
#include "hypervisor/local/guest_io.h"
#include "hypervisor/local/guest_memory.h"
#include "hypervisor/local/hv_client.h"
#include "hypervisor/local/ioreq_server.h"
#include "hypervisor/local/store.h"

namespace gpuvm::hv::local {
namespace {

Result<std::unique_ptr<GuestIo>> OpenLocalGuestIo(const LocalDomain& domain,
                                                  const GuestIoOptions& options) {
  GPUVM_ASSIGN_OR_RETURN(auto io, LocalGuestIo::Create(domain, options.timeout, options.busy_poll));
  if (options.note) io->set_note(options.note, options.slow_note);
  return std::unique_ptr<GuestIo>(std::move(io));
}

class LocalBackend final : public Backend {
 public:
  explicit LocalBackend(const BackendOptions& options)
      : hv_path_(options.local_hv_path.empty() ? DefaultHvSocketPath() : options.local_hv_path),
        domain_fd_(options.local_domain_fd) {}

  BackendKind kind() const override { return BackendKind::kLocal; }

  Status CreateDomain(const DomainConfig& config) override {
    if (domains_.count(config.domid) != 0) {
      return Status::AlreadyExists("domain " + std::to_string(config.domid) + " exists");
    }
    GPUVM_ASSIGN_OR_RETURN(
        std::unique_ptr<LocalDomain> domain,
        LocalDomain::Create(
            {.domid = config.domid, .ram_bytes = config.ram_bytes, .vcpus = config.vcpus}));
    domains_[config.domid] = std::move(domain);
    return Status::Ok();
  }

  Result<std::unique_ptr<IoreqServer>> CreateIoreqServer(DomainId domid) override {
    GPUVM_ASSIGN_OR_RETURN(std::shared_ptr<const LocalDomain> domain, Domain(domid));
    GPUVM_ASSIGN_OR_RETURN(auto server, LocalIoreqServer::Create(*domain));
    return std::unique_ptr<IoreqServer>(std::move(server));
  }

  Result<std::unique_ptr<GuestMemory>> OpenGuestMemory(DomainId domid) override {
    GPUVM_ASSIGN_OR_RETURN(std::shared_ptr<const LocalDomain> domain, Domain(domid));
    GPUVM_ASSIGN_OR_RETURN(auto memory, LocalGuestMemory::Create(*domain));
    return std::unique_ptr<GuestMemory>(std::move(memory));
  }

  Result<int> GuestRamFd(DomainId domid) override {
    GPUVM_ASSIGN_OR_RETURN(std::shared_ptr<const LocalDomain> domain, Domain(domid));
    return domain->ram_fd();
  }

  Result<std::unique_ptr<GuestMapping>> MapGuestRam(DomainId domid, uint64_t frames,
                                                    uint64_t* holes) override {
    GPUVM_ASSIGN_OR_RETURN(std::shared_ptr<const LocalDomain> domain, Domain(domid));
    GPUVM_ASSIGN_OR_RETURN(auto memory, LocalGuestMemory::Create(*domain));
    // The RAM memfd has no holes; the mapping keeps the RAM mapped after `memory` goes.
    GPUVM_ASSIGN_OR_RETURN(auto mapping, memory->Map(0, frames, Access::kReadWrite));
    if (holes != nullptr) *holes = 0;
    return mapping;
  }

  Result<std::unique_ptr<GuestIo>> OpenGuestIo(DomainId domid,
                                               const GuestIoOptions& options) override {
    GPUVM_ASSIGN_OR_RETURN(std::shared_ptr<const LocalDomain> domain, Domain(domid));
    return OpenLocalGuestIo(*domain, options);
  }

  Result<std::unique_ptr<EventChannels>> OpenEventChannels() override {
    GPUVM_ASSIGN_OR_RETURN(auto channels, LocalEventChannels::Connect(hv_path_, kControlDomain));
    return std::unique_ptr<EventChannels>(std::move(channels));
  }

  Result<std::unique_ptr<GrantSharer>> OpenGrantSharer() override {
    return Status::Unimplemented(
        "local: dom0 has no guest RAM to grant from (a local guest shares frames of its own RAM: "
        "LocalGrantSharer)");
  }

  Result<std::unique_ptr<GrantMapper>> OpenGrantMapper() override {
    GPUVM_ASSIGN_OR_RETURN(std::shared_ptr<LocalHvClient> client,
                           LocalHvClient::Connect(hv_path_, kControlDomain));
    return std::unique_ptr<GrantMapper>(new LocalGrantMapper(
        kControlDomain, [client](DomainId id) { return AttachDomain(*client, id); }));
  }

  Result<std::unique_ptr<Store>> OpenStore() override {
    GPUVM_ASSIGN_OR_RETURN(auto store, LocalStore::Connect(hv_path_, kControlDomain));
    return std::unique_ptr<Store>(std::move(store));
  }

 private:
  // The domain held here; else the one waiting on the launcher's socket (received once); else
  // attached through the daemon (whose connection is not kept: the domain's descriptors are ours).
  Result<std::shared_ptr<const LocalDomain>> Domain(DomainId domid) {
    if (auto it = domains_.find(domid); it != domains_.end()) return it->second;
    std::shared_ptr<const LocalDomain> domain;
    if (domain_fd_ >= 0) {
      const int fd = domain_fd_;
      domain_fd_ = -1;
      GPUVM_ASSIGN_OR_RETURN(domain, LocalDomain::ReceiveFrom(fd));
      domains_[domain->domid()] = domain;
      if (domain->domid() != domid) {
        return Status::InvalidArgument("received domain " + std::to_string(domain->domid()) +
                                       ", not domain " + std::to_string(domid));
      }
    } else {
      GPUVM_ASSIGN_OR_RETURN(auto client, LocalHvClient::Connect(hv_path_, kControlDomain));
      GPUVM_ASSIGN_OR_RETURN(domain, AttachDomain(*client, domid));
      domains_[domid] = domain;
    }
    return domain;
  }

  const std::string hv_path_;
  int domain_fd_;
  std::map<DomainId, std::shared_ptr<const LocalDomain>> domains_;
};

}  // namespace

std::unique_ptr<Backend> NewBackend(const BackendOptions& options) {
  return std::make_unique<LocalBackend>(options);
}

Result<std::unique_ptr<GuestIo>> ReceiveGuestIo(int socket, const GuestIoOptions& options) {
  // Asks for the domain: the launcher answers every request with a copy, so each program a VM runs
  // (one after another: a shell script's) gets its own (tools/gpuvm-vm/launcher.h).
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<LocalDomain> domain, LocalDomain::RequestFrom(socket));
  // The guest side keeps duplicates of every descriptor it needs; the domain can go.
  return OpenLocalGuestIo(*domain, options);
}

}  // namespace gpuvm::hv::local

namespace gpuvm::hv {

std::unique_ptr<Backend> NewLocalBackend(const BackendOptions& options) {
  return local::NewBackend(options);
}

Result<std::unique_ptr<GuestIo>> ReceiveLocalGuestIo(int socket, const GuestIoOptions& options) {
  return local::ReceiveGuestIo(socket, options);
}

}  // namespace gpuvm::hv
