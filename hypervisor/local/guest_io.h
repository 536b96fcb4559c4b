// The guest end of a local VM: what a VM process uses for the accesses a real VM would make by
// touching BAR memory or configuration space, which Xen would trap. It is the local stand-in for
// the trap: it routes an access by what the IOREQ server claimed (control page), writes Xen's
// ioreq_t into the vCPU's slot, rings the request eventfd and blocks on the response eventfd until
// IORESP_READY. Unclaimed accesses behave like unassigned addresses on a PC: reads return all-ones,
// writes vanish. It implements the port's guest side (hypervisor/guest_io.h), on which the guest
// driver's trapping Bus sits (guest-pv-driver/local_trap_bus.h).
//
// Memory ranges (BAR remap, LocalControlPage::memory_ranges): an access that lies inside one does
// not trap; it reads or writes the backing memfd, which the server sent over the physmap socket and
// which is mapped here once, whole, on first use (the local stand-in for a p2m entry that points at
// device memory). Aligned accesses of 1/2/4/8 bytes are single atomic loads/stores, as on a bus.
// Only one LocalGuestIo per domain at a time should use memory ranges (the first to read the
// physmap socket gets the backings); one created later (the next program of the VM) asks the server
// to send them again. An access whose backing is not here falls back to trapping, which the device
// model still serves.
//
// Waiting for an answer: a vCPU polls its slot for up to `busy_poll` (adaptive, busy_poll.h) before
// it sleeps on its response eventfd — the local stand-in for KVM's halt-polling. A trapped access
// is answered in tens of microseconds; sleeping for it lets the CPU go idle, and on a virtual
// machine waking an idle CPU costs about as much again (measured on these machines: pt's init +
// close of nn 17-21 ms sleeping, 8-9 ms polling up to 100 us; docs/IPC.md, "Waiting"). On Xen the
// vCPU blocks in the hypervisor instead; that half of the path is Xen's.
//
// How long to wait: as long as the device model lives. A real vCPU blocks in the hypervisor until
// its access is answered; a local VM's device model is a process, which may be stopped (SIGSTOP, a
// debugger, a starved host) — slow, not gone — so a vCPU waits for it however long, and tells
// `note` once after kSlowNote (and again when the answer comes). The server publishes its process
// id on the control page; the vCPU's wait set holds a pidfd of that process, so a device model
// that dies ends the wait at once (Unavailable), with no timer. An optional `timeout` turns a long
// wait into DeadlineExceeded instead (tests of a server in the same process, which cannot die
// separately). Limit: a server pid reused by another process between the server's death and our
// first look would be watched instead (gpuvm-vm kills its guest when the device model dies anyway).
//
// Threading: one thread per vCPU index; different vCPU indices may be used concurrently. set_note
// before the first access.
#ifndef GPUVM_HYPERVISOR_LOCAL_GUEST_IO_H_
#define GPUVM_HYPERVISOR_LOCAL_GUEST_IO_H_

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/busy_poll.h"
#include "base/os.h"
#include "hypervisor/backend.h"
#include "hypervisor/guest_io.h"
#include "hypervisor/local/domain.h"
#include "hypervisor/types.h"
#include "hypervisor/xen_abi/ioreq_page.h"

namespace gpuvm::hv::local {

class LocalGuestIo final : public GuestIo {
 public:
  // `timeout`: zero (the default) waits while the server's process lives; else an access that has
  // no answer after that long fails with DeadlineExceeded.
  // `busy_poll`: how long a vCPU polls for an answer before sleeping (zero: it sleeps at once).
  static constexpr std::chrono::microseconds kDefaultBusyPoll = GuestIoOptions::kDefaultBusyPoll;
  static constexpr std::chrono::milliseconds kSlowNote = GuestIoOptions::kDefaultSlowNote;
  static Result<std::unique_ptr<LocalGuestIo>> Create(
      const LocalDomain& domain, std::chrono::milliseconds timeout = std::chrono::milliseconds(0),
      std::chrono::microseconds busy_poll = kDefaultBusyPoll);

  // Who hears of a slow device model (`after` without an answer) and of its answer; empty: nobody.
  void set_note(std::function<void(const std::string&)> note,
                std::chrono::milliseconds after = kSlowNote) {
    note_ = std::move(note);
    slow_note_ = after;
  }

  DomainId domid() const override { return domid_; }
  uint32_t vcpu_count() const override { return vcpus_; }
  uint64_t ram_bytes() const override { return ram_bytes_; }
  int ram_fd() const override { return ram_.get(); }

