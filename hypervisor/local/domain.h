// A local VM's hypervisor-side objects: the local backend's stand-in for what Xen keeps about a
// domain.
//
// A local VM is a process. Its "hardware" is a handful of file descriptors, created by whoever
// creates the VM (the launcher, or a test) and handed to the VM process and to its device model
// (gpuvm-dm):
//   - guest RAM: a sealed memfd of ram_bytes (frames 0..ram_bytes/4K-1);
//   - the ioreq region: a sealed memfd of three pages — [0] Xen's shared_iopage_t (one ioreq_t slot
//   per
//     vCPU), [1] Xen's buffered_iopage_t, [2] LocalControlPage (what the IOREQ server claimed, and
//     interrupt state) — see docs/HYPERVISOR.md;
//   - the grant table: a sealed memfd of grant entries (hypervisor/local/grants.h);
//   - per vCPU, a request eventfd (guest -> server: "my slot is READY") and a response eventfd
//     (server -> guest: "IORESP_READY"); one interrupt eventfd (server -> guest);
//   - the physmap socket pair (SOCK_SEQPACKET): the server sends the memory that backs remapped
//     ranges (BAR remap) on end 0, the guest side receives it on end 1 (the local stand-in for Xen
//     changing the guest's p2m; see LocalControlPage::memory_ranges).
// Seals matter: a memfd that cannot shrink cannot make a peer's mapping fault (SIGBUS), so a
// receiver refuses unsealed memory.
//
// Threading: immutable after creation; any thread may read it.
#ifndef GPUVM_HYPERVISOR_LOCAL_DOMAIN_H_
#define GPUVM_HYPERVISOR_LOCAL_DOMAIN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "base/os.h"
#include "base/status.h"
#include "hypervisor/types.h"

namespace gpuvm::hv::local {

inline constexpr uint32_t kMaxLocalVcpus = 32;
inline constexpr uint64_t kMaxLocalRamBytes = uint64_t{64} << 30;
inline constexpr uint32_t kDefaultGrantEntries = 1024;
inline constexpr uint32_t kMaxGrantEntries = 65536;

struct LocalDomainConfig {
  DomainId domid = 1;
  uint64_t ram_bytes = 64ull << 20;  // a multiple of the page size
  uint32_t vcpus = 1;
  uint32_t grant_entries = kDefaultGrantEntries;
};

// Pages of the ioreq region.
inline constexpr uint64_t kIoreqSlotsPage = 0;
inline constexpr uint64_t kBufferedIoreqPage = 1;
inline constexpr uint64_t kControlPage = 2;
inline constexpr uint64_t kIoreqRegionPages = 3;

inline constexpr uint32_t kMaxClaimedPciDevices = 8;
inline constexpr uint32_t kMaxClaimedMmioRanges = 32;
inline constexpr uint32_t kMaxMemoryRanges = 64;
inline constexpr uint32_t kMaxMemoryBackings = 8;

// Page 2 of the ioreq region. Written by the IOREQ server only (under the routing seqlock), read by
// the guest side to route accesses. The guest can scribble on it too; the server never reads it
// back.
struct LocalControlPage {
  uint32_t magic;  // kControlPageMagic once the domain is created
  uint32_t vcpus;
  uint32_t routing_seq;       // seqlock: odd while the server rewrites the tables below
  uint32_t pci_device_count;  // <= kMaxClaimedPciDevices
  uint32_t mmio_range_count;  // <= kMaxClaimedMmioRanges
  uint32_t intx_levels;       // bit n: INTx pin n (0 = INTA) asserted
  uint32_t msi_count;         // number of MSIs injected so far
  uint32_t last_msi_data;
  uint64_t last_msi_address;
  uint64_t pci_devices[kMaxClaimedPciDevices];  // PackSbdf() values
  struct Range {
    uint64_t first;
    uint64_t last;  // inclusive
  } mmio_ranges[kMaxClaimedMmioRanges];
  // Memory ranges (BAR remap): guest accesses inside one go to backing `backing` (the n-th
  // descriptor the server sent on the physmap socket) at `offset + (gpa - first)` instead of
  // trapping. They take precedence over mmio_ranges. Whole pages.
  uint32_t memory_range_count;    // <= kMaxMemoryRanges
  uint32_t memory_backing_count;  // descriptors sent on the physmap socket so far
  struct MemoryRange {
    uint64_t first;
    uint64_t last;  // inclusive
    uint64_t offset;
    uint64_t backing;
  } memory_ranges[kMaxMemoryRanges];
  // The IOREQ server's process id while it serves (0 before and after): the guest side watches that
  // process (a pidfd) while it waits for an answer, so a stopped device model is waited for and a
  // dead one is noticed at once (LocalGuestIo::AwaitResponse).
  uint32_t server_pid;
};
static_assert(sizeof(LocalControlPage) <= kPageSize);
// The last cache line of the control page: the IOREQ server's busy-poll flag (u32, nonzero while
// it polls the slots without waiting; IoreqServer::BeginBusyPoll). A guest side that sees it set
// after filling its slot skips the request doorbell. Only the server writes it and never reads it
// back, so a guest that scribbles on it only delays its own requests.
inline constexpr size_t kServerPollingOffset = kPageSize - 64;
static_assert(sizeof(LocalControlPage) <= kServerPollingOffset);
inline constexpr uint32_t kControlPageMagic = 0x4c435047;  // "GPCL"

uint64_t PackSbdf(const Sbdf& sbdf);

class LocalDomain {
 public:
  // Creates the RAM, ioreq region, grant table and eventfds of a new local domain.
  static Result<std::unique_ptr<LocalDomain>> Create(const LocalDomainConfig& config);

