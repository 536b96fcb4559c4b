// One PFIFO channel of the software GPU as its command processor runs it: the RAMFC state loaded
// from the instance block, the GPFIFO (IB) fetch from IB_GET to the IB_PUT the driver wrote into
// USERD, the pushbuffer decoder, the channel (host) methods — subchannel binding, semaphores,
// reference counter, non-stall interrupts — and the objects bound to subchannels (M2MF, PCOPY,
// compute). Long operations (a copy, a compute grid, a semaphore acquire) are pending work the
// channel finishes before its next method, so PFIFO can time-slice between channels while one is
// busy.
//
// Threading: a Channel is driven by one thread at a time — the device's engine thread, or the
// caller of SimDevice::RunUntilIdle in single-step mode. PFIFO reads its state only from that
// thread and publishes copies under its register lock. The ChannelMemory it hands to compute jobs
// is thread-safe.
#ifndef GPUVM_GPU_SIM_CHANNEL_H_
#define GPUVM_GPU_SIM_CHANNEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpu/hw/gpfifo.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pgraph.h"
#include "gpu/sim/channel_types.h"
#include "gpu/sim/compute_class.h"
#include "gpu/sim/compute_engine.h"
#include "gpu/sim/copy_engine.h"
#include "gpu/sim/pushbuf.h"

namespace gpuvm::sim {

// How a compute fault other than an MMU fault is reported in PGRAPH's trap chain: the MP's warp
// error and global error bits (gf100::pgraph; the table is in docs/SOFTWARE-GPU.md).
struct MpTrapCodes {
  gf100::pgraph::MpWarpError warp_error = gf100::pgraph::MpWarpError::kNone;
  uint32_t global_error = 0;
};
MpTrapCodes MpTrapCodesFor(ComputeFault::Kind kind);

// What a channel needs from the rest of the device.
class ChannelEnvironment {
 public:
  virtual ~ChannelEnvironment() = default;
  virtual Mmu* mmu() = 0;
  virtual const PhysicalMemory* memory() = 0;
  virtual ComputeEngine* compute_engine() = 0;
  virtual uint64_t NowNs() = 0;
  // Records an MMU fault in VM_FAULT[source.unit] for the context whose instance block is
  // `inst_address`.
  virtual void RecordFault(const FaultSource& source, uint64_t inst_address,
                           const MemoryFault& fault) = 0;
  virtual void RaiseNonStall(gf100::pfifo::Engine engine) = 0;
  // A compute job of channel `chid` (instance block at `inst_address`) failed without an MMU
  // fault: PGRAPH's TRAP interrupt, with the MP's warp error (gf100::pgraph::MpWarpError) and
  // global error bits saying why.
  virtual void RaiseGraphTrap(uint32_t chid, uint64_t inst_address, uint32_t warp_error,
                              uint32_t global_error) = 0;
  // The channel starts (busy) or stops running on `engine`.
  virtual void EngineActive(gf100::pfifo::Engine engine, uint32_t chid, uint64_t inst_address,
                            bool busy) = 0;
};

class Channel final : private ObjectContext {
 public:
  Channel(uint32_t chid, ChannelEnvironment* env);
  ~Channel() override;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Forgets everything (pending work included) and binds the channel to the instance block at
  // `inst_address`: reads RAMFC (USERD, IB ring, signature) and the VM binding, and resumes the IB
  // at the IB_GET stored in USERD. False (and the error record) when the instance block is
  // unusable.
  bool Load(uint64_t inst_address);
  // Forgets everything; the channel is unbound.
  void Unload();

  enum class Outcome : uint8_t {
    kIdle,      // nothing to do: IB_GET == IB_PUT and no pending work
    kBlocked,   // waiting for a semaphore acquire
    kProgress,  // did work (and may have more)
    kError,     // stopped with an error (see error())
  };
  // Runs until idle, blocked, an error, or NowNs() reaches `deadline_ns` (a time slice).
  Outcome Run(uint64_t deadline_ns);

  bool loaded() const { return loaded_; }
  const ChannelError& error() const { return error_; }
  const ChannelStats& stats() const { return stats_; }
  bool acquire_pending() const { return acquire_pending_; }
  // Pending work: a copy or compute grid in flight (running, or switched out into the channel's
  // context), or an unfinished pushbuffer segment.
  bool busy() const {
    return copy_job_ != nullptr || compute_job_ != nullptr || !context_.empty() ||
           segment_words_ != 0;
  }