  // MMIO (size 1, 2, 4 or 8).
  Result<uint64_t> Read(uint32_t vcpu, uint64_t gpa, uint32_t size) override;
  Status Write(uint32_t vcpu, uint64_t gpa, uint32_t size, uint64_t value) override;
  // Configuration space of a PCI function (size 1, 2 or 4).
  Result<uint32_t> ConfigRead(uint32_t vcpu, const Sbdf& sbdf, uint32_t offset,
                              uint32_t size) override;
  Status ConfigWrite(uint32_t vcpu, const Sbdf& sbdf, uint32_t offset, uint32_t size,
                     uint32_t value) override;

  // Submits `request` on request.vcpu exactly as given — any size, rep count, data_is_ptr, type —
  // without routing, and returns the slot's data after completion. This is how tests play a hostile
  // or unusual guest (rep movs, odd sizes).
  Result<uint64_t> Submit(const IoRequest& request) override;

  // Routing as the server published it.
  bool IsMmioClaimed(uint64_t gpa, uint64_t length) const override;
  // Copies between `buffer` and guest physical [gpa, gpa + length) when that lies inside one memory
  // range whose backing is mapped here: true when done, false when the access must trap.
  bool AccessMemory(uint64_t gpa, void* buffer, uint64_t length, bool write) override;
  // Sets guest physical [gpa, gpa + length) to `byte` under the same condition (a memset of a
  // remapped range): true when done, false when the access must trap.
  bool FillMemory(uint64_t gpa, uint8_t byte, uint64_t length) override;
  // Whether [gpa, gpa + length) lies inside one memory range (accesses there do not trap).
  bool IsMemory(uint64_t gpa, uint64_t length) override { return MemoryAt(gpa, length) != nullptr; }
  // Accesses that went to a memory range instead of trapping.
  uint64_t memory_accesses() const { return memory_accesses_.load(std::memory_order_relaxed); }
  bool IsPciClaimed(const Sbdf& sbdf) const override;

  InterruptState interrupts() const override;
  // Waits until the server signals an interrupt (an INTx rising edge or an MSI); consumes the
  // signal.
  Status WaitForInterrupt(std::chrono::milliseconds timeout);
  int irq_fd() const override { return irq_.get(); }

 private:
  LocalGuestIo() = default;
  const LocalControlPage* control() const {
    return reinterpret_cast<const LocalControlPage*>(region_.data() + kControlPage * kPageSize);
  }
  // Host address of guest physical [gpa, gpa + length) if it lies in one memory range, else null.
  uint8_t* MemoryAt(uint64_t gpa, uint64_t length);
  // Takes every backing waiting on the physmap socket and maps it (backings_mu_ held).
  void ReceiveBackingsLocked();

  // Waits for the slot's response (or, for a slot left busy by an earlier timed-out access,
  // discards it). Unavailable when the server's process is gone; DeadlineExceeded past timeout_.
  Result<uint64_t> AwaitResponse(uint32_t vcpu);
  // Makes every vCPU's wait set watch the process the control page names as the server (a pidfd),
  // if it is not watched yet. False when that process no longer exists (or none is named).
  bool WatchServer();

  DomainId domid_ = 0;
  uint32_t vcpus_ = 0;
  uint64_t ram_bytes_ = 0;
  os::UniqueFd ram_;  // a duplicate of the domain's RAM memfd
  std::chrono::milliseconds timeout_{0};
  os::SharedMapping region_;
  std::unique_ptr<xen_abi::IoreqRequesterSlots> slots_;
  os::UniqueFd irq_;
  std::vector<os::UniqueFd> requests_;
  std::vector<os::UniqueFd> responses_;
  // Per vCPU, an edge-triggered epoll set of its response eventfd: waiting is one system call and
  // the eventfd never has to be read back (the round trip's guest half is write + epoll_wait, as
  // lean as a bare eventfd ping-pong).
  std::vector<os::UniqueFd> waits_;
  std::vector<BusyPoll> polls_;  // per vCPU, used only by that vCPU's thread
  std::function<void(const std::string&)> note_;
  std::chrono::milliseconds slow_note_ = kSlowNote;
  std::mutex watch_mu_;
  std::atomic<uint32_t> watched_pid_{
      0};                  // the server process the wait sets watch (watch_mu_ to set)
  os::UniqueFd server_pidfd_;  // watch_mu_

  os::UniqueFd physmap_;
  std::mutex backings_mu_;
  std::vector<os::SharedMapping> backing_maps_;  // by backing id (backings_mu_)
  std::array<std::atomic<uint8_t*>, kMaxMemoryBackings> backing_base_{};
  std::array<std::atomic<uint64_t>, kMaxMemoryBackings> backing_size_{};
  std::atomic<uint64_t> memory_accesses_{0};
};

}  // namespace gpuvm::hv::local

#endif  // GPUVM_HYPERVISOR_LOCAL_GUEST_IO_H_
