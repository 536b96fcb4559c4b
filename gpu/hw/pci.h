// PCI identity of the GF100 board the software GPU models: an NVIDIA Quadro 6000 (GF100GL).
// Sources: docs/FERMI-FACTS.md (10de:06d8, class 0x0300); envytools
// docs/hw/bus/bars.rst (BAR0 is a 16 MiB non-prefetchable 32-bit BAR; BAR1 and BAR3 are 64-bit
// prefetchable apertures, so they occupy PCI BAR slots 1-2 and 3-4, which is why they are called
// BAR1 and BAR3). Facts only.
#ifndef GPUVM_GPU_HW_PCI_H_
#define GPUVM_GPU_HW_PCI_H_

#include <cstdint>

namespace gpuvm::gf100::pci {

inline constexpr uint16_t kVendorId = 0x10de;  // NVIDIA
inline constexpr uint16_t kDeviceId = 0x06d8;  // Quadro 6000 (GF100GL)
// Base class 0x03 (display), subclass 0x00 (VGA-compatible), programming interface 0x00.
inline constexpr uint32_t kClassCode = 0x030000;
inline constexpr uint8_t kRevision = 0xa1;  // (our choice) matches the stepping in PMC_BOOT_0

// BAR0: the MMIO register space. envytools: "a 16MB area"; every register we model lies below
// 0x800000.
inline constexpr uint64_t kBar0Size = 16ull << 20;
// BAR1 (VRAM aperture through the BAR1 VM) and BAR3 (instance-memory aperture through the BAR3 VM).
// envytools only says "0x1000000 bytes or more depending on card type". (our choice) 128 MiB and 64
// MiB, the sizes lspci commonly reports for GF100 boards; the software GPU makes both configurable.
inline constexpr uint64_t kDefaultBar1Size = 128ull << 20;
inline constexpr uint64_t kDefaultBar3Size = 64ull << 20;

}  // namespace gpuvm::gf100::pci

#endif  // GPUVM_GPU_HW_PCI_H_
