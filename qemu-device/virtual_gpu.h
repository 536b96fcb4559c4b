// What the guest sees of the virtual GPU on its PCI bus: identity and BAR layout. Identity and
// sizes are the facts of gpu/hw/pci.h (Quadro 6000, GF100GL); the layout choices beyond them are
// marked
// "(our choice)".
//
// Threading: constants and plain values.
#ifndef GPUVM_QEMU_DEVICE_VIRTUAL_GPU_H_
#define GPUVM_QEMU_DEVICE_VIRTUAL_GPU_H_

#include <array>
#include <cstdint>
#include <string_view>

#include "gpu/hw/pci.h"
#include "hypervisor/types.h"

namespace gpuvm::dm {

// The memory BARs, by PCI region index: BAR1 and BAR3 are 64-bit, so each takes two register slots
// (BAR1 at 0x14/0x18, BAR3 at 0x1c/0x20), which is why the GPU has no BAR2 or BAR4.
enum class BarIndex : uint8_t { kBar0 = 0, kBar1 = 1, kBar3 = 3 };
inline constexpr std::array<BarIndex, 3> kBars = {BarIndex::kBar0, BarIndex::kBar1,
                                                  BarIndex::kBar3};
// 0, 1, 2 for BAR0, BAR1, BAR3: an index into per-BAR arrays.
constexpr size_t BarSlot(BarIndex bar) {
  return bar == BarIndex::kBar0 ? 0 : bar == BarIndex::kBar1 ? 1 : 2;
}
std::string_view BarName(BarIndex bar);

struct VirtualGpuLayout {
  uint64_t bar0_size = gf100::pci::kBar0Size;         // registers, 32-bit, non-prefetchable
  uint64_t bar1_size = gf100::pci::kDefaultBar1Size;  // VRAM aperture, 64-bit, prefetchable
  uint64_t bar3_size =
      gf100::pci::kDefaultBar3Size;  // instance-memory aperture, 64-bit, prefetchable
  uint64_t size(BarIndex bar) const {
    return bar == BarIndex::kBar0 ? bar0_size : bar == BarIndex::kBar1 ? bar1_size : bar3_size;
  }
};

// (our choice) The function a VM gets, unless configured otherwise: slot 5 of bus 0, clear of the
// devices a Xen HVM guest already has (00:00.0 host bridge, 00:01.x PIIX3, 00:02.0 Xen platform).
inline constexpr hv::Sbdf kDefaultSbdf{0, 0, 5, 0};
// (our choice) Subsystem IDs: NVIDIA's vendor id and the device id itself (a board's real subsystem
// id is not among our facts).
inline constexpr uint16_t kSubsystemVendorId = gf100::pci::kVendorId;
inline constexpr uint16_t kSubsystemId = gf100::pci::kDeviceId;

}  // namespace gpuvm::dm

#endif  // GPUVM_QEMU_DEVICE_VIRTUAL_GPU_H_
