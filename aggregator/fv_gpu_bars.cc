// FullVirtGpu, BAR1/BAR3 (part of fv_gpu.cc): the apertures translated by the guest's own BAR page
// tables, walked in software for each trapped access; the USER area (POLL_AREA) whose IB_PUT
// writes become submissions; and BAR remap, which hands the pages that map the VM's own VRAM to
// the device model to map into the guest.
//
// Threading: as FullVirtGpu (fv_gpu.h).
#include <chrono>
#include <cstring>

#include "aggregator/fv_gpu.h"
#include "aggregator/fv_gpu_internal.h"

namespace gpuvm::aggregator {

// ---- BAR1 / BAR3 ----

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
        if (!s.ok()) {
          LogGuestEvent(GuestEvent::kShadowFailure,
                        [&] { return "shadow rescan failed: " + s.ToString(); });
        }
      }
    }
    ++counters_.submissions;
    Status submitted = host_->queue().Submit({options_.vm_id, p, uint32_t(value)});
    if (!submitted.ok()) {
      // A full queue (a guest flooding IB_PUT writes): the doorbell is dropped, as a real GPU
      // would never see one it had no room for; the guest's IB_GET stays behind.
      ++counters_.refused_submissions;
      LogRefusal(Refusal::kSubmission, 1, [&] {
        return "submission on channel " + std::to_string(v) + " refused: " + submitted.ToString();
      });
    }
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
    if (view.ReadVram(instance + ramin::kPageDirLo, words, sizeof words) &&
        (words[0] & ramin::kPageDirTargetMask) == uint32_t(vm::Target::kVram)) {
      const uint64_t pd = (words[0] & ramin::kPageDirAddrLoMask) |
                          (uint64_t(words[1] & ramin::kPageDirAddrHiMask) << 32);
      const uint64_t limit = words[2] | (uint64_t(words[3]) << 32);
      const GuestPte g = va <= limit ? LookupGuestPte(view, pd, va) : GuestPte{};
      if (g.pte != 0) {
        const RelocatedPte r = RelocatePte(g.pte, g.page_bytes, layout());
        if (r.verdict == PteVerdict::kRejected) ++counters_.refused_memory;
        if (r.verdict == PteVerdict::kMapped) {
          const uint64_t address = vm::pte::Address(r.value) + g.inner;
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
    } else if (!PvStoreAllowed(page.address + inner - partition_.vram_base, n)) {
      // pv: a registered page table (the VM's VRAM is one static slice there): the host's copy is
      // authoritative, the guest neither writes nor reads it.
      ++counters_.refused_memory;
      if (!write) std::memset(data + done, 0, n);
    } else if (write) {
      host_->vram().Write(page.address + inner, data + done, n);
      DescriptorStore(/*guest=*/false, page.address + inner, n);
    } else {
      host_->vram().Read(page.address + inner, data + done, n);
    }
    done += n;
  }
}

pv::CallResult FullVirtGpu::PvBarStore(const pv::Call& call, std::span<const uint8_t> batch) {
  const gpu::Bar bar = call.bar == 0 ? gpu::Bar::k0 : call.bar == 1 ? gpu::Bar::k1 : gpu::Bar::k3;
  const uint64_t end = call.first + call.count;  // DecodeBatch bounded both
  if (!Check(bar, call.first, 4, call.count).ok()) return pv::CallResult::kNotMapped;
  if (bar == gpu::Bar::k0) {
    // Registers and PRAMIN, 4 bytes each as a driver's trapped writes; PRAMIN stores are checked
    // first (DecodeBatch kept the PV window out).
    const uint64_t window_end = pbus::kPraminWindow + pbus::kPraminWindowSize;
    const uint64_t from = std::max<uint64_t>(call.first, pbus::kPraminWindow);
    const uint64_t to = std::min<uint64_t>(end, window_end);
    if (from < to && (!PvStoreAllowed(PraminAddress(from), to - from) ||
                      PraminAddress(to - 1) >= vram_map_->guest_bytes())) {
      return pv::CallResult::kNotMapped;
    }
    for (uint64_t at = call.first; at < end; at += 4) {
      uint32_t value;
      std::memcpy(&value, batch.data() + call.entries_offset + (at - call.first), 4);
      WriteOne(bar, at, 4, value);
    }
    return pv::CallResult::kOk;
  }
  if (remap_dirty_) SyncRemap();
  // All or nothing: every page is checked before anything is stored.
  for (uint64_t at = call.first; at < end;) {
    const uint64_t n = std::min<uint64_t>(end - at, kPage - (at & (kPage - 1)));
    if (InUserArea(bar, at)) {
      const uint64_t base = uint64_t(poll_area_ & pf::kPollAreaAddrMask) << 12;
      if ((at - base) / pf::kUserPageSize >= channels_.size()) return pv::CallResult::kNotMapped;
    } else {
      const BarPage page = TranslateBar(bar, at / kPage);
      const uint64_t inner = at & (kPage - 1);
      if (!page.valid ||
          (page.sysram ? page.address + inner + n > ram_.size()
                       : !PvStoreAllowed(page.address + inner - partition_.vram_base, n))) {
        return pv::CallResult::kNotMapped;
      }
    }
    at += n;
  }
  // As a trapped rep of 8-byte elements (a USER page's IB_PUT is a submission only when stored
  // alone as 4 bytes, as it is trapped).
  const uint64_t pattern = call.value | (call.value << 32);
  for (uint64_t at = call.first; at < end;) {
    const uint32_t size = (at % 8 == 0 && end - at >= 8) ? 8 : 4;
    uint64_t value = pattern;
    if (call.op == pv::Op::kBarWrite) {
      value = 0;
      std::memcpy(&value, batch.data() + call.entries_offset + (at - call.first), size);
    }
    WriteOne(bar, at, size, value);
    at += size;
  }
  return pv::CallResult::kOk;
}

// ---- BAR remap (bar_remap.h) ----

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
    // Per-VM backing: offsets into the VM's own file are guest addresses (the chunk behind each is
    // the machine page the walk found); machine frames: the machine addresses.
    std::vector<uint64_t> targets(remap_own_backing_ ? walk.guest : walk.machine);
    for (size_t i = 0; i < targets.size(); ++i) {
      if (walk.machine[i] == 0) targets[i] = 0;
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
    if (!s.ok()) {
      LogGuestEvent(GuestEvent::kRemapUpdate, [&] { return "BAR remap: " + s.ToString(); });
    }
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

}  // namespace gpuvm::aggregator
