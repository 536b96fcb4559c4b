// A first-fit allocator of address ranges: VRAM, GPU virtual address heaps, BAR1/BAR3 apertures and
// bus addresses all use it. Ranges are [start, start + size); allocations are aligned to a power of
// two and freed by their start.
//
// Threading: not thread-safe; its owner locks.
#ifndef GPUVM_GUEST_PV_DRIVER_RANGE_ALLOCATOR_H_
#define GPUVM_GUEST_PV_DRIVER_RANGE_ALLOCATOR_H_

#include <cstdint>
#include <map>

#include "base/status.h"

namespace gpuvm::guest {

// Adds [start, start + size) to `free` (start -> size of free ranges, kept coalesced), merging it
// with the free ranges it touches. The range must not overlap one already free. The allocator's own
// bookkeeping, and that of the free lists kept beside it (bus addresses, guest frames).
void InsertFreeRange(std::map<uint64_t, uint64_t>& free, uint64_t start, uint64_t size);

class RangeAllocator {
 public:
  RangeAllocator() = default;
  // Manages [base, base + size).
  RangeAllocator(uint64_t base, uint64_t size);

  // The lowest suitable start. size > 0, align a power of two; kResourceExhausted when nothing
  // fits.
  Result<uint64_t> Allocate(uint64_t size, uint64_t align);
  // Takes exactly [start, start + size) out of the free space (for fixed carve-outs).
  Status Reserve(uint64_t start, uint64_t size);
  // kNotFound when `start` is not the start of a live allocation.
  Status Free(uint64_t start);

  // The live allocation containing `address`: its start and size, or false.
  bool Lookup(uint64_t address, uint64_t* start, uint64_t* size) const;
  uint64_t free_bytes() const { return free_bytes_; }
  uint64_t base() const { return base_; }
  uint64_t limit() const { return base_ + size_; }  // one past the end

 private:
  void Release(uint64_t start, uint64_t size);

  uint64_t base_ = 0;
  uint64_t size_ = 0;
  uint64_t free_bytes_ = 0;
  std::map<uint64_t, uint64_t> free_;  // start -> size, coalesced
  std::map<uint64_t, uint64_t> used_;  // start -> size
};

}  // namespace gpuvm::guest

#endif  // GPUVM_GUEST_PV_DRIVER_RANGE_ALLOCATOR_H_
