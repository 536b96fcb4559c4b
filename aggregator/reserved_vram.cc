#include "aggregator/reserved_vram.h"

#include <string>

namespace gpuvm::aggregator {

ReservedVram::ReservedVram(uint64_t begin, uint64_t end) : begin_(begin), end_(end) {
  if (end > begin) free_[begin] = end - begin;
}

Result<uint64_t> ReservedVram::Allocate(uint64_t bytes) {
  if (bytes == 0) bytes = kAlign;
  bytes = (bytes + kAlign - 1) & ~(kAlign - 1);
  for (int attempt = 0; attempt < 2; ++attempt) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < bytes) continue;
      const uint64_t address = it->first;
      const uint64_t rest = it->second - bytes;
      free_.erase(it);
      if (rest != 0) free_[address + bytes] = rest;
      used_ += bytes;
      return address;
    }
    if (attempt == 0 && !(reclaim_ && reclaim_())) break;
  }
  return Status::ResourceExhausted("the aggregator's reserved VRAM is full (" +
                                   std::to_string(used_ >> 10) + " KiB used); no room for " +
                                   std::to_string(bytes >> 10) + " KiB");
}

void ReservedVram::Free(uint64_t address, uint64_t bytes) {
  if (bytes == 0) bytes = kAlign;
  bytes = (bytes + kAlign - 1) & ~(kAlign - 1);
  used_ -= bytes;
  auto [it, inserted] = free_.emplace(address, bytes);
  if (!inserted) return;  // a double free: ignore rather than corrupt the map
  auto next = std::next(it);
  if (next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
    }
  }
}

}  // namespace gpuvm::aggregator
