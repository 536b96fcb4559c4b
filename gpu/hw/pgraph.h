// The PGRAPH registers the software GPU models: its interrupt status and enable, the channel whose
// context PGRAPH holds, and the trap status chain a driver walks to learn why a compute job
// failed. A compute job that fails other than through the MMU (invalid code, misaligned access,
// trap instruction, ...) raises TRAP here.
//
// Sources: nouveau nvkm/engine/gr/gf100.c — gf100_gr_intr reads 0x400100 and acknowledges by
// writing the bits back, finds the channel from 0x409b00 & 0x0fffffff (instance >> 12); bit
// 0x00200000 is TRAP, handled by gf100_gr_trap_intr: 0x400108 TRAP status (bit 24 = a GPC trapped,
// acknowledged by writing the bit back), 0x400118 the GPC mask (W1C), GPC_UNIT(gpc, 0x2c90) the
// GPC's status (bit 16 + tpc = that TPC trapped, W1C), TPC_UNIT(gpc, tpc, 0x508) the TPC's status
// (bit 1 = MP), and gf100_gr_trap_mp: TPC_UNIT(gpc, tpc, 0x648) the warp error (an enum in bits
// 0-15, cleared by writing 0) and TPC_UNIT(gpc, tpc, 0x650) the global error (bits, W1C), with the
// names of gf100_mp_warp_error / gf100_mp_global_error. GPC_UNIT(g, r) = 0x500000 + 0x8000 * g + r,
// TPC_UNIT(g, t, r) = 0x504000 + 0x8000 * g + 0x800 * t + r (nouveau gf100.h). gf100_gr_init writes
// 0xffffffff to 0x40013c. Facts only.
#ifndef GPUVM_GPU_HW_PGRAPH_H_
#define GPUVM_GPU_HW_PGRAPH_H_

#include <cstdint>

namespace gpuvm::gf100::pgraph {

inline constexpr uint32_t kIntr = 0x400100;  // W1C
inline constexpr uint32_t kIntrEn = 0x40013c;
inline constexpr uint32_t kIntrTrap = 1u << 21;

// TRAP status: which unit trapped. Bit 24 = GPC (details in kTrapGpcMask and the GPC/TPC chain).
inline constexpr uint32_t kTrap = 0x400108;  // W1C
inline constexpr uint32_t kTrapGpc = 1u << 24;
inline constexpr uint32_t kTrapGpcMask = 0x400118;  // bit g = GPC g trapped; W1C

// FECS current context: the instance block (>> 12, bits 0-27) of the channel whose context PGRAPH
// holds. nouveau reads it to blame an interrupt on a channel.
inline constexpr uint32_t kCurrentContext = 0x409b00;
inline constexpr uint32_t kCurrentContextInstMask = 0x0fffffff;

// GPC 0 / TPC 0 (the software GPU reports every trap there: its workers are not GPCs).
inline constexpr uint32_t kGpc0TrapStatus = 0x500000 + 0x2c90;  // bit 16 + tpc: TPC trapped; W1C
inline constexpr uint32_t kGpcTrapTpc0 = 1u << 16;
inline constexpr uint32_t kTpc0TrapStatus = 0x504000 + 0x508;  // bit 1: the MP trapped
inline constexpr uint32_t kTpcTrapMp = 1u << 1;
inline constexpr uint32_t kTpc0MpWarpError = 0x504000 + 0x648;  // enum MpWarpError; write 0
inline constexpr uint32_t kMpWarpErrorMask = 0xffff;
inline constexpr uint32_t kTpc0MpGlobalError = 0x504000 + 0x650;  // bits MpGlobalError; W1C

// gf100_mp_warp_error (nouveau): why a warp stopped.
enum class MpWarpError : uint32_t {
  kNone = 0x00,
  kStackError = 0x01,
  kApiStackError = 0x02,
  kRetEmptyStackError = 0x03,
  kPcWrap = 0x04,
  kMisalignedPc = 0x05,
  kPcOverflow = 0x06,
  kMisalignedImmcAddr = 0x07,
  kMisalignedReg = 0x08,
  kIllegalInstrEncoding = 0x09,
  kIllegalSphInstrCombo = 0x0a,
  kIllegalInstrParam = 0x0b,
  kInvalidConstAddr = 0x0c,
  kOorReg = 0x0d,
  kOorAddr = 0x0e,
  kMisalignedAddr = 0x0f,
  kInvalidAddrSpace = 0x10,
  kIllegalInstrParam2 = 0x11,
  kInvalidConstAddrLdc = 0x12,
  kGeometrySmError = 0x13,
  kDivergent = 0x14,
  kWarpExit = 0x15,
};

// gf100_mp_global_error (nouveau): bits of the MP's global error register.
inline constexpr uint32_t kMpGlobalSmToSmFault = 1u << 0;
inline constexpr uint32_t kMpGlobalL1Error = 1u << 1;
inline constexpr uint32_t kMpGlobalMultipleWarpErrors = 1u << 2;
inline constexpr uint32_t kMpGlobalPhysicalStackOverflow = 1u << 3;
inline constexpr uint32_t kMpGlobalBptInt = 1u << 4;
inline constexpr uint32_t kMpGlobalBptPause = 1u << 5;
inline constexpr uint32_t kMpGlobalSingleStepComplete = 1u << 6;
inline constexpr uint32_t kMpGlobalTimeout = 1u << 31;

}  // namespace gpuvm::gf100::pgraph

#endif  // GPUVM_GPU_HW_PGRAPH_H_
