#include "aggregator/fv_gpu.h"

#include <bit>
#include <chrono>
#include <cstring>

#include "gpu/hw/pbus.h"
#include "gpu/hw/pfb.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pgraph.h"
#include "gpu/hw/pmc.h"
#include "gpu/hw/ramin.h"
#include "gpu/hw/vm.h"

namespace gpuvm::aggregator {

namespace pf = gf100::pfifo;
namespace pmc = gf100::pmc;
namespace pbus = gf100::pbus;
namespace pfb = gf100::pfb;
namespace pgraph = gf100::pgraph;
namespace ramin = gf100::ramin;
namespace vm = gf100::vm;

namespace {

constexpr uint64_t kPage = 0x1000;
constexpr size_t kMaxSpaces = 64;          // shadowed directories per VM (bounds reserved VRAM)
constexpr size_t kMaxBarCache = 1u << 16;  // cached aperture translations per VM
constexpr uint32_t kShadowStateMask = pf::kStateRunnable | pf::kStateEngineMask;
constexpr uint32_t kReflectedStateMask =
    pf::kStateLoaded | pf::kStatePending | pf::kStateAcquirePending;

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

const char* FvModeName(FvMode mode) {
  switch (mode) {
    case FvMode::kNaive:
      return "fv-naive";
    case FvMode::kLazy:
      return "fv-lazy";
    case FvMode::kBarRemap:
      return "fv-bar-remap";
    case FvMode::kOptimized:
      return "fv-optimized";
  }
  return "fv-?";
}

Result<FvMode> ParseFvMode(std::string_view text) {
  if (text.starts_with("fv-")) text.remove_prefix(3);
  if (text == "naive" || text == "fv") return FvMode::kNaive;
  if (text == "lazy") return FvMode::kLazy;
  if (text == "bar-remap" || text == "remap") return FvMode::kBarRemap;
  if (text == "optimized" || text == "opt") return FvMode::kOptimized;
  return Status::InvalidArgument("unknown fv mode '" + std::string(text) +
                                 "' (naive, lazy, bar-remap, optimized)");
}

Result<std::unique_ptr<FullVirtGpu>> FullVirtGpu::Create(FvHost* host, const VmBars& bars,
                                                         const FvVmOptions& options) {
  if (bars.bar0 < pbus::kPraminWindow + pbus::kPraminWindowSize) {
    return Status::InvalidArgument("fv: BAR0 must reach the PRAMIN window (16 MiB)");
  }
  if (bars.bar1 < uint64_t(pf::kChannels) * pf::kUserPageSize || bars.bar3 < (1ull << 20) ||
      bars.bar1 > (4ull << 30) || bars.bar3 > (4ull << 30)) {
    return Status::InvalidArgument("fv: BAR1 and BAR3 must be 1 MiB to 4 GiB");
  }
  // The VRAM first (a static slice is zeroed here; dynamic chunks when first referenced).
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<VramMap> map,
                         VramMap::Create(host->options().vram_policy, &host->vm_vram(),
                                         &host->vram(), options.vram_bytes));
  GPUVM_ASSIGN_OR_RETURN(FvHost::Partition partition,
                         host->AllocatePartition(options.vram_bytes, options.channels));
  partition.vram_base = map->static_base();
  return std::unique_ptr<FullVirtGpu>(
      new FullVirtGpu(host, bars, options, partition, std::move(map)));
}

FullVirtGpu::FullVirtGpu(FvHost* host, const VmBars& bars, const FvVmOptions& options,
                         const FvHost::Partition& partition, std::unique_ptr<VramMap> vram_map)
    : host_(host),
      bars_(bars),
      options_(options),
      partition_(partition),
      vram_map_(std::move(vram_map)) {
  pmc_enable_ = pmc::kEnableResetValue;
  channels_.resize(partition.channels);
  if ((options.mode == FvMode::kBarRemap || options.mode == FvMode::kOptimized) &&
      host->gpu().vram_fd() >= 0) {
    remap_ =
        std::make_unique<BarRemapper>(host->gpu().vram_fd(), pf::kChannels - partition.channels);
  }
}

FullVirtGpu::~FullVirtGpu() {
  if (!detached_) (void)Detach();
}

VmMemoryLayout FullVirtGpu::layout() const {
  return {partition_.vram_base, partition_.vram_bytes, partition_.sysram_base, ram_.size(),
          vram_map_.get()};
}

void FullVirtGpu::Log(const std::string& line) {
  host_->Log("fv VM " + std::to_string(options_.vm_id) + " '" + options_.name + "': " + line);
}

std::string FullVirtGpu::DescribeCounters() const {
  const FvCounters& k = counters_;
  const ShadowCounters& s = k.shadow;
  const uint64_t assigned = vram_map_ ? vram_map_->assigned_bytes() : k.vram_assigned;
  return std::string(FvModeName(options_.mode)) + ", VRAM " +
         std::to_string(partition_.vram_bytes >> 20) + " MiB " +
         (host_->options().vram_policy == VramPolicy::kStatic
              ? "at " + Hex(partition_.vram_base)
              : "dynamic (" + std::to_string(assigned >> 10) + " KiB assigned" +
                    (k.vram_exhausted != 0 || (vram_map_ && vram_map_->exhausted() != 0)
                         ? ", pool exhausted"
                         : "") +
                    ")") +
         ", channels " + std::to_string(partition_.first_channel) + ".." +
         std::to_string(partition_.first_channel + partition_.channels - 1) + "; traps BAR0/1/3 " +
         std::to_string(k.traps[0]) + "/" + std::to_string(k.traps[1]) + "/" +
         std::to_string(k.traps[2]) + " (PRAMIN " + std::to_string(k.pramin) + ", USER " +
         std::to_string(k.user_area) + "), TLB flushes " + std::to_string(k.tlb_flushes) +
         ", scans " + std::to_string(s.scans) + " (tables " + std::to_string(s.tables_scanned) +
         ", unchanged " + std::to_string(s.tables_unchanged) + "), shadow entries written " +
         std::to_string(s.entries_written) + ", rejected " + std::to_string(s.entries_rejected) +
         ", BAR walks " + std::to_string(k.bar_walks) + ", submissions " +
         std::to_string(k.submissions) + ", playlists " + std::to_string(k.playlist_updates) +
         ", shadow channels " + std::to_string(k.shadow_channels_built) +
         ", refused registers/memory/channels " + std::to_string(k.refused_registers) + "/" +
         std::to_string(k.refused_memory) + "/" + std::to_string(k.refused_channels) + ", faults " +
         std::to_string(k.faults) +
         (k.descriptor_writes != 0
              ? ", descriptor writes " + std::to_string(k.descriptor_writes)
              : std::string()) +
         (remap_ ? ", remap syncs " + std::to_string(k.remap_syncs) + " (" +
                       std::to_string(k.remap_ns / 1000) + " us, runs " +
                       std::to_string(remap_->runs()) + ", pages " +
                       std::to_string(remap_->mapped_pages()) + ", maps/unmaps " +
                       std::to_string(remap_->maps()) + "/" + std::to_string(remap_->unmaps()) +
                       (remap_off_ ? ", refused: trapping" : "") + ")"
                 : std::string());
}

// ---- access entry points --------------------------------------------------------------------

Status FullVirtGpu::Check(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t length) const {
  if (detached_) return Status::FailedPrecondition("the VM's virtual GPU is gone");
  if (size != 1 && size != 2 && size != 4 && size != 8) {
    return Status::InvalidArgument("MMIO size must be 1, 2, 4 or 8");
  }
  if (length == 0 || length % size != 0) {
    return Status::InvalidArgument("a block must be whole elements");
  }
  const uint64_t bar_size = bars_.size(bar);
  if (offset >= bar_size || length > bar_size - offset) {
    return Status::OutOfRange("access past the end of BAR" + std::to_string(static_cast<int>(bar)));
  }
  return Status::Ok();
}

static size_t Slot(gpu::Bar bar) { return bar == gpu::Bar::k0 ? 0 : bar == gpu::Bar::k1 ? 1 : 2; }

Result<uint64_t> FullVirtGpu::Read(gpu::Bar bar, uint64_t offset, uint32_t size, uint32_t) {
  GPUVM_RETURN_IF_ERROR(Check(bar, offset, size, size));
  ++counters_.traps[Slot(bar)];
  return ReadOne(bar, offset, size);
}

Status FullVirtGpu::Write(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t value, uint32_t) {
  GPUVM_RETURN_IF_ERROR(Check(bar, offset, size, size));
  ++counters_.traps[Slot(bar)];
  WriteOne(bar, offset, size, value);
  return Status::Ok();
}

Status FullVirtGpu::WriteElements(gpu::Bar bar, uint64_t offset, uint32_t size,
                                  std::span<const uint8_t> data, uint32_t) {
  GPUVM_RETURN_IF_ERROR(Check(bar, offset, size, data.size()));
  counters_.traps[Slot(bar)] += data.size() / size;
  for (size_t at = 0; at < data.size(); at += size) {
    uint64_t value = 0;
    std::memcpy(&value, data.data() + at, size);
    WriteOne(bar, offset + at, size, value);
  }
  return Status::Ok();
}

Status FullVirtGpu::ReadElements(gpu::Bar bar, uint64_t offset, uint32_t size,
                                 std::span<uint8_t> out, uint32_t) {
  GPUVM_RETURN_IF_ERROR(Check(bar, offset, size, out.size()));
  counters_.traps[Slot(bar)] += out.size() / size;
  for (size_t at = 0; at < out.size(); at += size) {
    const uint64_t value = ReadOne(bar, offset + at, size);
    std::memcpy(out.data() + at, &value, size);
  }
  return Status::Ok();
}

uint64_t FullVirtGpu::PraminAddress(uint64_t offset) const {
  return (uint64_t(pramin_base_) << pbus::kPraminBaseShift) + (offset - pbus::kPraminWindow);
}

uint64_t FullVirtGpu::ReadOne(gpu::Bar bar, uint64_t offset, uint32_t size) {
  uint64_t value = 0;
  if (bar == gpu::Bar::k0) {
    if (offset >= pbus::kPraminWindow && offset < pbus::kPraminWindow + pbus::kPraminWindowSize) {
      ++counters_.pramin;
      if (!vram_map_->Read(PraminAddress(offset), &value, size)) ++counters_.refused_memory;
      return value;
    }
    if (size == 8) {
      return ReadRegister(uint32_t(offset)) | (uint64_t(ReadRegister(uint32_t(offset + 4))) << 32);
    }
    const uint32_t word = ReadRegister(uint32_t(offset & ~3ull));
    value = word >> ((offset & 3) * 8);
    return size == 4 ? uint32_t(value) : value & ((1ull << (size * 8)) - 1);
  }
  if (remap_dirty_) SyncRemap();
  if (InUserArea(bar, offset)) return UserAccess(offset, size, false, 0);
  ApertureAccess(bar, offset, reinterpret_cast<uint8_t*>(&value), size, false);
  return value;
}

void FullVirtGpu::WriteOne(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t value) {
  if (bar == gpu::Bar::k0) {
    if (offset >= pbus::kPraminWindow && offset < pbus::kPraminWindow + pbus::kPraminWindowSize) {
      ++counters_.pramin;
      if (!vram_map_->Write(PraminAddress(offset), &value, size)) {
        ++counters_.refused_memory;
      } else {
        DescriptorStore(/*guest=*/true, PraminAddress(offset), size);
      }
      return;
    }
    if (size == 8 && (offset & 3) == 0) {
      WriteRegister(uint32_t(offset), uint32_t(value));
      WriteRegister(uint32_t(offset + 4), uint32_t(value >> 32));
    } else if (size == 4 && (offset & 3) == 0) {
      WriteRegister(uint32_t(offset), uint32_t(value));
    } else {
      ++counters_.refused_registers;  // partial register writes: no driver does them
    }
    return;
  }
  if (remap_dirty_) SyncRemap();
  if (InUserArea(bar, offset)) {
    UserAccess(offset, size, true, value);
    return;
  }
  ApertureAccess(bar, offset, reinterpret_cast<uint8_t*>(&value), size, true);
}

// ---- BAR0 registers -----------------------------------------------------------------------

uint32_t FullVirtGpu::VirtualPfifoIntr() const {
  uint32_t intr = pfifo_intr_edges_;
  if (vm_fault_source_ != 0) intr |= pf::kIntrVmFault;
  for (const Subfifo& s : subfifo_) {
    if (s.intr != 0) intr |= pf::kIntrSubfifo;
  }
  if (runlist_intr_ != 0) intr |= pf::kIntrRunlist;
  return intr;
}

uint32_t FullVirtGpu::VirtualPmcIntr() const {
  uint32_t intr = 0;
  if (VirtualPfifoIntr() & pfifo_intr_en_) intr |= pmc::kIntrPfifo;
  if (graph_intr_ & graph_intr_en_) intr |= pmc::kIntrPgraph;
  return intr;
}

bool FullVirtGpu::interrupt_asserted() const {
  if (detached_) return false;
  host_->PollInterrupts();
  return (pmc_intr_en_ & pmc::kIntrEnHardware) != 0 && (VirtualPmcIntr() & ~pmc_intr_mask_) != 0;
}

uint32_t FullVirtGpu::ReadRegister(uint32_t offset) {
  switch (offset) {
    case pmc::kBoot0:
      return host_->gpu().device().ReadReg(pmc::kBoot0);
    case pmc::kIntrHost:
      host_->PollInterrupts();
      return VirtualPmcIntr();
    case pmc::kIntrEnHost:
      return pmc_intr_en_;
    case pmc::kIntrMaskHost:
      return pmc_intr_mask_;
    case pmc::kEnable:
      return pmc_enable_;
    case pfb::kFbpCount:
      return 1;
    case pfb::kFbpDisabledMask:
      return 0;
    case pfb::kFbpAmount:
      return uint32_t(partition_.vram_bytes >> pfb::kAmountShift);
    case pbus::kPraminBase:
      return pramin_base_;
    case pbus::kBar1Inst:
      return bar_inst_[0];
    case pbus::kBar3Inst:
      return bar_inst_[1];
    case pf::kIntr:
      return VirtualPfifoIntr();
    case pf::kIntrEn:
      return pfifo_intr_en_;
    case pf::kCtrl:
      return pfifo_ctrl_;
    case pf::kPollArea:
      return poll_area_;
    case pf::kPlaylistWr:
      return playlist_wr_;
    case pf::kPlaylistRdLen:
      return 0;  // every playlist is taken before the write that submitted it returns
    case pf::kChanTableErrorCode:
      return chan_table_error_;
    case pf::kVmFaultSource:
      return vm_fault_source_;
    case pf::kSubfifoIntrSource: {
      uint32_t source = 0;
      for (uint32_t n = 0; n < pf::kSubfifos; ++n) {
        if (subfifo_[n].intr != 0) source |= 1u << n;
      }
      return source;
    }
    case pf::kEngineIntrEnable:
      return engine_intr_enable_;
    case pf::kKickChid: {
      const uint32_t physical = host_->ReadKick();
      const int v = VirtualChannelOf(physical & pf::kKickChidMask);
      return (physical & pf::kKickPending) | uint32_t(v < 0 ? 0 : v);
    }
    case pf::kEngineChannel:
      return graph_trap_channel_;
    case pf::kRunlistIntr:
      return runlist_intr_;
    case pgraph::kIntr:
      return graph_intr_;
    case pgraph::kIntrEn:
      return graph_intr_en_;
    case pgraph::kTrap:
      return graph_trap_;
    case pgraph::kTrapGpcMask:
      return graph_trap_gpc_mask_;
    case pgraph::kGpc0TrapStatus:
      return gpc0_trap_;
    case pgraph::kTpc0TrapStatus:
      return (mp_warp_error_ != 0 || mp_global_error_ != 0) ? pgraph::kTpcTrapMp : 0;
    case pgraph::kTpc0MpWarpError:
      return mp_warp_error_;
    case pgraph::kTpc0MpGlobalError:
      return mp_global_error_;
    case vm::kCfg:
      return (host_->gpu().device().ReadReg(vm::kCfg) & ~vm::kCfgLargePage64K) | vm_cfg_;
    case vm::kTlbFlushPage:
      return tlb_page_;
    case vm::kTlbFlushVspace:
      return tlb_vspace_;
  }
  if (offset >= pf::kVmFault && offset < pf::kVmFault + pf::kVmFaultUnits * pf::kVmFaultStride) {
    const uint32_t unit = (offset - pf::kVmFault) / pf::kVmFaultStride;
    return vm_fault_[unit][(offset - pf::kVmFault) % pf::kVmFaultStride / 4];
  }
  if (offset >= pf::kChanTable && offset < pf::kChanTable + pf::kChannels * pf::kChanTableStride) {
    const uint32_t v = (offset - pf::kChanTable) / pf::kChanTableStride;
    if (v >= channels_.size()) return 0;
    const VirtualChannel& ch = channels_[v];
    if ((offset - pf::kChanTable) % pf::kChanTableStride == 0) return ch.chan;
    uint32_t state = ch.state & ~kReflectedStateMask;
    if (ch.bound) {
      state |= host_->ChannelState(partition_.first_channel + v) & kReflectedStateMask;
    }
    return state;
  }
  if (offset >= pf::kSubfifo && offset < pf::kSubfifo + pf::kSubfifos * pf::kSubfifoStride) {
    const Subfifo& s = subfifo_[(offset - pf::kSubfifo) / pf::kSubfifoStride];
    switch ((offset - pf::kSubfifo) % pf::kSubfifoStride) {
      case pf::kSubfifoIntr:
        return s.intr;
      case pf::kSubfifoIntrEn:
        return s.intr_en;
      case pf::kSubfifoChannel:
        return s.channel;
    }
    return 0;
  }
  return 0;  // everything else: nothing to see
}

void FullVirtGpu::WriteRegister(uint32_t offset, uint32_t value) {
  switch (offset) {
    case pmc::kEnable:
      pmc_enable_ = value;
      return;
    case pmc::kIntrEnHost:
      pmc_intr_en_ = value;
      return;
    case pmc::kIntrMaskHost:
      pmc_intr_mask_ = value;
      return;
    case pbus::kPraminBase:
      pramin_base_ = value & pbus::kPraminBaseMask;
      return;
    case pbus::kBar1Inst:
      bar_inst_[0] = value;
      bar_cache_.clear();
      RemapChanged(true, 1);
      return;
    case pbus::kBar3Inst:
      bar_inst_[1] = value;
      bar_cache_.clear();
      RemapChanged(true, 2);
      return;
    case pf::kIntr:
      pfifo_intr_edges_ &= ~value;
      return;
    case pf::kIntrEn:
      pfifo_intr_en_ = value;
      return;
    case pf::kCtrl:
      pfifo_ctrl_ = value;
      return;
    case pf::kPollArea:
      poll_area_ = value;
      RemapChanged(true, 1);
      return;
    case pf::kPlaylistWr:
      playlist_wr_ = value;
      return;
    case pf::kPlaylistWrLen:
      OnPlaylistSubmit(value & pf::kPlaylistLenMask);
      return;
    case pf::kVmFaultSource:
      vm_fault_source_ &= ~value;
      return;
    case pf::kEngineIntrEnable:
      engine_intr_enable_ = value;
      return;
    case pf::kKickChid: {
      const uint32_t v = value & pf::kKickChidMask;
      if (v < channels_.size()) {
        host_->Kick(partition_.first_channel + v);
      } else {
        ++counters_.refused_channels;
      }
      return;
    }
    case pf::kRunlistIntr:
      runlist_intr_ &= ~value;
      return;
    case pgraph::kIntr:
      graph_intr_ &= ~value;
      return;
    case pgraph::kIntrEn:
      graph_intr_en_ = value;
      return;
    // The trap chain: the VM acknowledges its own copy only (the host acknowledged the GPU's).
    case pgraph::kTrap:
      graph_trap_ &= ~value;
      return;
    case pgraph::kTrapGpcMask:
      graph_trap_gpc_mask_ &= ~value;
      return;
    case pgraph::kGpc0TrapStatus:
      gpc0_trap_ &= ~value;
      return;
    case pgraph::kTpc0MpWarpError:
      mp_warp_error_ = value & pgraph::kMpWarpErrorMask;  // drivers write 0
      return;
    case pgraph::kTpc0MpGlobalError:
      mp_global_error_ &= ~value;
      return;
    case pgraph::kTpc0TrapStatus:
      return;  // read-only
    case vm::kCfg:
      if ((value & vm::kCfgLargePage64K) != 0) {
        ++counters_.refused_registers;  // every VM shares the GPU's 128 KiB large pages
        Log("refused 64 KiB large pages (VM_CFG " + Hex(value) + ")");
      }
      return;
    case vm::kTlbFlushPage:
      tlb_page_ = value;
      return;
    case vm::kTlbFlushVspace:
      tlb_vspace_ = value;
      return;
    case vm::kTlbFlushTrigger:
      OnTlbFlush(value);
      return;
  }
  if (offset >= pf::kChanTable && offset < pf::kChanTable + pf::kChannels * pf::kChanTableStride) {
    OnChannelTableWrite((offset - pf::kChanTable) / pf::kChanTableStride,
                        (offset - pf::kChanTable) % pf::kChanTableStride != 0, value);
    return;
  }
  if (offset >= pf::kSubfifo && offset < pf::kSubfifo + pf::kSubfifos * pf::kSubfifoStride) {
    Subfifo& s = subfifo_[(offset - pf::kSubfifo) / pf::kSubfifoStride];
    switch ((offset - pf::kSubfifo) % pf::kSubfifoStride) {
      case pf::kSubfifoIntr:
        s.intr &= ~value;
        return;
      case pf::kSubfifoIntrEn:
        s.intr_en = value;
        return;
    }
  }
  if (offset >= pf::kEngineIntr && offset < pf::kEngineIntr + 4 * pf::kEngineSlots) return;
  if (offset >= pf::kSubfifo && offset < pf::kSubfifo + pf::kSubfifos * pf::kSubfifoStride) {
    return;  // other PSUBFIFO words: harmless to drop
  }
  ++counters_.refused_registers;
}

// ---- TLB flushes and shadow spaces ----------------------------------------------------------

Status FullVirtGpu::Resync(SpaceEntry& entry) {
  const uint64_t rejected = counters_.shadow.entries_rejected;
  const GuestMemoryView view(&host_->vram(), layout(), ram_);
  Status s = entry.space->Rescan(view, counters_.shadow);
  host_->FlushTlb(entry.space->physical_pd());
  entry.stale = false;
  if (counters_.shadow.entries_rejected != rejected) {
    Log(std::to_string(counters_.shadow.entries_rejected - rejected) +
        " page-table entries dropped in directory " + Hex(entry.space->guest_pd()) + " (" +
        entry.space->last_rejection() + ")");
  }
  return s;
}

void FullVirtGpu::OnTlbFlush(uint32_t trigger) {
  if ((trigger & vm::kFlushTrigger) == 0) return;
  ++counters_.tlb_flushes;
  bar_cache_.clear();  // the guest may have changed its BAR1/BAR3 tables
  const uint64_t pd = uint64_t(tlb_vspace_ >> vm::kTlbFlushVspaceAddrShift) << 12;
  const bool all = (trigger & vm::kFlushAllPdb) != 0;
  if (remap_ != nullptr) {  // ... and with them its remapped pages
    const GuestMemoryView view(&host_->vram(), layout(), ram_);
    const uint8_t bars = uint8_t((all || pd == BarDirectory(view, bar_inst_[0]) ? 1 : 0) |
                                 (all || pd == BarDirectory(view, bar_inst_[1]) ? 2 : 0));
    if (bars != 0) RemapChanged(true, bars);
  }
  for (auto& [guest_pd, entry] : spaces_) {
    if (!all && guest_pd != pd) continue;
    if (options_.mode == FvMode::kLazy || options_.mode == FvMode::kOptimized) {
      entry.stale = true;
    } else {
      Status s = Resync(entry);
      if (!s.ok()) Log("shadow rescan failed: " + s.ToString());
    }
  }
}

Result<ShadowSpace*> FullVirtGpu::ShadowFor(uint64_t guest_pd) {
  auto it = spaces_.find(guest_pd);
  if (it == spaces_.end()) {
    if (spaces_.size() >= kMaxSpaces) {
      return Status::ResourceExhausted("fv: more than " + std::to_string(kMaxSpaces) +
                                       " page directories in use");
    }
    GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<ShadowSpace> space,
                           ShadowSpace::Create(&host_->vram(), &host_->reserved(), guest_pd));
    it = spaces_.emplace(guest_pd, SpaceEntry{std::move(space), true}).first;
  }
  if (it->second.stale) GPUVM_RETURN_IF_ERROR(Resync(it->second));
  return it->second.space.get();
}

