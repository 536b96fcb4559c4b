// The physical side of full virtualization, shared by every fv VM: how the GPU is partitioned
// (a VRAM slice, a channel range and a SYSRAM bus window per VM, plus the aggregator's reserved
// VRAM), the physical structures the aggregator owns (its BAR1 with the USER area of every physical
// channel, one shadow instance block per physical channel, the physical playlist), physical TLB
// flushes, the submission queue, and the demultiplexing of the GPU's interrupts to the VM that owns
// the faulting channel.
//
// Physical VRAM layout (our choice):
//   [0, 1 MiB)                 untouched (VGA/VBIOS area on a real board)
//   [1 MiB, reserved_bytes)    ReservedVram: BAR1 instance/directory/table, USER area (128 pages),
//                              shadow instance blocks (128 x 4 KiB), playlists, shadow page tables
//   [reserved_bytes, VRAM end) the VMs' VRAM (vm_vram()): each VM's VramMap (vram_map.h) takes a
//                              static slice from it, or 128 KiB chunks on first reference (dynamic)
// SYSRAM: VM slot i's RAM is reachable by the GPU at bus address (i + 1) << 36 (GuestRamWindow
// regions), so relocated SYSRAM PTEs of different VMs never meet.
//
// Threading: the aggregator's owner thread only.
#ifndef GPUVM_AGGREGATOR_FV_HOST_H_
#define GPUVM_AGGREGATOR_FV_HOST_H_

#include <array>
#include <bitset>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "aggregator/physical_gpu.h"
#include "aggregator/reserved_vram.h"
#include "aggregator/submission_queue.h"
#include "aggregator/vram_access.h"
#include "aggregator/vram_map.h"
#include "base/rate_limited_log.h"
#include "gpu/hw/pfifo.h"

namespace gpuvm::aggregator {

struct FvOptions {
  uint64_t reserved_bytes = 48ull << 20;
  uint32_t default_channels = 16;
  uint64_t default_vram_bytes = 128ull << 20;
  VramPolicy vram_policy = VramPolicy::kDynamic;  // how VMs get their VRAM (vram_map.h)
  // How each VM's refusals and faults are logged: the first lines of each kind, then a summary
  // per interval (base/rate_limited_log.h).
  RateLimitedLog::Options guest_log = {};
};

// What a physical interrupt means for the VM owning the channel (implemented by FullVirtGpu).
class FvChannelOwner {
 public:
  virtual ~FvChannelOwner() = default;
  // `record`: VM_FAULT words (instance, address low, high, flags) as the GPU reported them.
  virtual void OnVmFault(uint32_t physical_channel, const std::array<uint32_t, 4>& record) = 0;
  virtual void OnSubfifoError(uint32_t physical_channel, uint32_t unit, uint32_t intr) = 0;
  // A compute trap: the MP trap registers (warp error 0x504648, global error 0x504650) as the GPU
  // reported them, read before the host acknowledged the trap (0 when it gave no reason).
  virtual void OnGraphTrap(uint32_t physical_channel, uint32_t warp_error,
                           uint32_t global_error) = 0;
  // The host failed the channel's work (FvHost::FailChannel: the operator's kill-work or the VM's
  // kernel limit): `intr` is the PSUBFIFO error to present (a gpuvm extension bit, pfifo.h),
  // `reason` says why, for the log.
  virtual void OnChannelFailed(uint32_t physical_channel, uint32_t intr,
                               const std::string& reason) = 0;
};

class FvHost {
 public:
  static constexpr uint32_t kChannels = gf100::pfifo::kChannels;
  static constexpr uint64_t kSliceAlign = 1ull << 20;
  static constexpr int kSysramSlotShift = 36;
  static constexpr uint32_t kSysramSlots = 15;

  // Takes the GPU over for fv: BAR1 + USER area, polling, interrupts (the GPU must be idle: no pt
  // VM on it).
  static Result<std::unique_ptr<FvHost>> Create(PhysicalGpu* gpu, const FvOptions& options);
  ~FvHost();

  struct Partition {
    uint64_t vram_base = 0;  // static policy: the slice's base (set by the VM's VramMap); else 0
    uint64_t vram_bytes = 0;
    uint32_t first_channel = 0;
    uint32_t channels = 0;
    uint32_t sysram_slot = 0;
    uint64_t sysram_base = 0;
  };
  // Channels and a SYSRAM slot (the VRAM is the VM's VramMap's, from vm_vram()).
  // ResourceExhausted with what is missing when channels or SYSRAM slots run out.
  Result<Partition> AllocatePartition(uint64_t vram_bytes, uint32_t channels);
  void ReleasePartition(const Partition& partition);

  PhysicalGpu& gpu() { return *gpu_; }
  VramAccess& vram() { return vram_; }
  ReservedVram& reserved() { return reserved_; }
  // The VRAM VMs get, past the reserved area (VramMap takes slices or chunks of it).
  ReservedVram& vm_vram() { return slices_; }
  const FvOptions& options() const { return options_; }
  SubmissionQueue& queue() { return *queue_; }
  // Replaces the FIFO (the scheduler's dispatcher); it forwards through Forward().
  void SetQueue(std::unique_ptr<SubmissionQueue> queue) { queue_ = std::move(queue); }
  // Writes IB_PUT into the physical channel's USER page through our BAR1 (the GPU notices it
  // there).
  void Forward(const Submission& submission);

