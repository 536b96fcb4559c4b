#include "gpu/sim/memory.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gpu/hw/pbus.h"
#include "gpu/sim/device.h"

namespace gpuvm::sim {
namespace {

// A file standing in for a device's memory (the Xen test bed's ivshmem BAR2), full of old bytes.
class VramFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuvm-vram-XXXXXX";
    const int fd = mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    path_ = tmpl;
    const std::vector<uint8_t> old(kFileBytes, 0xa5);
    ASSERT_EQ(pwrite(fd, old.data(), old.size(), 0), ssize_t(old.size()));
    close(fd);
  }
  void TearDown() override { unlink(path_.c_str()); }
  uint8_t FileByte(uint64_t offset) const {
    const int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    uint8_t b = 0;
    EXPECT_EQ(pread(fd, &b, 1, off_t(offset)), 1);
    close(fd);
    return b;
  }
  static constexpr uint64_t kFileBytes = 1 << 20;
  std::string path_;
};

TEST_F(VramFile, VramInAFileIsZeroedSharedAndNeverResized) {
  auto vram = Vram::Open(path_, 256 << 10);  // the start of a larger region
  ASSERT_TRUE(vram.ok()) << vram.status().ToString();
  EXPECT_EQ((*vram)->size(), 256u << 10);
  // Power-on VRAM reads zero: the old bytes are gone, up to the VRAM's end and no further.
  EXPECT_EQ(Load64((*vram)->At(0, 8)), 0u);
  EXPECT_EQ(Load64((*vram)->At((256 << 10) - 8, 8)), 0u);
  EXPECT_EQ(FileByte(256 << 10), 0xa5);
  EXPECT_EQ((*vram)->At(256 << 10, 1), nullptr);
  // Writes reach the file (another mapping of it, e.g. a guest's, sees them).
  Store32((*vram)->At(0x1234 * 4, 4), 0x11223344);
  EXPECT_EQ(FileByte(0x1234 * 4 + 3), 0x11);
  // fd() is the file itself, not a memfd.
  struct stat by_fd, by_path;
  ASSERT_EQ(fstat((*vram)->fd(), &by_fd), 0);
  ASSERT_EQ(stat(path_.c_str(), &by_path), 0);
  EXPECT_EQ(by_fd.st_ino, by_path.st_ino);
  EXPECT_EQ(uint64_t(by_path.st_size), kFileBytes);
  EXPECT_LT(fcntl((*vram)->fd(), F_GET_SEALS), 0);
}