// ---- channels --------------------------------------------------------------------------------

int FullVirtGpu::VirtualChannelOf(uint32_t physical_channel) const {
  if (physical_channel < partition_.first_channel ||
      physical_channel >= partition_.first_channel + partition_.channels) {
    return -1;
  }
  return int(physical_channel - partition_.first_channel);
}

void FullVirtGpu::OnChannelTableWrite(uint32_t v, bool state_word, uint32_t value) {
  if (v >= channels_.size()) {
    ++counters_.refused_channels;
    chan_table_error_ = v;
    pfifo_intr_edges_ |= pf::kIntrChanTableError;
    return;
  }
  VirtualChannel& ch = channels_[v];
  if (state_word) {
    ch.state = value;
    if (ch.bound) host_->SetChannelState(partition_.first_channel + v, value & kShadowStateMask);
    return;
  }
  if (value == ch.chan) return;
  UnbindShadowChannel(v);
  ch.chan = value;
  ch.dead = false;
}

Status FullVirtGpu::BindShadowChannel(uint32_t v) {
  VirtualChannel& ch = channels_[v];
  const uint32_t p = partition_.first_channel + v;
  if ((ch.chan & pf::kChanValid) == 0) {
    return Status::FailedPrecondition("channel " + std::to_string(v) + " is not valid");
  }
  const uint64_t instance = uint64_t(ch.chan & pf::kChanInstMask) << 12;
  std::vector<uint8_t> block(ramin::kSize);
  const GuestMemoryView view(&host_->vram(), layout(), ram_);
  if (!view.ReadVram(instance, block.data(), block.size())) {
    return Status::PermissionDenied("instance block " + Hex(instance) + " is outside the slice");
  }
  auto word = [&](uint32_t at) {
    uint32_t w;
    std::memcpy(&w, block.data() + at, 4);
    return w;
  };
  auto set = [&](uint32_t at, uint32_t w) { std::memcpy(block.data() + at, &w, 4); };
  const uint32_t pd_lo = word(ramin::kPageDirLo);
  const uint32_t pd_hi = word(ramin::kPageDirHi);
  if ((pd_lo & ramin::kPageDirTargetMask) != uint32_t(vm::Target::kVram)) {
    return Status::PermissionDenied("a page directory outside VRAM is not shadowed");
  }
  const uint64_t guest_pd =
      (pd_lo & ramin::kPageDirAddrLoMask) | (uint64_t(pd_hi & ramin::kPageDirAddrHiMask) << 32);
  if (guest_pd + ShadowSpace::kPdeCount * vm::kEntrySize > partition_.vram_bytes) {
    return Status::PermissionDenied("page directory " + Hex(guest_pd) + " is outside the slice");
  }
  GPUVM_ASSIGN_OR_RETURN(ShadowSpace * space, ShadowFor(guest_pd));
  const uint64_t user = host_->user_page(p);
  set(ramin::kUserdLo, uint32_t(user));
  set(ramin::kUserdHi, uint32_t(user >> 32));
  const uint64_t shadow_pd = space->physical_pd();
  set(ramin::kPageDirLo, (uint32_t(shadow_pd) & ramin::kPageDirAddrLoMask) |
                             (pd_lo & ~(ramin::kPageDirAddrLoMask | ramin::kPageDirTargetMask)));
  set(ramin::kPageDirHi, uint32_t(shadow_pd >> 32) & ramin::kPageDirAddrHiMask);
  // Engine context pointers would be guest addresses: nothing of ours uses them, so none.
  for (uint32_t at : {ramin::kGrContext, ramin::kCe0Context, ramin::kCe1Context}) {
    set(at, 0);
    set(at + 4, 0);
  }
  host_->vram().Write(host_->shadow_instance(p), block.data(), block.size());
  host_->SetChannelOwner(p, this);
  host_->BindChannel(p, ch.state & kShadowStateMask);
  ch.bound = true;
  ch.space = space;
  ch.guest_instance = instance;
  ++counters_.shadow_channels_built;
  RemapChanged(true);  // its instance block (channel descriptors) traps from now on
  return Status::Ok();
}

