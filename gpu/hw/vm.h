// GF100 virtual memory: the page directory / page table formats and the MMU's TLB-control
// registers. Sources: envytools rnndb/memory/gf100_vm.xml (GF100_PDE, GF100_PTE bitsets); nouveau
// nvkm/subdev/mmu/vmmgf100.c (table geometry per large-page size, PDE target encoding, the PD
// pointer in RAMIN 0x200 and the TLB flush sequence); nvkm/subdev/fb/gf100.c (0x100c80 bit 0
// selects the large page size); docs/FERMI-FACTS.md. Facts only; the walk itself lives
// in gpu/sim/mmu.h.
#ifndef GPUVM_GPU_HW_VM_H_
#define GPUVM_GPU_HW_VM_H_

#include <cstdint>

namespace gpuvm::gf100::vm {

// ---- Address geometry ----
inline constexpr int kVaBits = 40;
inline constexpr uint64_t kVaLimit = 1ull << kVaBits;
inline constexpr int kSmallPageShift = 12;  // 4 KiB
inline constexpr uint64_t kSmallPageSize = 1ull << kSmallPageShift;
// Large pages are 128 KiB (VM_CFG bit 0 clear) or 64 KiB (bit 0 set). A PDE covers 1024 large
// pages: 128 MiB (13-bit PD index, 32768-entry small table) or 64 MiB (14-bit PD index, 16384-entry
// small table).
inline constexpr int kLargePageShift128K = 17;
inline constexpr int kLargePageShift64K = 16;
inline constexpr int kLargeTableIndexBits = 10;
inline constexpr int kPdeShift(int large_page_shift) {
  return large_page_shift + kLargeTableIndexBits;
}
inline constexpr uint64_t kPdeCount(int large_page_shift) {
  return 1ull << (kVaBits - kPdeShift(large_page_shift));
}
inline constexpr uint64_t kSmallTableEntries(int large_page_shift) {
  return 1ull << (kPdeShift(large_page_shift) - kSmallPageShift);
}
inline constexpr uint64_t kLargeTableEntries = 1ull << kLargeTableIndexBits;
inline constexpr uint64_t kEntrySize = 8;  // PDEs and PTEs are 64-bit

// ---- Memory targets ----
// PTE TARGET (bits 33-34) and the PD pointer / flush register targets (bits 0-1): g80_mem_target.
enum class Target : uint8_t {
  kVram = 0,
  kInvalid = 1,  // not used by nouveau; (our choice) the MMU treats it as not present
  kSysramSnooped = 2,
  kSysramNoSnoop = 3,
};
// PDE table pointers use a different encoding (vmmgf100.c gf100_vmm_pgd_pde): 0 = no table, 1 =
// VRAM, 2 = SYSRAM snooped, 3 = SYSRAM not snooped. gf100_vm.xml calls bit 0 / bit 32 "PRESENT".
enum class PdeTarget : uint8_t { kNone = 0, kVram = 1, kSysramSnooped = 2, kSysramNoSnoop = 3 };

// ---- PDE (64-bit) ----
// bits 0-1 large-page table target, bits 2-3 PT_SIZE, bits 4-31 large-page table address >> 12, bit
// 35 large-table VOL, bits 32-33 small-page table target, bit 34 small-table VOL, bits 36-63
// small-page table address >> 12.
namespace pde {
inline constexpr int kLargeTargetShift = 0;
inline constexpr int kPtSizeShift = 2;  // 0 FULL, 1 half, 2 quarter, 3 eighth of the PDE's range
inline constexpr int kLargeAddrShift = 4;
inline constexpr int kSmallTargetShift = 32;
inline constexpr int kSmallAddrShift = 36;
inline constexpr uint64_t kAddrFieldMask = 0x0fffffff;  // 28 bits of address >> 12
inline constexpr uint64_t kSmallVol = 1ull << 34;
inline constexpr uint64_t kLargeVol = 1ull << 35;

constexpr PdeTarget LargeTarget(uint64_t v) { return PdeTarget((v >> kLargeTargetShift) & 3); }
constexpr PdeTarget SmallTarget(uint64_t v) { return PdeTarget((v >> kSmallTargetShift) & 3); }
constexpr uint32_t PtSize(uint64_t v) { return (v >> kPtSizeShift) & 3; }
constexpr uint64_t LargeTableAddress(uint64_t v) {
  return ((v >> kLargeAddrShift) & kAddrFieldMask) << 12;
}
constexpr uint64_t SmallTableAddress(uint64_t v) {
  return ((v >> kSmallAddrShift) & kAddrFieldMask) << 12;
}
constexpr uint64_t Make(PdeTarget large_target, uint64_t large_table, PdeTarget small_target,
                        uint64_t small_table, uint32_t pt_size = 0) {
  return (uint64_t(large_target) << kLargeTargetShift) | (uint64_t(pt_size & 3) << kPtSizeShift) |
         (((large_table >> 12) & kAddrFieldMask) << kLargeAddrShift) |
         (uint64_t(small_target) << kSmallTargetShift) |
         (((small_table >> 12) & kAddrFieldMask) << kSmallAddrShift);
}
}  // namespace pde

// ---- PTE (64-bit) ----
// bit 0 present, bit 1 supervisor only, bit 2 read only, bit 3 encrypted (SYSRAM), bits 4-31
// address >> 12, bit 32 VOL, bits 33-34 target, bits 36-43 storage type (0 = linear), bits 44-60
// compression tag.
namespace pte {
inline constexpr uint64_t kPresent = 1ull << 0;
inline constexpr uint64_t kSupervisorOnly = 1ull << 1;
inline constexpr uint64_t kReadOnly = 1ull << 2;
inline constexpr uint64_t kEncrypted = 1ull << 3;
inline constexpr int kAddrShift = 4;
inline constexpr uint64_t kAddrFieldMask = 0x0fffffff;
inline constexpr uint64_t kVol = 1ull << 32;
inline constexpr int kTargetShift = 33;
inline constexpr int kStorageTypeShift = 36;

constexpr uint64_t Address(uint64_t v) { return ((v >> kAddrShift) & kAddrFieldMask) << 12; }
constexpr Target TargetOf(uint64_t v) { return Target((v >> kTargetShift) & 3); }
constexpr uint32_t StorageType(uint64_t v) { return (v >> kStorageTypeShift) & 0xff; }
struct Flags {
  bool read_only = false;
  bool supervisor_only = false;
  Target target = Target::kVram;
  uint32_t storage_type = 0;
};
constexpr uint64_t Make(uint64_t address, Flags f = {}) {
  return kPresent | (f.supervisor_only ? kSupervisorOnly : 0) | (f.read_only ? kReadOnly : 0) |
         (((address >> 12) & kAddrFieldMask) << kAddrShift) |
         (f.target == Target::kSysramSnooped ? kVol : 0) | (uint64_t(f.target) << kTargetShift) |
         (uint64_t(f.storage_type & 0xff) << kStorageTypeShift);
}
}  // namespace pte

// ---- MMU registers (BAR0) ----
// VM_CFG. bit 0: large page size (0 = 128 KiB, 1 = 64 KiB). nouveau's flush handshake reads two
// more fields: bits 16-23 (nouveau: "looks like maybe a free flush slots counter") must be non-zero
// before a flush is queued, and bit 15 is polled after the trigger ("wait for flush to be
// queued?").
inline constexpr uint32_t kCfg = 0x100c80;
inline constexpr uint32_t kCfgLargePage64K = 1u << 0;
inline constexpr uint32_t kCfgFlushSlotsShift = 16;
inline constexpr uint32_t kCfgFlushSlotsMask = 0xffu << kCfgFlushSlotsShift;
inline constexpr uint32_t kCfgFlushQueued = 1u << 15;
// TLB_FLUSH_PAGE: envytools names it; its format is undocumented. (our choice) virtual address >>
// 12 of the one page a trigger without PAGE_ALL flushes.
inline constexpr uint32_t kTlbFlushPage = 0x100cb4;
// TLB_FLUSH_VSPACE: bits 0-1 target of the page directory, bits 4-31 page directory address >> 12.
inline constexpr uint32_t kTlbFlushVspace = 0x100cb8;
inline constexpr uint32_t kTlbFlushVspaceAddrShift = 4;
// TLB_FLUSH_TRIGGER: bit 0 PAGE_ALL, bit 1 ALL_PDB (every address space), bit 2 HUB_ONLY, bit 31
// TRIGGER.
inline constexpr uint32_t kTlbFlushTrigger = 0x100cbc;
inline constexpr uint32_t kFlushPageAll = 1u << 0;
inline constexpr uint32_t kFlushAllPdb = 1u << 1;
inline constexpr uint32_t kFlushHubOnly = 1u << 2;
inline constexpr uint32_t kFlushTrigger = 1u << 31;

}  // namespace gpuvm::gf100::vm

#endif  // GPUVM_GPU_HW_VM_H_
