// GuestRamWindow's first touch of a 2 MiB block maps the pages the guest has in that block into
// our mapping at once (and allocates nothing); VramAccess zeroes large ranges by punching them out
// of the software GPU's VRAM memfd, which every mapping (the GPU's included) then reads as zeros.
#include "aggregator/guest_ram_window.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "aggregator/sim_gpu.h"
#include "aggregator/testing/unthreaded_sim.h"
#include "aggregator/vram_access.h"
#include "base/os.h"
#include "gpu/hw/pbus.h"

namespace gpuvm::aggregator {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kBlock = GuestRamWindow::kPopulateBlock;

// Pages of [p, p + bytes) our page tables map (/proc/self/pagemap's present bit).
uint64_t MappedPages(const uint8_t* p, uint64_t bytes) {
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ~0ull;
  std::vector<uint64_t> entries(bytes / 4096);
  const off_t at = off_t(reinterpret_cast<uintptr_t>(p) / 4096 * 8);
  const ssize_t n = ::pread(fd, entries.data(), entries.size() * 8, at);
  ::close(fd);
  if (n != ssize_t(entries.size() * 8)) return ~0ull;
  uint64_t mapped = 0;
  for (uint64_t e : entries) mapped += e >> 63;
  return mapped;
}

// Pages of [p, p + bytes) the file behind the mapping has (holes are not).
uint64_t FilePages(const uint8_t* p, uint64_t bytes) {
  std::vector<unsigned char> v(bytes / 4096);
  if (::mincore(const_cast<uint8_t*>(p), bytes, v.data()) != 0) return ~0ull;
  uint64_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n;
}

TEST(GuestRamWindowTest, TheFirstTouchOfABlockMapsThePagesTheGuestHasInThatBlockOnly) {
  auto memfd = os::CreateSealedMemfd("guest-ram-window-test", 8 * kMiB);
  ASSERT_TRUE(memfd.ok()) << memfd.status().ToString();
  // The guest's view and ours of the same RAM.
  auto guest = os::SharedMapping::Map(memfd->get(), 0, 8 * kMiB, true);
  auto ours = os::SharedMapping::Map(memfd->get(), 0, 8 * kMiB, true);
  ASSERT_TRUE(guest.ok() && ours.ok());
  // 4 KiB pages whatever the host allows: the test is about which small pages get mapped (a huge
  // page would make the guest's first store allocate the whole block).
  ASSERT_EQ(::madvise(guest->data(), 8 * kMiB, MADV_NOHUGEPAGE), 0);
  ASSERT_EQ(::madvise(ours->data(), 8 * kMiB, MADV_NOHUGEPAGE), 0);
  uint8_t* const g = guest->bytes().data();
  const std::span<uint8_t> bytes = ours->bytes();
  // The guest has all of block 0 but page 10, pages 0-3 of block 1, and nothing else.
  std::memset(g, 0x11, kBlock);
  ASSERT_EQ(::fallocate(memfd->get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 10 * 4096, 4096),
            0);
  std::memset(g + kBlock, 0x22, 4 * 4096);
  ASSERT_EQ(MappedPages(bytes.data(), 8 * kMiB), 0u);

  GuestRamWindow window;
  const uint64_t base = 1ull << 30;
  ASSERT_TRUE(window.AttachRegion(base, bytes));
  EXPECT_EQ(window.Translate(base + 4096, 8), bytes.data() + 4096);
  EXPECT_EQ(window.populated_blocks(), 1u);
  EXPECT_EQ(MappedPages(bytes.data(), kBlock), kBlock / 4096 - 1);
  EXPECT_EQ(FilePages(bytes.data(), kBlock), kBlock / 4096 - 1) << "the hole stays a hole";
  // (The kernel's fault-around may map a few neighbours already in the file too: same RAM.)
  // The same block again: nothing more.
  EXPECT_EQ(window.Translate(base + kBlock - 8, 8), bytes.data() + kBlock - 8);
  EXPECT_EQ(window.populated_blocks(), 1u);
  // A range straddling blocks 1 and 2: block 1's four pages; block 2 has none.
  EXPECT_EQ(window.Translate(base + 2 * kBlock - 4, 8), bytes.data() + 2 * kBlock - 4);
  EXPECT_EQ(window.populated_blocks(), 2u);
  EXPECT_EQ(MappedPages(bytes.data() + kBlock, kBlock), 4u);
  EXPECT_EQ(FilePages(bytes.data(), 8 * kMiB), kBlock / 4096 - 1 + 4) << "nothing allocated";
  // Outside the region: refused, nothing populated.
  EXPECT_EQ(window.Translate(base + 8 * kMiB - 4, 8), nullptr);
  EXPECT_EQ(window.Translate(base - 4096, 8), nullptr);
  EXPECT_EQ(window.refused(), 2u);
  EXPECT_EQ(window.populated_blocks(), 2u);
  // What is there is what the guest wrote, holes read zero.
  EXPECT_EQ(window.Translate(base + 4096, 1)[0], 0x11);
  EXPECT_EQ(window.Translate(base + 10 * 4096, 1)[0], 0);
  EXPECT_EQ(window.Translate(base + kBlock + 3 * 4096, 1)[0], 0x22);
  window.DetachRegion(base);
  EXPECT_EQ(window.Translate(base + 4096, 8), nullptr);
}

TEST(VramAccessTest, ZeroingALargeRangePunchesItAndKeepsItsNeighbours) {
  auto gpu = SimGpu::Create(testing::UnthreadedSim(16 * kMiB));
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  VramAccess vram(gpu->get());
  const std::span<uint8_t> direct = (*gpu)->vram_mapping();
  std::memset(direct.data() + 4 * kMiB, 0xab, 2 * kMiB);
  const uint64_t begin = 4 * kMiB + 100;  // unaligned at both ends
  const uint64_t length = 1 * kMiB + 1000;
  vram.Fill(begin, 0, length);
  // The whole pages inside are a hole in the memfd now, not stored zeros (checked before anything
  // reads them: a read fault of a memfd hole allocates a page)...
  const off_t interior = off_t(4 * kMiB + 4096);
  EXPECT_EQ(::lseek((*gpu)->sim_device()->vram_fd(), interior, SEEK_HOLE), interior);
  for (uint64_t a = 4 * kMiB; a < 6 * kMiB; ++a) {
    const uint8_t want = a >= begin && a < begin + length ? 0 : 0xab;
    ASSERT_EQ(direct[a], want) << "at " << a;
  }
  // ... and every mapping reads them as zeros: ours, and the GPU's own (through PRAMIN).
  gpu::Device& d = (*gpu)->device();
  d.WriteReg(gf100::pbus::kPraminBase, uint32_t((4 * kMiB) >> gf100::pbus::kPraminBaseShift));
  EXPECT_EQ(d.ReadReg(gf100::pbus::kPraminWindow + 4096), 0u);
  EXPECT_EQ(d.ReadReg(gf100::pbus::kPraminWindow + 96), 0xababababu);
  // Small fills and other values are stores, as before.
  vram.Fill(5 * kMiB + 8192, 0x11, 64);
  EXPECT_EQ(direct[5 * kMiB + 8192], 0x11);
  EXPECT_EQ(direct[5 * kMiB + 8255], 0x11);
  EXPECT_EQ(direct[5 * kMiB + 8256], 0xab);
}

}  // namespace
}  // namespace gpuvm::aggregator