void FullVirtGpu::DescriptorStore(bool guest, uint64_t address, uint64_t length) {
  for (uint32_t v = 0; v < channels_.size(); ++v) {
    const VirtualChannel& ch = channels_[v];
    if (!ch.bound) continue;
    // Machine addresses: the instance block (4 KiB, aligned) lies in one chunk of the map.
    const uint64_t base = guest ? ch.guest_instance : vram_map_->Lookup(ch.guest_instance);
    if (!guest && base == 0) continue;
    if (address >= base + ramin::kSize || address + length <= base) continue;
    const uint64_t first = address > base ? address - base : 0;
    const uint64_t end = std::min<uint64_t>(address + length - base, ramin::kSize);
    RefreshShadowInstance(v, uint32_t(first), uint32_t(end));
  }
}

// The channel runs from its shadow instance, built at binding from a copy of the guest's block
// (BindShadowChannel); a later store by the guest into that block is treated the same way, word by
// word: USERD stays our physical USER page, engine context pointers stay 0, the page directory
// must stay the one the channel's shadow space was built for (the GPU walks it while the channel
// runs: changing it under a bound channel is refused, and the channel is stopped as if its shadow
// could not be built), everything else is copied — the GPU reads it at the next channel load, as
// it would natively read the guest's own block.
void FullVirtGpu::RefreshShadowInstance(uint32_t v, uint32_t first, uint32_t end) {
  VirtualChannel& ch = channels_[v];
  const uint32_t p = partition_.first_channel + v;
  first &= ~3u;
  end = std::min<uint32_t>((end + 3) & ~3u, uint32_t(ramin::kSize));
  // One copy of the guest's words; only the copy is looked at.
  std::vector<uint32_t> words((end - first) / 4);
  uint32_t pd[2] = {0, 0};
  if (!vram_map_->Read(ch.guest_instance + first, words.data(), words.size() * 4) ||
      !vram_map_->Read(ch.guest_instance + ramin::kPageDirLo, pd, sizeof pd)) {
    return;
  }
  if (first < ramin::kPageDirHi + 4 && end > ramin::kPageDirLo) {
    const uint64_t guest_pd = (pd[0] & ramin::kPageDirAddrLoMask) |
                              (uint64_t(pd[1] & ramin::kPageDirAddrHiMask) << 32);
    if ((pd[0] & ramin::kPageDirTargetMask) != uint32_t(vm::Target::kVram) || ch.space == nullptr ||
        guest_pd != ch.space->guest_pd()) {
      ++counters_.refused_channels;
      pfifo_intr_edges_ |= pf::kIntrPlaylist;
      Log("channel " + std::to_string(v) + ": its page directory was rewritten to " +
          Hex(guest_pd) + " while the channel is bound (" +
          Hex(ch.space != nullptr ? ch.space->guest_pd() : 0) +
          "): refused, the channel is stopped");
      UnbindShadowChannel(v);
      ch.dead = true;  // until its CHAN_TABLE entry changes
      return;
    }
  }
  const uint64_t shadow = host_->shadow_instance(p);
  for (size_t i = 0; i < words.size(); ++i) {
    const uint32_t at = first + uint32_t(i) * 4;
    uint32_t w = words[i];
    switch (at) {
      case ramin::kUserdLo:
      case ramin::kUserdHi:
      case ramin::kPageDirHi:
      case ramin::kGrContext:
      case ramin::kGrContext + 4:
      case ramin::kCe0Context:
      case ramin::kCe0Context + 4:
      case ramin::kCe1Context:
      case ramin::kCe1Context + 4:
        continue;  // ours: the physical USER page, the shadow directory, no engine contexts
      case ramin::kPageDirLo:
        w = (uint32_t(ch.space->physical_pd()) & ramin::kPageDirAddrLoMask) |
            (w & ~(ramin::kPageDirAddrLoMask | ramin::kPageDirTargetMask));
        break;
      default:
        break;
    }
    host_->vram().Write(shadow + at, &w, 4);
  }
  ++counters_.descriptor_writes;
}

