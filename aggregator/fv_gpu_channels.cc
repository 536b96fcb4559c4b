// FullVirtGpu, channels (part of fv_gpu.cc): the VM's CHAN_TABLE and playlist in terms of shadow
// channels whose instance blocks point at shadow page directories, guest stores to a bound
// channel's instance block re-validated into the shadow, and the physical GPU's interrupts
// demultiplexed to the VM that owns the channel.
//
// Threading: as FullVirtGpu (fv_gpu.h).
#include <cstring>

#include "aggregator/fv_gpu.h"
#include "aggregator/fv_gpu_internal.h"
#include "base/log.h"
#include "gpu/hw/mmu_fault.h"

namespace gpuvm::aggregator {

// ---- channels ----

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
  ShadowSpace* space = nullptr;
  uint64_t shadow_pd = 0;
  if (pv_ != nullptr) {
    // pv: the GPU walks the guest's own directory, which must be one its calls registered.
    shadow_pd = pv_->tables().ChannelDirectory(guest_pd);
    if (shadow_pd == 0) {
      return Status::PermissionDenied("page directory " + Hex(guest_pd) +
                                      " is not an attached para-virtual channel space");
    }
  } else {
    GPUVM_ASSIGN_OR_RETURN(space, ShadowFor(guest_pd));
    shadow_pd = space->physical_pd();
  }
  const uint64_t user = host_->user_page(p);
  set(ramin::kUserdLo, uint32_t(user));
  set(ramin::kUserdHi, uint32_t(user >> 32));
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
  ch.guest_pd = guest_pd;
  ch.physical_pd = shadow_pd;
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
    const uint64_t guest_pd =
        (pd[0] & ramin::kPageDirAddrLoMask) | (uint64_t(pd[1] & ramin::kPageDirAddrHiMask) << 32);
    if ((pd[0] & ramin::kPageDirTargetMask) != uint32_t(vm::Target::kVram) ||
        guest_pd != ch.guest_pd) {
      ++counters_.refused_channels;
      pfifo_intr_edges_ |= pf::kIntrPlaylist;
      LogRefusal(Refusal::kChannel, 1, [&] {
        return "channel " + std::to_string(v) + ": its page directory was rewritten to " +
               Hex(guest_pd) + " while the channel is bound (" + Hex(ch.guest_pd) +
               "): refused, the channel is stopped";
      });
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
        w = (uint32_t(ch.physical_pd) & ramin::kPageDirAddrLoMask) |
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
  if (!host_->StopChannel(p)) {
    LogGuestEvent(GuestEvent::kStuckChannel,
                  [&] { return "channel " + std::to_string(v) + " did not leave the engine"; });
  }
  ch.bound = false;
  ch.on_playlist = false;
  ShadowSpace* space = ch.space;
  ch.space = nullptr;
  ch.guest_pd = ch.physical_pd = 0;
  if (space == nullptr) return;  // pv: the directory is the guest's, registered until it detaches
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
    ++counters_.refused_playlists;
    pfifo_intr_edges_ |= pf::kIntrPlaylist;
    LogRefusal(Refusal::kPlaylist, 1, [&] {
      return "refused a playlist at " + Hex(address) + " of " + std::to_string(length) + " entries";
    });
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
        LogRefusal(Refusal::kChannel, 1,
                   [&] { return "channel " + std::to_string(v) + " cannot run: " + s.ToString(); });
      }
    } else if (wanted[v] && ch.bound && ch.space != nullptr) {
      auto it = spaces_.find(ch.space->guest_pd());
      if (it != spaces_.end() && it->second.stale) (void)Resync(it->second);
    }
    ch.on_playlist = wanted[v];
    host_->SetOnPlaylist(partition_.first_channel + v, wanted[v] && ch.bound);
  }
  Status s = host_->CommitPlaylist();
  if (!s.ok()) LogGuestEvent(GuestEvent::kPlaylistCommit, [&] { return s.ToString(); });
}

// ---- interrupts from the physical GPU ----

