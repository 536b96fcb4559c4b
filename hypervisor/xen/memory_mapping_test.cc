#include "hypervisor/xen/memory_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace gpuvm::hv::xen {
namespace {

TEST(XenMemoryMapping, FramesOfARealApertureRange) {
  MemoryBacking aperture;
  aperture.machine_address = 0xd0000000ull + 0x200000;  // a BAR3 aperture page of a real board
  auto plan = PlanMemoryMapping(0x1800004000ull, 0x1800005fffull, aperture);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->first_gfn, 0x1800004u);
  EXPECT_EQ(plan->first_mfn, 0xd0200u);
  EXPECT_EQ(plan->frames, 2u);
}

TEST(XenMemoryMapping, AMemfdCannotBackGuestFramesOnXen) {
  MemoryBacking memfd;
  memfd.fd = 7;
  EXPECT_EQ(PlanMemoryMapping(0, 0xfff, memfd).status().code(), StatusCode::kUnimplemented);
  // A real memfd (dom0 RAM, the software GPU's default VRAM) resolves to no machine frames.
  const int fd = memfd_create("vram", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 1 << 20), 0);
  EXPECT_EQ(MachineBackingOfFd(fd, 0, 4096).status().code(), StatusCode::kUnimplemented);
  close(fd);
}

// A PCI device's sysfs directory as files: `resource` (one "start end flags" line per BAR) and a
// resourceN file per BAR.
class PciResourceFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuvm-xen-pci-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream table(dir_ + "/resource");
    table << "0x00000000fe800000 0x00000000fe8000ff 0x0000000000040200\n"   // BAR0: 256 B MMIO
          << "0x000000000000c000 0x000000000000c0ff 0x0000000000040101\n"   // BAR1: I/O ports
          << "0x0000000800000000 0x000000080fffffff 0x000000000014220c\n"   // BAR2: 256 MiB, 64-bit
          << "0x0000000000000000 0x0000000000000000 0x0000000000000000\n";  // BAR3: none
    table.close();
    for (const char* name :
         {"resource0", "resource1", "resource2", "resource2_wc", "resource3", "config"}) {
      std::ofstream(dir_ + "/" + name) << "";
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(PciResourceFiles, ABarFileIsMachineMemoryAtItsAddress) {
  auto backing = MachineBackingOfFile(dir_ + "/resource2", 0x300000, 0x2000);
  ASSERT_TRUE(backing.ok()) << backing.status().ToString();
  EXPECT_EQ(backing->fd, -1);
  EXPECT_EQ(backing->machine_address, 0x800300000ull);
  auto wc = MachineBackingOfFile(dir_ + "/resource2_wc", 0, 0x10000000);
  ASSERT_TRUE(wc.ok()) << wc.status().ToString();
  EXPECT_EQ(wc->machine_address, 0x800000000ull);
  // The same through a descriptor, then planned: guest frames onto the BAR's frames.
  const int fd = open((dir_ + "/resource2").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto by_fd = MachineBackingOfFd(fd, 0x5000, 0x1000);
  close(fd);
  ASSERT_TRUE(by_fd.ok()) << by_fd.status().ToString();
  auto plan = PlanMemoryMapping(0xe0010000ull, 0xe0010fffull, *by_fd);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->first_gfn, 0xe0010u);
  EXPECT_EQ(plan->first_mfn, 0x800005u);
  EXPECT_EQ(plan->frames, 1u);
}

TEST_F(PciResourceFiles, RefusesRangesPastTheBarAndBarsThatAreNotMemory) {
  EXPECT_EQ(MachineBackingOfFile(dir_ + "/resource2", 0x10000000 - 0x1000, 0x2000).status().code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(MachineBackingOfFile(dir_ + "/resource2", 0x20000000, 0x1000).status().code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(MachineBackingOfFile(dir_ + "/resource0", 0, 0x1000).status().code(),
            StatusCode::kOutOfRange);  // 256 bytes
  EXPECT_EQ(MachineBackingOfFile(dir_ + "/resource1", 0, 0x100).status().code(),
            StatusCode::kFailedPrecondition);  // I/O ports
  EXPECT_EQ(MachineBackingOfFile(dir_ + "/resource3", 0, 0x1000).status().code(),
            StatusCode::kFailedPrecondition);  // unassigned
  EXPECT_EQ(MachineBackingOfFile(dir_ + "/resource5", 0, 0x1000).status().code(),
            StatusCode::kFailedPrecondition);  // no line for it
}

TEST_F(PciResourceFiles, OtherFilesAreNotDeviceMemory) {
  for (const char* name : {"config", "resource", "resource6", "resource2_uc", "resource22"}) {
    EXPECT_EQ(MachineBackingOfFile(dir_ + "/" + name, 0, 0x1000).status().code(),
              StatusCode::kUnimplemented)
        << name;
  }
  // A resourceN file with no `resource` table beside it is no PCI device's.
  std::filesystem::remove(dir_ + "/resource");
  EXPECT_EQ(MachineBackingOfFile(dir_ + "/resource2", 0, 0x1000).status().code(),
            StatusCode::kUnimplemented);
}

TEST(XenMemoryMapping, RefusesPartialPagesAndHugeRanges) {
  MemoryBacking aperture;
  EXPECT_EQ(PlanMemoryMapping(0x800, 0x17ff, aperture).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanMemoryMapping(0x2000, 0xfff, aperture).status().code(),
            StatusCode::kInvalidArgument);
  aperture.machine_address = 0x123;
  EXPECT_EQ(PlanMemoryMapping(0, 0xfff, aperture).status().code(), StatusCode::kInvalidArgument);
  aperture.machine_address = 0;
  EXPECT_EQ(PlanMemoryMapping(0, (uint64_t{1} << 33) - 1, aperture).status().code(),
            StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace gpuvm::hv::xen