void FullVirtGpu::UnbindShadowChannel(uint32_t v) {
  VirtualChannel& ch = channels_[v];
  if (!ch.bound) return;
  const uint32_t p = partition_.first_channel + v;
  RemapChanged(false);
  if (!host_->StopChannel(p)) Log("channel " + std::to_string(v) + " did not leave the engine");
  ch.bound = false;
  ch.on_playlist = false;
  ShadowSpace* space = ch.space;
  ch.space = nullptr;
  // A directory no channel uses any more is dropped (its translations with it).
  for (const VirtualChannel& other : channels_) {
    if (other.bound && other.space == space) return;
  }
  for (auto it = spaces_.begin(); it != spaces_.end(); ++it) {
    if (it->second.space.get() == space) {
      host_->FlushTlb(space->physical_pd());
      spaces_.erase(it);
      break;
    }
  }
}

void FullVirtGpu::OnPlaylistSubmit(uint32_t length) {
  ++counters_.playlist_updates;
  runlist_intr_ |= pf::kRunlistIntrUpdateDone;
  const uint64_t address = uint64_t(playlist_wr_ & pf::kPlaylistAddrMask) << 12;
  const uint32_t target = playlist_wr_ >> pf::kPlaylistTargetShift & 3;
  std::vector<uint32_t> entries(size_t(length) * 2);
  const GuestMemoryView view(&host_->vram(), layout(), ram_);
  if (target != 0 || length > pf::kChannels ||
      (length > 0 && !view.ReadVram(address, entries.data(), entries.size() * 4))) {
    ++counters_.refused_memory;
    pfifo_intr_edges_ |= pf::kIntrPlaylist;
    Log("refused a playlist at " + Hex(address) + " of " + std::to_string(length) + " entries");
    return;
  }
  std::vector<bool> wanted(channels_.size(), false);
  for (uint32_t i = 0; i < length; ++i) {
    const uint32_t v = entries[2 * i] & pf::kPlaylistEntryChidMask;
    if (v >= channels_.size()) {
      ++counters_.refused_channels;
      continue;
    }
    wanted[v] = true;
  }
  for (uint32_t v = 0; v < channels_.size(); ++v) {
    VirtualChannel& ch = channels_[v];
    if (wanted[v] && !ch.bound && !ch.dead) {
      Status s = BindShadowChannel(v);
      if (!s.ok()) {
        ch.dead = true;
        ++counters_.refused_channels;
        pfifo_intr_edges_ |= pf::kIntrPlaylist;
        Log("channel " + std::to_string(v) + " cannot run: " + s.ToString());
      }
    } else if (wanted[v] && ch.bound && ch.space != nullptr) {
      auto it = spaces_.find(ch.space->guest_pd());
      if (it != spaces_.end() && it->second.stale) (void)Resync(it->second);
    }
    ch.on_playlist = wanted[v];
    host_->SetOnPlaylist(partition_.first_channel + v, wanted[v] && ch.bound);
  }
  Status s = host_->CommitPlaylist();
  if (!s.ok()) Log(s.ToString());
}

