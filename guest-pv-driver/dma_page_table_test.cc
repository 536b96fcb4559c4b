#include "guest-pv-driver/dma_page_table.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace gpuvm::guest {
namespace {

constexpr uintptr_t kPage = DmaPageTable::kPageBytes;

TEST(DmaPageTableTest, RecordsFindsAndForgetsPages) {
  DmaPageTable table;
  const uintptr_t base = 0x7f0000000000;
  EXPECT_EQ(table.Find(base), nullptr);
  table.At(base) = {42, 1};
  table.At(base + kPage).refs = 3;  // recorded as {0, 0} first
  ASSERT_NE(table.Find(base), nullptr);
  EXPECT_EQ(table.Find(base)->frame, 42u);
  EXPECT_EQ(table.Find(base + kPage)->frame, 0u);
  EXPECT_EQ(table.Find(base + kPage)->refs, 3u);
  EXPECT_EQ(table.Find(base + 2 * kPage), nullptr);
  EXPECT_EQ(table.size(), 2u);
  ++table.At(base).refs;  // an existing entry is returned as it is
  EXPECT_EQ(table.Find(base)->refs, 2u);
  EXPECT_EQ(table.size(), 2u);
  table.Erase(base);
  table.Erase(base);              // twice: nothing happens
  table.Erase(base + 5 * kPage);  // never recorded
  EXPECT_EQ(table.Find(base), nullptr);
  EXPECT_EQ(table.size(), 1u);
  // Erased and recorded again: a fresh entry.
  EXPECT_EQ(table.At(base).refs, 0u);
}

TEST(DmaPageTableTest, PagesOfDifferentBlocksAndTheLastBlockCacheStayApart) {
  DmaPageTable table;
  const uintptr_t block = DmaPageTable::kPageBytes * DmaPageTable::kBlockPages;
  // The same index in three blocks, and a block emptied while it is the cached one.
  table.At(1 * block).frame = 1;
  table.At(2 * block).frame = 2;
  table.At(3 * block).frame = 3;
  table.Erase(2 * block);
  EXPECT_EQ(table.Find(2 * block), nullptr);
  EXPECT_EQ(table.Find(1 * block)->frame, 1u);
  EXPECT_EQ(table.Find(3 * block)->frame, 3u);
  table.At(2 * block).frame = 22;
  EXPECT_EQ(table.Find(2 * block)->frame, 22u);
  EXPECT_EQ(table.size(), 3u);
}

TEST(DmaPageTableTest, AgreesWithAMapOverRandomOperations) {
  DmaPageTable table;
  std::map<uintptr_t, DmaPageTable::Entry> model;
  std::mt19937_64 rng(7);
  // Pages around three block boundaries, so blocks fill, empty and come back.
  const uintptr_t block = DmaPageTable::kPageBytes * DmaPageTable::kBlockPages;
  for (int step = 0; step < 200000; ++step) {
    const uintptr_t page = (1 + rng() % 3) * block + (int64_t(rng() % 64) - 32) * kPage;
    switch (rng() % 3) {
      case 0: {
        DmaPageTable::Entry& e = table.At(page);
        DmaPageTable::Entry& m = model[page];
        e.frame = m.frame = rng();
        e.refs = ++m.refs;
        break;
      }
      case 1:
        table.Erase(page);
        model.erase(page);
        break;
      default: {
        const DmaPageTable::Entry* e = table.Find(page);
        auto it = model.find(page);
        ASSERT_EQ(e != nullptr, it != model.end()) << step;
        if (e != nullptr) {
          EXPECT_EQ(e->frame, it->second.frame);
          EXPECT_EQ(e->refs, it->second.refs);
        }
      }
    }
    ASSERT_EQ(table.size(), model.size()) << step;
  }
}

}  // namespace
}  // namespace gpuvm::guest
