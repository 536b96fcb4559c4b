// PFB: how much VRAM the board has. A GF100 has several framebuffer partitions (FBPs, one per
// memory controller); each reports the MiB of VRAM behind it, some may be disabled (fused off), and
// the total is the sum over the enabled ones. Sources: nouveau nvkm/subdev/fb/ramgf100.c and
// gf100.c (gf100_ram_probe_fbp / gf100_fb_vidmem_probe_fbpa_amount: FBP count at 0x022438,
// disabled-FBP mask at 0x022554, MiB per FBP at 0x11020c + fbp * 0x1000); envytools rnndb (PTOP /
// PFFB). The GPUvm authors' Quadro 6000 device model answers the same three registers. Facts only.
#ifndef GPUVM_GPU_HW_PFB_H_
#define GPUVM_GPU_HW_PFB_H_

#include <cstdint>

namespace gpuvm::gf100::pfb {

inline constexpr uint32_t kFbpCount = 0x022438;         // number of FB partitions
inline constexpr uint32_t kFbpDisabledMask = 0x022554;  // bit n set = partition n disabled
// VRAM behind partition n, in MiB: kFbpAmount + n * kFbpStride.
inline constexpr uint32_t kFbpAmount = 0x11020c;
inline constexpr uint32_t kFbpStride = 0x1000;
inline constexpr uint32_t kMaxFbps = 16;  // (our choice) bound on a hostile count
inline constexpr int kAmountShift = 20;   // amounts are in MiB

}  // namespace gpuvm::gf100::pfb

#endif  // GPUVM_GPU_HW_PFB_H_
