#include "aggregator/fv_host.h"

#include <chrono>
#include <thread>

#include "aggregator/fv_gpu_internal.h"

namespace gpuvm::aggregator {

namespace {

constexpr uint64_t kVgaArea = 1ull << 20;  // never used, as the guest driver does
constexpr uint32_t kBar1PtSize = 3;        // PT_SIZE: an eighth of a PDE's range (16 MiB)
constexpr uint32_t kPlaylistBusyWaitMs = 1000;

// Polls `done` until true or `ms` pass; spins briefly first (the software GPU answers at once).
template <typename F>
bool WaitFor(F done, uint32_t ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  for (int i = 0;; ++i) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (i > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace

FvHost::FvHost(PhysicalGpu* gpu, const FvOptions& options)
    : gpu_(gpu),
      options_(options),
      vram_(gpu),
      reserved_(kVgaArea, options.reserved_bytes),
      slices_(options.reserved_bytes, gpu->vram_bytes() & ~(kSliceAlign - 1)) {
  queue_ = std::make_unique<FifoSubmissionQueue>([this](const Submission& s) { Forward(s); });
}

FvHost::~FvHost() = default;

Result<std::unique_ptr<FvHost>> FvHost::Create(PhysicalGpu* gpu, const FvOptions& options) {
  if (options.reserved_bytes < (4ull << 20) || options.reserved_bytes % kSliceAlign != 0 ||
      options.reserved_bytes + kSliceAlign > gpu->vram_bytes()) {
    return Status::InvalidArgument(
        "fv: the reserved area must be whole MiB, at least 4 MiB, and "
        "leave VRAM for VMs");
  }
  std::unique_ptr<FvHost> host(new FvHost(gpu, options));
  GPUVM_RETURN_IF_ERROR(host->Init());
  return host;
}

Status FvHost::Init() {
  gpu::Device& d = gpu_->device();
  d.WriteReg(pmc::kEnable, d.ReadReg(pmc::kEnable) | pmc::kEnablePfifo | pmc::kEnablePgraph |
                               pmc::kEnablePcopy0 | pmc::kEnablePcopy1);
  // 128 KiB large pages for every VM (guests asking for 64 KiB are refused: fv_gpu.cc).
  d.WriteReg(vm::kCfg, d.ReadReg(vm::kCfg) & ~vm::kCfgLargePage64K);

  // Our BAR1: the USER pages of all 128 physical channels at BAR1 offset 0.
  const uint64_t user_bytes = uint64_t(kChannels) * pf::kUserPageSize;
  const uint64_t pt_entries = vm::kSmallTableEntries(vm::kLargePageShift128K) >> kBar1PtSize;
  GPUVM_ASSIGN_OR_RETURN(user_area_, reserved_.Allocate(user_bytes));
  GPUVM_ASSIGN_OR_RETURN(instances_, reserved_.Allocate(uint64_t(kChannels) * ramin::kSize));
  GPUVM_ASSIGN_OR_RETURN(bar1_inst_, reserved_.Allocate(ramin::kSize));
  GPUVM_ASSIGN_OR_RETURN(bar1_pd_, reserved_.Allocate(0x1000));
  GPUVM_ASSIGN_OR_RETURN(bar1_pt_, reserved_.Allocate(pt_entries * vm::kEntrySize));
  GPUVM_ASSIGN_OR_RETURN(playlists_[0], reserved_.Allocate(0x1000));
  GPUVM_ASSIGN_OR_RETURN(playlists_[1], reserved_.Allocate(0x1000));
  vram_.Fill(user_area_, 0, user_bytes);
  vram_.Fill(instances_, 0, uint64_t(kChannels) * ramin::kSize);
  vram_.Fill(bar1_inst_, 0, ramin::kSize);
  vram_.Fill(bar1_pd_, 0, 0x1000);
  vram_.Fill(bar1_pt_, 0, pt_entries * vm::kEntrySize);
  for (uint32_t i = 0; i < kChannels; ++i) {
    vram_.Write64(bar1_pt_ + i * vm::kEntrySize, vm::pte::Make(user_page(i)));
  }
  vram_.Write64(bar1_pd_, vm::pde::Make(vm::PdeTarget::kNone, 0, vm::PdeTarget::kVram, bar1_pt_,
                                        kBar1PtSize));
  vram_.Write32(bar1_inst_ + ramin::kPageDirLo, uint32_t(bar1_pd_));  // target VRAM (0)
  vram_.Write32(bar1_inst_ + ramin::kPageDirHi, uint32_t(bar1_pd_ >> 32));
  vram_.Write32(bar1_inst_ + ramin::kVmLimitLo, uint32_t(user_bytes - 1));
  vram_.Write32(bar1_inst_ + ramin::kVmLimitHi, 0);
  d.WriteReg(pbus::kBar1Inst, pbus::kBarInstVmMode | uint32_t(bar1_inst_ >> pbus::kBarInstShift));
  FlushTlb(bar1_pd_);
  d.WriteReg(pf::kPollArea, pf::kPollAreaEnable | 0);

  // Interrupts: everything a guest may cause is ours to decode and hand on.
  d.WriteReg(pf::kIntr, 0xffffffff);
  d.WriteReg(pf::kIntrEn,
             pf::kIntrChanTableError | pf::kIntrPlaylist | pf::kIntrVmFault | pf::kIntrSubfifo);
  for (uint32_t n = 0; n < pf::kSubfifos; ++n) {
    d.WriteReg(pf::kSubfifo + n * pf::kSubfifoStride + pf::kSubfifoIntr, 0xffffffff);
    d.WriteReg(pf::kSubfifo + n * pf::kSubfifoStride + pf::kSubfifoIntrEn, 0xffffffff);
  }
  d.WriteReg(pgraph::kIntr, 0xffffffff);
  d.WriteReg(pgraph::kIntrEn, 0xffffffff);
  d.WriteReg(pmc::kIntrEnHost, pmc::kIntrEnHardware);
  return Status::Ok();
}

Result<FvHost::Partition> FvHost::AllocatePartition(uint64_t vram_bytes, uint32_t channels) {
  if (vram_bytes == 0 || vram_bytes % kSliceAlign != 0) {
    return Status::InvalidArgument("fv: a VM's VRAM must be a whole number of MiB");
  }
  if (channels == 0 || channels > kChannels) {
    return Status::InvalidArgument("fv: a VM needs 1 to 128 channels");
  }
  Partition p;
  p.vram_bytes = vram_bytes;
  p.channels = channels;
  // Channels: the first free contiguous run.
  uint32_t run = 0;
  bool found = false;
  for (uint32_t c = 0; c < kChannels && !found; ++c) {
    run = channels_used_[c] ? 0 : run + 1;
    if (run == channels) {
      p.first_channel = c + 1 - channels;
      found = true;
    }
  }
  if (!found) {
    return Status::ResourceExhausted("fv: no run of " + std::to_string(channels) +
                                     " free physical channels (" +
                                     std::to_string(channels_used_.count()) + " of 128 in use)");
  }
  uint32_t slot = 0;
  while (slot < kSysramSlots && slots_used_[slot]) ++slot;
  if (slot == kSysramSlots) {
    return Status::ResourceExhausted("fv: every SYSRAM window is in use (" +
                                     std::to_string(kSysramSlots) + " fv VMs)");
  }
  p.sysram_slot = slot;
  p.sysram_base = uint64_t(slot + 1) << kSysramSlotShift;
  slots_used_[slot] = true;
  for (uint32_t c = 0; c < channels; ++c) channels_used_[p.first_channel + c] = true;
  return p;
}

void FvHost::ReleasePartition(const Partition& p) {
  slots_used_[p.sysram_slot] = false;
  for (uint32_t c = 0; c < p.channels; ++c) {
    channels_used_[p.first_channel + c] = false;
    owners_[p.first_channel + c] = nullptr;
  }
}

void FvHost::Forward(const Submission& s) {
  if (s.physical_channel >= kChannels) return;
  gpu_->device().Write32(gpu::Bar::k1,
                         uint64_t(s.physical_channel) * pf::kUserPageSize + gf100::userd::kIbPut,
                         s.ib_put);
}

int FvHost::ChannelOfInstance(uint64_t address) const {
  if (address < instances_ || address >= instances_ + uint64_t(kChannels) * ramin::kSize) return -1;
  if ((address - instances_) % ramin::kSize != 0) return -1;
  return int((address - instances_) / ramin::kSize);
}

void FvHost::SetChannelOwner(uint32_t c, FvChannelOwner* owner) {
  if (c >= kChannels) return;
  owners_[c] = owner;
  std::lock_guard lock(failed_mu_);
  failed_.erase(c);  // a failure of the previous owner's work is not the new owner's
}

void FvHost::BindChannel(uint32_t c, uint32_t state) {
  gpu::Device& d = gpu_->device();
  d.WriteReg(pf::kChanTable + c * pf::kChanTableStride,
             pf::kChanValid | pf::kChanPollEnable | uint32_t(shadow_instance(c) >> 12));
  SetChannelState(c, state);
}

void FvHost::SetChannelState(uint32_t c, uint32_t state) {
  std::lock_guard lock(state_mu_);
  wanted_state_[c] = state;
  gpu_->device().WriteReg(pf::kChanTable + c * pf::kChanTableStride + 4,
                          held_[c] ? state & ~pf::kStateRunnable : state);
}

void FvHost::HoldChannel(uint32_t c, bool hold) {
  if (c >= kChannels) return;
  std::lock_guard lock(state_mu_);
  held_[c] = hold;
  gpu::Device& d = gpu_->device();
  d.WriteReg(pf::kChanTable + c * pf::kChanTableStride + 4,
             hold ? wanted_state_[c] & ~pf::kStateRunnable : wanted_state_[c]);
  if (hold) d.WriteReg(pf::kPreempt, c);
}

uint32_t FvHost::ChannelState(uint32_t c) {
  return gpu_->device().ReadReg(pf::kChanTable + c * pf::kChanTableStride + 4);
}

void FvHost::Kick(uint32_t c) { gpu_->device().WriteReg(pf::kKickChid, c); }
uint32_t FvHost::ReadKick() { return gpu_->device().ReadReg(pf::kKickChid); }

bool FvHost::StopChannel(uint32_t c) {
  gpu::Device& d = gpu_->device();
  const bool was_on = on_playlist_[c];
  {
    std::lock_guard lock(state_mu_);
    held_[c] = false;  // a hold does not outlive the binding
  }
  SetChannelState(c, 0);
  if (was_on) {
    on_playlist_[c] = false;
    (void)CommitPlaylist();
  }
  Kick(c);
  const bool kicked =
      WaitFor([&] { return (d.ReadReg(pf::kKickChid) & pf::kKickPending) == 0; }, 1000);
  d.WriteReg(pf::kChanTable + c * pf::kChanTableStride, 0);
  vram_.Fill(user_page(c), 0, pf::kUserPageSize);
  vram_.Fill(shadow_instance(c), 0, ramin::kSize);
  return kicked;
}

Status FvHost::CommitPlaylist() {
  gpu::Device& d = gpu_->device();
  const uint64_t buffer = playlists_[next_playlist_];
  next_playlist_ ^= 1;
  uint32_t count = 0;
  for (uint32_t c = 0; c < kChannels; ++c) {
    if (!on_playlist_[c]) continue;
    const uint32_t entry[2] = {c, pf::kPlaylistEntryWord1};
    vram_.Write(buffer + count * pf::kPlaylistEntrySize, entry, sizeof entry);
    ++count;
  }
  d.WriteReg(pf::kPlaylistWr, uint32_t(buffer >> 12));
  d.WriteReg(pf::kPlaylistWrLen, count);
  const bool done =
      WaitFor([&] { return (d.ReadReg(pf::kPlaylistRdLen) & pf::kPlaylistBusy) == 0; },
              kPlaylistBusyWaitMs);
  d.WriteReg(pf::kRunlistIntr, pf::kRunlistIntrUpdateDone);
  if (!done) return Status::DeadlineExceeded("fv: the GPU did not take the playlist");
  return Status::Ok();
}

void FvHost::FlushTlb(uint64_t physical_pd) {
  gpu::Device& d = gpu_->device();
  (void)WaitFor([&] { return (d.ReadReg(vm::kCfg) & vm::kCfgFlushSlotsMask) != 0; }, 100);
  d.WriteReg(vm::kTlbFlushVspace, uint32_t(physical_pd >> 8));
  d.WriteReg(vm::kTlbFlushTrigger, vm::kFlushTrigger | vm::kFlushPageAll);
  (void)WaitFor([&] { return (d.ReadReg(vm::kCfg) & vm::kCfgFlushQueued) != 0; }, 100);
}

void FvHost::FailChannel(uint32_t c, uint32_t intr, std::string reason) {
  if (c >= kChannels) return;
  {
    std::lock_guard lock(failed_mu_);
    Failure& f = failed_[c];
    f.intr |= intr;
    f.reason = std::move(reason);
  }
  if (notify_) notify_();
}

void FvHost::PollInterrupts() {
  std::map<uint32_t, Failure> failed;
  {
    std::lock_guard lock(failed_mu_);
    failed.swap(failed_);
  }
  for (const auto& [c, f] : failed) {
    if (owners_[c] != nullptr) {
      owners_[c]->OnChannelFailed(c, f.intr, f.reason);
    } else {
      ++unattributed_;  // its VM left meanwhile
    }
  }
  gpu::Device& d = gpu_->device();
  const uint32_t pmc_intr = d.ReadReg(pmc::kIntrHost);
  if (pmc_intr & pmc::kIntrPfifo) {
    const uint32_t intr = d.ReadReg(pf::kIntr);
    if (intr & pf::kIntrVmFault) {
      const uint32_t source = d.ReadReg(pf::kVmFaultSource);
      for (uint32_t u = 0; u < pf::kVmFaultUnits; ++u) {
        if ((source & (1u << u)) == 0) continue;
        const uint32_t base = pf::kVmFault + u * pf::kVmFaultStride;
        const std::array<uint32_t, 4> record = {
            d.ReadReg(base + pf::kVmFaultInst), d.ReadReg(base + pf::kVmFaultAddrLo),
            d.ReadReg(base + pf::kVmFaultAddrHi), d.ReadReg(base + pf::kVmFaultFlags)};
        const int c = ChannelOfInstance(uint64_t(record[0]) << 12);
        if (c >= 0 && owners_[c] != nullptr) {
          owners_[c]->OnVmFault(uint32_t(c), record);
        } else {
          ++unattributed_;  // e.g. our own BAR1 (never expected)
        }
        d.WriteReg(pf::kVmFaultSource, 1u << u);
      }
    }
    if (intr & pf::kIntrSubfifo) {
      const uint32_t source = d.ReadReg(pf::kSubfifoIntrSource);
      for (uint32_t n = 0; n < pf::kSubfifos; ++n) {
        if ((source & (1u << n)) == 0) continue;
        const uint32_t base = pf::kSubfifo + n * pf::kSubfifoStride;
        const uint32_t sintr = d.ReadReg(base + pf::kSubfifoIntr);
        const uint32_t c = d.ReadReg(base + pf::kSubfifoChannel) & pf::kPlaylistEntryChidMask;
        if (owners_[c] != nullptr) {
          owners_[c]->OnSubfifoError(c, n, sintr);
        } else {
          ++unattributed_;
        }
        d.WriteReg(base + pf::kSubfifoIntr, sintr);
      }
    }
    const uint32_t edges = intr & (pf::kIntrChanTableError | pf::kIntrPlaylist);
    if (edges != 0) d.WriteReg(pf::kIntr, edges);
  }
  if (pmc_intr & pmc::kIntrPgraph) {
    const uint32_t gintr = d.ReadReg(pgraph::kIntr);
    if (gintr & pgraph::kIntrTrap) {
      const uint32_t engine = d.ReadReg(pf::kEngineChannel);
      const int c = (engine & pf::kEngineChannelValid)
                        ? ChannelOfInstance(uint64_t(engine & pf::kChanInstMask) << 12)
                        : -1;
      // The reason, read and acknowledged innermost first (as the guest driver does natively)
      // before 0x400100 is: that acknowledgement presents the next trap in the same registers.
      uint32_t warp_error = 0, global_error = 0;
      const uint32_t trap = d.ReadReg(pgraph::kTrap);
      if (trap & pgraph::kTrapGpc) {
        if (d.ReadReg(pgraph::kTpc0TrapStatus) & pgraph::kTpcTrapMp) {
          warp_error = d.ReadReg(pgraph::kTpc0MpWarpError) & pgraph::kMpWarpErrorMask;
          global_error = d.ReadReg(pgraph::kTpc0MpGlobalError);
          d.WriteReg(pgraph::kTpc0MpWarpError, 0);
          d.WriteReg(pgraph::kTpc0MpGlobalError, global_error);
        }
        d.WriteReg(pgraph::kGpc0TrapStatus, d.ReadReg(pgraph::kGpc0TrapStatus));
        d.WriteReg(pgraph::kTrapGpcMask, d.ReadReg(pgraph::kTrapGpcMask));
      }
      if (trap != 0) d.WriteReg(pgraph::kTrap, trap);
      if (c >= 0 && owners_[c] != nullptr) {
        owners_[c]->OnGraphTrap(uint32_t(c), warp_error, global_error);
      } else {
        ++unattributed_;
      }
    }
    d.WriteReg(pgraph::kIntr, gintr);
  }
}

}  // namespace gpuvm::aggregator
