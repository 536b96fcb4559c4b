// FullVirtGpu, BAR0 (part of fv_gpu.cc): the virtual registers a VM reads and writes — PMC/PFIFO/
// PGRAPH interrupt state, the FB partition, PRAMIN over its VRAM, identity registers read through —
// and the TLB flushes that make its shadow page tables rescan (naive) or go stale (lazy).
//
// Threading: as FullVirtGpu (fv_gpu.h).
#include <cstring>

#include "aggregator/fv_gpu.h"
#include "aggregator/fv_gpu_internal.h"

namespace gpuvm::aggregator {

// ---- BAR0 registers ----

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
        LogRefusal(Refusal::kRegister, 1,
                   [&] { return "refused 64 KiB large pages (VM_CFG " + Hex(value) + ")"; });
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
        if (s.intr == 0) PresentFailedChannels();
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

// ---- TLB flushes and shadow spaces ----

Status FullVirtGpu::Resync(SpaceEntry& entry) {
  const uint64_t rejected = counters_.shadow.entries_rejected;
  const GuestMemoryView view(&host_->vram(), layout(), ram_);
  Status s = entry.space->Rescan(view, counters_.shadow);
  host_->FlushTlb(entry.space->physical_pd());
  entry.stale = false;
  if (counters_.shadow.entries_rejected != rejected) {
    const uint64_t dropped = counters_.shadow.entries_rejected - rejected;
    LogRefusal(Refusal::kPageTableEntry, dropped, [&] {
      return std::to_string(dropped) + " page-table entries dropped in directory " +
             Hex(entry.space->guest_pd()) + " (" + entry.space->last_rejection() + ")";
    });
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
    const uint8_t bars = BarsFlushed(view, trigger, tlb_vspace_, bar_inst_);
    if (bars != 0) RemapChanged(true, bars);
  }
  if (pv_ != nullptr) {
    // pv: the guest's own directories; a flush by MMIO works as its FLUSH call does.
    if (all) {
      for (const VirtualChannel& ch : channels_) {
        if (ch.bound) host_->FlushTlb(ch.physical_pd);
      }
    } else if (const uint64_t machine = pv_->tables().ChannelDirectory(pd); machine != 0) {
      host_->FlushTlb(machine);
    }
  }
  for (auto& [guest_pd, entry] : spaces_) {
    if (!all && guest_pd != pd) continue;
    if (options_.mode == FvMode::kLazy || options_.mode == FvMode::kOptimized) {
      entry.stale = true;
    } else {
      Status s = Resync(entry);
      if (!s.ok()) {
        LogGuestEvent(GuestEvent::kShadowFailure,
                      [&] { return "shadow rescan failed: " + s.ToString(); });
      }
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

}  // namespace gpuvm::aggregator
