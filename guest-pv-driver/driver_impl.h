// The implementation classes behind driver.h (internal; tests include it for white-box checks).
//
//   Driver::Impl   device-wide state: the counting Bus, VRAM heap, instance memory (BAR3), the
//                  page-table writer, BAR1 (USER area + mappings for small copies), PFIFO channel
//                  table and playlist, interrupt decoding.
//   Context::Impl  one address space: allocations (AllocRecord), report slots, channels, events.
//   Channel::Impl  one PFIFO channel: instance block/RAMFC, IB ring + pushbuffer ring in pinned
//                  host memory, fence slot, submission tracking, operations.
//   Event::Impl    a report slot and the sequence of its latest Record.
//
// Locks (acquire in this order; never call the Bus's interrupt path while holding one):
//   Context::Impl::register_mu_ (Register only) -> alloc_mu_ / va_mu_ and what follows them.
//   Channel::Impl::staging_mu_ -> Channel::Impl::mu_ -> Context::Impl::alloc_mu_ ->
//   Context::Impl::va_mu_ / slot_mu_
//   -> Driver::Impl::fifo_mu_ / bar1_mu_ -> VmSpace / InstMem / VramHeap locks -> TLB flush lock.
//   Driver::Impl::irq_mu_ -> fifo_mu_ -> Context::Impl::fault_mu_ (interrupt decoding).
//   Context::Impl::objects_mu_ is a leaf: nothing else is taken while it is held.
#ifndef GPUVM_GUEST_PV_DRIVER_DRIVER_IMPL_H_
#define GPUVM_GUEST_PV_DRIVER_DRIVER_IMPL_H_

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "guest-pv-driver/counting_bus.h"
#include "guest-pv-driver/driver.h"
#include "guest-pv-driver/instmem.h"
#include "guest-pv-driver/pushbuf.h"
#include "guest-pv-driver/pv_calls.h"
#include "guest-pv-driver/range_allocator.h"
#include "guest-pv-driver/vm_space.h"

namespace gpuvm::guest {

// Subchannel assignment (Gdev's nvc0 layout): compute on 1, M2MF on 2, PCOPY0 on 4.
inline constexpr uint32_t kSubcCompute = 1;
inline constexpr uint32_t kSubcM2mf = 2;
inline constexpr uint32_t kSubcCopy = 4;
// Generic-address windows for shared and local memory (nouveau's nvc0 compute setup uses the top
// two 16 MiB of the low 4 GiB; context heaps start above 4 GiB, so no global va falls inside).
inline constexpr uint32_t kSharedWindow = 0xfe000000;
inline constexpr uint32_t kLocalWindow = 0xff000000;
// Context heaps (our choice): 4 KiB-page allocations in [4 GiB, 36 GiB), large-page ones above, up
// to the managed window (kManagedBase, driver.h).
inline constexpr uint64_t kSmallHeapBase = 4ull << 30;
inline constexpr uint64_t kSmallHeapSize = 32ull << 30;
inline constexpr uint64_t kLargeHeapBase = kSmallHeapBase + kSmallHeapSize;
// Device allocations of at least this size use large pages.
inline constexpr uint64_t kLargePageThreshold = 1ull << 20;
// Report slots (fences, queries, events): 16 bytes {payload, 0, timestamp64}.
inline constexpr uint64_t kReportSlotBytes = 16;
inline constexpr uint64_t kReportPageBytes = 64 << 10;
// (our choice) bound on the drain waits at a channel's destruction (also the Context's at
// teardown). A channel's setup at creation waits the context's default timeout instead: it queues
// behind other VMs' work like any submission.
inline constexpr auto kChannelDrainWait = std::chrono::seconds(5);
// DRM mode: how often a wait asks the kernel whether its context still runs (a stopped context's
// fence never arrives; this is how a wait learns of it).
inline constexpr auto kDrmHealthInterval = std::chrono::milliseconds(2);
// Device allocations up to this size are mapped whole into BAR1 on their first small copy.
inline constexpr uint64_t kBar1MapMax = 8ull << 20;
// nouveau's gf100 fifo kick: write the channel id to 0x2634, then wait for bit 20 to clear.
inline constexpr uint32_t kKickPending = 1u << 20;

class AllocRecord;
class WaitClock;

class Driver::Impl {
 public:
  static Result<std::unique_ptr<Impl>> Create(Bus* bus, const DriverOptions& options);
  static Result<std::unique_ptr<Impl>> CreateOnDrm(DrmDevice* drm, const DriverOptions& options);
  ~Impl();