TEST_F(VramFile, RefusesAFileSmallerThanTheVramAndBadSizes) {
  EXPECT_EQ(Vram::Open(path_, kFileBytes * 2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Vram::Open(path_, 1000).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Vram::Open(path_ + ".missing", 4096).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(FileByte(0), 0xa5);  // nothing was touched
}

TEST_F(VramFile, ADeviceWithVramInAFileUsesItAndZeroesItAgainWhenRebuilt) {
  SimDeviceOptions o;
  o.vram_size = 512 << 10;
  o.vram_file = path_;
  o.threaded = false;
  auto device = SimDevice::Create(o);
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  EXPECT_EQ((*device)->vram_size(), 512u << 10);
  // A word through the PRAMIN window lands in the file at its VRAM address.
  namespace pbus = gf100::pbus;
  (*device)->Write(gpu::Bar::k0, pbus::kPraminBase, gpu::Width::k32, 0x10000 >> 16);
  (*device)->Write(gpu::Bar::k0, pbus::kPraminWindow + 0x40, gpu::Width::k32, 0xcafef00d);
  EXPECT_EQ(FileByte(0x10040), 0x0d);
  EXPECT_EQ(FileByte(0x10043), 0xca);
  device->reset();
  // A new instance on the same file (the aggregator's GPU reset) starts from zero again.
  auto again = SimDevice::Create(o);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(FileByte(0x10040), 0);
  EXPECT_EQ((*again)->Read(gpu::Bar::k0, pbus::kPraminWindow + 0x40, gpu::Width::k32), 0u);
}

// Per-VM backing: pages of the VRAM view become another memfd's pages and go back to VRAM's own
// memory, zeroed, with the memfd cut off from the view (docs/FULL-VIRTUALIZATION.md, "BAR remap").
class VramBackingTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kKiB = 1024;
  void SetUp() override {
    auto vram = Vram::Create(1024 * kKiB);
    ASSERT_TRUE(vram.ok()) << vram.status().ToString();
    vram_ = std::move(*vram);
    std::memset(vram_->data(), 0x11, 1024 * kKiB);  // VRAM's own memory, everywhere
    file_ = memfd_create("vm-vram", MFD_CLOEXEC);
    ASSERT_GE(file_, 0);
    ASSERT_EQ(ftruncate(file_, 256 * kKiB), 0);
    const std::vector<uint8_t> bytes(256 * kKiB, 0x22);
    ASSERT_EQ(pwrite(file_, bytes.data(), bytes.size(), 0), ssize_t(bytes.size()));
  }
  void TearDown() override { close(file_); }
  uint8_t FileByte(uint64_t offset) const {
    uint8_t b = 0;
    EXPECT_EQ(pread(file_, &b, 1, off_t(offset)), 1);
    return b;
  }
  uint8_t View(uint64_t address) const { return *vram_->At(address, 1); }

  std::unique_ptr<Vram> vram_;
  int file_ = -1;
};

// Back(populate = false), what a VM's static VRAM slice gets: the file's pages show (none mapped
// up front), and the range's blocks are prefaulted anew at the GPU's first reach — the bit left by
// the GPU's own memory there does not keep the new pages from being brought in; Restore likewise.
TEST_F(VramBackingTest, AnUnpopulatedBackingShowsTheFileAndIsPrefaultedAnew) {
  vram_->Prefault(512 * kKiB);  // VRAM's own memory there, brought in once
  const uint64_t before = vram_->prefaulted_blocks();
  vram_->Prefault(512 * kKiB + 4096);
  EXPECT_EQ(vram_->prefaulted_blocks(), before) << "one madvise per block and mapping";
  ASSERT_TRUE(vram_->Back(512 * kKiB, 128 * kKiB, file_, 64 * kKiB, /*populate=*/false).ok());
  vram_->Prefault(512 * kKiB + 4096);
  EXPECT_EQ(vram_->prefaulted_blocks(), before + 1) << "the file's pages are brought in";
  EXPECT_EQ(View(512 * kKiB), 0x22);
  EXPECT_EQ(View(640 * kKiB - 1), 0x22);
  EXPECT_EQ(View(640 * kKiB), 0x11);  // the neighbour is VRAM's own memory still
  ASSERT_TRUE(vram_->Restore(512 * kKiB, 128 * kKiB).ok());
  EXPECT_EQ(View(512 * kKiB), 0);
  vram_->Prefault(512 * kKiB);
  EXPECT_EQ(vram_->prefaulted_blocks(), before + 2) << "restored: the next owner's reach";
}

TEST_F(VramBackingTest, BackedPagesAreTheFilesUntilRestoredZeroedAndCutOff) {
  ASSERT_TRUE(vram_->rebindable());
  uint8_t* const before = vram_->data();
  ASSERT_TRUE(vram_->Back(512 * kKiB, 128 * kKiB, file_, 64 * kKiB).ok());
  EXPECT_EQ(vram_->data(), before);  // the same view, other pages under it
  EXPECT_EQ(View(512 * kKiB), 0x22);
  EXPECT_EQ(View(640 * kKiB - 1), 0x22);
  EXPECT_EQ(View(512 * kKiB - 1), 0x11);  // the neighbours are VRAM's own memory still
  EXPECT_EQ(View(640 * kKiB), 0x11);
  // Both ways: the view writes the file at the offset, the file's writes show in the view.
  Store32(vram_->At(512 * kKiB + 8, 4), 0xa1b2c3d4);
  EXPECT_EQ(FileByte(64 * kKiB + 8), 0xd4);
  const uint8_t x = 0x77;
  ASSERT_EQ(pwrite(file_, &x, 1, off_t(64 * kKiB + 100)), 1);
  EXPECT_EQ(View(512 * kKiB + 100), 0x77);
  // The file's pages outside the backed range never show.
  EXPECT_EQ(View(512 * kKiB - 4096), 0x11);

  ASSERT_TRUE(vram_->Restore(512 * kKiB, 128 * kKiB).ok());
  // Punched: nothing resident in VRAM's own memfd there (looked at before anything reads it: a
  // read fault of a memfd hole allocates a page) ...
  EXPECT_EQ(lseek(vram_->fd(), off_t(512 * kKiB), SEEK_HOLE), off_t(512 * kKiB));
  EXPECT_EQ(lseek(vram_->fd(), off_t(512 * kKiB), SEEK_DATA), off_t(640 * kKiB));
  // ... and zeroed, not VRAM's old 0x11 from under the backing.
  EXPECT_EQ(View(512 * kKiB), 0);
  EXPECT_EQ(View(600 * kKiB), 0);
  EXPECT_EQ(View(512 * kKiB - 1), 0x11);
  EXPECT_EQ(View(640 * kKiB), 0x11);
  // The file is cut off both ways: what a holder of it writes reaches no VRAM, and VRAM's writes
  // no longer reach it.
  const std::vector<uint8_t> scribble(128 * kKiB, 0x66);
  ASSERT_EQ(pwrite(file_, scribble.data(), scribble.size(), off_t(64 * kKiB)),
            ssize_t(scribble.size()));
  EXPECT_EQ(View(512 * kKiB + 100), 0);
  Store32(vram_->At(512 * kKiB + 8, 4), 0x01020304);
  EXPECT_EQ(FileByte(64 * kKiB + 8), 0x66);
}

// The engine threads must not take a page fault per page of a VM's chunk: Back brings the whole
// range in at once, so a file that had nothing there has every page of it afterwards, before
// anyone touched the view.
TEST_F(VramBackingTest, BackPopulatesTheWholeRangeAtOnce) {
  const int holes = memfd_create("vm-vram-holes", MFD_CLOEXEC);
  ASSERT_GE(holes, 0);
  ASSERT_EQ(ftruncate(holes, 512 * kKiB), 0);
  ASSERT_EQ(lseek(holes, 0, SEEK_DATA), -1);  // nothing allocated yet
  ASSERT_TRUE(vram_->Back(256 * kKiB, 128 * kKiB, holes, 128 * kKiB).ok());
  EXPECT_EQ(lseek(holes, 0, SEEK_DATA), off_t(128 * kKiB));
  EXPECT_EQ(lseek(holes, off_t(128 * kKiB), SEEK_HOLE), off_t(256 * kKiB));
  std::vector<unsigned char> resident(128 * kKiB / 4096);
  ASSERT_EQ(mincore(vram_->data() + 256 * kKiB, 128 * kKiB, resident.data()), 0);
  for (size_t i = 0; i < resident.size(); ++i) EXPECT_TRUE(resident[i] & 1) << "page " << i;
  EXPECT_EQ(View(256 * kKiB), 0);
  ASSERT_TRUE(vram_->Restore(256 * kKiB, 128 * kKiB).ok());
  close(holes);
}

TEST_F(VramBackingTest, BadRangesAreRefusedAndAFailedBackLeavesVramsOwnMemory) {
  EXPECT_EQ(vram_->Back(4096 + 1, 4096, file_, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(vram_->Back(0, 4095, file_, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(vram_->Back(0, 4096, file_, 100).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(vram_->Back(1020 * kKiB, 8192, file_, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(vram_->Back(0, 0, file_, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(vram_->Restore(1024 * kKiB, 4096).code(), StatusCode::kInvalidArgument);
  // An fd mmap refuses: the range still shows (and is) VRAM's own memory.
  EXPECT_FALSE(vram_->Back(64 * kKiB, 4096, -1, 0).ok());
  EXPECT_EQ(View(64 * kKiB), 0x11);
  Store32(vram_->At(64 * kKiB, 4), 0x55555555);
  uint32_t own = 0;
  ASSERT_EQ(pread(vram_->fd(), &own, 4, off_t(64 * kKiB)), 4);
  EXPECT_EQ(own, 0x55555555u);
}

TEST_F(VramFile, VramInAFileCannotBeBacked) {
  auto vram = Vram::Open(path_, 256 << 10);
  ASSERT_TRUE(vram.ok()) << vram.status().ToString();
  EXPECT_FALSE((*vram)->rebindable());
  const int other = memfd_create("other", MFD_CLOEXEC);
  ASSERT_GE(other, 0);
  ASSERT_EQ(ftruncate(other, 4096), 0);
  EXPECT_EQ((*vram)->Back(0, 4096, other, 0).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ((*vram)->Restore(0, 4096).code(), StatusCode::kFailedPrecondition);
  close(other);
}

}  // namespace
}  // namespace gpuvm::sim
