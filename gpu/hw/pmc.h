// PMC: the master control unit of BAR0 (chip id, engine enables, the top-level interrupt tree).
// Sources: envytools rnndb/bus/pmc.xml (register offsets and bit positions for GF100);
// docs/FERMI-FACTS.md. Facts only; the software GPU's model lives in gpu/sim/pmc.h.
#ifndef GPUVM_GPU_HW_PMC_H_
#define GPUVM_GPU_HW_PMC_H_

#include <cstdint>

namespace gpuvm::gf100::pmc {

// PMC_BOOT_0 (pmc.xml "ID", NV10-): bits 0-7 stepping, bits 20-28 chipset, bits 29-31 foundry.
inline constexpr uint32_t kBoot0 = 0x000000;
inline constexpr uint32_t kChipsetGf100 = 0xc0;
inline constexpr uint32_t kBoot0ChipsetShift = 20;
inline constexpr uint32_t kStepping = 0xa1;  // (our choice) stepping A1
inline constexpr uint32_t kBoot0Value = (kChipsetGf100 << kBoot0ChipsetShift) | kStepping;

// Interrupt status as seen by the host (read-only summary of the units' own status registers; bit
// 31 is the software interrupt, which the driver sets and clears by writing it).
inline constexpr uint32_t kIntrHost = 0x000100;
// Bit 0 enables hardware interrupts, bit 1 the software interrupt (nouveau writes 1 / 0 to arm /
// disarm).
inline constexpr uint32_t kIntrEnHost = 0x000140;
inline constexpr uint32_t kIntrEnHardware = 1u << 0;
inline constexpr uint32_t kIntrEnSoftware = 1u << 1;
// Per-source mask (GT215+). (our choice) resets to all ones so a driver that never writes it still
// gets its interrupts.
inline constexpr uint32_t kIntrMaskHost = 0x000640;

// Bits of INTR_HOST / INTR_MASK_HOST (pmc.xml nv_pmc_intr, GF100 variants).
inline constexpr uint32_t kIntrPcopy0 = 1u << 5;
inline constexpr uint32_t kIntrPcopy1 = 1u << 6;
inline constexpr uint32_t kIntrPfifo = 1u << 8;
inline constexpr uint32_t kIntrPgraph = 1u << 12;
inline constexpr uint32_t kIntrPbus = 1u << 28;
inline constexpr uint32_t kIntrSoftware = 1u << 31;

// PMC_ENABLE: engine enables (pmc.xml nv_pmc_enable). Some summaries put PCOPY0/1 at bits 5/6;
// pmc.xml's GF100 variants put PIBUS at 5 and PCOPY0/1 at 6/7. We follow pmc.xml.
inline constexpr uint32_t kEnable = 0x000200;
inline constexpr uint32_t kEnablePcopy0 = 1u << 6;
inline constexpr uint32_t kEnablePcopy1 = 1u << 7;
inline constexpr uint32_t kEnablePfifo = 1u << 8;
inline constexpr uint32_t kEnablePgraph = 1u << 12;
// (our choice) the value after reset: everything we model enabled, as after the VBIOS init scripts
// ran.
inline constexpr uint32_t kEnableResetValue =
    kEnablePcopy0 | kEnablePcopy1 | kEnablePfifo | kEnablePgraph;

}  // namespace gpuvm::gf100::pmc

#endif  // GPUVM_GPU_HW_PMC_H_
