#include "hypervisor/testing/backend_env.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "hypervisor/local/domain.h"
#include "hypervisor/local/event_channels.h"
#include "hypervisor/local/grants.h"
#include "hypervisor/local/guest_io.h"
#include "hypervisor/local/guest_memory.h"
#include "hypervisor/local/hv_client.h"
#include "hypervisor/local/hv_daemon.h"
#include "hypervisor/local/ioreq_server.h"
#include "hypervisor/local/store.h"
#include "hypervisor/xen/xen_backend.h"

namespace gpuvm::hv::testing {
namespace {

using local::LocalDomain;

class LocalEnv : public BackendEnv {
 public:
  static constexpr DomainId kGuest = 1;
  static constexpr uint64_t kRamBytes = 16ull << 20;
  static constexpr uint64_t kGrantPoolFrames = 64;

  Status Init() {
    static std::atomic<int> counter{0};
    path_ = "@gpuvm-test-hv-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    GPUVM_ASSIGN_OR_RETURN(daemon_, local::LocalHvDaemon::Create(path_));
    GPUVM_RETURN_IF_ERROR(daemon_->Start());
    GPUVM_ASSIGN_OR_RETURN(domain_, LocalDomain::Create({kGuest, kRamBytes, 2}));
    GPUVM_ASSIGN_OR_RETURN(ram_, local::LocalGuestMemory::Create(*domain_));
    GPUVM_ASSIGN_OR_RETURN(control_, local::LocalHvClient::Connect(path_, kControlDomain));
    return local::RegisterDomain(*control_, *domain_);
  }

  DomainId guest_domid() const override { return kGuest; }
  DomainId peer_domid() const override { return kGuest; }

  Result<std::unique_ptr<IoreqServer>> CreateIoreqServer() override {
    // As gpuvm-dm does: attach to the registered domain through the daemon, then serve it.
    GPUVM_ASSIGN_OR_RETURN(std::shared_ptr<const LocalDomain> attached,
                           local::AttachDomain(*control_, kGuest));
    GPUVM_ASSIGN_OR_RETURN(auto server, local::LocalIoreqServer::Create(*attached));
    return std::unique_ptr<IoreqServer>(std::move(server));
  }
  Result<std::unique_ptr<GuestMemory>> OpenGuestMemory() override {
    GPUVM_ASSIGN_OR_RETURN(std::shared_ptr<const LocalDomain> attached,
                           local::AttachDomain(*control_, kGuest));
    GPUVM_ASSIGN_OR_RETURN(auto memory, local::LocalGuestMemory::Create(*attached));
    return std::unique_ptr<GuestMemory>(std::move(memory));
  }
  Result<std::unique_ptr<GuestIo>> CreateGuest() override {
    GPUVM_ASSIGN_OR_RETURN(auto io,
                           local::LocalGuestIo::Create(*domain_, std::chrono::seconds(20)));
    return std::unique_ptr<GuestIo>(std::move(io));
  }
  std::span<uint8_t> guest_ram() override { return ram_->ram(); }
  Result<std::unique_ptr<EventChannels>> OpenEventChannels(DomainId as) override {
    GPUVM_ASSIGN_OR_RETURN(auto channels, local::LocalEventChannels::Connect(path_, as));
    return std::unique_ptr<EventChannels>(std::move(channels));
  }
  Result<std::unique_ptr<Store>> OpenStore(DomainId as) override {
    GPUVM_ASSIGN_OR_RETURN(auto store, local::LocalStore::Connect(path_, as));
    return std::unique_ptr<Store>(std::move(store));
  }
  Result<std::unique_ptr<GrantSharer>> OpenGrantSharer() override {
    GPUVM_ASSIGN_OR_RETURN(
        auto sharer, local::LocalGrantSharer::Create(
                         *domain_, domain_->frame_count() - kGrantPoolFrames, kGrantPoolFrames));
    return std::unique_ptr<GrantSharer>(std::move(sharer));
  }
  Result<std::unique_ptr<GrantMapper>> OpenGrantMapper() override {
    GPUVM_ASSIGN_OR_RETURN(std::shared_ptr<local::LocalHvClient> client,
                           local::LocalHvClient::Connect(path_, kControlDomain));
    return std::unique_ptr<GrantMapper>(new local::LocalGrantMapper(
        kControlDomain, [client](DomainId id) { return local::AttachDomain(*client, id); }));
  }
  std::string scratch_store_path() const override { return "/local/domain/0/gpuvm-test"; }

 private:
  std::string path_;
  std::unique_ptr<local::LocalHvDaemon> daemon_;
  std::unique_ptr<LocalDomain> domain_;
  std::unique_ptr<local::LocalGuestMemory> ram_;  // the guest's view of its RAM
  std::unique_ptr<local::LocalHvClient> control_;
};

class XenEnv : public BackendEnv {
 public:
  Status Init() {
    // Probe: dom0 of a running Xen can open the event channel device.
    GPUVM_RETURN_IF_ERROR(xen::OpenEventChannels().status());
    if (const char* domid = std::getenv("GPUVM_XEN_TEST_DOMID"); domid != nullptr) {
      guest_ = static_cast<DomainId>(std::strtoul(domid, nullptr, 10));
    }
    return Status::Ok();
  }

  DomainId guest_domid() const override { return guest_; }
  DomainId peer_domid() const override { return kControlDomain; }  // loop back within dom0

  Result<std::unique_ptr<IoreqServer>> CreateIoreqServer() override {
    GPUVM_RETURN_IF_ERROR(NeedGuest());
    return xen::CreateIoreqServer(guest_);
  }
  Result<std::unique_ptr<GuestMemory>> OpenGuestMemory() override {
    GPUVM_RETURN_IF_ERROR(NeedGuest());
    return xen::OpenGuestMemory(guest_);
  }
  Result<std::unique_ptr<GuestIo>> CreateGuest() override {
    return Status::Unavailable("on Xen the guest makes its own accesses (Xen test bed)");
  }
  std::span<uint8_t> guest_ram() override { return {}; }
  Result<std::unique_ptr<EventChannels>> OpenEventChannels(DomainId) override {
    return xen::OpenEventChannels();
  }
  Result<std::unique_ptr<Store>> OpenStore(DomainId) override { return xen::OpenStore(); }
  Result<std::unique_ptr<GrantSharer>> OpenGrantSharer() override { return xen::OpenGrantSharer(); }
  Result<std::unique_ptr<GrantMapper>> OpenGrantMapper() override { return xen::OpenGrantMapper(); }
  std::string scratch_store_path() const override {
    return "/local/domain/0/gpuvm-test-" + std::to_string(::getpid());
  }

 private:
  Status NeedGuest() const {
    if (guest_ == 0) return Status::Unavailable("set GPUVM_XEN_TEST_DOMID to a test HVM guest");
    return Status::Ok();
  }
  DomainId guest_ = 0;
};

}  // namespace

Result<std::unique_ptr<BackendEnv>> LocalBackend::Open() {
  auto env = std::make_unique<LocalEnv>();
  GPUVM_RETURN_IF_ERROR(env->Init());
  return std::unique_ptr<BackendEnv>(std::move(env));
}

Result<std::unique_ptr<BackendEnv>> XenBackend::Open() {
  auto env = std::make_unique<XenEnv>();
  GPUVM_RETURN_IF_ERROR(env->Init());
  return std::unique_ptr<BackendEnv>(std::move(env));
}

}  // namespace gpuvm::hv::testing
