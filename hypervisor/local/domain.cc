#include "hypervisor/local/domain.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "hypervisor/local/grants.h"

namespace gpuvm::hv::local {
namespace {

constexpr uint32_t kWireMagic = 0x444c5047;  // "GPLD"
constexpr uint16_t kWireVersion = 2;         // 2: the physmap socket pair

struct WireHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t domid;
  uint32_t vcpus;
  uint32_t grant_entries;
  uint64_t ram_bytes;
};
static_assert(sizeof(WireHeader) == 24);

uint64_t GrantTableBytes(uint32_t entries) {
  const uint64_t raw = uint64_t{entries} * sizeof(LocalGrantEntry);
  return (raw + kPageSize - 1) & ~(kPageSize - 1);
}

}  // namespace

uint64_t PackSbdf(const Sbdf& sbdf) {
  return (uint64_t{sbdf.segment} << 16) | (uint64_t{sbdf.bus} << 8) |
         (uint64_t{sbdf.device & 0x1fu} << 3) | (sbdf.function & 0x7u);
}

uint64_t LocalDomain::grant_table_bytes() const { return GrantTableBytes(config_.grant_entries); }

Status LocalDomain::CheckConfig(const LocalDomainConfig& c) {
  if (c.vcpus == 0 || c.vcpus > kMaxLocalVcpus) {
    return Status::InvalidArgument("local domain needs 1.." + std::to_string(kMaxLocalVcpus) +
                                   " vCPUs");
  }
  if (c.ram_bytes == 0 || c.ram_bytes % kPageSize != 0 || c.ram_bytes > kMaxLocalRamBytes) {
    return Status::InvalidArgument("local domain RAM must be whole pages, at most 64 GiB");
  }
  if (c.grant_entries == 0 || c.grant_entries > kMaxGrantEntries) {
    return Status::InvalidArgument("grant table size out of range");
  }
  return Status::Ok();
}

Result<std::unique_ptr<LocalDomain>> LocalDomain::Create(const LocalDomainConfig& config) {
  GPUVM_RETURN_IF_ERROR(CheckConfig(config));
  std::unique_ptr<LocalDomain> d(new LocalDomain());
  d->config_ = config;
  const std::string tag = "gpuvm-dom" + std::to_string(config.domid);
  GPUVM_ASSIGN_OR_RETURN(d->ram_, os::CreateSealedMemfd((tag + "-ram").c_str(), config.ram_bytes));
  GPUVM_ASSIGN_OR_RETURN(
      d->ioreq_, os::CreateSealedMemfd((tag + "-ioreq").c_str(), kIoreqRegionPages * kPageSize));
  GPUVM_ASSIGN_OR_RETURN(d->grants_, os::CreateSealedMemfd((tag + "-grants").c_str(),
                                                           GrantTableBytes(config.grant_entries)));
  GPUVM_ASSIGN_OR_RETURN(d->irq_, os::CreateEventFd());
  for (uint32_t v = 0; v < config.vcpus; ++v) {
    GPUVM_ASSIGN_OR_RETURN(os::UniqueFd request, os::CreateEventFd());
    GPUVM_ASSIGN_OR_RETURN(os::UniqueFd response, os::CreateEventFd());
    d->requests_.push_back(std::move(request));
    d->responses_.push_back(std::move(response));
  }
  int physmap[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, physmap) != 0) {
    return Status::FromErrno(errno, "socketpair (physmap)");
  }
  d->physmap_[0] = os::UniqueFd(physmap[0]);
  d->physmap_[1] = os::UniqueFd(physmap[1]);
  // Stamp the control page so a receiver can tell a live region from garbage.
  GPUVM_ASSIGN_OR_RETURN(
      os::SharedMapping control,
      os::SharedMapping::Map(d->ioreq_.get(), kControlPage * kPageSize, kPageSize, true));
  auto* page = reinterpret_cast<LocalControlPage*>(control.data());
  os::StoreShared(page->vcpus, config.vcpus);
  os::StoreShared(page->magic, kControlPageMagic);
  return d;
}

