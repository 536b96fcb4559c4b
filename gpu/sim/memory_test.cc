#include "gpu/sim/memory.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
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

}  // namespace
}  // namespace gpuvm::sim
