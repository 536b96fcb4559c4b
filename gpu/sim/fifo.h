// PFIFO of the software GPU: the channel table, the playlist, the USER poll area, the command-fetch
// unit's error registers, MMU fault records, non-stall (engine) interrupts, per-engine "which
// channel is on it" status, and the scheduler that runs the channels: runnable channels on the
// playlist take turns in round-robin time slices, on the device's engine thread (threaded mode) or
// on the caller's thread (single-step mode, SimDevice::RunUntilIdle).
//
// Threading: register methods (Read/Write, Kick, RecordFault for BARs) are called with the device's
// register lock held, from any thread. Step() is called by exactly one thread at a time (the engine
// thread, or the single-step caller) without the lock; it takes the lock itself for short updates.
// Channel objects are touched only by the stepping thread; other threads read their published
// copies.
#ifndef GPUVM_GPU_SIM_FIFO_H_
#define GPUVM_GPU_SIM_FIFO_H_

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gpu/hw/pfifo.h"
#include "gpu/hw/pgraph.h"
#include "gpu/hw/ramin.h"
#include "gpu/sim/channel.h"
#include "gpu/sim/pmc.h"

namespace gpuvm::sim {

// How PFIFO reports interrupt changes to the device (which owns PMC and the interrupt line).
class InterruptSink {
 public:
  virtual ~InterruptSink() = default;
  // PFIFO's or PGRAPH's pending state changed. Called with the register lock held.
  virtual void UpdateInterrupts() = 0;
  // Delivers a changed line level to the handler. Called without the register lock.
  virtual void DeliverInterrupt() = 0;
};

struct PfifoConfig {
  const PhysicalMemory* memory = nullptr;
  Mmu* mmu = nullptr;
  Pmc* pmc = nullptr;
  std::mutex* register_lock = nullptr;
  InterruptSink* interrupts = nullptr;
  ComputeEngine* compute_engine = nullptr;
  uint64_t time_slice_ns = 1'000'000;
  // A slice counts toward the channel's busy time (CHAN_BUSY_US) for at most time_slice_ns plus
  // this. The engines check the slice's deadline at least every ~0.1 ms of work (a compute slice,
  // a copy chunk), so a slice that lasted longer than that did no more work: the engine thread was
  // not running — its process stopped (SIGSTOP, a debugger) or starved — and that is not time the
  // GPU spent on the channel. The margin keeps ordinary preemption (milliseconds) counted as
  // before. (our choice) 50 ms.
  uint64_t max_slice_overrun_ns = 50'000'000;
  // SimDeviceOptions::on_channel_drained (called by Step, without the register lock).
  std::function<void(uint32_t chid)> on_channel_drained;
};

class Pfifo final : private ChannelEnvironment {
 public:
  explicit Pfifo(const PfifoConfig& config);
  ~Pfifo() override;

  // ---- registers (register lock held) ----
  bool Read(uint32_t offset, uint32_t* value);
  bool Write(uint32_t offset, uint32_t value);
  // PFIFO's pending bit for PMC, and PGRAPH's.
  bool pending() const;
  bool graph_pending() const { return (graph_intr_ & graph_intr_en_) != 0; }
  bool ReadGraph(uint32_t offset, uint32_t* value) const;
  bool WriteGraph(uint32_t offset, uint32_t value);
  // A BAR1 write of [offset, offset + length): if it touches a channel's IB_PUT in the poll area,
  // kick it. Lock-free (called on every BAR1 write).
  void SnoopBar1Write(uint64_t offset, uint64_t length);
  // A BAR1/BAR3 access fault (register lock held).
  void RecordBarFault(const FaultSource& source, uint64_t inst_address, const MemoryFault& fault);

  // ---- scheduling ----
  // Runs one time slice of the next channel that has work. False when no channel could make
  // progress.
  bool Step();
  // Threaded mode: starts / stops the engine thread. WaitIdle blocks until the thread found nothing
  // to do (every channel idle, blocked or dead) or the timeout passed; returns whether it is idle.
  void StartThread();
  void StopThread();
  bool WaitIdle(uint64_t timeout_ns);
  // Wakes the scheduler (work may have arrived).
  void Wake();

  // ---- introspection (any thread) ----
  ChannelError channel_error(uint32_t chid) const;
  ChannelStats channel_stats(uint32_t chid) const;

 private:
  // Per-channel register state (register lock) and what the stepping thread published.
  struct Slot {
    uint32_t chan = 0;        // CHAN_TABLE word 0 as written
    bool runnable = false;    // CHAN_TABLE word 1 bit 0
    uint64_t generation = 0;  // bumped on every write of word 0: the channel must be (re)loaded
    // Published by the stepping thread:
    bool loaded = false;
    bool acquire_pending = false;
    // Work left at the end of the channel's last slice. CHAN_TABLE's PENDING bit also reads set
    // while the channel is inside a slice (running_chid_), so "IB_GET caught up with IB_PUT and
    // not PENDING" means the work it fetched has really finished, not just been fetched.
    bool pending_work = false;
    bool dead = false;
    ChannelError error;
    ChannelStats stats;
  };
  struct EngineStatus {
    uint32_t state = 0;    // ENG_STATE
    uint32_t channel = 0;  // ENGINE_CHANNEL
  };

  // ChannelEnvironment.
  Mmu* mmu() override { return config_.mmu; }
  const PhysicalMemory* memory() override { return config_.memory; }
  ComputeEngine* compute_engine() override { return config_.compute_engine; }
  uint64_t NowNs() override;
  void RecordFault(const FaultSource& source, uint64_t inst_address,
                   const MemoryFault& fault) override;
  void RaiseNonStall(gf100::pfifo::Engine engine) override;
  void RaiseGraphTrap(uint32_t chid, uint64_t inst_address, uint32_t warp_error,
                      uint32_t global_error) override;
  void EngineActive(gf100::pfifo::Engine engine, uint32_t chid, uint64_t inst_address,
                    bool busy) override;

