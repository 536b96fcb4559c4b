// The aggregator's own area of physical VRAM under full virtualization (shadow page tables, shadow
// instance blocks, the physical USER area, BAR1 tables and playlists): a first-fit allocator of
// 4 KiB-aligned blocks inside [begin, end). No VM's slice overlaps it, and no shadow PTE may point
// into it (shadow_page_table.h), so guests can neither read nor write it.
//
// Threading: the aggregator's owner thread only.
#ifndef GPUVM_AGGREGATOR_RESERVED_VRAM_H_
#define GPUVM_AGGREGATOR_RESERVED_VRAM_H_

#include <cstdint>
#include <functional>
#include <map>

#include "base/status.h"

namespace gpuvm::aggregator {

class ReservedVram {
 public:
  static constexpr uint64_t kAlign = 0x1000;

  ReservedVram(uint64_t begin, uint64_t end);

  // `bytes` rounded up to kAlign; ResourceExhausted when no free run is large enough (after one
  // call of the reclaim hook, if set, and a second try when it freed something).
  Result<uint64_t> Allocate(uint64_t bytes);
  // Called when Allocate finds no run large enough; returns true when it gave memory back (Free)
  // — the aggregator's quarantine of dead VMs' VRAM (Aggregator::ReapQuarantine).
  void SetReclaim(std::function<bool()> reclaim) { reclaim_ = std::move(reclaim); }
  void Free(uint64_t address, uint64_t bytes);

  uint64_t begin() const { return begin_; }
  uint64_t end() const { return end_; }
  uint64_t used() const { return used_; }

 private:
  const uint64_t begin_, end_;
  std::map<uint64_t, uint64_t> free_;  // start -> length, coalesced
  uint64_t used_ = 0;
  std::function<bool()> reclaim_;
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_RESERVED_VRAM_H_
