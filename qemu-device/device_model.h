// gpuvm-dm, namespace gpuvm::dm: the per-VM device model of the virtual GPU. Despite its folder's
// name (qemu-device/) it is not a QEMU device: it is a standalone IOREQ server that runs beside the
// VM's own, unpatched QEMU on Xen (and alone on the local backend).
//
// The hypervisor-facing half of gpuvm-dm: one virtual GPU of one VM. It takes the IoRequests an
// IOREQ server delivers, decodes them — configuration space (PciConfigSpace) or an access into
// BAR0/BAR1/BAR3 at their current guest addresses — and forwards BAR accesses to the aggregator; it
// keeps the IOREQ server's MMIO ranges equal to where the guest put the BARs (unmap the old range,
// map the new one, as firmware and drivers move them), counts every trap per BAR, and turns the
// aggregator's interrupt line into INTx or MSI for the guest. The same code runs on the Xen and the
// local backend.
//
// BAR remap (fv): the aggregator's BAR_MAP asks that a page range of BAR1/BAR3 stop trapping and
// become the memory it passes (the software GPU's VRAM memfd, at the VM's own pages); the device
// model checks the range against the BAR and has the IOREQ server map it into the guest
// (IoreqServer::MapMemoryRange), and BAR_UNMAP makes it trap again. When the guest moves or
// disables a BAR its remapped ranges are withdrawn (the aggregator still serves those pages by
// trap, so trapping is always a correct fallback). BAR0 is never remapped.
//
// Hostile guests: every field of a request is as the guest made it. Bad requests — wrong sizes,
// addresses outside every BAR, unaligned BAR0 accesses, rep counts that are zero or move more than
// a page, data_is_ptr buffers outside guest memory, port I/O, unknown types, reads in the posted
// ring — are answered all-ones (reads) or dropped (writes), counted by reason, and never reach the
// aggregator. A rep access with a guest buffer moves at most max_rep_bytes (one page, as Xen
// issues them), so no request costs more than 1024 aggregator round trips (upward runs go as
// blocks: one per page with protocol version 3). A rep stos (one value, no buffer) stores at most
// max_fill_count elements (Xen clips a rep string instruction to 4096 repetitions per ioreq);
// upwards it goes to the aggregator as fills (one message per BAR it touches with protocol version
// 4), downwards element by element and at most max_rep_bytes.
//
// Threading: one thread owns a DeviceModel and calls everything; counters() may be read anywhere.
#ifndef GPUVM_QEMU_DEVICE_DEVICE_MODEL_H_
#define GPUVM_QEMU_DEVICE_DEVICE_MODEL_H_

#include <array>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "base/busy_poll.h"
#include "base/os.h"
#include "hypervisor/guest_memory.h"
#include "hypervisor/ioreq_server.h"
#include "qemu-device/aggregator_connection.h"
#include "qemu-device/pci_config_space.h"
#include "qemu-device/trap_counters.h"

namespace gpuvm::dm {

struct DeviceModelConfig {
  hv::Sbdf sbdf = kDefaultSbdf;
  VirtualGpuLayout layout;
  uint32_t max_rep_bytes = 4096;
  uint32_t max_fill_count = 4096;
  // After serving, poll the IOREQ server for the guest's next access this long before sleeping
  // (adaptive; base/busy_poll.h). Off by default: measured, the guest's next access
  // almost never came within 10 us (docs/IPC.md, "Waiting"). Zero: always sleep.
  std::chrono::microseconds busy_poll = std::chrono::microseconds(0);
  // The VM is para-virtual (gpuvm-dm --mode pv): its BAR0 PV register window (pv/protocol.h,
  // docs/PARAVIRT.md) reaches the aggregator. Otherwise the device has no such window: single
  // accesses there are answered here (reads 0, writes dropped) and never forwarded — a pt VM's
  // physical GPU never sees them — and rep accesses into it are refused (outside the BARs).
  bool pv_window = false;
  // Posted writes (docs/IPC.md, "Posted writes"): a guest's single write into BAR1 completes as
  // soon as it is sent to the aggregator; its acknowledgement is awaited before the VM's next
  // access of any kind is served (and before teardown), and a refusal is counted then
  // (Refusal::kAggregatorError). BAR0 and BAR3 writes, rep transfers and fills are never posted.
  // gpuvm-dm --no-posted-writes turns it off.
  bool posted_writes = true;
};

class DeviceModel {
 public:
  // Claims `config.sbdf` on `server`. `guest_memory` may be null (then data_is_ptr requests are
  // refused). The three collaborators must outlive the DeviceModel.
  static Result<std::unique_ptr<DeviceModel>> Create(const DeviceModelConfig& config,
                                                     hv::IoreqServer* server,
                                                     AggregatorConnection* aggregator,
                                                     hv::GuestMemory* guest_memory);
  ~DeviceModel();

