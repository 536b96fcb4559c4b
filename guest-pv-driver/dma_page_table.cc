#include "guest-pv-driver/dma_page_table.h"

namespace gpuvm::guest {

DmaPageTable::Entry* DmaPageTable::Find(uintptr_t page) {
  const uint64_t key = BlockOf(page);
  Block* block = nullptr;
  if (key == last_key_) {
    block = last_;
  } else {
    auto it = blocks_.find(key);
    if (it == blocks_.end()) return nullptr;
    block = it->second.get();
    last_key_ = key;
    last_ = block;
  }
  const size_t i = IndexOf(page);
  return block->present[i] ? &block->entries[i] : nullptr;
}

DmaPageTable::Entry& DmaPageTable::At(uintptr_t page) {
  const uint64_t key = BlockOf(page);
  Block* block = nullptr;
  if (key == last_key_) {
    block = last_;
  } else {
    std::unique_ptr<Block>& slot = blocks_[key];
    if (slot == nullptr) slot = std::make_unique<Block>();
    block = slot.get();
    last_key_ = key;
    last_ = block;
  }
  const size_t i = IndexOf(page);
  if (!block->present[i]) {
    block->present[i] = true;
    block->entries[i] = {};
    ++block->used;
    ++size_;
  }
  return block->entries[i];
}

void DmaPageTable::Erase(uintptr_t page) {
  if (Find(page) == nullptr) return;  // Find leaves the page's block in last_
  Block& block = *last_;
  block.present[IndexOf(page)] = false;
  --size_;
  if (--block.used == 0) {
    last_ = nullptr;
    last_key_ = ~uint64_t{0};
    blocks_.erase(BlockOf(page));
  }
}

}  // namespace gpuvm::guest
