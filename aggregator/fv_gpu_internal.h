// What the parts of FullVirtGpu (fv_gpu.cc, fv_gpu_registers.cc, fv_gpu_channels.cc,
// fv_gpu_bars.cc) and the FvHost they run on (fv_host.cc) share: the register namespaces they speak
// in and the per-VM limits. Internal to those files (the namespace aliases and names below are not
// for anyone else).
//
// Threading: constants only.
#ifndef GPUVM_AGGREGATOR_FV_GPU_INTERNAL_H_
#define GPUVM_AGGREGATOR_FV_GPU_INTERNAL_H_

#include <cstddef>
#include <cstdint>

#include "base/hex.h"
#include "gpu/device.h"
#include "gpu/hw/pbus.h"
#include "gpu/hw/pfb.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pgraph.h"
#include "gpu/hw/pmc.h"
#include "gpu/hw/ramin.h"
#include "gpu/hw/vm.h"

namespace gpuvm::aggregator {

namespace pf = gf100::pfifo;
namespace pmc = gf100::pmc;
namespace pbus = gf100::pbus;
namespace pfb = gf100::pfb;
namespace pgraph = gf100::pgraph;
namespace ramin = gf100::ramin;
namespace vm = gf100::vm;

inline constexpr uint64_t kPage = 0x1000;
inline constexpr size_t kMaxSpaces = 64;  // shadowed directories per VM (bounds reserved VRAM)
inline constexpr size_t kMaxBarCache = 1u << 16;  // cached aperture translations per VM
inline constexpr uint32_t kShadowStateMask = pf::kStateRunnable | pf::kStateEngineMask;
inline constexpr uint32_t kReflectedStateMask =
    pf::kStateLoaded | pf::kStatePending | pf::kStateAcquirePending;

// Counter slot of a BAR: 0, 1, 2 for BAR0, BAR1, BAR3.
inline size_t CounterSlot(gpu::Bar bar) {
  return bar == gpu::Bar::k0 ? 0 : bar == gpu::Bar::k1 ? 1 : 2;
}

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_FV_GPU_INTERNAL_H_
