#include "pv/call_area.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "pv/call_page.h"
#include "pv/protocol.h"

namespace gpuvm::pv {
namespace {

constexpr uint64_t kRam = 1 << 20;

struct Ram {
  std::vector<uint8_t> bytes = std::vector<uint8_t>(kRam, 0);
  // A page list at `list` naming `pages`.
  void List(uint64_t list, const std::vector<uint64_t>& pages) {
    std::memcpy(bytes.data() + list, pages.data(), pages.size() * 8);
  }
};

TEST(PvCallArea, RegistersWholePagesOfRamInAnyOrder) {
  Ram ram;
  ram.List(0x1000, {0x8000, 0x3000, 0xff000});
  Result<CallArea> area = CallArea::Register(ram.bytes, 0x1000, 3);
  ASSERT_TRUE(area.ok()) << area.status().ToString();
  EXPECT_TRUE(area->registered());
  EXPECT_EQ(area->pages(), 3u);
  EXPECT_EQ(area->bytes(), 3 * kPageBytes);
  EXPECT_EQ(area->Address(0), 0x8000u);
  EXPECT_EQ(area->Address(4096 + 8), 0x3008u);
  EXPECT_EQ(area->Address(2 * 4096 + 4095), 0xfffffu);
  EXPECT_FALSE(CallArea().registered());
}

TEST(PvCallArea, EveryBadPageListIsRefused) {
  Ram ram;
  ram.List(0x1000, {0x8000, 0x3000});
  struct Case {
    const char* what;
    uint64_t list;
    uint32_t pages;
    std::vector<uint64_t> entries;  // written at `list` when non-empty
  };
  const Case cases[] = {
      {"no pages", 0x1000, 0, {}},
      {"more pages than the maximum", 0x1000, kMaxAreaPages + 1, {}},
      {"the list past the RAM", kRam - 8, 2, {}},
      {"the list far past the RAM", 1ull << 40, 1, {}},
      {"the list wrapping around", ~0ull - 7, 2, {}},
      {"a page not aligned", 0x2000, 2, {0x8000, 0x3008}},
      {"a page past the RAM", 0x2000, 1, {kRam}},
      {"a page running past the RAM", 0x2000, 1, {kRam - 2048}},
      {"a page at the top of the address space", 0x2000, 1, {~0ull & ~0xfffull}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    if (!c.entries.empty()) ram.List(c.list, c.entries);
    Result<CallArea> area = CallArea::Register(ram.bytes, c.list, c.pages);
    EXPECT_EQ(area.status().code(), StatusCode::kInvalidArgument);
  }
  // The last whole page is fine.
  ram.List(0x2000, {kRam - 4096});
  EXPECT_TRUE(CallArea::Register(ram.bytes, 0x2000, 1).ok());
}

TEST(PvCallArea, TheBatchIsCopiedOnceAcrossScatteredPages) {
  Ram ram;
  ram.List(0x1000, {0x9000, 0x4000});
  Result<CallArea> area = CallArea::Register(ram.bytes, 0x1000, 2);
  ASSERT_TRUE(area.ok());
  // A batch spanning both pages, written the way the guest does: area byte i at Address(i).
  BatchBuilder b(area->bytes());
  std::vector<uint64_t> entries(600);
  std::iota(entries.begin(), entries.end(), 1);
  b.Write(0x100000, 0x120000, 0, entries);
  std::span<const uint8_t> batch = b.Finish();
  ASSERT_GT(batch.size(), kPageBytes);
  for (size_t i = 0; i < batch.size(); ++i) ram.bytes[area->Address(i)] = batch[i];
  std::vector<uint8_t> copy = area->Copy(ram.bytes, batch.size());
  EXPECT_TRUE(std::equal(copy.begin(), copy.end(), batch.begin(), batch.end()));
  // The guest rewriting its pages afterwards changes nothing the host holds.
  std::memset(ram.bytes.data() + 0x9000, 0xee, 4096);
  std::memset(ram.bytes.data() + 0x4000, 0xee, 4096);
  const DecodedBatch d = DecodeBatch(copy);
  ASSERT_EQ(d.status, CallResult::kOk) << d.error;
  EXPECT_EQ(EntryOf(d.calls[0], copy, 599), 600u);
  // Copies never run past the area.
  EXPECT_EQ(area->Copy(ram.bytes, 1 << 20).size(), area->bytes());
}

TEST(PvCallArea, ResultsGoToTheGuestsPages) {
  Ram ram;
  ram.List(0x1000, {0x9000, 0x4000});
  Result<CallArea> area = CallArea::Register(ram.bytes, 0x1000, 2);
  ASSERT_TRUE(area.ok());
  area->Store32(ram.bytes, 4096 + 8, 0xabcd);
  uint32_t v = 0;
  std::memcpy(&v, ram.bytes.data() + 0x4008, 4);
  EXPECT_EQ(v, 0xabcdu);
  // Unaligned or past the area: nothing is written.
  const std::vector<uint8_t> before = ram.bytes;
  area->Store32(ram.bytes, 2, 1);
  area->Store32(ram.bytes, 2 * 4096, 1);
  area->Store32(ram.bytes, 2 * 4096 - 2, 1);
  EXPECT_EQ(ram.bytes, before);
}

}  // namespace
}  // namespace gpuvm::pv
