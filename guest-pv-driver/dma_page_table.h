// The guest side's record of which host pages of a local VM's process are DMA memory, and on which
// frame of guest RAM each one sits (LocalVmGuest: the pages AllocDma and MapDma put there, with a
// count of the mappings that use each). Looked up and changed a page at a time, but in runs of
// thousands: 64 MiB of pinned memory is 16 384 pages.
//
// Why not a std::map by page: one node allocation and a tree rebalance per page cost 2.3-3.7 ms to
// register 64 MiB and as much again to release it, more than the rest of a pinned allocation when
// the memory is huge pages (docs/GUEST-DRIVER.md, "Pinned memory in a local VM"). Here a page's
// entry sits in an array for its 2 MiB block of address space, found through a hash of the block:
// registering 64 MiB fills 32 arrays.
//
// Threading: none (LocalVmGuest holds its dma_mu_ around every call).
#ifndef GPUVM_GUEST_PV_DRIVER_DMA_PAGE_TABLE_H_
#define GPUVM_GUEST_PV_DRIVER_DMA_PAGE_TABLE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

namespace gpuvm::guest {

class DmaPageTable {
 public:
  struct Entry {
    uint64_t frame = 0;
    uint64_t refs = 0;
  };
  static constexpr uint64_t kPageBytes = 4096;
  static constexpr uint64_t kBlockPages = 512;  // a 2 MiB block of address space

  // The entry of the page at `page` (4 KiB aligned), or nullptr when the page is not recorded.
  Entry* Find(uintptr_t page);
  // The entry of the page at `page`, recorded now ({0, 0}) if it was not.
  Entry& At(uintptr_t page);
  // Forgets the page (nothing when it is not recorded).
  void Erase(uintptr_t page);
  // Pages recorded.
  size_t size() const { return size_; }

 private:
  struct Block {
    uint32_t used = 0;
    std::array<bool, kBlockPages> present{};
    std::array<Entry, kBlockPages> entries{};
  };
  static uint64_t BlockOf(uintptr_t page) { return page / (kPageBytes * kBlockPages); }
  static size_t IndexOf(uintptr_t page) { return (page / kPageBytes) % kBlockPages; }

  std::unordered_map<uint64_t, std::unique_ptr<Block>> blocks_;
  // The block found last: runs of pages ask for the same block 512 times in a row.
  uint64_t last_key_ = ~uint64_t{0};
  Block* last_ = nullptr;
  size_t size_ = 0;
};

}  // namespace gpuvm::guest

#endif  // GPUVM_GUEST_PV_DRIVER_DMA_PAGE_TABLE_H_