std::vector<uint8_t> LocalDomain::EncodeHeader() const {
  WireHeader h{kWireMagic,    kWireVersion,          config_.domid,
               config_.vcpus, config_.grant_entries, config_.ram_bytes};
  std::vector<uint8_t> out(sizeof(h));
  std::memcpy(out.data(), &h, sizeof(h));
  return out;
}

std::vector<int> LocalDomain::fds() const {
  std::vector<int> out = {ram_.get(), ioreq_.get(), grants_.get(), irq_.get()};
  for (const os::UniqueFd& fd : requests_) out.push_back(fd.get());
  for (const os::UniqueFd& fd : responses_) out.push_back(fd.get());
  out.push_back(physmap_[0].get());
  out.push_back(physmap_[1].get());
  return out;
}

Status LocalDomain::SendTo(int socket) const {
  const std::vector<uint8_t> header = EncodeHeader();
  const std::vector<int> all = fds();
  return os::SendWithFds(socket, header, all);
}

Result<std::unique_ptr<LocalDomain>> LocalDomain::RequestFrom(int socket) {
  const uint8_t request = 'D';
  if (::send(socket, &request, 1, MSG_NOSIGNAL) != 1) {
    return Status::FromErrno(errno, "asking the launcher for the VM's domain");
  }
  return ReceiveFrom(socket);
}

Result<std::unique_ptr<LocalDomain>> LocalDomain::ReceiveFrom(int socket) {
  GPUVM_ASSIGN_OR_RETURN(os::ReceivedMessage message, os::ReceiveWithFds(socket, 256, false));
  return FromWire(message.bytes, std::move(message.fds));
}

Result<std::unique_ptr<LocalDomain>> LocalDomain::FromWire(std::span<const uint8_t> header,
                                                           std::vector<os::UniqueFd> fds) {
  WireHeader h;
  if (header.size() != sizeof(h)) return Status::DataLoss("local domain header has the wrong size");
  std::memcpy(&h, header.data(), sizeof(h));
  if (h.magic != kWireMagic || h.version != kWireVersion) {
    return Status::DataLoss("not a local domain description (magic/version)");
  }
  LocalDomainConfig config{h.domid, h.ram_bytes, h.vcpus, h.grant_entries};
  GPUVM_RETURN_IF_ERROR(CheckConfig(config));
  if (fds.size() != 6 + 2 * size_t{config.vcpus}) {
    return Status::DataLoss("local domain description carries " + std::to_string(fds.size()) +
                            " descriptors, expected " + std::to_string(6 + 2 * config.vcpus));
  }
  GPUVM_RETURN_IF_ERROR(
      os::CheckSealedMemfd(fds[0].get(), config.ram_bytes).WithContext("guest RAM"));
  GPUVM_RETURN_IF_ERROR(os::CheckSealedMemfd(fds[1].get(), kIoreqRegionPages * kPageSize)
                            .WithContext("ioreq region"));
  GPUVM_RETURN_IF_ERROR(os::CheckSealedMemfd(fds[2].get(), GrantTableBytes(config.grant_entries))
                            .WithContext("grant table"));
  std::unique_ptr<LocalDomain> d(new LocalDomain());
  d->config_ = config;
  d->ram_ = std::move(fds[0]);
  d->ioreq_ = std::move(fds[1]);
  d->grants_ = std::move(fds[2]);
  d->irq_ = std::move(fds[3]);
  for (uint32_t v = 0; v < config.vcpus; ++v) {
    d->requests_.push_back(std::move(fds[4 + v]));
    d->responses_.push_back(std::move(fds[4 + config.vcpus + v]));
  }
  d->physmap_[0] = std::move(fds[4 + 2 * config.vcpus]);
  d->physmap_[1] = std::move(fds[5 + 2 * config.vcpus]);
  return d;
}

}  // namespace gpuvm::hv::local
