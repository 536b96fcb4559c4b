#include "aggregator/bar_remap.h"

#include <fcntl.h>

#include <algorithm>
#include <cstring>

#include "gpu/hw/pbus.h"
#include "gpu/hw/ramin.h"
#include "gpu/hw/vm.h"

namespace gpuvm::aggregator {

namespace pbus = gf100::pbus;
namespace ramin = gf100::ramin;
namespace vm = gf100::vm;

namespace {

constexpr uint64_t kPage = 0x1000;
constexpr uint64_t kLarge = 1ull << ShadowSpace::kLargePageShift;

}  // namespace

bool WalkBarTables(const GuestMemoryView& view, uint32_t inst_reg, uint64_t bar_bytes, BarWalk& w) {
  const uint64_t pages = bar_bytes / kPage;
  bool changed = false;
  if (w.machine.size() != pages) {
    changed = true;
    w.guest.assign(pages, 0);
    w.machine.assign(pages, 0);
    w.small_pte.assign(pages, 0);
    w.large_pte.assign(pages, 0);
    w.pde.assign(pages, 0);  // used as "entries known" flags (0 = relocate again)
    w.chunk_known.assign((pages + BarWalk::kChunkPages - 1) / BarWalk::kChunkPages, 0);
  }
  w.inst_reg = inst_reg;
  auto nothing_from = [&](uint64_t page) {
    for (uint64_t k = page; k < pages; ++k) {
      if (w.machine[k] != 0) changed = true;
      w.machine[k] = 0;
      w.guest[k] = 0;
      w.pde[k] = 0;
    }
    for (uint64_t c = page / BarWalk::kChunkPages; c < w.chunk_known.size(); ++c) {
      w.chunk_known[c] = 0;
    }
    return changed;
  };
  if ((inst_reg & pbus::kBarInstVmMode) == 0) return nothing_from(0);  // aperture = raw VRAM: trap
  const uint64_t instance = uint64_t(inst_reg & pbus::kBarInstAddrMask) << pbus::kBarInstShift;
  uint32_t words[4];
  if (!view.ReadVram(instance + ramin::kPageDirLo, words, sizeof words) ||
      (words[0] & ramin::kPageDirTargetMask) != uint32_t(vm::Target::kVram)) {
    return nothing_from(0);
  }
  const uint64_t pd = (words[0] & ramin::kPageDirAddrLoMask) |
                      (uint64_t(words[1] & ramin::kPageDirAddrHiMask) << 32);
  const uint64_t limit = words[2] | (uint64_t(words[3]) << 32);
  const uint64_t end = limit >= bar_bytes - 1 ? bar_bytes : (limit + 1) & ~(kPage - 1);
  const uint64_t pde_span = 1ull << vm::kPdeShift(ShadowSpace::kLargePageShift);
  // Copies of one directory entry's tables (BAR1's small table alone is 256 KiB), kept between
  // walks: a fresh vector per walk was a fresh mapping to fault in and clear, most of a walk's
  // cost. Owner thread only (as everything here), hence thread_local rather than shared.
  thread_local std::vector<uint64_t> small, large;
  for (uint64_t va0 = 0; va0 < end; va0 += pde_span) {
    uint64_t pde = 0;
    if (!view.ReadVram(pd + (va0 / pde_span) * vm::kEntrySize, &pde, 8)) pde = 0;
    const uint64_t covered = pde_span >> vm::pde::PtSize(pde);  // what the tables reach
    const uint64_t span = std::min(end - va0, pde_span);
    const uint64_t n = span / kPage;
    const uint64_t n_small = std::min(span, covered) / kPage;
    const uint64_t n_large = (std::min(span, covered) + kLarge - 1) / kLarge;
    small.resize(n);
    large.resize((span + kLarge - 1) / kLarge);
    // One copying read per table (a table reaching outside the VM's memory reads as absent); what
    // the table does not reach reads as zero entries.
    auto read_table = [&view](vm::PdeTarget target, uint64_t address, std::vector<uint64_t>& table,
                              uint64_t entries) {
      const bool read = target != vm::PdeTarget::kNone &&
                        view.Read(target, address, table.data(), entries * vm::kEntrySize);
      std::fill(table.begin() + (read ? entries : 0), table.end(), 0);
    };
    read_table(vm::pde::SmallTarget(pde), vm::pde::SmallTableAddress(pde), small, n_small);
    read_table(vm::pde::LargeTarget(pde), vm::pde::LargeTableAddress(pde), large, n_large);
    constexpr uint64_t kChunk = BarWalk::kChunkPages;
    constexpr uint64_t kPagesPerLarge = kLarge / kPage;
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t page = va0 / kPage + i;
      const uint64_t in_pde = i * kPage;
      if (page % kChunk == 0 && i + kChunk <= n && (i + kChunk) * kPage <= covered) {
        // A whole chunk of pages inside the tables' reach (the directory entry is a multiple of
        // chunks, and pde_span of kLarge): when every page of it is known and its small entries
        // and large entries are those of the last walk, no page's translation can have changed.
        // A walk of an unchanged 128 MiB BAR was ~80 us page by page on our hosts; memcmp does
        // it in a fraction (docs/FULL-VIRTUALIZATION.md, "BAR remap").
        uint8_t& known = w.chunk_known[page / kChunk];
        bool same = known != 0 && std::memcmp(&small[i], &w.small_pte[page], kChunk * 8) == 0;
        for (uint64_t k = 0; same && k < kChunk; k += kPagesPerLarge) {
          same = large[(in_pde + k * kPage) / kLarge] == w.large_pte[page + k];
        }
        if (same) {
          ++w.chunks_skipped;
          i += kChunk - 1;
          continue;
        }
        known = 1;  // the loop below now sets every page of the chunk
      } else if (page % kChunk == 0) {
        w.chunk_known[page / kChunk] = 0;  // a chunk this walk does not look at as a whole
      }
      const uint64_t s = in_pde < covered ? small[i] : 0;
      const uint64_t l = in_pde < covered ? large[in_pde / kLarge] : 0;
      // The result depends on the two entries alone: unchanged entries keep their translation.
      if (w.pde[page] != 0 && w.small_pte[page] == s && w.large_pte[page] == l) continue;
      w.small_pte[page] = s;
      w.large_pte[page] = l;
      w.pde[page] = 1;
      ++w.relocated;
      RelocatedPte r;
      uint64_t inner = 0;
      uint64_t guest_pte = 0;
      if (s & vm::pte::kPresent) {
        guest_pte = s;
        r = RelocatePte(s, kPage, view.layout());
      } else if (l != 0) {
        guest_pte = l;
        inner = in_pde & (kLarge - 1);
        r = RelocatePte(l, kLarge, view.layout());
      }
      const bool vram = r.verdict == PteVerdict::kMapped &&
                        vm::pte::TargetOf(r.value) == vm::Target::kVram &&
                        vm::pte::TargetOf(guest_pte) == vm::Target::kVram;
      const uint64_t guest = vram ? vm::pte::Address(guest_pte) + inner : 0;
      const uint64_t machine = vram ? vm::pte::Address(r.value) + inner : 0;
      if (guest != w.guest[page] || machine != w.machine[page]) changed = true;
      w.guest[page] = guest;
      w.machine[page] = machine;
    }
  }
  return nothing_from(end / kPage);
}