// ---- BAR1 / BAR3 ---------------------------------------------------------------------------

bool FullVirtGpu::InUserArea(gpu::Bar bar, uint64_t offset) const {
  if (bar != gpu::Bar::k1 || (poll_area_ & pf::kPollAreaEnable) == 0) return false;
  const uint64_t base = uint64_t(poll_area_ & pf::kPollAreaAddrMask) << 12;
  return offset >= base && offset - base < uint64_t(pf::kChannels) * pf::kUserPageSize;
}

uint64_t FullVirtGpu::UserAccess(uint64_t offset, uint32_t size, bool write, uint64_t value) {
  ++counters_.user_area;
  const uint64_t base = uint64_t(poll_area_ & pf::kPollAreaAddrMask) << 12;
  const uint32_t v = uint32_t((offset - base) / pf::kUserPageSize);
  const uint32_t reg = uint32_t((offset - base) % pf::kUserPageSize);
  if (v >= channels_.size() || reg + size > pf::kUserPageSize) {
    ++counters_.refused_channels;
    return 0;
  }
  const uint32_t p = partition_.first_channel + v;
  const uint64_t physical = host_->user_page(p) + reg;
  if (!write) {
    uint64_t out = 0;
    host_->vram().Read(physical, &out, size);
    return out;
  }
  if (reg == gf100::userd::kIbPut && size == 4) {
    VirtualChannel& ch = channels_[v];
    if (ch.bound && ch.space != nullptr) {
      auto it = spaces_.find(ch.space->guest_pd());
      if (it != spaces_.end() && it->second.stale) {
        Status s = Resync(it->second);
        if (!s.ok()) Log("shadow rescan failed: " + s.ToString());
      }
    }
    ++counters_.submissions;
    host_->queue().Submit({options_.vm_id, p, uint32_t(value)});
    return 0;
  }
  host_->vram().Write(physical, &value, size);
  return 0;
}

