// BAR remap for full virtualization (fv-bar-remap, fv-optimized): which pages of a VM's BAR1/BAR3
// apertures may stop trapping, and the BAR_MAP/BAR_UNMAP requests (docs/IPC.md) that get the
// device model's mappings there.
//
//   WalkBarTables  one pass over the guest's own BAR page tables (instance block -> directory ->
//                  tables, every read a copying read inside the VM's memory, every PTE validated
//                  and relocated by RelocatePte exactly as a trapped access's walk would): per
//                  4 KiB page of the BAR, the guest VRAM page and the machine VRAM page it maps.
//                  Entries unchanged since the last walk are not relocated again.
//   BarRemapper    the wanted target of every page (an offset into the VRAM backing it was given,
//                  the VM's scratch memory, or "trap") -> runs of consecutive pages -> the
//                  difference to what is mapped now, as requests (unmaps first). At most kMaxRuns
//                  runs per VM; the rest traps.
//
// What FullVirtGpu remaps (fv_gpu.cc, SyncRemap): every aperture page whose PTE maps VRAM of the VM
// — except the pages holding a bound channel's instance block (channel descriptors stay trapped),
// the USER pages of the VM's own channels (IB_PUT is a submission) and SYSRAM pages; the USER pages
// of channel ids the VM does not own go to a per-VM scratch memfd (writes there reach nothing, as
// when trapped; reads give back what the guest wrote, never another VM's bytes) — when the VRAM
// backing is a memfd; with VRAM in a file of device memory (--sim-vram-file, Xen) they keep
// trapping.
//
// The VRAM backing, i.e. what a BAR_MAP hands the device model and the guest:
//   - per-VM backing (the software GPU's own VRAM, vram_map.h): the VM's own VRAM memfd, targets
//     are guest VRAM addresses. The file holds that VM's VRAM and nothing else, so whatever the
//     guest does with it (the local backend maps it whole) it reaches no other VM's pages, no
//     reserved area, and no page after the VM lets it go (released chunks are re-backed by the
//     GPU's own memory first). (A page at guest address 0 keeps trapping: 0 means trap.)
//   - machine frames (--sim-vram-file: VRAM in a PCI BAR, for Xen): the GPU's VRAM file, targets
//     are machine VRAM addresses. Isolation rests on the walk and on the hypervisor: a machine
//     page is only ever taken from RelocatePte of the VM's own PTE, so it is a page of the VM's
//     VRAM (static slice or assigned chunk), never reserved VRAM or another VM's, and Xen puts
//     exactly those frames in the guest's p2m (the device model, a privileged dom0 process that
//     could map any frame anyway, gets the file; the guest never does). A VM's chunks stay its own
//     until it is detached; a device model that dies with ranges mapped leaves them in the p2m
//     (aggregator.h: quarantine).
//
// Threading: the aggregator's owner thread only.
#ifndef GPUVM_AGGREGATOR_BAR_REMAP_H_
#define GPUVM_AGGREGATOR_BAR_REMAP_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "aggregator/shadow_page_table.h"
#include "aggregator/virtual_gpu.h"
#include "base/os.h"

namespace gpuvm::aggregator {

// What one BAR's page tables map, per 4 KiB page of the BAR. machine[i] == 0: page i maps no VRAM
// of the VM (not mapped, SYSRAM, rejected): it must trap.
struct BarWalk {
  uint32_t inst_reg = 0;
  std::vector<uint64_t> guest;    // guest VRAM address of the page
  std::vector<uint64_t> machine;  // machine VRAM address of the page, 0 = none
  // The raw entries behind each page at the last walk (so unchanged ones are not relocated again).
  std::vector<uint64_t> small_pte, large_pte, pde;
  // Per run of kChunkPages pages: every page of it known (pde flag set) since the last walk, so
  // the run can be compared with the tables as a whole and skipped when they are unchanged.
  static constexpr uint64_t kChunkPages = 512;  // one 4 KiB page of small PTEs
  std::vector<uint8_t> chunk_known;
  uint64_t chunks_skipped = 0;  // counter: chunks found unchanged as a whole
  uint64_t relocated = 0;       // entries relocated over the walker's life (counter)
};

// Walks the guest's tables of a BAR of `bar_bytes` whose instance register holds `inst_reg` (no VM
// mode: nothing is remappable). True when any page's translation changed since the last walk.
bool WalkBarTables(const GuestMemoryView& view, uint32_t inst_reg, uint64_t bar_bytes,
                   BarWalk& walk);

// The guest VRAM address of the page directory a BAR instance register names, or ~0 when the BAR is
// not in VM mode or its instance block is unreadable (a TLB flush naming it concerns the BAR).
uint64_t BarDirectory(const GuestMemoryView& view, uint32_t inst_reg);

// Which BARs' remapped sets a TLB flush concerns, bit 0 BAR1 and bit 1 BAR3: both for a flush of
// every directory, else those whose instance register (`bar_inst`: BAR1, BAR3) names the directory
// in `vspace` (the TLB_FLUSH_VSPACE register written before `trigger`). 0 when `trigger` starts no
// flush.
uint8_t BarsFlushed(const GuestMemoryView& view, uint32_t trigger, uint32_t vspace,
                    const uint32_t (&bar_inst)[2]);

class BarRemapper {
 public:
  static constexpr size_t kMaxRuns = 48;  // per VM (the local backend publishes 64 ranges)
  // A page's target: 0 = trap; a machine VRAM address; or kScratch | offset into scratch memory.
  static constexpr uint64_t kScratch = 1ull << 63;

  // `vram`: the VRAM backing (above; ours, a duplicate). `scratch_pages`: size of the scratch
  // memory (created on first use).
  BarRemapper(os::UniqueFd vram, uint64_t scratch_pages)
      : vram_(std::move(vram)), scratch_pages_(scratch_pages) {}

  // The wanted target of every page of `bar` (BAR1 or BAR3): queues what changes the mappings to
  // it.
  Status Update(gpu::Bar bar, std::span<const uint64_t> targets);
  // Queues unmaps for everything mapped (remap refused: trap everything again).
  void UnmapAll();
  // The requests queued since the last call, in order.
  std::vector<BarRemapRequest> Take();

  uint64_t mapped_pages() const;
  size_t runs() const { return current_[0].size() + current_[1].size(); }
  uint64_t maps() const { return maps_; }
  uint64_t unmaps() const { return unmaps_; }

 private:
  struct Run {
    uint64_t offset = 0, length = 0, target = 0;
    friend bool operator==(const Run&, const Run&) = default;
  };
  static size_t Slot(gpu::Bar bar) { return bar == gpu::Bar::k1 ? 0 : 1; }
  static gpu::Bar BarOf(size_t slot) { return slot == 0 ? gpu::Bar::k1 : gpu::Bar::k3; }

  const os::UniqueFd vram_;
  const uint64_t scratch_pages_;
  os::UniqueFd scratch_;
  std::vector<Run> current_[2];
  std::vector<BarRemapRequest> queued_;
  uint64_t maps_ = 0, unmaps_ = 0;
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_BAR_REMAP_H_