  // Non-null when the driver is DRM user space (Driver::CreateOnDrm): then there is no Bus to
  // speak of (bus() reads all-ones), no VRAM heap, instance memory, BAR1 nor PFIFO of ours.
  DrmDevice* drm() const { return drm_; }
  // DRM mode: VRAM held by this driver's objects (vram_free is the device's size minus it).
  std::atomic<uint64_t> drm_vram_used{0};

  Bus* bus() { return &bus_; }
  const DriverOptions& options() const { return options_; }
  const DeviceInfo& info() const { return info_; }
  VramHeap* vram() { return vram_.get(); }
  InstMem* instmem() { return instmem_.get(); }
  PageTableWriter* writer() { return writer_.get(); }
  int large_page_shift() const { return large_page_shift_; }
  BusCounters counters() const { return bus_.counters(); }
  ParaVirtualCounters pv_counters() const;
  VmSpace* bar1_space() { return bar1_.get(); }

  // ---- BAR1 ----
  // Maps `bytes` of VRAM at `vram` (4 KiB aligned) into BAR1; returns the BAR1 offset.
  Result<uint64_t> MapBar1(uint64_t vram, uint64_t bytes);
  // Removes the PTEs, without a TLB flush: nothing reads a freed window, and its range is mapped
  // again only by MapBar1, whose flush comes before the new window is used.
  void UnmapBar1(uint64_t offset, uint64_t bytes);
  void ReleaseBar1(uint64_t offset);  // returns the range to the allocator
  uint64_t user_area_vram() const { return user_vram_; }
  uint64_t user_area_bar1() const { return user_bar1_; }
  uint64_t userd_vram(uint32_t chid) const;
  uint64_t user_bar1(uint32_t chid) const;

  // ---- PFIFO ----
  Result<uint32_t> AllocateChannelId();
  void ReleaseChannelId(uint32_t chid);
  // CHAN_TABLE (valid, poll, instance; runnable) and a playlist commit with the channel added.
  Status EnableChannel(uint32_t chid, uint64_t inst_vram, Channel::Impl* owner);
  // nouveau's teardown: runnable off, playlist without it, kick, CHAN_TABLE entry cleared.
  Status DisableChannel(uint32_t chid);
  uint64_t playlist_vram(int which) const { return playlist_[which].vram; }

  // ---- errors ----
  size_t ServiceInterrupts();
  // Services when an interrupt is pending, or (without interrupts) once per poll interval.
  void MaybeService();
  bool interrupts_enabled() const { return interrupts_; }

  std::atomic<int> live_contexts{0};
  // VRAM the contexts keep in their recycled allocations (Context::Impl::recycled_): reclaimable,
  // so vram_free() counts it as free.
  std::atomic<uint64_t> recycled_vram{0};
  // Host memory of a context destroyed while its channels had not drained: the device may still be
  // in the middle of a time slice reading it, so it is released only with the driver.
  void Quarantine(std::shared_ptr<AllocRecord> record);

 private:
  // `pv`: the device's para-virtual calls, or null; the driver then reaches the device through
  // their PvSyncBus.
  Impl(Bus* bus, const DriverOptions& options, std::unique_ptr<PvCalls> pv);
  Status Init();
  Status Probe();
  Status SetUpBar1();
  Status SetUpFifo();
  Status CommitPlaylist();  // fifo_mu_ held
  void DecodeVmFaults();    // irq_mu_ held
  void DecodeSubfifo();
  void DecodeGraphTrap();
  void Attribute(uint64_t inst_vram, int chid, GpuFault fault);
  Status InitOnDrm();

  DrmDevice* drm_ = nullptr;