FullVirtGpu::BarPage FullVirtGpu::TranslateBar(gpu::Bar bar, uint64_t page) {
  const uint64_t key = (uint64_t(bar == gpu::Bar::k1 ? 1 : 3) << 48) | page;
  if (auto it = bar_cache_.find(key); it != bar_cache_.end()) return it->second;
  ++counters_.bar_walks;
  BarPage result;
  const uint32_t inst_reg = bar_inst_[bar == gpu::Bar::k1 ? 0 : 1];
  const GuestMemoryView view(&host_->vram(), layout(), ram_);
  const uint64_t va = page * kPage;
  if ((inst_reg & pbus::kBarInstVmMode) == 0) {
    // No VM mode: the aperture is the VM's VRAM itself (the page is referenced: assigned).
    if (Result<uint64_t> machine = vram_map_->Assign(va); machine.ok()) {
      result = {true, false, *machine};
    }
  } else {
    const uint64_t instance = uint64_t(inst_reg & pbus::kBarInstAddrMask) << pbus::kBarInstShift;
    uint32_t words[4];
    const int pde_shift = vm::kPdeShift(ShadowSpace::kLargePageShift);
    if (view.ReadVram(instance + ramin::kPageDirLo, words, sizeof words) &&
        (words[0] & ramin::kPageDirTargetMask) == uint32_t(vm::Target::kVram)) {
      const uint64_t pd = (words[0] & ramin::kPageDirAddrLoMask) |
                          (uint64_t(words[1] & ramin::kPageDirAddrHiMask) << 32);
      const uint64_t limit = words[2] | (uint64_t(words[3]) << 32);
      uint64_t pde = 0;
      const uint64_t in_pde = va & ((1ull << pde_shift) - 1);
      if (va <= limit && view.ReadVram(pd + (va >> pde_shift) * vm::kEntrySize, &pde, 8) &&
          in_pde < ((1ull << pde_shift) >> vm::pde::PtSize(pde))) {
        RelocatedPte r;
        uint64_t inner = 0;
        uint64_t pte = 0;
        if (vm::pde::SmallTarget(pde) != vm::PdeTarget::kNone &&
            view.Read(vm::pde::SmallTarget(pde),
                      vm::pde::SmallTableAddress(pde) + (in_pde >> 12) * vm::kEntrySize, &pte, 8) &&
            (pte & vm::pte::kPresent)) {
          r = RelocatePte(pte, kPage, layout());
        } else if (vm::pde::LargeTarget(pde) != vm::PdeTarget::kNone &&
                   view.Read(vm::pde::LargeTarget(pde),
                             vm::pde::LargeTableAddress(pde) +
                                 (in_pde >> ShadowSpace::kLargePageShift) * vm::kEntrySize,
                             &pte, 8)) {
          const uint64_t large = 1ull << ShadowSpace::kLargePageShift;
          r = RelocatePte(pte, large, layout());
          inner = va & (large - 1);
        }
        if (r.verdict == PteVerdict::kRejected) ++counters_.refused_memory;
        if (r.verdict == PteVerdict::kMapped) {
          const uint64_t address = vm::pte::Address(r.value) + inner;
          const vm::Target target = vm::pte::TargetOf(r.value);
          if (target == vm::Target::kVram) {
            result = {true, false, address};
          } else {
            result = {true, true, address - partition_.sysram_base};
          }
        }
      }
    }
  }
  if (bar_cache_.size() >= kMaxBarCache) bar_cache_.clear();
  bar_cache_[key] = result;
  return result;
}

