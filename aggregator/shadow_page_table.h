// Shadow page tables (full virtualization). A guest driver builds GPU page directories and tables
// in its own VRAM, with guest addresses: VRAM offsets inside its slice and guest-physical SYSRAM
// addresses. The GPU never walks those. For each guest page directory a channel uses, the
// aggregator keeps a shadow directory and shadow tables in its reserved VRAM (reserved_vram.h), and
// points the channel's shadow instance block at the shadow directory. A rescan copies the guest's
// directory and tables (copy first: the guest may change them meanwhile), validates and relocates
// every entry (RelocatePte), and writes the entries that changed. Entries that would reach outside
// the VM's memory are dropped (not present in the shadow) and counted: the guest's channel then
// faults on them, nobody else notices.
//
// When a rescan happens is the mode's business (fv_gpu.h): fv-naive on every TLB flush of the
// directory, fv-lazy when a channel using it is activated (an IB_PUT submission).
//
// Threading: the aggregator's owner thread only.
#ifndef GPUVM_AGGREGATOR_SHADOW_PAGE_TABLE_H_
#define GPUVM_AGGREGATOR_SHADOW_PAGE_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "aggregator/reserved_vram.h"
#include "aggregator/vram_access.h"
#include "aggregator/vram_map.h"
#include "base/status.h"
#include "gpu/hw/vm.h"

namespace gpuvm::aggregator {

// Where one VM's memory lies physically.
struct VmMemoryLayout {
  uint64_t vram_base = 0;    // without a map: physical VRAM address of the guest's VRAM address 0
  uint64_t vram_bytes = 0;   // the VRAM the guest sees
  uint64_t sysram_base = 0;  // bus address of guest-physical address 0 (GuestRamWindow region)
  uint64_t ram_bytes = 0;
  // The VM's guest-physical -> machine VRAM map (vram_map.h); when set, it replaces vram_base:
  // relocating a VRAM PTE assigns the page's chunk (dynamic policy), reads go through it.
  VramMap* vram_map = nullptr;
};

enum class PteVerdict : uint8_t { kEmpty, kMapped, kRejected };
struct RelocatedPte {
  PteVerdict verdict = PteVerdict::kEmpty;
  uint64_t value = 0;            // the shadow entry (0 unless kMapped)
  const char* reason = nullptr;  // why kRejected
};

// One guest PTE mapping a page of `page_bytes` (4 KiB or a large page): VRAM inside the slice ->
// its machine address (vram_map, assigning the chunk on this first reference; else vram_base +
// address), rejected when the over-committed GPU has no chunk left for it; SYSRAM inside the VM's
// RAM -> sysram_base + address; anything else (outside, the invalid target, storage kinds and
// compression tags we do not virtualize) rejected.
RelocatedPte RelocatePte(uint64_t guest_pte, uint64_t page_bytes, const VmMemoryLayout& layout);

// Reads of one VM's memory by guest address, always into our own buffers.
class GuestMemoryView {
 public:
  GuestMemoryView(VramAccess* vram, const VmMemoryLayout& layout, std::span<const uint8_t> ram)
      : vram_(vram), layout_(layout), ram_(ram) {}
  // False (and `out` zeroed) when [address, address + length) is not inside the VM's memory.
  bool ReadVram(uint64_t address, void* out, size_t length) const;
  bool ReadSysram(uint64_t address, void* out, size_t length) const;
  bool Read(gf100::vm::PdeTarget target, uint64_t address, void* out, size_t length) const;
  const VmMemoryLayout& layout() const { return layout_; }