  // Para-virtual calls (before bus_: everything the driver does goes through pv_bus_ to them).
  std::unique_ptr<PvCalls> pv_;
  std::unique_ptr<PvSyncBus> pv_bus_;
  CountingBus bus_;
  const DriverOptions options_;
  DeviceInfo info_;
  int large_page_shift_ = 17;
  std::unique_ptr<VramHeap> vram_;
  std::unique_ptr<PageTableWriter> writer_;
  std::unique_ptr<InstMem> instmem_;

  // BAR1: its space and instance block, the USER area, the allocator of the rest.
  std::unique_ptr<VmSpace> bar1_;
  InstObject bar1_inst_;
  uint64_t user_vram_ = 0;
  uint64_t user_bar1_ = 0;
  std::mutex bar1_mu_;
  RangeAllocator bar1_va_;  // guarded by bar1_mu_

  // PFIFO.
  std::mutex fifo_mu_;
  std::array<Channel::Impl*, 128> channels_{};  // by chid; guarded by fifo_mu_
  std::array<uint64_t, 128> channel_inst_{};    // instance VRAM by chid
  std::array<bool, 128> chid_used_{};
  std::array<bool, 128> on_playlist_{};
  InstObject playlist_[2];
  int playlist_next_ = 0;

  // Interrupts.
  bool interrupts_ = false;
  std::mutex irq_mu_;
  std::atomic<bool> irq_pending_{false};
  std::atomic<int64_t> last_service_ns_{0};

  std::mutex quarantine_mu_;
  std::vector<std::shared_ptr<AllocRecord>> quarantine_;
};

// Everything a context allocated: user memory, code, and its own internal buffers (rings, staging,
// constant buffers, report pages). Shared by the context's map and by operations in progress, so
// freeing while another thread copies never reuses the memory under it: the PTEs go at Free, the
// memory (VRAM, va range, BAR1 range, DMA mapping, host pages) when the last reference drops.
class AllocRecord {
 public:
  AllocRecord(Driver::Impl* driver, Context::Impl* context) : driver_(driver), context_(context) {}
  ~AllocRecord();
  AllocRecord(const AllocRecord&) = delete;
  AllocRecord& operator=(const AllocRecord&) = delete;

  Allocation Describe() const { return {kind, va, size, host}; }
  bool is_vram() const { return kind == MemoryKind::kDevice || kind == MemoryKind::kCode; }

  MemoryKind kind = MemoryKind::kDevice;
  bool internal = false;
  uint64_t va = 0;
  uint64_t size = 0;    // as requested
  uint64_t mapped = 0;  // va bytes reserved and mapped (rounded to the page size)
  bool large = false;
  uint64_t vram = 0;        // VRAM kinds
  uint8_t* host = nullptr;  // host kinds (kHost, kManaged: memory owned by `dma`)
  std::shared_ptr<DmaMapping> dma;
  // DRM mode: the object's handle in the context's file (0: none, or closed), and what keeps a
  // host-visible object's memory alive.
  uint32_t gem = 0;
  std::shared_ptr<void> drm_backing;
  uint64_t drm_vram_bytes = 0;  // counted in Driver::Impl::drm_vram_used while the record lives
  // Registered host memory at any address: `va` and `host` are the caller's first byte, mapped at
  // `map_offset` into the first of the covering pages (map_va()). A first or last page another
  // registration of the context already maps is not mapped again: its PTE takes that mapping's bus
  // address, and `borrowed` keeps that mapping alive while this record uses it. `dma` then covers
  // only the pages from `dma_first_page` on (null when every page is borrowed).
  uint64_t map_offset = 0;
  uint64_t dma_first_page = 0;
  std::vector<std::shared_ptr<DmaMapping>> borrowed;
  std::array<bool, 2> borrows{};           // whether the first / last page is borrowed
  std::array<uint64_t, 2> borrowed_bus{};  // and then its bus address
  uint64_t map_va() const { return va - map_offset; }
  // BAR1 window for small copies, and whether Free has run (both guarded by
  // Context::Impl::alloc_mu_; a freed record is never mapped into BAR1 again).
  uint64_t bar1 = 0;
  bool in_bar1 = false;
  bool freed = false;