uint64_t BarDirectory(const GuestMemoryView& view, uint32_t inst_reg) {
  if ((inst_reg & pbus::kBarInstVmMode) == 0) return ~0ull;
  const uint64_t instance = uint64_t(inst_reg & pbus::kBarInstAddrMask) << pbus::kBarInstShift;
  uint32_t words[2];
  if (!view.ReadVram(instance + ramin::kPageDirLo, words, sizeof words)) return ~0ull;
  return (words[0] & ramin::kPageDirAddrLoMask) |
         (uint64_t(words[1] & ramin::kPageDirAddrHiMask) << 32);
}

uint8_t BarsFlushed(const GuestMemoryView& view, uint32_t trigger, uint32_t vspace,
                    const uint32_t (&bar_inst)[2]) {
  if ((trigger & vm::kFlushTrigger) == 0) return 0;
  if ((trigger & vm::kFlushAllPdb) != 0) return 3;
  const uint64_t pd = uint64_t(vspace >> vm::kTlbFlushVspaceAddrShift) << 12;
  return uint8_t((pd == BarDirectory(view, bar_inst[0]) ? 1 : 0) |
                 (pd == BarDirectory(view, bar_inst[1]) ? 2 : 0));
}

Status BarRemapper::Update(gpu::Bar bar, std::span<const uint64_t> targets) {
  const size_t slot = Slot(bar);
  std::vector<Run> runs;
  for (size_t i = 0; i < targets.size();) {
    const uint64_t t = targets[i];
    if (t == 0) {
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < targets.size() && targets[j] == t + (j - i) * kPage) ++j;
    runs.push_back({i * kPage, (j - i) * kPage, t});
    i = j;
  }
  const size_t budget = kMaxRuns - std::min(kMaxRuns, current_[1 - slot].size());
  if (runs.size() > budget) {
    // The longest runs save the most traps; the rest keeps trapping.
    std::stable_sort(runs.begin(), runs.end(),
                     [](const Run& a, const Run& b) { return a.length > b.length; });
    runs.resize(budget);
    std::sort(runs.begin(), runs.end(),
              [](const Run& a, const Run& b) { return a.offset < b.offset; });
  }
  for (const Run& old : current_[slot]) {
    if (std::find(runs.begin(), runs.end(), old) != runs.end()) continue;
    queued_.push_back({false, bar, old.offset, old.length, 0, -1});
    ++unmaps_;
  }
  std::vector<Run> kept;
  Status result;
  for (const Run& run : runs) {
    if (std::find(current_[slot].begin(), current_[slot].end(), run) != current_[slot].end()) {
      kept.push_back(run);
      continue;
    }
    int fd = vram_.get();
    uint64_t backing = run.target;
    if (run.target & kScratch) {
      backing = run.target & ~kScratch;
      // Scratch memory is a memfd, mappable only where the VRAM backing is one (the local
      // backend). VRAM in a file of device memory (--sim-vram-file, for Xen) means machine frames:
      // there those pages keep trapping (the foreign USER ids reach nothing either way).
      if (fcntl(vram_.get(), F_GET_SEALS) < 0) continue;
      if (!scratch_.valid()) {
        Result<os::UniqueFd> scratch =
            os::CreateSealedMemfd("gpuvm-fv-scratch", scratch_pages_ * kPage);
        if (!scratch.ok()) {
          result = scratch.status();
          continue;  // those pages keep trapping
        }
        scratch_ = std::move(*scratch);
      }
      if (backing + run.length > scratch_pages_ * kPage) continue;
      fd = scratch_.get();
    }
    if (fd < 0) continue;
    queued_.push_back({true, bar, run.offset, run.length, backing, fd});
    ++maps_;
    kept.push_back(run);
  }
  current_[slot] = std::move(kept);
  return result;
}

void BarRemapper::UnmapAll() {
  for (size_t slot = 0; slot < 2; ++slot) {
    for (const Run& old : current_[slot]) {
      queued_.push_back({false, BarOf(slot), old.offset, old.length, 0, -1});
      ++unmaps_;
    }
    current_[slot].clear();
  }
}

std::vector<BarRemapRequest> BarRemapper::Take() {
  std::vector<BarRemapRequest> out;
  out.swap(queued_);
  return out;
}

uint64_t BarRemapper::mapped_pages() const {
  uint64_t bytes = 0;
  for (const auto& runs : current_) {
    for (const Run& r : runs) bytes += r.length;
  }
  return bytes / kPage;
}

}  // namespace gpuvm::aggregator
