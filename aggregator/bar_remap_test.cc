#include "aggregator/bar_remap.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "aggregator/sim_gpu.h"
#include "aggregator/testing/same_file.h"
#include "aggregator/testing/unthreaded_sim.h"
#include "aggregator/vram_access.h"
#include "gpu/hw/pbus.h"
#include "gpu/hw/ramin.h"
#include "gpu/hw/vm.h"

namespace gpuvm::aggregator {
namespace {

constexpr uint64_t kPage = 0x1000;
namespace vm = gf100::vm;

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

// WalkBarTables skips runs of pages whose entries are those of the last walk (BarWalk::kChunkPages
// at a time). Whatever the guest changes between walks — single small or large entries, whole
// runs, valid, foreign or cleared — the walk that skips must give exactly what a first walk of
// the same tables gives, and say "changed" exactly when a translation changed.
TEST(BarWalkTest, AWalkThatSkipsUnchangedRunsAgreesWithAFreshOne) {
  constexpr uint64_t kMiB = 1ull << 20;
  constexpr uint64_t kVmBase = 16 * kMiB, kVmBytes = 32 * kMiB;
  constexpr uint64_t kInstance = 0x10000, kPd = 0x20000, kSmall = 0x100000, kLarge = 0x180000;
  constexpr uint64_t kBarBytes = 64 * kMiB;  // under one directory entry (128 MiB)
  constexpr uint64_t kLargeBytes = 1ull << ShadowSpace::kLargePageShift;
  auto gpu = SimGpu::Create(testing::UnthreadedSim(64 * kMiB));
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  VramAccess vram(gpu->get());
  const VmMemoryLayout layout{kVmBase, kVmBytes, 1ull << 36, 0, nullptr};
  const GuestMemoryView view(&vram, layout, {});
  auto put64 = [&](uint64_t guest, uint64_t value) { vram.Write64(kVmBase + guest, value); };
  vram.Fill(kVmBase, 0, kVmBytes);
  vram.Write32(kVmBase + kInstance + gf100::ramin::kPageDirLo,
               uint32_t(kPd) | uint32_t(vm::Target::kVram));
  vram.Write32(kVmBase + kInstance + gf100::ramin::kPageDirHi, 0);
  vram.Write64(kVmBase + kInstance + gf100::ramin::kVmLimitLo, kBarBytes - 1);
  put64(kPd, vm::pde::Make(vm::PdeTarget::kVram, kLarge, vm::PdeTarget::kVram, kSmall));
  const uint32_t inst = gf100::pbus::kBarInstVmMode | uint32_t(kInstance >> 12);

  std::mt19937_64 rng(7);
  auto pick = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };
  // A present entry at a page of the VM's VRAM, or one past it (refused), or nothing.
  auto entry = [&](uint64_t page_bytes) -> uint64_t {
    switch (pick(4)) {
      case 0:
        return 0;
      case 1:
        return vm::pte::Make(kVmBytes + pick(16) * page_bytes);  // outside the VM: refused
      default:
        return vm::pte::Make(pick(kVmBytes / page_bytes) * page_bytes);
    }
  };
  BarWalk incremental;
  std::vector<uint64_t> last_machine;
  for (int round = 0; round < 300; ++round) {
    const uint64_t pages = kBarBytes / kPage;
    // The space's limit shrinks for a round now and then (the pages past it are dropped) and is
    // back the next: entries that never changed must be relocated again then.
    const bool shrink = pick(8) == 0;
    vram.Write64(kVmBase + kInstance + gf100::ramin::kVmLimitLo,
                 shrink ? (pick(pages) + 1) * kPage - 1 : kBarBytes - 1);
    switch (pick(5)) {
      case 0:  // a few single small entries
        for (int k = 0; k < 3; ++k) put64(kSmall + pick(pages) * 8, entry(kPage));
        break;
      case 1:  // a large entry
        put64(kLarge + pick(kBarBytes / kLargeBytes) * 8, entry(kLargeBytes));
        break;
      case 2: {  // a run of small entries across a chunk boundary
        const uint64_t first = pick(pages - 600);
        for (uint64_t k = 0; k < 600; ++k) put64(kSmall + (first + k) * 8, entry(kPage));
        break;
      }
      case 3:  // nothing: the walk skips everything
        break;
      default:  // the last entry of a chunk
        put64(kSmall + (pick(pages / BarWalk::kChunkPages) * BarWalk::kChunkPages +
                        BarWalk::kChunkPages - 1) *
                           8,
              entry(kPage));
    }
    const bool changed = WalkBarTables(view, inst, kBarBytes, incremental);
    BarWalk fresh;
    WalkBarTables(view, inst, kBarBytes, fresh);
    ASSERT_EQ(incremental.machine, fresh.machine) << "round " << round;
    ASSERT_EQ(incremental.guest, fresh.guest) << "round " << round;
    if (round > 0) {
      EXPECT_EQ(changed, fresh.machine != last_machine) << "round " << round;
    }
    last_machine = fresh.machine;
  }
  EXPECT_GT(incremental.chunks_skipped, 0u);
  // Some pages map, some do not: the tables exercised both.
  EXPECT_NE(std::count(last_machine.begin(), last_machine.end(), 0u), 0);
  EXPECT_NE(std::count(last_machine.begin(), last_machine.end(), 0u),
            std::ptrdiff_t(last_machine.size()));
}

}  // namespace
}  // namespace gpuvm::aggregator