 private:
  Driver::Impl* const driver_;
  Context::Impl* const context_;
};

struct ReportSlot {
  uint8_t* host = nullptr;
  uint64_t va = 0;
  uint32_t index = 0;
  uint32_t Payload() const {
    return __atomic_load_n(reinterpret_cast<uint32_t*>(host), __ATOMIC_ACQUIRE);
  }
  uint64_t Timestamp() const {
    uint32_t lo = __atomic_load_n(reinterpret_cast<uint32_t*>(host + 8), __ATOMIC_ACQUIRE);
    uint32_t hi = __atomic_load_n(reinterpret_cast<uint32_t*>(host + 12), __ATOMIC_ACQUIRE);
    return lo | (uint64_t(hi) << 32);
  }
};

class Context::Impl {
 public:
  static Result<std::unique_ptr<Context>> Create(Driver::Impl* driver,
                                                 const ContextOptions& options);
  ~Impl();

  Driver::Impl* driver() { return driver_; }
  VmSpace* space() { return space_.get(); }
  const ContextOptions& options() const { return options_; }
  Context* owner() { return owner_; }

  // ---- DRM mode ----
  uint32_t drm_file() const { return drm_file_; }
  // Asks the kernel (throttled to one call per kDrmHealthInterval) whether this context still
  // runs; a context it stopped gets a fault (kAborted from then on), a device that is gone
  // Unavailable. OK at once outside DRM mode.
  Status PollDrm();

  // ---- faults ----
  void SetFault(const GpuFault& fault);
  bool faulted() const { return faulted_.load(std::memory_order_acquire); }
  Status status() const;
  std::optional<GpuFault> fault() const;

  // ---- memory ----
  Result<std::shared_ptr<AllocRecord>> AllocVram(uint64_t size, MemoryKind kind, bool internal);
  Result<std::shared_ptr<AllocRecord>> AllocPinned(uint64_t size, bool internal);
  Result<std::shared_ptr<AllocRecord>> Register(void* host, uint64_t size);
  Result<std::shared_ptr<AllocRecord>> AllocManaged(uint64_t size);
  Status Free(uint64_t va, bool internal, bool wait = true);
  // The user-visible allocation holding [va, va + bytes) (bytes may be 0), or an error.
  Result<std::shared_ptr<AllocRecord>> Lookup(uint64_t va, uint64_t bytes, bool allow_internal);
  std::shared_ptr<AllocRecord> LookupHost(const void* host, uint64_t bytes);
  // BAR1 offset of the allocation's first byte, mapping it on first use; 0 when it cannot be mapped
  // (too big, BAR1 full): the caller uses DMA instead.
  uint64_t EnsureBar1(AllocRecord* record);
  void ReleaseVa(uint64_t va, bool large);
  uint64_t code_epoch() const { return code_epoch_.load(std::memory_order_acquire); }
  // Code changed in memory: every channel flushes the code cache before its next launch.
  void BumpCodeEpoch() { code_epoch_.fetch_add(1, std::memory_order_acq_rel); }

  // ---- report slots ----
  Result<ReportSlot> AllocateSlot();
  void FreeSlot(const ReportSlot& slot);

  // ---- channels / events ----
  Result<Channel*> CreateChannel();
  Status DestroyChannel(Channel* channel);
  Channel* default_channel() { return default_channel_; }
  Result<Event*> CreateEvent();
  Status DestroyEvent(Event* event);
  Status Synchronize(std::chrono::nanoseconds timeout);
  // Set while the context is being destroyed after its channels did not drain: channels then tear
  // down without waiting again.
  bool abandoning() const { return abandoning_.load(std::memory_order_acquire); }

 private:
  Impl(Driver::Impl* driver, const ContextOptions& options) : driver_(driver), options_(options) {}
  Status Init();
  Result<uint64_t> ReserveVa(uint64_t bytes, bool large);
  Status MapRecord(AllocRecord* record);
  Status UnmapRecord(AllocRecord* record);
  std::vector<Channel*> ChannelsSnapshot();
  // Pin: false when `channel` is no longer listed; otherwise it stays alive until Unpin (its
  // DestroyChannel waits for the last pin to go).
  bool Pin(Channel* channel);
  void Unpin(Channel* channel);
  // After the record's PTEs are gone: host memory of an abandoned context goes to the driver's
  // quarantine instead of being released.
  void Retire(std::shared_ptr<AllocRecord> record);

