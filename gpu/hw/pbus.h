// PBUS: the PRAMIN window (a movable 1 MiB view of VRAM inside BAR0) and the BAR1/BAR3 instance
// registers that put the two apertures behind their own GPU virtual address spaces. Sources:
// docs/FERMI-FACTS.md; envytools rnndb/bus/pbus.xml; nouveau nvkm/subdev/bar/gf100.c
// (writes 0x80000000 | inst >> 12 to 0x1704 / 0x1714). Facts only.
#ifndef GPUVM_GPU_HW_PBUS_H_
#define GPUVM_GPU_HW_PBUS_H_

#include <cstdint>

namespace gpuvm::gf100::pbus {

// PMEM base: VRAM address >> 16 of the first byte the PRAMIN window shows.
inline constexpr uint32_t kPraminBase = 0x001700;
inline constexpr uint32_t kPraminBaseShift = 16;
// (our choice) 24 bits = 1 TiB of VRAM, ample
inline constexpr uint32_t kPraminBaseMask = 0x00ffffff;

// The window itself in BAR0.
inline constexpr uint32_t kPraminWindow = 0x700000;
inline constexpr uint32_t kPraminWindowSize = 0x100000;

// BAR1 / BAR3 instance: bits 0-29 instance block address >> 12, bit 31 = the BAR translates through
// the VM whose page directory the instance block names (RAMIN 0x200, limit at 0x208, like a
// channel's). Bit 30 appears in older nouveau for BAR3 (0xc0000000); its meaning is unknown and we
// ignore it.
inline constexpr uint32_t kBar1Inst = 0x001704;
inline constexpr uint32_t kBar3Inst = 0x001714;
inline constexpr uint32_t kBarInstAddrMask = 0x3fffffff;
inline constexpr uint32_t kBarInstShift = 12;
inline constexpr uint32_t kBarInstVmMode = 1u << 31;

}  // namespace gpuvm::gf100::pbus

#endif  // GPUVM_GPU_HW_PBUS_H_
