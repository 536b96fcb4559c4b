// Port: an IOREQ server — the dom0 side of trapped guest accesses to an emulated device.
//
// The server claims a PCI function (its configuration space) and MMIO ranges of one domain; the
// hypervisor then turns every guest access that hits them into an IoRequest on the accessing vCPU's
// slot and blocks that vCPU until the server completes it. Ranges can be unmapped and mapped again
// while the guest runs (its firmware or OS moves BARs through configuration-space writes).
//
// Xen: a standalone IOREQ server (libxendevicemodel) beside the VM's own QEMU. Local: Xen's ioreq_t
// page in shared memory with eventfd notification (hypervisor/local/).
//
// BAR remap: a range can also stop trapping altogether and become memory of the device's
// (MapMemoryRange): the guest's accesses there reach the backing directly, without a request —
// Xen changes the guest's p2m, the local backend publishes the range and hands the guest side the
// backing (docs/HYPERVISOR.md). Memory ranges take precedence over MMIO claims for the pages they
// cover; unmapping one makes those pages trap again.
//
// Threading: one owner thread (the device model's loop) calls everything. At most one request per
// vCPU is outstanding: Poll() does not return another request for a vCPU before Complete() answered
// the last.
#ifndef GPUVM_HYPERVISOR_IOREQ_SERVER_H_
#define GPUVM_HYPERVISOR_IOREQ_SERVER_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "base/status.h"
#include "hypervisor/types.h"

namespace gpuvm::hv {

// What backs a memory range (MapMemoryRange). Local backend: a memfd sealed against shrinking (the
// descriptor is borrowed for the call; the backend keeps its own duplicate) and the byte offset
// into it. Xen: host-physical frames — a real GPU's BAR aperture — at machine_address (fd < 0); a
// descriptor cannot back guest memory there.
struct MemoryBacking {
  int fd = -1;
  uint64_t offset = 0;
  uint64_t machine_address = 0;
};

class IoreqServer {
 public:
  virtual ~IoreqServer() = default;

  virtual DomainId domain() const = 0;
  virtual uint32_t vcpu_count() const = 0;

  // Configuration-space accesses to `sbdf` come to this server.
  virtual Status MapPciDevice(const Sbdf& sbdf) = 0;
  virtual Status UnmapPciDevice(const Sbdf& sbdf) = 0;
  // Guest physical range [first, last] (inclusive, as Xen counts) comes to this server. Overlapping
  // an already mapped range is AlreadyExists; unmapping a range that was not mapped is NotFound.
  virtual Status MapMmioRange(uint64_t first, uint64_t last) = 0;
  virtual Status UnmapMmioRange(uint64_t first, uint64_t last) = 0;
  // Guest physical [first, last] (whole pages) becomes `backing`: accesses there no longer trap.
  // Overlapping another memory range is AlreadyExists; unmapping a range that was not mapped
  // exactly so is NotFound. A backend that cannot do it answers Unimplemented (the default), and
  // the range simply keeps trapping. The server withdraws its memory ranges when destroyed.
  virtual Status MapMemoryRange(uint64_t first, uint64_t last, const MemoryBacking& backing) {
    (void)first, (void)last, (void)backing;
    return Status::Unimplemented("this hypervisor backend cannot map memory into the guest");
  }
  virtual Status UnmapMemoryRange(uint64_t first, uint64_t last) {
    (void)first, (void)last;
    return Status::Unimplemented("this hypervisor backend cannot map memory into the guest");
  }

  // A file descriptor that polls readable when a request may be waiting (spurious wakeups allowed).
  virtual int wait_fd() const = 0;
  // The next waiting request of any vCPU, or nullopt. Non-blocking. Buffered (posted) writes come
  // first.
  virtual Result<std::optional<IoRequest>> Poll() = 0;
  // Busy polling (optional): between BeginBusyPoll() and EndBusyPoll() the caller calls Poll() in a
  // tight loop, so Poll() makes no system calls and a backend may let guests skip the request
  // notification (the local backend: a flag on its control page). After EndBusyPoll(), Poll() once
  // more before blocking on wait_fd(). Backends without a cheaper path ignore both.
  virtual void BeginBusyPoll() {}
  virtual void EndBusyPoll() {}
  // A caller that waits for wait_fd() edge-triggered (EPOLLET in its own epoll set) says so here;
  // when the backend agrees (true), Poll() stops consuming notifications — a system call less per
  // request. Default: false, wait_fd() stays level-triggered (poll() + Poll()).
  virtual bool UseEdgeTriggeredWait() { return false; }
  // Housekeeping besides requests (optional): a descriptor that polls readable when there is some
  // (-1: never), and the call that does it; not OK means "stop watching the descriptor". The local
  // backend: a guest program that attached after memory ranges were mapped (the second program of a
  // VM) asks for their backings again on the physmap socket.
  virtual int housekeeping_fd() const { return -1; }
  virtual Status Housekeep() { return Status::Ok(); }
  // Answers `request` and resumes its vCPU. `read_value` is what a read returns (ignored for writes
  // and for data_is_ptr requests, whose data the server already copied to guest memory). A no-op
  // for buffered requests.
  virtual Status Complete(const IoRequest& request, uint64_t read_value) = 0;

  // Interrupts into the guest on behalf of the emulated device.
  virtual Status SetPciIntxLevel(const Sbdf& sbdf, uint8_t pin, bool asserted) = 0;
  virtual Status InjectMsi(uint64_t address, uint32_t data) = 0;
};

// Blocks up to `timeout` for the next request: nullopt when none arrived in time.
Result<std::optional<IoRequest>> WaitForIoreq(IoreqServer& server,
                                              std::chrono::milliseconds timeout);

// For the backends' servers: the MMIO ranges a server claimed ([first, last], inclusive, in claim
// order) and the two checks both make on them.
using MmioRangeList = std::vector<std::pair<uint64_t, uint64_t>>;
// AlreadyExists when [first, last] overlaps a range of `ranges`.
Status CheckNoOverlap(const MmioRangeList& ranges, uint64_t first, uint64_t last);
// Removes exactly [first, last] from `ranges`; NotFound when it was not claimed.
Status RemoveRange(MmioRangeList& ranges, uint64_t first, uint64_t last);

}  // namespace gpuvm::hv

#endif  // GPUVM_HYPERVISOR_IOREQ_SERVER_H_