  Driver::Impl* const driver_;
  const ContextOptions options_;
  Context* owner_ = nullptr;
  std::unique_ptr<VmSpace> space_;
  uint32_t drm_file_ = 0;  // DRM mode: the context's file (0 until opened)
  std::atomic<int64_t> drm_polled_ns_{0};

  mutable std::mutex fault_mu_;
  std::optional<GpuFault> fault_;  // guarded by fault_mu_
  std::atomic<bool> faulted_{false};
  std::atomic<bool> abandoning_{false};
  // Set by the destructor when the context's channels drained (nothing runs in its space, and
  // nothing may be submitted to a context being destroyed): unmapping then skips the per-allocation
  // TLB flush, and the destructor flushes the space once, after the last channel is gone.
  std::atomic<bool> idle_teardown_{false};

  std::mutex alloc_mu_;
  std::map<uint64_t, std::shared_ptr<AllocRecord>> allocs_;  // by va; guarded by alloc_mu_
  std::map<uintptr_t, uint64_t> host_index_;                 // host address -> va
  // Host pages at the ends of registrations (by page address, guarded by alloc_mu_): the mapping
  // that holds each and the page's offset in it, for a neighbouring registration sharing the page.
  struct SharedPage {
    std::weak_ptr<DmaMapping> mapping;
    uint64_t offset = 0;
  };
  std::map<uintptr_t, SharedPage> boundary_pages_;
  // Device allocations freed by the program, still mapped, kept for the next AllocDevice of the
  // same mapped size (by (large, mapped); guarded by alloc_mu_). Freeing and allocating the same
  // sizes again — a cudaMalloc/cudaFree per iteration — then writes no page-table entry and needs
  // no TLB flush, which under full virtualization is a trapped flush and a shadow scan each. The
  // memory stays this context's (contents undefined, as cuMemAlloc's are); at most
  // ContextOptions::recycle_bytes, each at most kRecycleMaxMapped; given back when the VRAM
  // allocator runs dry, and at teardown. The driver counts them as free (vram_free): they are
  // reclaimable.
  static constexpr uint64_t kRecycleMaxMapped = 4ull << 20;
  std::multimap<std::pair<bool, uint64_t>, std::shared_ptr<AllocRecord>> recycled_;
  uint64_t recycled_bytes_ = 0;
  // Unmaps and retires every recycled allocation (outside alloc_mu_). True if there was any.
  bool DrainRecycled();
  std::mutex register_mu_;  // serializes Register (taken before alloc_mu_)
  std::mutex va_mu_;
  RangeAllocator small_heap_, large_heap_;  // guarded by va_mu_
  std::atomic<uint64_t> code_epoch_{0};

  std::mutex slot_mu_;
  std::shared_ptr<AllocRecord> report_page_;
  std::vector<bool> slot_used_;  // guarded by slot_mu_

  std::mutex objects_mu_;  // guards the five below
  std::vector<std::unique_ptr<Channel>> channels_;
  std::vector<std::unique_ptr<Event>> events_;
  std::set<const Channel*> dying_;      // listed, but a DestroyChannel is draining them
  std::map<const Channel*, int> pins_;  // threads waiting on a channel (Pin); no 0 entries
  std::condition_variable unpinned_;    // a channel's last pin went
  Channel* default_channel_ = nullptr;
};

class Channel::Impl {
 public:
  static Result<std::unique_ptr<Channel>> Create(Context::Impl* context);
  // Waits (bounded) for idle, takes the channel off PFIFO, frees everything.
  ~Impl();

  uint32_t id() const { return chid_; }
  Context::Impl* context() { return ctx_; }
  uint64_t instance_vram() const { return inst_.vram; }

  Result<Fence> CopyAsync(uint64_t dst_va, uint64_t src_va, uint64_t bytes);
  Result<Fence> Copy2DAsync(const Copy2D& copy);
  Result<Fence> Memset2D(uint64_t dst_va, uint64_t pitch, uint32_t pattern, uint64_t width,
                         uint64_t height);
  Result<Fence> Memset(uint64_t dst_va, uint32_t pattern, uint64_t bytes);
  Result<Fence> Launch(const LaunchParams& params);
  Result<Fence> SubmitSegments(std::span<const CommandSegment> segments);
  Result<Fence> Record(Event::Impl* event);
  Status WaitEvent(Event::Impl* event);
  Status CopyHostToDevice(uint64_t dst_va, const void* src, uint64_t bytes);
  Status CopyDeviceToHost(void* dst, uint64_t src_va, uint64_t bytes);