void FullVirtGpu::OnVmFault(uint32_t physical_channel, const std::array<uint32_t, 4>& record) {
  const int v = VirtualChannelOf(physical_channel);
  if (v < 0) return;
  ++counters_.faults;
  const uint32_t free_units = ~vm_fault_source_;
  if (free_units == 0) return;  // the guest has not acknowledged 32 faults: it learns of these
  const int unit = std::countr_zero(free_units);
  const uint64_t va = record[1] | (uint64_t(record[2]) << 32);
  vm_fault_[unit] = record;
  vm_fault_[unit][0] = uint32_t(channels_[v].guest_instance >> 12);
  // A page the guest mapped but the over-committed pool had no VRAM for: the guest learns "out of
  // VRAM" (a reason of our own) instead of a bad pointer (docs/FULL-VIRTUALIZATION.md).
  const bool out_of_vram = LacksVram(channels_[v], va);
  if (out_of_vram) {
    ++counters_.out_of_vram_faults;
    vm_fault_[unit][3] = (record[3] & ~pf::kVmFaultReasonMask) | gf100::kFaultReasonGpuvmOutOfVram;
  }
  vm_fault_source_ |= 1u << unit;
  LogGuestEvent(GuestEvent::kMmuFault, [&] {
    return "MMU fault on channel " + std::to_string(v) + " at " + Hex(va) + " (reason " +
           std::to_string(record[3] & pf::kVmFaultReasonMask) +
           (out_of_vram ? "; reported as out of VRAM: the GPU's VRAM is over-committed and full)"
                        : ")");
  });
}

bool FullVirtGpu::LacksVram(const VirtualChannel& ch, uint64_t va) const {
  if (vram_map_ == nullptr || vram_map_->exhausted() == 0 || ch.space == nullptr) return false;
  // The guest's own walk of the faulting address: a table or the page in guest VRAM without a
  // chunk means the pool refused it (every VRAM reference assigns one; only an exhausted pool
  // leaves it out). A guest that faults on garbage after the pool ran dry may be told "out of
  // VRAM" too; before that, never.
  const GuestMemoryView view(&host_->vram(), layout(), ram_);
  const auto unbacked = [&](uint64_t address) {
    return address < partition_.vram_bytes && vram_map_->Lookup(address) == 0;
  };
  const uint64_t pd = ch.space->guest_pd();
  const int pde_shift = vm::kPdeShift(ShadowSpace::kLargePageShift);
  if (unbacked(pd + (va >> pde_shift) * vm::kEntrySize)) return true;
  const GuestPte g = LookupGuestPte(view, pd, va);
  if (g.table_target == vm::PdeTarget::kVram && unbacked(g.table_address)) return true;
  if (g.pte == 0 || (g.pte & vm::pte::kPresent) == 0) return false;
  return vm::pte::TargetOf(g.pte) == vm::Target::kVram &&
         unbacked((vm::pte::Address(g.pte) & ~(g.page_bytes - 1)) + g.inner);
}

void FullVirtGpu::OnSubfifoError(uint32_t physical_channel, uint32_t unit, uint32_t intr) {
  const int v = VirtualChannelOf(physical_channel);
  if (v < 0 || unit >= subfifo_.size()) return;
  ++counters_.faults;
  subfifo_[unit].intr |= intr;
  subfifo_[unit].channel = uint32_t(v) | pf::kSubfifoChannelActive;
  LogGuestEvent(GuestEvent::kCommandError, [&] {
    return "command error on channel " + std::to_string(v) + " (PSUBFIFO INTR " + Hex(intr) + ")";
  });
}

void FullVirtGpu::OnChannelFailed(uint32_t physical_channel, uint32_t intr,
                                  const std::string& reason) {
  const int v = VirtualChannelOf(physical_channel);
  if (v < 0) return;
  ++counters_.faults;
  failed_waiting_[uint32_t(v)] |= intr;
  PresentFailedChannels();
  // The operator's act or the VM's limit, one line each (not the guest's doing, so not
  // rate-limited with the guest's events).
  host_->Log(LogEvent(LogLevel::kWarn, VmLogFields(options_.vm_id, options_.name),
                      "GPU work on channel " + std::to_string(v) + " (physical " +
                          std::to_string(physical_channel) + ") failed: " + reason));
}

void FullVirtGpu::PresentFailedChannels() {
  // Each failed channel gets a unit of its own, so that the guest attributes every one (a unit
  // names one channel); more than kSubfifos wait until the guest acknowledges one.
  for (Subfifo& unit : subfifo_) {
    if (failed_waiting_.empty()) return;
    if (unit.intr != 0) continue;
    const auto next = failed_waiting_.begin();
    unit.intr = next->second;
    unit.channel = next->first | pf::kSubfifoChannelActive;
    failed_waiting_.erase(next);
  }
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
  LogGuestEvent(GuestEvent::kComputeTrap, [&] {
    return "compute trap on channel " + std::to_string(v) + " (warp error " + Hex(mp_warp_error_) +
           ", global error " + Hex(mp_global_error_) + ")";
  });
}

}  // namespace gpuvm::aggregator
