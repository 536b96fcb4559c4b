#include "aggregator/bar_remap.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "aggregator/testing/same_file.h"

namespace gpuvm::aggregator {
namespace {

constexpr uint64_t kPage = 0x1000;

using testing::SameFile;

// BAR1 of 8 pages: pages 0-2 map VRAM 0x40000.., pages 5-6 foreign USER ids (scratch), rest trap.
std::vector<uint64_t> Targets() {
  std::vector<uint64_t> t(8, 0);
  for (uint64_t i = 0; i < 3; ++i) t[i] = 0x40000 + i * kPage;
  t[5] = BarRemapper::kScratch | 0;
  t[6] = BarRemapper::kScratch | kPage;
  return t;
}

TEST(BarRemapperTest, WithVramInAMemfdScratchPagesAreMappedToo) {
  auto vram = os::CreateSealedMemfd("vram", 1 << 20);
  ASSERT_TRUE(vram.ok()) << vram.status().ToString();
  auto dup = os::DuplicateFd(vram->get());
  ASSERT_TRUE(dup.ok());
  BarRemapper remap(std::move(*dup), 4);
  ASSERT_TRUE(remap.Update(gpu::Bar::k1, Targets()).ok());
  const std::vector<BarRemapRequest> requests = remap.Take();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_TRUE(requests[0].map);
  EXPECT_EQ(requests[0].offset, 0u);
  EXPECT_EQ(requests[0].length, 3 * kPage);
  EXPECT_EQ(requests[0].backing_offset, 0x40000u);
  EXPECT_TRUE(SameFile(requests[0].fd, vram->get()));
  EXPECT_EQ(requests[1].offset, 5 * kPage);
  EXPECT_EQ(requests[1].length, 2 * kPage);
  EXPECT_FALSE(SameFile(requests[1].fd, vram->get()));  // the VM's scratch memfd
  EXPECT_EQ(remap.mapped_pages(), 5u);
}

// VRAM in a file of device memory (--sim-vram-file: a PCI BAR, machine frames on Xen): VRAM pages
// are mapped with that file; the scratch memfd could not be mapped where VRAM is machine memory, so
// those pages keep trapping instead of having the device model refuse (which turns remap off).
TEST(BarRemapperTest, WithVramInADeviceFileScratchPagesKeepTrapping) {
  char tmpl[] = "/tmp/gpuvm-bar-remap-vram-XXXXXX";
  const int file = mkstemp(tmpl);
  ASSERT_GE(file, 0);
  unlink(tmpl);
  ASSERT_EQ(ftruncate(file, 1 << 20), 0);
  auto dup = os::DuplicateFd(file);
  ASSERT_TRUE(dup.ok());
  BarRemapper remap(std::move(*dup), 4);
  ASSERT_TRUE(remap.Update(gpu::Bar::k1, Targets()).ok());
  std::vector<BarRemapRequest> requests = remap.Take();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_TRUE(requests[0].map);
  EXPECT_EQ(requests[0].length, 3 * kPage);
  EXPECT_EQ(requests[0].backing_offset, 0x40000u);
  EXPECT_TRUE(SameFile(requests[0].fd, file));
  EXPECT_EQ(remap.mapped_pages(), 3u);
  // The same targets again: nothing to send (the scratch run is not retried as a change).
  ASSERT_TRUE(remap.Update(gpu::Bar::k1, Targets()).ok());
  EXPECT_TRUE(remap.Take().empty());
  close(file);
}

}  // namespace
}  // namespace gpuvm::aggregator