  bool Done(uint32_t sequence) const;
  Result<bool> IsDone(Fence fence);
  Status Wait(Fence fence, std::chrono::nanoseconds timeout);
  Status Synchronize(std::chrono::nanoseconds timeout);
  // With the clock of a longer wait (Context::Synchronize waits for every channel on one clock).
  Status Synchronize(std::chrono::nanoseconds timeout, WaitClock& clock);
  Fence last_fence() const { return {chid_, last_sequence_.load(std::memory_order_acquire)}; }
  // Tests: submits arbitrary commands (plus the fence), bypassing every validation of the API.
  Result<Fence> SubmitForTesting(PushBuffer pb) {
    std::lock_guard lock(mu_);
    return Submit(pb);
  }
  const ReportSlot& query_slot() const { return query_; }
  const InstObject& instance() const { return inst_; }
  // Submissions still tracked (tests).
  size_t inflight() {
    std::lock_guard lock(mu_);
    return inflight_.size();
  }

 private:
  struct Inflight {
    uint32_t sequence;
    uint64_t pb_begin;
    uint64_t pb_end;
    uint32_t ib_count;  // IB entries it used (its segments, then its own commands)
  };
  explicit Impl(Context::Impl* context) : ctx_(context), drv_(context->driver()) {}
  Status Init();
  // Binds the objects and windows every channel starts with, and waits for that to run.
  Status Setup();
  // Appends the fence release, copies the words into the rings and writes IB_PUT (mu_ held).
  // `segments` (already checked) get IB entries of their own before `pb`'s.
  Result<Fence> Submit(PushBuffer& pb, std::span<const CommandSegment> segments = {});
  // No lock needed. `clock`: the wait's clock (null: a fresh one).
  Status WaitSequence(uint32_t sequence, std::chrono::nanoseconds timeout,
                      WaitClock* clock = nullptr);
  void Reclaim();  // mu_ held
  // Copy commands for [src, src + bytes) -> [dst, ...), appended to `pb`.
  void EmitCopy(PushBuffer& pb, uint64_t dst, uint64_t src, uint64_t bytes);
  void EmitMemset(PushBuffer& pb, uint64_t dst_va, uint32_t pattern, uint64_t bytes);
  // M2MF PUSH: `bytes` bytes (at most those of `words`) written at dst_va from the pushbuffer.
  void EmitPush(PushBuffer& pb, uint64_t dst_va, std::span<const uint32_t> words, uint64_t bytes);
  // A small host-to-device copy with its bytes inline in the pushbuffer (M2MF PUSH): no staging,
  // no wait for the GPU. For DRM mode, where user space has no BAR1 to write through.
  Status CopyInline(uint64_t dst_va, const void* src, uint64_t bytes);
  Status CheckUsable() const;
  // The bounce buffer, grown so a copy of `bytes` fits in one half, up to
  // ContextOptions::staging_bytes (staging_mu_ and mu_ held).
  Result<std::shared_ptr<AllocRecord>> Staging(uint64_t bytes);

  Context::Impl* const ctx_;
  Driver::Impl* const drv_;
  uint32_t chid_ = 0;
  bool have_chid_ = false;
  int32_t drm_channel_ = -1;  // DRM mode: the file's channel (chid_ is then its id)
  bool enabled_ = false;
  InstObject inst_;

