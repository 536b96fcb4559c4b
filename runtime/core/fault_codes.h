// The CUDA error a GPU fault becomes: the guest driver decodes a fault from the device's registers
// (guest::GpuFault: MMU fault, command error, compute trap with the MP's warp error and global
// error bits), and the runtime reports it as the CUresult a program sees at its next synchronizing
// call (and, as cudaError_t has the same values, the runtime API's code). The table of the software
// GPU's trap reasons is in docs/SOFTWARE-GPU.md "Compute traps"; docs/RUNTIME.md "Errors" lists the
// result.
//
// Threading: pure functions.
#ifndef GPUVM_RUNTIME_CORE_FAULT_CODES_H_
#define GPUVM_RUNTIME_CORE_FAULT_CODES_H_

#include <cstdint>

#include "guest-pv-driver/driver.h"
#include "runtime/include/cuda.h"

namespace gpuvm::runtime {

// The code for a compute trap with these MP trap registers (warp error 0x504648 = a
// gf100::pgraph::MpWarpError, global error 0x504650 = gf100::pgraph::kMpGlobal* bits). A warp error
// wins over global error bits; no reason at all is CUDA_ERROR_LAUNCH_FAILED.
CUresult CuResultForTrap(uint32_t warp_error, uint32_t global_error);

// The sticky code of a context that recorded `fault`: an MMU fault is CUDA_ERROR_ILLEGAL_ADDRESS,
// except one with gpuvm's out-of-VRAM reason (gf100::kFaultReasonGpuvmOutOfVram: full
// virtualization had no VRAM left for the page), which is CUDA_ERROR_OUT_OF_MEMORY.
CUresult CuResultForFault(const guest::GpuFault& fault);

}  // namespace gpuvm::runtime

#endif  // GPUVM_RUNTIME_CORE_FAULT_CODES_H_