  uint64_t shadow_instance(uint32_t physical_channel) const {
    return instances_ + uint64_t(physical_channel) * 0x1000;
  }
  uint64_t user_page(uint32_t physical_channel) const {
    return user_area_ + uint64_t(physical_channel) * gf100::pfifo::kUserPageSize;
  }
  // The physical channel whose shadow instance block is at `address`, or -1.
  int ChannelOfInstance(uint64_t address) const;

  void SetChannelOwner(uint32_t physical_channel, FvChannelOwner* owner);
  // Binds the channel to its shadow instance block (CHAN_TABLE) with `state` (RUNNABLE etc.).
  void BindChannel(uint32_t physical_channel, uint32_t state);
  // The VM's state word (RUNNABLE, engine); while the scheduler holds the channel RUNNABLE stays
  // clear on the GPU whatever the VM writes, and is restored when the hold ends.
  void SetChannelState(uint32_t physical_channel, uint32_t state);
  // The scheduler's hold (a suspended submission, docs/SCHEDULER.md "Preemption"): clears RUNNABLE
  // and asks the GPU to switch the channel's grid out (PREEMPT; not waited for: the GPU's engine
  // thread may be the caller). Released, the VM's own state word applies again. Thread-safe
  // against the owner thread's SetChannelState/BindChannel/StopChannel (the dispatch thread and
  // the GPU's engine thread call it).
  void HoldChannel(uint32_t physical_channel, bool hold);
  uint32_t ChannelState(uint32_t physical_channel);
  // Off the playlist, not runnable, kicked off the engine (bounded wait), unbound, its USER page
  // and shadow instance zeroed. False when the kick did not complete in time.
  bool StopChannel(uint32_t physical_channel);
  void Kick(uint32_t physical_channel);
  uint32_t ReadKick();

  void SetOnPlaylist(uint32_t physical_channel, bool on) { on_playlist_[physical_channel] = on; }
  // Writes the union of every VM's playlisted channels and submits it.
  Status CommitPlaylist();

  // Physical TLB flush of one directory (nouveau's handshake), bounded.
  void FlushTlb(uint64_t physical_pd);

  // The scheduler failed the channel's work (kill-work, a kernel limit: docs/SCHEDULER.md): its
  // owner hears of it at the next PollInterrupts (OnChannelFailed), as of a GPU error. Thread-safe
  // (the dispatch thread or the GPU's engine thread calls it); at most one pending per channel
  // (the bits merge).
  void FailChannel(uint32_t physical_channel, uint32_t intr, std::string reason);
  // What FailChannel calls after recording the failure so that the owner thread polls interrupts
  // (the aggregator's interrupt eventfd); set on the owner thread before any VM runs. Called on
  // the failing thread; must be thread-safe.
  void SetInterruptNotifier(std::function<void()> notify) { notify_ = std::move(notify); }
  // Reads the GPU's pending interrupts, hands each to the owner of its channel and acknowledges it
  // (channels failed by FailChannel first).
  void PollInterrupts();
  uint64_t unattributed_interrupts() const { return unattributed_; }

  // Optional log of what the host did about hostile input (owner thread): LogEvent bodies
  // (base/log.h) carrying the VM's id and name (FullVirtGpu writes them).
  void SetLog(std::function<void(const std::string&)> log) { log_ = std::move(log); }
  void Log(const std::string& line) {
    if (log_) log_(line);
  }

 private:
  FvHost(PhysicalGpu* gpu, const FvOptions& options);
  Status Init();

  PhysicalGpu* const gpu_;
  const FvOptions options_;
  VramAccess vram_;
  ReservedVram reserved_;
  ReservedVram slices_;
  std::unique_ptr<SubmissionQueue> queue_;
  uint64_t bar1_inst_ = 0, bar1_pd_ = 0, bar1_pt_ = 0;
  uint64_t user_area_ = 0, instances_ = 0;
  uint64_t playlists_[2] = {0, 0};
  int next_playlist_ = 0;
  std::bitset<kChannels> channels_used_;
  std::bitset<kChannels> on_playlist_;
  std::mutex state_mu_;  // orders state-word writes of the owner thread and of HoldChannel
  std::array<uint32_t, kChannels> wanted_state_{};  // guarded by state_mu_: the VM's state word
  std::bitset<kChannels> held_;                     // guarded by state_mu_
  std::array<FvChannelOwner*, kChannels> owners_{};
  std::bitset<kSysramSlots> slots_used_;
  uint64_t unattributed_ = 0;
  std::function<void(const std::string&)> log_;
  struct Failure {
    uint32_t intr = 0;
    std::string reason;
  };
  std::mutex failed_mu_;
  std::map<uint32_t, Failure> failed_;  // guarded by failed_mu_: by physical channel
  std::function<void()> notify_;
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_FV_HOST_H_