  // Held for a whole staged copy (CopyHostToDevice/CopyDeviceToHost through the bounce buffer),
  // including its waits; taken before mu_. Async work is not held up by it.
  std::mutex staging_mu_;
  std::mutex mu_;                      // everything below
  std::shared_ptr<AllocRecord> ring_;  // [IB entries | pushbuffer]
  uint32_t ib_entries_ = 0;
  uint32_t ib_put_ = 0;
  uint32_t ib_in_use_ = 0;  // IB entries of the submissions in inflight_
  uint64_t pb_base_ = 0;    // offset of the pushbuffer in ring_
  uint64_t pb_size_ = 0;
  uint64_t pb_head_ = 0;
  std::deque<Inflight> inflight_;
  ReportSlot fence_;
  ReportSlot query_;  // compute QUERY after each launch
  uint32_t next_sequence_ = 1;
  std::atomic<uint32_t> last_sequence_{0};
  // The last submission whose effects the host could see before a later one completes: all but
  // inline copies into VRAM, which only later work on the GPU (ordered behind them) can read. The
  // stream synchronization CUDA does before a pageable host-to-device copy waits for this one.
  std::atomic<uint32_t> host_visible_sequence_{0};
  std::shared_ptr<AllocRecord> cb_;  // constant bank 0 (kernel parameters)
  std::shared_ptr<AllocRecord> temp_;
  std::shared_ptr<AllocRecord> staging_;
  uint64_t code_epoch_seen_ = 0;
};

class Event::Impl {
 public:
  // Sequences continue from the slot's payload (report slots are never reset, context.cc).
  Impl(Context::Impl* context, ReportSlot slot)
      : ctx_(context), slot_(slot), next_(slot.Payload()) {}
  ~Impl();

  Context::Impl* context() { return ctx_; }
  const ReportSlot& slot() const { return slot_; }
  // The payload the next Record releases (and from then on waits for).
  uint32_t NextSequence();
  void Recorded(uint32_t sequence) { target_.store(sequence, std::memory_order_release); }
  uint32_t target() const { return target_.load(std::memory_order_acquire); }
  bool Complete() const;

  Result<bool> Query();
  Status Wait(std::chrono::nanoseconds timeout);
  Result<uint64_t> TimestampNs();

 private:
  Context::Impl* const ctx_;
  const ReportSlot slot_;
  std::mutex mu_;
  uint32_t next_ = 0;                // guarded by mu_
  std::atomic<uint32_t> target_{0};  // 0 = never recorded
};

// Spins, then yields, then sleeps with growing pauses: what every CPU-side wait does between
// polls of host memory.
class Backoff {
 public:
  // The timer slack of a pause's sleep (ns): the pause is 5-200 us.
  static constexpr int kPauseSlackNs = 1000;
  void Pause();

 private:
  int rounds_ = 0;
};

// The clock of a wait for the GPU (fences, events): the time waited, not counting stalls — of
// this process, or of the path to the GPU (in a VM: the device model, the aggregator). A stall of
// either is slow, not gone, and must not turn into a timeout (CUDA waits until the work ends).
//  - Each round of the wait loop adds the time since the last round, at most kMaxStep: a round is
//    a poll of memory and a Backoff pause (<= 200 us), so a longer one means this thread did not
//    run (the process was stopped, or starved).
//  - A wait reads fences in memory and would not notice a stalled device model or aggregator, so
//    on a remote bus (Bus::remote: in a VM) every kProbeEvery of counted waiting it reads
//    PMC_BOOT_0 through the bus: a stalled path
//    blocks that read until it resumes — one long step, counted as kMaxStep — and a GPU that is
//    gone reads all-ones (a master abort: a device model that died) and ends the wait with
//    Unavailable instead of a timeout.
// So a stall costs a wait at most kProbeEvery + kMaxStep of its timeout, however long it lasts.
// Threading: one waiting thread.
class WaitClock {
 public:
  static constexpr std::chrono::milliseconds kMaxStep{250};
  static constexpr std::chrono::milliseconds kProbeEvery{1000};
  explicit WaitClock(Driver::Impl* driver)
      : driver_(driver), last_(std::chrono::steady_clock::now()) {}
  // Once per round: the time waited so far, or Unavailable when the GPU is gone.
  Result<std::chrono::nanoseconds> Tick();
  // Whether `timeout` has passed on this clock (kWaitForever never does).
  Result<bool> Expired(std::chrono::nanoseconds timeout);

 private:
  void Step();
  Driver::Impl* const driver_;
  std::chrono::steady_clock::time_point last_;
  std::chrono::nanoseconds waited_{0};
  std::chrono::nanoseconds probed_at_{0};
};

}  // namespace gpuvm::guest

#endif  // GPUVM_GUEST_PV_DRIVER_DRIVER_IMPL_H_
