// GPU faults to CUDA error codes (fault_codes.h).
#include "runtime/core/fault_codes.h"

#include "gpu/hw/mmu_fault.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pgraph.h"

namespace gpuvm::runtime {

namespace pg = gf100::pgraph;

CUresult CuResultForTrap(uint32_t warp_error, uint32_t global_error) {
  switch (pg::MpWarpError(warp_error & pg::kMpWarpErrorMask)) {
    case pg::MpWarpError::kNone:
      break;
    case pg::MpWarpError::kStackError:
    case pg::MpWarpError::kApiStackError:
    case pg::MpWarpError::kRetEmptyStackError:
      return CUDA_ERROR_HARDWARE_STACK_ERROR;
    case pg::MpWarpError::kPcWrap:
    case pg::MpWarpError::kMisalignedPc:
    case pg::MpWarpError::kPcOverflow:
      return CUDA_ERROR_INVALID_PC;
    case pg::MpWarpError::kMisalignedImmcAddr:
    case pg::MpWarpError::kMisalignedAddr:
      return CUDA_ERROR_MISALIGNED_ADDRESS;
    case pg::MpWarpError::kMisalignedReg:
    case pg::MpWarpError::kIllegalInstrEncoding:
    case pg::MpWarpError::kIllegalSphInstrCombo:
    case pg::MpWarpError::kIllegalInstrParam2:
    case pg::MpWarpError::kOorReg:
      return CUDA_ERROR_ILLEGAL_INSTRUCTION;
    case pg::MpWarpError::kIllegalInstrParam:
      // The software GPU's invalid launch (dimensions, shared/local size, code address; our
      // choice of code there): CUDA reports a launch that fails on the device as a launch failure.
      return CUDA_ERROR_LAUNCH_FAILED;
    case pg::MpWarpError::kInvalidConstAddr:
    case pg::MpWarpError::kInvalidConstAddrLdc:
    case pg::MpWarpError::kOorAddr:
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    case pg::MpWarpError::kInvalidAddrSpace:
      return CUDA_ERROR_INVALID_ADDRESS_SPACE;
    case pg::MpWarpError::kGeometrySmError:
    case pg::MpWarpError::kDivergent:
    case pg::MpWarpError::kWarpExit:
      return CUDA_ERROR_LAUNCH_FAILED;
  }
  if (warp_error != 0) return CUDA_ERROR_LAUNCH_FAILED;  // a code nouveau does not name
  if (global_error & pg::kMpGlobalBptPause) return CUDA_ERROR_ASSERT;  // __assertfail (our choice)
  if (global_error & pg::kMpGlobalTimeout) return CUDA_ERROR_LAUNCH_TIMEOUT;
  if (global_error & pg::kMpGlobalPhysicalStackOverflow) return CUDA_ERROR_HARDWARE_STACK_ERROR;
  // BPT_INT (PTX `trap`: CUDA says "unspecified launch failure") and everything else.
  return CUDA_ERROR_LAUNCH_FAILED;
}

CUresult CuResultForFault(const guest::GpuFault& fault) {
  switch (fault.kind) {
    case guest::GpuFault::Kind::kMmuFault:
      // A page the hypervisor had no VRAM for (gpuvm's fv on an over-committed GPU): the memory
      // the program allocated could not be given after all.
      if (fault.reason == gf100::kFaultReasonGpuvmOutOfVram) return CUDA_ERROR_OUT_OF_MEMORY;
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    case guest::GpuFault::Kind::kComputeTrap:
      return CuResultForTrap(fault.warp_error, fault.global_error);
    case guest::GpuFault::Kind::kCommandError:
      // gpuvm's host stopped a kernel past the VM's run-time limit: what CUDA reports when a
      // watchdog (TDR) ends a kernel. Anything else, the operator's kill-work included: a launch
      // failure.
      if (fault.subfifo_intr & gf100::pfifo::kSubfifoIntrGpuvmTimeLimit) {
        return CUDA_ERROR_LAUNCH_TIMEOUT;
      }
      return CUDA_ERROR_LAUNCH_FAILED;
  }
  return CUDA_ERROR_LAUNCH_FAILED;
}

}  // namespace gpuvm::runtime
