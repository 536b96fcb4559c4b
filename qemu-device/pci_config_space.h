// The virtual GPU's PCI configuration space, as a guest's firmware and driver see it: identity, the
// command/status registers, BAR0/BAR1/BAR3 with sizing (write all-ones, read back the size mask)
// and relocation, a power-management and an MSI capability, and an interrupt line. 4 KiB of space;
// the extended part (0x100..0xfff) is empty (reads 0: no extended capabilities).
//
// Every register byte has a write mask (1 = the guest may change that bit): that one table makes
// read-only identity, BAR sizing and the writable fields all follow from the same rule, and nothing
// the guest writes can change what the device is.
//
// Layout (our choice where the facts stop): 0x00 ids, 0x04 command (I/O, memory, bus master, INTx
// disable writable), 0x06 status (capability list; bit 3 mirrors the interrupt line), 0x08 revision
// + class 0x030000, 0x10 BAR0 (32-bit), 0x14/0x18 BAR1 (64-bit prefetchable), 0x1c/0x20 BAR3
// (64-bit prefetchable), 0x24 BAR5 absent, 0x2c subsystem ids, 0x30 no expansion ROM (the VBIOS is
// in BAR0's PROM window), 0x34 capabilities at 0x60, 0x3c interrupt line (writable) / pin INTA;
// 0x60 PM capability -> 0x68 MSI capability (64-bit address, one vector).
//
// Threading: owned by the device model thread.
#ifndef GPUVM_QEMU_DEVICE_PCI_CONFIG_SPACE_H_
#define GPUVM_QEMU_DEVICE_PCI_CONFIG_SPACE_H_

#include <array>
#include <cstdint>
#include <optional>

#include "qemu-device/virtual_gpu.h"

namespace gpuvm::dm {

inline constexpr uint32_t kConfigSpaceSize = 4096;
inline constexpr uint32_t kConventionalConfigSize = 256;

// Register offsets.
inline constexpr uint32_t kPciVendorId = 0x00;
inline constexpr uint32_t kPciCommand = 0x04;
inline constexpr uint32_t kPciStatus = 0x06;
inline constexpr uint32_t kPciRevision = 0x08;
inline constexpr uint32_t kPciBar0 = 0x10;
inline constexpr uint32_t kPciBar1 = 0x14;
inline constexpr uint32_t kPciBar3 = 0x1c;
inline constexpr uint32_t kPciBar5 = 0x24;
inline constexpr uint32_t kPciSubsystemVendorId = 0x2c;
inline constexpr uint32_t kPciExpansionRom = 0x30;
inline constexpr uint32_t kPciCapabilityPointer = 0x34;
inline constexpr uint32_t kPciInterruptLine = 0x3c;
inline constexpr uint32_t kPciInterruptPin = 0x3d;
inline constexpr uint32_t kPmCapability = 0x60;
inline constexpr uint32_t kMsiCapability = 0x68;

inline constexpr uint16_t kCommandIo = 1u << 0;
inline constexpr uint16_t kCommandMemory = 1u << 1;
inline constexpr uint16_t kCommandBusMaster = 1u << 2;
inline constexpr uint16_t kCommandIntxDisable = 1u << 10;
inline constexpr uint16_t kStatusInterrupt = 1u << 3;
inline constexpr uint16_t kStatusCapabilityList = 1u << 4;

// The highest guest physical address a BAR may decode at (our choice: 52 bits, x86-64's
// architectural physical address limit); above it a BAR counts as unprogrammed.
inline constexpr uint64_t kMaxGuestPhysicalAddress = (uint64_t{1} << 52) - 1;

class PciConfigSpace {
 public:
  explicit PciConfigSpace(const VirtualGpuLayout& layout);

  // A well-formed config access: size 1, 2 or 4, naturally aligned, inside the 4 KiB space.
  static bool ValidAccess(uint64_t offset, uint32_t size);
  // Preconditions: ValidAccess(offset, size). (Violations read all-ones / write nothing.)
  uint32_t Read(uint32_t offset, uint32_t size) const;
  void Write(uint32_t offset, uint32_t size, uint32_t value);

  uint16_t command() const { return Get16(kPciCommand); }
  bool memory_enabled() const { return command() & kCommandMemory; }
  bool intx_disabled() const { return command() & kCommandIntxDisable; }
  // The address BAR `bar` decodes at, or nullopt when memory decoding is off or the register holds
  // no usable address (0, the all-ones sizing pattern, or beyond kMaxGuestPhysicalAddress).
  std::optional<uint64_t> BarAddress(BarIndex bar) const;
  uint64_t BarSize(BarIndex bar) const { return layout_.size(bar); }

  bool msi_enabled() const;
  uint64_t msi_address() const;
  uint16_t msi_data() const;

  // Status bit 3 reflects the device's interrupt line (the aggregator drives it).
  void set_interrupt_status(bool asserted);

 private:
  uint16_t Get16(uint32_t offset) const;
  uint32_t Get32(uint32_t offset) const;
  void Set(uint32_t offset, uint64_t value, uint32_t size, uint64_t write_mask);

  VirtualGpuLayout layout_;
  std::array<uint8_t, kConventionalConfigSize> bytes_{};
  std::array<uint8_t, kConventionalConfigSize> write_mask_{};
};

}  // namespace gpuvm::dm

#endif  // GPUVM_QEMU_DEVICE_PCI_CONFIG_SPACE_H_