  // All with the register lock held.
  uint32_t IntrValue() const;
  void RecordFaultLocked(const FaultSource& source, uint64_t inst_address,
                         const MemoryFault& fault);
  void SubmitPlaylist(uint32_t length);
  void WriteChannelTable(uint32_t chid, bool state_word, uint32_t value);
  void LatchChannelError(uint32_t chid, const Channel& channel);
  // Error reports wait in a queue while the one before them is unacknowledged, so the registers
  // a driver reads always belong to the error it is handling (D1). Register lock held.
  struct SubfifoError {
    uint32_t intr = 0;
    uint32_t cache_addr = 0, cache_data = 0;
    uint32_t chid = 0;
    uint32_t ib_put = 0, ib_get = 0, dma_get = 0, ref = 0;
  };
  struct GraphTrap {
    uint32_t chid = 0;
    uint64_t inst_address = 0;
    uint32_t warp_error = 0, global_error = 0;
  };
  void PresentSubfifoError(const SubfifoError& error);
  void PresentGraphTrap(const GraphTrap& trap);
  bool graph_trap_latched() const { return (graph_intr_ & gf100::pgraph::kIntrTrap) != 0; }
  void NotifyInterrupts() { config_.interrupts->UpdateInterrupts(); }

  void ThreadMain();
  // Serves a pending PREEMPT request if its channel is between slices (stepping thread).
  void ServicePreempt();

  const PfifoConfig config_;
  const uint64_t start_ns_;
  std::vector<std::unique_ptr<Channel>> channels_;  // stepping thread only

  // ---- register state (register lock) ----
  std::array<Slot, gf100::pfifo::kChannels> slots_;
  std::vector<uint32_t> playlist_;
  uint32_t intr_ = 0;  // the edge bits (CHAN_TABLE_ERROR, PLAYLIST)
  uint32_t intr_en_ = 0;
  uint32_t ctrl_ = 0;
  uint32_t poll_area_ = 0;
  uint32_t playlist_wr_ = 0, playlist_rd_ = 0, playlist_rd_len_ = 0;
  uint32_t chan_table_error_ = 0, playlist_intr_code_ = 0;
  uint32_t vm_fault_source_ = 0;
  std::array<std::array<uint32_t, 4>, gf100::pfifo::kVmFaultUnits> vm_fault_{};
  uint64_t faults_dropped_ = 0;
  std::array<uint32_t, gf100::pfifo::kEngineSlots> engine_intr_{};
  uint32_t engine_intr_enable_ = 0;
  std::array<EngineStatus, gf100::pfifo::kEngineSlots> engines_{};
  uint32_t runlist_intr_ = 0;
  struct Subfifo {
    uint32_t intr = 0;
    uint32_t intr_en = 0xffffffff;  // (our choice) enabled at reset
    uint32_t cache_addr = 0, cache_data = 0;
    uint32_t channel = 0;  // chid | active bit
    uint32_t ib_put = 0, ib_get = 0, dma_get = 0, ref = 0;
  };
  std::array<Subfifo, gf100::pfifo::kSubfifos> subfifo_{};
  uint32_t graph_intr_ = 0, graph_intr_en_ = 0;
  // PGRAPH trap chain (gf100::pgraph) and the context register.
  uint32_t graph_trap_ = 0, graph_trap_gpc_mask_ = 0, gpc0_trap_ = 0;
  uint32_t mp_warp_error_ = 0, mp_global_error_ = 0;
  uint32_t graph_context_ = 0;
  // Reports waiting for the driver to acknowledge the one before (bounded; the rest are dropped
  // and counted — each channel's own error record still says what happened).
  static constexpr size_t kMaxQueuedReports = 2 * gf100::pfifo::kChannels;
  std::deque<SubfifoError> queued_subfifo_errors_;
  std::deque<GraphTrap> queued_graph_traps_;
  uint64_t reports_dropped_ = 0;
  // KICK_CHID (D2): the channel the stepping thread is inside (-1: none), the last kicked channel
  // and whether the kick waits for that channel to leave its slice.
  int running_chid_ = -1;
  uint32_t kick_chid_ = 0;
  bool kick_pending_ = false;
  // PREEMPT (gpuvm extension): the request, and figures of the last one served.
  struct Preemption {
    uint32_t value = 0;  // chid | DRAIN as written
    bool pending = false;
    bool saved = false;
    uint64_t sequence = 0;  // bumped by every write, so a replaced request is not reported served
    uint64_t requested_ns = 0;
    uint32_t saved_bytes = 0, latency_ns = 0, save_ns = 0, count = 0, restore_ns = 0;
  } preempt_;

  // Poll area for the lock-free BAR1 snoop.
  std::atomic<uint64_t> poll_base_{0};
  std::atomic<bool> poll_enabled_{false};

  // ---- scheduler (stepping thread) ----
  size_t next_ = 0;  // round-robin position in the playlist
  std::array<uint64_t, gf100::pfifo::kChannels> loaded_generation_{};
  std::vector<uint32_t> order_;
  bool any_blocked_ = false;

  // ---- engine thread ----
  std::mutex wake_mu_;
  std::condition_variable wake_cv_;
  std::condition_variable idle_cv_;
  bool work_hint_ = true;
  bool idle_ = false;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gpuvm::sim

#endif  // GPUVM_GPU_SIM_FIFO_H_