  // Decodes and performs one request; returns what to complete it with (all-ones for a refused
  // read). A write it posts is sent by SendPostedWrite, which RunOnce calls right after completing
  // the guest's request (so the guest's vCPU resumes before we talk to the aggregator), and which
  // the next access, and anything else that talks to the aggregator, does first.
  uint64_t Handle(const hv::IoRequest& request);
  // Sends the write Handle posted, if it has not gone yet.
  void SendPostedWrite();

  // One turn of the event loop: waits up to `timeout` for guest requests or aggregator events, then
  // serves everything waiting. Returns Aborted once the aggregator asked for teardown, and the
  // error of a failed IOREQ server or aggregator connection (the VM cannot go on without either).
  Status RunOnce(std::chrono::milliseconds timeout);
  Status HandleAggregatorEvent(const AggregatorEvent& event);

  const TrapCounters& counters() const { return counters_; }
  const PciConfigSpace& config() const { return config_; }
  const DeviceModelConfig& settings() const { return settings_; }
  // The range [first, last] the IOREQ server currently routes to us for `bar`, if any.
  std::optional<std::pair<uint64_t, uint64_t>> mapped_range(BarIndex bar) const {
    return mapped_[BarSlot(bar)];
  }
  bool teardown_requested() const { return teardown_requested_; }
  // pv: the guest's writes to the PV doorbell (each one batch of para-virtual calls).
  uint64_t pv_doorbells() const { return pv_doorbells_; }
  // MMIO requests (ioreqs: the guest's exits) handled, whatever they moved: a rep transfer or fill
  // of many elements is one, where the trap counters count its elements.
  uint64_t mmio_exits() const { return mmio_exits_; }
  // Guest writes completed before the aggregator acknowledged them (posted_writes).
  uint64_t posted_writes() const { return posted_writes_; }
  // Whether a posted write's acknowledgement is still outstanding.
  bool write_posted() const { return write_posted_; }
  // Waits for that acknowledgement now (as the next access would) and counts a refusal: before
  // reading the counters at the end.
  void SettlePostedWrite() { SettlePosted(); }

 private:
  DeviceModel(const DeviceModelConfig& config, hv::IoreqServer* server,
              AggregatorConnection* aggregator, hv::GuestMemory* guest_memory);