  // Takes the channel's compute grid off the engine, between its slices (docs/SOFTWARE-GPU.md
  // "Preemption"). Switch (drain == false): the grid's whole state goes into the channel's context
  // and the engine's job is released; the channel's next turn restores it. Drain: the grid starts
  // no new thread block; once the started ones have finished (a later call) the little that is
  // left is switched out the same way. Returns true when the channel is off the engine — with
  // *saved_bytes the size of the context saved (0: nothing to save: no grid, a grid not started
  // yet, or an engine that cannot save) — and false while a drain waits for its blocks.
  bool Preempt(bool drain, size_t* saved_bytes);
  // A switched-out grid waits in the context.
  bool context_saved() const { return !context_.empty(); }
  uint64_t inst_address() const { return inst_address_; }
  uint32_t ib_get() const { return ib_get_; }
  uint32_t ib_put() const { return ib_put_; }
  uint64_t dma_get() const { return segment_va_; }
  uint32_t reference() const { return reference_; }
  // The method being executed when the error happened.
  const MethodCall& last_method() const { return current_; }

 private:
  // A channel's address space as compute jobs see it (unprivileged, faults attributed to PGRAPH).
  class JobMemory final : public ChannelMemory {
   public:
    explicit JobMemory(const VmView* vm) : vm_(vm) {}
    uint8_t* Translate(uint64_t va, uint32_t len, bool write, MemoryFault* fault) override;
    uint64_t AddressSpaceId() const override;

   private:
    const VmView* vm_;
  };

  Outcome RunCopy(uint64_t deadline_ns);
  Outcome RunCompute();
  bool CheckAcquire(bool* satisfied);
  // Fetches and executes pushbuffer words of the current segment.
  MethodStatus RunSegment(uint64_t deadline_ns);
  MethodStatus Execute(const MethodCall& call);
  MethodStatus HostMethod(const MethodCall& call);
  MethodStatus FetchIbEntry(uint32_t ib_put);
  void WriteUserd(uint32_t offset, uint32_t value);

  // ObjectContext.
  const VmView& vm() const override { return vm_; }
  MethodStatus WriteReport(const FaultSource& source, const Report& report) override;
  MethodStatus Fault(const FaultSource& source, const MemoryFault& fault) override;
  MethodStatus Fail(ChannelError::Kind kind, std::string message) override;
  void RaiseNonStall(gf100::pfifo::Engine engine) override;
  MethodStatus StartCopy(std::unique_ptr<CopyJob> job) override;
  MethodStatus StartCompute(const ComputeLaunch& launch) override;
  void FlushCode() override;
  uint64_t NowNs() override;

  const uint32_t chid_;
  ChannelEnvironment* const env_;

  bool loaded_ = false;
  uint64_t inst_address_ = 0;
  uint8_t* userd_ = nullptr;  // host address of the USERD page in VRAM
  uint64_t ib_base_ = 0;
  uint32_t ib_entries_ = 1;
  VmView vm_;
  JobMemory job_memory_{&vm_};

  uint32_t ib_get_ = 0;
  uint32_t ib_put_ = 0;
  uint64_t segment_va_ = 0;     // next pushbuffer word to fetch
  uint32_t segment_words_ = 0;  // words left in the current segment
  MethodDecoder decoder_;
  MethodCall current_;
  std::array<uint32_t, gf100::gpfifo::kSubchannels> subchannel_class_{};

  uint64_t semaphore_address_ = 0;
  uint32_t semaphore_payload_ = 0;
  uint32_t acquire_operation_ = 0;
  bool acquire_pending_ = false;
  uint32_t reference_ = 0;

  M2mfObject m2mf_;
  CopyObject copy_;
  ComputeObject compute_;
  std::unique_ptr<CopyJob> copy_job_;
  std::unique_ptr<ComputeJob> compute_job_;
  // A switched-out grid (ComputeJob::SaveContext). The authoritative copy lives here, in the
  // device's own memory, where no BAR, DMA or channel of any guest reaches; ComputeEngine::Resume
  // validates it anyway.
  std::vector<uint8_t> context_;

  ChannelError error_;
  ChannelStats stats_;
};

}  // namespace gpuvm::sim

#endif  // GPUVM_GPU_SIM_CHANNEL_H_
