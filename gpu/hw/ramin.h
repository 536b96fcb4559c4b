// Channel instance blocks (RAMIN), their first 0x200 bytes (RAMFC: the saved PFIFO state of a
// channel), and the per-channel USER page (USERD) through which the driver and PFIFO exchange
// GET/PUT pointers. Sources: docs/FERMI-FACTS.md; nouveau
// nvkm/engine/fifo/gpfifogf100.c (RAMFC init: USERD address at 0x08/0x0c, 0xface at 0x10, IB base
// at 0x48/0x4c with log2(entries) << 16 in 0x4c) and nvkm/subdev/mmu/vmmgf100.c (gf100_vmm_join:
// page directory at 0x200, limit - 1 at 0x208); envytools rnndb/fifo/gf100_pfifo.xml (PSUBFIFO SIG:
// "only low 16 bits have to match"). Facts only.
#ifndef GPUVM_GPU_HW_RAMIN_H_
#define GPUVM_GPU_HW_RAMIN_H_

#include <cstdint>

namespace gpuvm::gf100::ramin {

inline constexpr uint64_t kAlign = 0x1000;  // instance blocks are 4 KiB aligned
inline constexpr uint64_t kSize = 0x1000;   // (our choice) what the device may read of one block

// RAMFC.
inline constexpr uint32_t kUserdLo = 0x008;  // USERD physical address (VRAM), low / high word
inline constexpr uint32_t kUserdHi = 0x00c;
inline constexpr uint32_t kSignature = 0x010;
inline constexpr uint32_t kSignatureValue = 0xface;
inline constexpr uint32_t kSignatureMask = 0xffff;
inline constexpr uint32_t kIbBaseLo = 0x048;
// bits 0-7 address bits 32-39, bits 16-20 log2(entries)
inline constexpr uint32_t kIbBaseHi = 0x04c;
inline constexpr uint32_t kIbBaseHiAddrMask = 0xff;
inline constexpr uint32_t kIbOrderShift = 16;
inline constexpr uint32_t kIbOrderMask = 0x1f;

// VM binding (also used by the BAR1/BAR3 instance blocks).
// 0x200: bits 0-1 page-directory target (vm::Target), bit 2 VOL, bits 12-31 address bits 12-31;
// 0x204: address bits 32-39.
inline constexpr uint32_t kPageDirLo = 0x200;
inline constexpr uint32_t kPageDirHi = 0x204;
inline constexpr uint32_t kPageDirTargetMask = 0x3;
inline constexpr uint32_t kPageDirVol = 1u << 2;
inline constexpr uint32_t kPageDirAddrLoMask = 0xfffff000;
inline constexpr uint32_t kPageDirAddrHiMask = 0xff;
// 0x208/0x20c: the highest valid virtual address of the space (nouveau writes limit - 1).
inline constexpr uint32_t kVmLimitLo = 0x208;
inline constexpr uint32_t kVmLimitHi = 0x20c;

// Engine context pointers (not interpreted by the software GPU: its engines keep their state
// themselves).
inline constexpr uint32_t kGrContext = 0x210;
inline constexpr uint32_t kCe0Context = 0x230;
inline constexpr uint32_t kCe1Context = 0x240;

}  // namespace gpuvm::gf100::ramin

namespace gpuvm::gf100::userd {

inline constexpr uint32_t kSize = 0x1000;
inline constexpr uint32_t kDmaPut = 0x40;
inline constexpr uint32_t kDmaGet = 0x44;
inline constexpr uint32_t kRef = 0x48;
inline constexpr uint32_t kDmaMget = 0x58;
inline constexpr uint32_t kIbGet = 0x88;
inline constexpr uint32_t kIbPut = 0x8c;

}  // namespace gpuvm::gf100::userd

#endif  // GPUVM_GPU_HW_RAMIN_H_
