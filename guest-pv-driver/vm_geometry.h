// Page-table geometry shared by the driver's address spaces (vm_space.h) and the BAR3 bootstrap
// (instmem.h): how big a PDE's tables are. A PDE covers 1024 large pages (128 MiB with 128 KiB
// pages); its PT_SIZE field (gpu/hw/vm.h) lets both tables cover only the first 1/2, 1/4 or 1/8 of
// that, which the driver uses when the space's limit ends inside the PDE (the BAR spaces), so
// small spaces get small tables.
//
// Threading: pure functions.
#ifndef GPUVM_GUEST_PV_DRIVER_VM_GEOMETRY_H_
#define GPUVM_GUEST_PV_DRIVER_VM_GEOMETRY_H_

#include <cstdint>

#include "gpu/hw/vm.h"

namespace gpuvm::guest {

// The driver's page: its allocations, mappings and instance objects come in multiples of it.
inline constexpr uint64_t kPage = gf100::vm::kSmallPageSize;

// PT_SIZE (0..3) for the PDE `index` of a space whose highest address is `limit`.
inline uint32_t PtSizeFor(uint64_t index, uint64_t limit, int pde_shift) {
  const uint64_t span = 1ull << pde_shift;
  const uint64_t start = index << pde_shift;
  const uint64_t covered = limit - start + 1;  // caller guarantees start <= limit
  uint32_t k = 0;
  while (k < 3 && (span >> (k + 1)) >= covered) ++k;
  return k;
}

inline uint64_t SmallTableEntries(int large_page_shift, uint32_t pt_size) {
  return gf100::vm::kSmallTableEntries(large_page_shift) >> pt_size;
}
inline uint64_t LargeTableEntries(uint32_t pt_size) {
  return gf100::vm::kLargeTableEntries >> pt_size;
}

}  // namespace gpuvm::guest

#endif  // GPUVM_GUEST_PV_DRIVER_VM_GEOMETRY_H_