  uint64_t HandleConfig(const hv::IoRequest& r);
  uint64_t HandleMmio(const hv::IoRequest& r);
  // An upward rep transfer with a guest buffer (bounds already checked): runs of consecutive
  // elements to the aggregator.
  uint64_t HandleRepRun(const hv::IoRequest& r, bool read, uint64_t total);
  // An upward rep stos (count already checked): runs of consecutive elements to the aggregator.
  uint64_t HandleFill(const hv::IoRequest& r);
  // One element of an MMIO access at guest physical `gpa`. nullopt (refusal counted) when it fails.
  std::optional<uint64_t> ForwardRead(uint64_t gpa, uint32_t size, uint32_t vcpu);
  // `may_post`: the write is a single access that may be posted (see posted_writes).
  bool ForwardWrite(uint64_t gpa, uint32_t size, uint64_t value, uint32_t vcpu,
                    bool may_post = false);
  // Waits for the acknowledgement of a posted write, if any; counts its refusal.
  void SettlePosted();
  // The consecutive elements of `size` bytes from `gpa` (at most `bytes`) that lie in one mapped
  // BAR: which BAR, the offset of the first, and how many bytes. nullopt (refusal counted) when the
  // first element decodes to nothing.
  struct Run {
    BarIndex bar;
    uint64_t offset;
    uint64_t bytes;
  };
  std::optional<Run> NextRun(uint64_t gpa, uint32_t size, uint64_t bytes);
  // Which mapped BAR holds all of [gpa, gpa + size), and at what offset. Counts the refusal if
  // none.
  std::optional<std::pair<BarIndex, uint64_t>> Decode(uint64_t gpa, uint32_t size);
  uint64_t Refuse(Refusal reason, uint32_t size);
  // Brings the IOREQ server's ranges in line with the BAR registers and the memory-enable bit.
  void SyncBarMappings();
  // Drives INTx or MSI from the current line level and the guest's interrupt configuration.
  void SyncInterrupt(bool rising_edge);
  Status MapBarMemory(const BarMapRequest& request);
  Status UnmapBarMemory(const BarUnmapRequest& request);
  // Applies and answers the queued BAR_MAP/BAR_UNMAP requests in order, up to the first the
  // hypervisor cannot apply yet (Unavailable: a vCPU is inside an access we must serve first).
  Status ApplyDeferredBarEvents();
  // After a register write the aggregator answered: what it has sent meanwhile — the BAR_MAP/
  // BAR_UNMAP that write caused come before its reply (docs/IPC.md) — is applied now, before the
  // guest's write completes, so the guest's next access never goes through a mapping the write
  // retired (a TLB flush after a BAR PTE changed). Costs one non-blocking receive when nothing
  // came.
  void TakeEventsCausedByWrite();
  // Withdraws every remapped range of BAR slot `slot` (it moved or stopped decoding).
  void DropRemaps(size_t slot);

  // Whether BAR0 offset `offset` is the PV window of a device that has none (see pv_window).
  bool AbsentPvWindow(BarIndex bar, uint64_t offset) const;

  DeviceModelConfig settings_;
  uint64_t pv_doorbells_ = 0;
  uint64_t mmio_exits_ = 0;
  uint64_t posted_writes_ = 0;
  bool write_posted_ = false;  // sent (or to be sent), acknowledgement not collected
  struct PostedWrite {
    BarIndex bar;
    uint64_t offset;
    uint32_t size;
    uint64_t value;
    uint32_t vcpu;
  };
  std::optional<PostedWrite> unsent_post_;  // posted by Handle, not sent yet (SendPostedWrite)
  hv::IoreqServer* server_;
  AggregatorConnection* aggregator_;
  hv::GuestMemory* guest_memory_;
  PciConfigSpace config_;
  TrapCounters counters_;
  std::array<std::optional<std::pair<uint64_t, uint64_t>>, 3> mapped_;
  // Where a BAR was last refused a mapping (so a lasting conflict is counted once).
  std::array<std::optional<std::pair<uint64_t, uint64_t>>, 3> refused_at_;
  // Remapped ranges per BAR slot: BAR offset -> (guest physical first, last) as mapped.
  std::array<std::map<uint64_t, std::pair<uint64_t, uint64_t>>, 3> remaps_;
  std::deque<AggregatorEvent> deferred_bar_events_;  // BAR_MAP/BAR_UNMAP not applied yet
  // Busy polling between accesses (RunOnce).
  static constexpr std::chrono::microseconds kEventCheckInterval{200};
  static constexpr uint32_t kServerTag = 1;
  static constexpr uint32_t kAggregatorTag = 2;
  static constexpr uint32_t kHousekeepingTag = 3;  // IoreqServer::housekeeping_fd
  BusyPoll busy_poll_;
  bool served_last_ = false;
  // One epoll set over the IOREQ server's wait_fd (edge-triggered when it agrees) and the
  // aggregator's event_fd: RunOnce sleeps in one epoll_wait.
  os::UniqueFd wait_;
  std::chrono::steady_clock::time_point last_wait_;
  bool line_asserted_ = false;
  bool intx_output_ = false;  // what we last told the hypervisor about INTA
  bool teardown_requested_ = false;
};

}  // namespace gpuvm::dm

#endif  // GPUVM_QEMU_DEVICE_DEVICE_MODEL_H_
