#include "guest-pv-driver/range_allocator.h"

#include <iterator>

namespace gpuvm::guest {

RangeAllocator::RangeAllocator(uint64_t base, uint64_t size)
    : base_(base), size_(size), free_bytes_(size) {
  if (size > 0) free_[base] = size;
}

Result<uint64_t> RangeAllocator::Allocate(uint64_t size, uint64_t align) {
  if (size == 0 || align == 0 || (align & (align - 1)) != 0) {
    return Status::InvalidArgument("allocation size must be > 0 and alignment a power of two");
  }
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const uint64_t start = it->first;
    const uint64_t length = it->second;
    const uint64_t aligned = (start + align - 1) & ~(align - 1);
    if (aligned < start) continue;  // wrapped
    const uint64_t pad = aligned - start;
    if (pad >= length || length - pad < size) continue;
    free_.erase(it);
    if (pad > 0) free_[start] = pad;
    const uint64_t rest = length - pad - size;
    if (rest > 0) free_[aligned + size] = rest;
    used_[aligned] = size;
    free_bytes_ -= size;
    return aligned;
  }
  return Status::ResourceExhausted("no free range of " + std::to_string(size) + " bytes");
}

Status RangeAllocator::Reserve(uint64_t start, uint64_t size) {
  if (size == 0) return Status::InvalidArgument("empty reservation");
  auto it = free_.upper_bound(start);
  if (it == free_.begin()) return Status::FailedPrecondition("range is not free");
  --it;
  const uint64_t fstart = it->first;
  const uint64_t flen = it->second;
  if (start - fstart >= flen || flen - (start - fstart) < size) {
    return Status::FailedPrecondition("range is not free");
  }
  free_.erase(it);
  if (start > fstart) free_[fstart] = start - fstart;
  const uint64_t end = start + size;
  if (fstart + flen > end) free_[end] = fstart + flen - end;
  used_[start] = size;
  free_bytes_ -= size;
  return Status::Ok();
}

Status RangeAllocator::Free(uint64_t start) {
  auto it = used_.find(start);
  if (it == used_.end()) return Status::NotFound("no allocation starts there");
  const uint64_t size = it->second;
  used_.erase(it);
  Release(start, size);
  return Status::Ok();
}

void InsertFreeRange(std::map<uint64_t, uint64_t>& free, uint64_t start, uint64_t size) {
  auto next = free.lower_bound(start);
  if (next != free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free.erase(prev);
    }
  }
  if (next != free.end() && start + size == next->first) {
    size += next->second;
    free.erase(next);
  }
  free[start] = size;
}

void RangeAllocator::Release(uint64_t start, uint64_t size) {
  free_bytes_ += size;
  InsertFreeRange(free_, start, size);
}

bool RangeAllocator::Lookup(uint64_t address, uint64_t* start, uint64_t* size) const {
  auto it = used_.upper_bound(address);
  if (it == used_.begin()) return false;
  --it;
  if (address - it->first >= it->second) return false;
  *start = it->first;
  *size = it->second;
  return true;
}

}  // namespace gpuvm::guest
