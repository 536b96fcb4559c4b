// The two PGRAPH registers the software GPU models: its interrupt status and enable. A compute job
// that fails other than through the MMU (invalid code, misaligned access, trap) raises TRAP here.
// Source: nouveau nvkm/engine/gr/gf100.c (gf100_gr_intr reads 0x400100 and acknowledges by writing
// the bits back; gf100_gr_init writes 0xffffffff to 0x40013c; bit 0x00200000 is handled as TRAP).
// Facts only.
#ifndef GPUVM_GPU_HW_PGRAPH_H_
#define GPUVM_GPU_HW_PGRAPH_H_

#include <cstdint>

namespace gpuvm::gf100::pgraph {

inline constexpr uint32_t kIntr = 0x400100;  // W1C
inline constexpr uint32_t kIntrEn = 0x40013c;
inline constexpr uint32_t kIntrTrap = 1u << 21;

}  // namespace gpuvm::gf100::pgraph

#endif  // GPUVM_GPU_HW_PGRAPH_H_
