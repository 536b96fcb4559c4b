#include "qemu-device/pci_config_space.h"

#include "gtest/gtest.h"

namespace gpuvm::dm {
namespace {

TEST(PciConfigSpace, IdentifiesAsAQuadro6000) {
  PciConfigSpace c{VirtualGpuLayout{}};
  EXPECT_EQ(c.Read(0x00, 2), 0x10deu);
  EXPECT_EQ(c.Read(0x02, 2), 0x06d8u);
  EXPECT_EQ(c.Read(0x00, 4), 0x06d810deu);
  EXPECT_EQ(c.Read(0x08, 4) >> 8, 0x030000u) << "VGA-compatible display controller";
  EXPECT_EQ(c.Read(0x0e, 1), 0x00u) << "type 0 header, single function";
  EXPECT_EQ(c.Read(kPciInterruptPin, 1), 1u);
  // Identity cannot be written.
  c.Write(0x00, 4, 0x12345678);
  c.Write(0x08, 4, 0xffffffff);
  EXPECT_EQ(c.Read(0x00, 4), 0x06d810deu);
  EXPECT_EQ(c.Read(0x08, 4) >> 8, 0x030000u);
}

TEST(PciConfigSpace, BarsSizeLikeRealHardware) {
  const VirtualGpuLayout layout;
  PciConfigSpace c{layout};
  EXPECT_EQ(c.Read(kPciBar0, 4), 0x0u) << "32-bit, non-prefetchable";
  EXPECT_EQ(c.Read(kPciBar1, 4), 0xcu) << "64-bit, prefetchable";
  EXPECT_EQ(c.Read(kPciBar3, 4), 0xcu);
  for (uint32_t reg = kPciBar0; reg <= kPciBar5; reg += 4) c.Write(reg, 4, 0xffffffff);
  EXPECT_EQ(c.Read(kPciBar0, 4), static_cast<uint32_t>(~(layout.bar0_size - 1)));  // 0xff000000
  EXPECT_EQ(c.Read(kPciBar1, 4), static_cast<uint32_t>(~(layout.bar1_size - 1)) | 0xcu);
  EXPECT_EQ(c.Read(kPciBar1 + 4, 4), 0xffffffffu) << "upper half of a 64-bit BAR below 4 GiB";
  EXPECT_EQ(c.Read(kPciBar3, 4), static_cast<uint32_t>(~(layout.bar3_size - 1)) | 0xcu);
  EXPECT_EQ(c.Read(kPciBar5, 4), 0u) << "no BAR5";
  EXPECT_EQ(c.Read(kPciExpansionRom, 4), 0u);
  c.Write(kPciExpansionRom, 4, 0xffffffff);
  EXPECT_EQ(c.Read(kPciExpansionRom, 4), 0u) << "no expansion ROM";
  // The sizing pattern is not an address, even with decoding on.
  c.Write(kPciCommand, 2, kCommandMemory);
  for (BarIndex bar : kBars) EXPECT_FALSE(c.BarAddress(bar).has_value()) << BarName(bar);
}

TEST(PciConfigSpace, BarAddressesNeedMemoryDecode) {
  PciConfigSpace c{VirtualGpuLayout{}};
  c.Write(kPciBar0, 4, 0xf2000000);
  c.Write(kPciBar1, 4, 0xe0000000);
  c.Write(kPciBar1 + 4, 4, 0x00000001);  // above 4 GiB
  c.Write(kPciBar3, 4, 0xf4000000);
  EXPECT_FALSE(c.BarAddress(BarIndex::kBar0).has_value()) << "memory decode off";
  c.Write(kPciCommand, 2, kCommandMemory | kCommandBusMaster);
  EXPECT_EQ(c.command(), kCommandMemory | kCommandBusMaster);
  EXPECT_EQ(c.BarAddress(BarIndex::kBar0), std::optional<uint64_t>(0xf2000000));
  EXPECT_EQ(c.BarAddress(BarIndex::kBar1), std::optional<uint64_t>(0x1e0000000));
  EXPECT_EQ(c.BarAddress(BarIndex::kBar3), std::optional<uint64_t>(0xf4000000));
  // Low address bits below the BAR size are not writable: a misaligned base is impossible.
  c.Write(kPciBar0, 4, 0xf2345678);
  EXPECT_EQ(c.BarAddress(BarIndex::kBar0), std::optional<uint64_t>(0xf2000000));
  // Byte writes reach single lanes.
  c.Write(kPciBar0 + 3, 1, 0xf5);
  EXPECT_EQ(c.BarAddress(BarIndex::kBar0), std::optional<uint64_t>(0xf5000000));
  // Zero is unprogrammed; so is an address past the 52-bit guest physical space.
  c.Write(kPciBar0, 4, 0);
  EXPECT_FALSE(c.BarAddress(BarIndex::kBar0).has_value());
  c.Write(kPciBar1 + 4, 4, 0xfff00000);
  EXPECT_FALSE(c.BarAddress(BarIndex::kBar1).has_value());
  c.Write(kPciCommand, 2, 0xffff);
  EXPECT_EQ(c.command(), kCommandIo | kCommandMemory | kCommandBusMaster | kCommandIntxDisable);
}

TEST(PciConfigSpace, CapabilitiesChainToMsi) {
  PciConfigSpace c{VirtualGpuLayout{}};
  EXPECT_TRUE(c.Read(kPciStatus, 2) & kStatusCapabilityList);
  uint32_t at = c.Read(kPciCapabilityPointer, 1);
  std::vector<uint32_t> ids;
  for (int guard = 0; at != 0 && guard < 48; ++guard) {
    ids.push_back(c.Read(at, 1));
    at = c.Read(at + 1, 1);
  }
  EXPECT_EQ(ids, (std::vector<uint32_t>{0x01, 0x05})) << "power management, then MSI";
  EXPECT_FALSE(c.msi_enabled());
  c.Write(kMsiCapability + 4, 4, 0xfee00003);  // low two bits are not writable
  c.Write(kMsiCapability + 8, 4, 0x1);
  c.Write(kMsiCapability + 12, 2, 0x4041);
  c.Write(kMsiCapability + 2, 2, 0xffff);
  EXPECT_TRUE(c.msi_enabled());
  EXPECT_EQ(c.Read(kMsiCapability + 2, 2), 0x0081u) << "64-bit capable + enable only";
  EXPECT_EQ(c.msi_address(), 0x1fee00000u);
  EXPECT_EQ(c.msi_data(), 0x4041u);
}

TEST(PciConfigSpace, MalformedAccessesAndTheExtendedSpace) {
  PciConfigSpace c{VirtualGpuLayout{}};
  EXPECT_FALSE(PciConfigSpace::ValidAccess(0x01, 2));
  EXPECT_FALSE(PciConfigSpace::ValidAccess(0x02, 4));
  EXPECT_FALSE(PciConfigSpace::ValidAccess(0x00, 3));
  EXPECT_FALSE(PciConfigSpace::ValidAccess(0x00, 8));
  EXPECT_FALSE(PciConfigSpace::ValidAccess(4096, 4));
  EXPECT_TRUE(PciConfigSpace::ValidAccess(4092, 4));
  EXPECT_EQ(c.Read(0x01, 2), 0xffffffffu);
  EXPECT_EQ(c.Read(0x100, 4), 0u) << "no extended capabilities";
  c.Write(0x100, 4, 0x12345678);
  EXPECT_EQ(c.Read(0x100, 4), 0u);
  c.set_interrupt_status(true);
  EXPECT_TRUE(c.Read(kPciStatus, 2) & kStatusInterrupt);
  c.set_interrupt_status(false);
  EXPECT_FALSE(c.Read(kPciStatus, 2) & kStatusInterrupt);
  c.Write(kPciStatus, 2, 0xffff);
  EXPECT_EQ(c.Read(kPciStatus, 2), kStatusCapabilityList) << "status is read-only here";
}

}  // namespace
}  // namespace gpuvm::dm