  // Hands every descriptor and the config to the peer of a unix socket (SCM_RIGHTS) ...
  Status SendTo(int socket) const;
  // ... which rebuilds the domain, checking sizes and seals.
  static Result<std::unique_ptr<LocalDomain>> ReceiveFrom(int socket);
  // Asks a launcher for its domain (one byte; gpuvm-vm answers every request with a copy, so each
  // program a VM runs gets its own, tools/gpuvm-vm/launcher.h), then ReceiveFrom.
  static Result<std::unique_ptr<LocalDomain>> RequestFrom(int socket);
  // The wire form used by SendTo/ReceiveFrom (the local hypervisor daemon relays it).
  std::vector<uint8_t> EncodeHeader() const;
  std::vector<int> fds() const;
  static Result<std::unique_ptr<LocalDomain>> FromWire(std::span<const uint8_t> header,
                                                       std::vector<os::UniqueFd> fds);

  const LocalDomainConfig& config() const { return config_; }
  DomainId domid() const { return config_.domid; }
  uint64_t frame_count() const { return config_.ram_bytes >> kPageShift; }
  int ram_fd() const { return ram_.get(); }
  int ioreq_fd() const { return ioreq_.get(); }
  int grant_fd() const { return grants_.get(); }
  int irq_fd() const { return irq_.get(); }
  int request_fd(uint32_t vcpu) const { return requests_.at(vcpu).get(); }
  int response_fd(uint32_t vcpu) const { return responses_.at(vcpu).get(); }
  // The physmap socket pair: end 0 the server's (sends backings), end 1 the guest's (receives).
  int physmap_server_fd() const { return physmap_[0].get(); }
  int physmap_guest_fd() const { return physmap_[1].get(); }
  uint64_t grant_table_bytes() const;

 private:
  LocalDomain() = default;
  static Status CheckConfig(const LocalDomainConfig& config);

  LocalDomainConfig config_;
  os::UniqueFd ram_;
  os::UniqueFd ioreq_;
  os::UniqueFd grants_;
  os::UniqueFd irq_;
  std::vector<os::UniqueFd> requests_;
  std::vector<os::UniqueFd> responses_;
  os::UniqueFd physmap_[2];
};

}  // namespace gpuvm::hv::local

#endif  // GPUVM_HYPERVISOR_LOCAL_DOMAIN_H_