void FullVirtGpu::ApertureAccess(gpu::Bar bar, uint64_t offset, uint8_t* data, uint32_t size,
                                 bool write) {
  for (uint32_t done = 0; done < size;) {
    const uint64_t at = offset + done;
    const uint32_t n = uint32_t(std::min<uint64_t>(size - done, kPage - (at & (kPage - 1))));
    const BarPage page = TranslateBar(bar, at / kPage);
    const uint64_t inner = at & (kPage - 1);
    if (!page.valid) {
      ++counters_.refused_memory;
      if (!write) std::memset(data + done, 0, n);
    } else if (page.sysram) {
      if (page.address + inner + n <= ram_.size()) {
        if (write) {
          std::memcpy(ram_.data() + page.address + inner, data + done, n);
        } else {
          std::memcpy(data + done, ram_.data() + page.address + inner, n);
        }
      } else if (!write) {
        std::memset(data + done, 0, n);
      }
    } else if (write) {
      host_->vram().Write(page.address + inner, data + done, n);
      DescriptorStore(/*guest=*/false, page.address + inner, n);
    } else {
      host_->vram().Read(page.address + inner, data + done, n);
    }
    done += n;
  }
}

// ---- BAR remap (bar_remap.h) -------------------------------------------------------------------

void FullVirtGpu::RemapChanged(bool eager, uint8_t bars) {
  if (remap_ == nullptr || remap_off_ || detached_) return;
  remap_dirty_ |= bars;
  if (eager && remap_->runs() > 0) SyncRemap();
}

void FullVirtGpu::SyncRemap() {
  const uint8_t dirty = remap_dirty_;
  remap_dirty_ = 0;
  if (remap_ == nullptr || remap_off_ || detached_) return;
  ++counters_.remap_syncs;
  const auto started = std::chrono::steady_clock::now();
  const GuestMemoryView view(&host_->vram(), layout(), ram_);
  // Channel descriptors stay trapped: the pages of bound channels' instance blocks.
  std::vector<uint64_t> descriptors;
  for (const VirtualChannel& ch : channels_) {
    if (ch.bound) descriptors.push_back(ch.guest_instance & ~(kPage - 1));
  }
  for (size_t b = 0; b < 2; ++b) {
    if ((dirty & (1u << b)) == 0) continue;  // nothing of this BAR changed
    const gpu::Bar bar = b == 0 ? gpu::Bar::k1 : gpu::Bar::k3;
    BarWalk& walk = bar_walk_[b];
    const bool changed = WalkBarTables(view, bar_inst_[b], bars_.size(bar), walk);
    RemapInputs& inputs = remap_inputs_[b];
    if (!changed && inputs.valid && inputs.descriptors == descriptors &&
        inputs.poll_area == poll_area_) {
      continue;  // the same pages as last time: nothing to send
    }
    inputs = {descriptors, poll_area_, true};
    std::vector<uint64_t> targets(walk.machine);
    for (size_t i = 0; i < targets.size(); ++i) {
      if (targets[i] != 0 &&
          std::find(descriptors.begin(), descriptors.end(), walk.guest[i]) != descriptors.end()) {
        targets[i] = 0;
      }
    }
    if (bar == gpu::Bar::k1 && (poll_area_ & pf::kPollAreaEnable) != 0) {
      // USER pages: the VM's own channels trap (IB_PUT is a submission); other ids go to scratch.
      const uint64_t base = (uint64_t(poll_area_ & pf::kPollAreaAddrMask) << 12) / kPage;
      for (uint32_t v = 0; v < pf::kChannels && base + v < targets.size(); ++v) {
        targets[base + v] = v < channels_.size()
                                ? 0
                                : BarRemapper::kScratch | uint64_t(v - channels_.size()) * kPage;
      }
    }
    Status s = remap_->Update(bar, targets);
    if (!s.ok()) Log("BAR remap: " + s.ToString());
  }
  counters_.remap_ns += uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now() - started)
                                     .count());
}