 private:
  VramAccess* vram_;
  VmMemoryLayout layout_;
  std::span<const uint8_t> ram_;
};

// Where the guest's own page tables map one virtual address (read by copying, as a rescan reads
// them): the PTE and its page size, and where the walk read the table, so a caller can tell why
// there is nothing (the table or the page in VRAM the VM never got, ...).
struct GuestPte {
  uint64_t pte = 0;         // the guest's entry; 0 when no table maps the address
  uint64_t page_bytes = 0;  // 4 KiB or the large page (ShadowSpace::kLargePageShift)
  uint64_t inner = 0;       // the address's offset inside that page
  gf100::vm::PdeTarget table_target = gf100::vm::PdeTarget::kNone;  // the table read, if any
  uint64_t table_address = 0;  // guest address of the table entry read
};
// The walk a GF100 does for `va` in the directory at guest VRAM `pd`: the small-page table first
// (when its entry is present), then the large-page table.
GuestPte LookupGuestPte(const GuestMemoryView& guest, uint64_t pd, uint64_t va);

struct ShadowCounters {
  uint64_t scans = 0;             // rescans of a directory
  uint64_t tables_scanned = 0;    // guest tables copied and compared
  uint64_t tables_unchanged = 0;  // ... of which identical to the last copy (no entry relocated)
  uint64_t entries_written = 0;   // shadow PDEs/PTEs written to VRAM
  uint64_t entries_rejected = 0;  // guest PTEs/PDEs dropped by validation
};

class ShadowSpace {
 public:
  // A shadow directory (all entries absent) for the guest directory at guest VRAM `guest_pd`.
  static Result<std::unique_ptr<ShadowSpace>> Create(VramAccess* vram, ReservedVram* reserved,
                                                     uint64_t guest_pd);
  ~ShadowSpace();
  ShadowSpace(const ShadowSpace&) = delete;
  ShadowSpace& operator=(const ShadowSpace&) = delete;

  uint64_t guest_pd() const { return guest_pd_; }
  uint64_t physical_pd() const { return physical_pd_; }
  // Bytes of reserved VRAM this space holds.
  uint64_t reserved_bytes() const;
  // The last rejection's reason (for the aggregator's log), empty if none.
  const std::string& last_rejection() const { return last_rejection_; }

  // Copies the guest's directory and tables, relocates them, writes what changed. Fails only when
  // reserved VRAM runs out (the shadow then keeps the tables it had).
  Status Rescan(const GuestMemoryView& guest, ShadowCounters& counters);

  static constexpr int kLargePageShift = gf100::vm::kLargePageShift128K;
  static constexpr uint64_t kPdeCount = gf100::vm::kPdeCount(kLargePageShift);

 private:
  struct Table {
    gf100::vm::PdeTarget guest_target = gf100::vm::PdeTarget::kNone;
    uint64_t guest_address = 0;
    uint64_t physical = 0;
    std::vector<uint64_t> guest_copy;  // the guest's entries at the last scan
    std::vector<uint64_t> shadow;      // what the shadow table holds
  };

  ShadowSpace(VramAccess* vram, ReservedVram* reserved, uint64_t guest_pd, uint64_t physical_pd)
      : vram_(vram), reserved_(reserved), guest_pd_(guest_pd), physical_pd_(physical_pd) {}
  // Brings `table` in line with the guest table named by (target, address, entries); returns
  // whether the shadow table exists afterwards.
  Result<bool> SyncTable(std::unique_ptr<Table>& table, gf100::vm::PdeTarget target,
                         uint64_t address, uint64_t entries, uint64_t page_bytes,
                         const GuestMemoryView& guest, ShadowCounters& counters);
  void FreeTable(std::unique_ptr<Table>& table);

  VramAccess* const vram_;
  ReservedVram* const reserved_;
  const uint64_t guest_pd_;
  const uint64_t physical_pd_;
  std::vector<uint64_t> shadow_pd_ = std::vector<uint64_t>(kPdeCount, 0);
  std::vector<std::unique_ptr<Table>> small_ = std::vector<std::unique_ptr<Table>>(kPdeCount);
  std::vector<std::unique_ptr<Table>> large_ = std::vector<std::unique_ptr<Table>>(kPdeCount);
  std::string last_rejection_;
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_SHADOW_PAGE_TABLE_H_
