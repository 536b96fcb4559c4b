#include "qemu-device/pci_config_space.h"

namespace gpuvm::dm {
namespace {

uint32_t BarRegister(BarIndex bar) {
  return bar == BarIndex::kBar0 ? kPciBar0 : bar == BarIndex::kBar1 ? kPciBar1 : kPciBar3;
}
bool Is64Bit(BarIndex bar) { return bar != BarIndex::kBar0; }

// Low bits of a memory BAR register (PCI spec): bit 0 = 0 memory, bits 2:1 = type (10b: 64-bit),
// bit 3 = prefetchable.
constexpr uint32_t kBarMemory32 = 0x0;
constexpr uint32_t kBarMemory64Prefetchable = 0x4 | 0x8;
constexpr uint32_t kBarFlagBits = 0xf;

}  // namespace

std::string_view BarName(BarIndex bar) {
  return bar == BarIndex::kBar0 ? "BAR0" : bar == BarIndex::kBar1 ? "BAR1" : "BAR3";
}

PciConfigSpace::PciConfigSpace(const VirtualGpuLayout& layout) : layout_(layout) {
  Set(kPciVendorId, gf100::pci::kVendorId, 2, 0);
  Set(kPciVendorId + 2, gf100::pci::kDeviceId, 2, 0);
  Set(kPciCommand, 0, 2, kCommandIo | kCommandMemory | kCommandBusMaster | kCommandIntxDisable);
  Set(kPciStatus, kStatusCapabilityList, 2, 0);
  Set(kPciRevision, gf100::pci::kRevision, 1, 0);
  Set(kPciRevision + 1, gf100::pci::kClassCode, 3, 0);
  Set(0x0c, 0, 1, 0xff);  // cache line size: a scratch register for firmware
  for (BarIndex bar : kBars) {
    // Writable bits are exactly the address bits above the BAR's size: writing all-ones reads back
    // ~(size - 1) plus the flag bits, which is how software sizes a BAR.
    const uint64_t address_mask = ~(layout_.size(bar) - 1) & ~uint64_t{kBarFlagBits};
    const uint32_t reg = BarRegister(bar);
    if (Is64Bit(bar)) {
      Set(reg, kBarMemory64Prefetchable, 4, address_mask & 0xffffffffu);
      Set(reg + 4, 0, 4, address_mask >> 32);
    } else {
      Set(reg, kBarMemory32, 4, address_mask & 0xffffffffu);
    }
  }
  Set(kPciSubsystemVendorId, kSubsystemVendorId, 2, 0);
  Set(kPciSubsystemVendorId + 2, kSubsystemId, 2, 0);
  Set(kPciCapabilityPointer, kPmCapability, 1, 0);
  Set(kPciInterruptLine, 0, 1, 0xff);
  Set(kPciInterruptPin, 1, 1, 0);  // INTA
  // Power management: version 3, no PME; PMCSR power state (D0..D3hot) writable.
  Set(kPmCapability, 0x01, 1, 0);
  Set(kPmCapability + 1, kMsiCapability, 1, 0);
  Set(kPmCapability + 2, 0x0003, 2, 0);
  Set(kPmCapability + 4, 0x0000, 2, 0x0003);
  // MSI: 64-bit address capable, one vector; enable, address and data writable.
  Set(kMsiCapability, 0x05, 1, 0);
  Set(kMsiCapability + 1, 0x00, 1, 0);
  Set(kMsiCapability + 2, 0x0080, 2, 0x0001);
  Set(kMsiCapability + 4, 0, 4, 0xfffffffc);
  Set(kMsiCapability + 8, 0, 4, 0xffffffff);
  Set(kMsiCapability + 12, 0, 2, 0xffff);
}

void PciConfigSpace::Set(uint32_t offset, uint64_t value, uint32_t size, uint64_t write_mask) {
  for (uint32_t i = 0; i < size; ++i) {
    bytes_[offset + i] = static_cast<uint8_t>(value >> (8 * i));
    write_mask_[offset + i] = static_cast<uint8_t>(write_mask >> (8 * i));
  }
}

bool PciConfigSpace::ValidAccess(uint64_t offset, uint32_t size) {
  if (size != 1 && size != 2 && size != 4) return false;
  return offset < kConfigSpaceSize && offset % size == 0;
}

uint32_t PciConfigSpace::Read(uint32_t offset, uint32_t size) const {
  if (!ValidAccess(offset, size)) return 0xffffffffu;
  if (offset >= kConventionalConfigSize) return 0;  // extended space: no capabilities
  uint32_t value = 0;
  for (uint32_t i = 0; i < size; ++i) value |= uint32_t{bytes_[offset + i]} << (8 * i);
  return value;
}

void PciConfigSpace::Write(uint32_t offset, uint32_t size, uint32_t value) {
  if (!ValidAccess(offset, size) || offset >= kConventionalConfigSize) return;
  for (uint32_t i = 0; i < size; ++i) {
    const uint8_t mask = write_mask_[offset + i];
    const uint8_t incoming = static_cast<uint8_t>(value >> (8 * i));
    bytes_[offset + i] = static_cast<uint8_t>((bytes_[offset + i] & ~mask) | (incoming & mask));
  }
}

uint16_t PciConfigSpace::Get16(uint32_t offset) const {
  return static_cast<uint16_t>(bytes_[offset] | (bytes_[offset + 1] << 8));
}

uint32_t PciConfigSpace::Get32(uint32_t offset) const {
  return uint32_t{Get16(offset)} | (uint32_t{Get16(offset + 2)} << 16);
}

std::optional<uint64_t> PciConfigSpace::BarAddress(BarIndex bar) const {
  if (!memory_enabled()) return std::nullopt;
  const uint32_t reg = BarRegister(bar);
  uint64_t base = Get32(reg) & ~kBarFlagBits;
  if (Is64Bit(bar)) base |= uint64_t{Get32(reg + 4)} << 32;
  const uint64_t size = layout_.size(bar);
  uint64_t sizing_pattern = ~(size - 1) & ~uint64_t{kBarFlagBits};
  if (!Is64Bit(bar)) sizing_pattern &= 0xffffffffu;
  if (base == 0 || base == sizing_pattern) return std::nullopt;
  if (base > kMaxGuestPhysicalAddress - (size - 1)) return std::nullopt;
  return base;
}

bool PciConfigSpace::msi_enabled() const { return Get16(kMsiCapability + 2) & 1; }

uint64_t PciConfigSpace::msi_address() const {
  return uint64_t{Get32(kMsiCapability + 4)} | (uint64_t{Get32(kMsiCapability + 8)} << 32);
}

uint16_t PciConfigSpace::msi_data() const { return Get16(kMsiCapability + 12); }

void PciConfigSpace::set_interrupt_status(bool asserted) {
  if (asserted) {
    bytes_[kPciStatus] |= kStatusInterrupt;
  } else {
    bytes_[kPciStatus] &= static_cast<uint8_t>(~kStatusInterrupt);
  }
}

}  // namespace gpuvm::dm