std::vector<BarRemapRequest> FullVirtGpu::TakeBarRemapRequests() {
  return remap_ != nullptr ? remap_->Take() : std::vector<BarRemapRequest>();
}

void FullVirtGpu::BarRemapAnswered(bool map, const Status& status) {
  if (status.ok() || remap_ == nullptr) return;
  if (!map) return;  // an unmap of a range the device model already withdrew (its BAR moved)
  ++counters_.remap_refused;
  if (remap_off_) return;
  // Trapping is always correct: withdraw what is mapped and trap from now on.
  remap_off_ = true;
  remap_->UnmapAll();
  Log("BAR remap refused by the device model (" + status.ToString() + "); trapping instead");
}

// ---- interrupts from the physical GPU --------------------------------------------------------

void FullVirtGpu::OnVmFault(uint32_t physical_channel, const std::array<uint32_t, 4>& record) {
  const int v = VirtualChannelOf(physical_channel);
  if (v < 0) return;
  ++counters_.faults;
  const uint32_t free_units = ~vm_fault_source_;
  if (free_units == 0) return;  // the guest has not acknowledged 32 faults: it learns of these
  const int unit = std::countr_zero(free_units);
  vm_fault_[unit] = record;
  vm_fault_[unit][0] = uint32_t(channels_[v].guest_instance >> 12);
  vm_fault_source_ |= 1u << unit;
  Log("MMU fault on channel " + std::to_string(v) + " at " +
      Hex(record[1] | (uint64_t(record[2]) << 32)) + " (reason " +
      std::to_string(record[3] & pf::kVmFaultReasonMask) + ")");
}

void FullVirtGpu::OnSubfifoError(uint32_t physical_channel, uint32_t unit, uint32_t intr) {
  const int v = VirtualChannelOf(physical_channel);
  if (v < 0 || unit >= subfifo_.size()) return;
  ++counters_.faults;
  subfifo_[unit].intr |= intr;
  subfifo_[unit].channel = uint32_t(v) | pf::kSubfifoChannelActive;
  Log("command error on channel " + std::to_string(v) + " (PSUBFIFO INTR " + Hex(intr) + ")");
}

void FullVirtGpu::OnGraphTrap(uint32_t physical_channel, uint32_t warp_error,
                              uint32_t global_error) {
  const int v = VirtualChannelOf(physical_channel);
  if (v < 0) return;
  ++counters_.faults;
  graph_intr_ |= pgraph::kIntrTrap;
  graph_trap_channel_ = pf::kEngineChannelValid | uint32_t(channels_[v].guest_instance >> 12);
  // The chain as the software GPU presents a trap (GPC 0, TPC 0, MP); a later trap the guest has
  // not acknowledged yet replaces the reason, as it replaces the channel above.
  graph_trap_ |= pgraph::kTrapGpc;
  graph_trap_gpc_mask_ |= 1u;
  gpc0_trap_ |= pgraph::kGpcTrapTpc0;
  mp_warp_error_ = warp_error & pgraph::kMpWarpErrorMask;
  mp_global_error_ = global_error;
  Log("compute trap on channel " + std::to_string(v) + " (warp error " + Hex(mp_warp_error_) +
      ", global error " + Hex(mp_global_error_) + ")");
}

// ---- lifetime --------------------------------------------------------------------------------

Status FullVirtGpu::AttachGuestRam(const GuestRam& ram) {
  if (detached_) return Status::FailedPrecondition("the VM's virtual GPU is gone");
  if (ram_attached_) return Status::AlreadyExists("the VM's RAM is already attached");
  if ((ram.size() >> 12) + (partition_.sysram_base >> 12) > vm::pte::kAddrFieldMask ||
      ram.size() > (1ull << FvHost::kSysramSlotShift)) {
    return Status::InvalidArgument("fv: guest RAM too large for a SYSRAM window");
  }
  if (host_->gpu().reaches_guest_memory() &&
      !host_->gpu().host_window().AttachRegion(partition_.sysram_base, ram.bytes())) {
    return Status::Internal("fv: the SYSRAM window is taken");
  }
  ram_ = ram.bytes();
  ram_attached_ = true;
  bar_cache_.clear();
  return Status::Ok();
}

Status FullVirtGpu::Detach() { return DetachKeepingVram(nullptr); }

Status FullVirtGpu::DetachKeepingVram(std::unique_ptr<VramMap>* kept) {
  if (detached_) return Status::Ok();
  bool all_stopped = true;
  for (uint32_t v = 0; v < channels_.size(); ++v) {
    if (channels_[v].bound && !host_->StopChannel(partition_.first_channel + v)) {
      all_stopped = false;
    }
    channels_[v].bound = false;
    channels_[v].space = nullptr;
  }
  host_->queue().ForgetVm(options_.vm_id);
  for (auto& [pd, entry] : spaces_) host_->FlushTlb(entry.space->physical_pd());
  spaces_.clear();
  bar_cache_.clear();
  if (ram_attached_) host_->gpu().host_window().DetachRegion(partition_.sysram_base);
  ram_ = {};
  counters_.vram_assigned = vram_map_->assigned_bytes();
  counters_.vram_exhausted = vram_map_->exhausted();
  if (kept != nullptr) {
    *kept = std::move(vram_map_);  // quarantined by the caller: the guest may still reach it
  } else {
    vram_map_.reset();  // every page back to the pool (a static slice scrubbed)
  }
  host_->ReleasePartition(partition_);
  detached_ = true;
  if (!all_stopped) {
    return Status::DeadlineExceeded("fv: a channel of the VM did not leave the engine in time");
  }
  return Status::Ok();
}

}  // namespace gpuvm::aggregator
