// The CUDA code of every GPU fault the guest driver decodes, and of every trap reason the MP trap
// registers can hold (docs/SOFTWARE-GPU.md "Compute traps").
#include "runtime/core/fault_codes.h"

#include <gtest/gtest.h>

#include "gpu/hw/mmu_fault.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pgraph.h"

namespace gpuvm::runtime {
namespace {

namespace pg = gf100::pgraph;
using W = pg::MpWarpError;

CUresult Trap(W warp, uint32_t global = 0) { return CuResultForTrap(uint32_t(warp), global); }

TEST(RuntimeFaultCodes, TheSoftwareGpusTrapReasons) {
  // One line per row of the table in docs/SOFTWARE-GPU.md.
  EXPECT_EQ(Trap(W::kMisalignedAddr), CUDA_ERROR_MISALIGNED_ADDRESS);
  EXPECT_EQ(Trap(W::kIllegalInstrEncoding), CUDA_ERROR_ILLEGAL_INSTRUCTION);
  EXPECT_EQ(Trap(W::kOorAddr), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(Trap(W::kIllegalInstrParam), CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_EQ(Trap(W::kNone, pg::kMpGlobalBptInt), CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_EQ(Trap(W::kNone, pg::kMpGlobalBptPause), CUDA_ERROR_ASSERT);
  EXPECT_EQ(Trap(W::kNone, pg::kMpGlobalTimeout), CUDA_ERROR_LAUNCH_TIMEOUT);
}

TEST(RuntimeFaultCodes, OtherHardwareReasons) {
  EXPECT_EQ(Trap(W::kStackError), CUDA_ERROR_HARDWARE_STACK_ERROR);
  EXPECT_EQ(Trap(W::kRetEmptyStackError), CUDA_ERROR_HARDWARE_STACK_ERROR);
  EXPECT_EQ(Trap(W::kNone, pg::kMpGlobalPhysicalStackOverflow), CUDA_ERROR_HARDWARE_STACK_ERROR);
  EXPECT_EQ(Trap(W::kMisalignedPc), CUDA_ERROR_INVALID_PC);
  EXPECT_EQ(Trap(W::kPcOverflow), CUDA_ERROR_INVALID_PC);
  EXPECT_EQ(Trap(W::kMisalignedImmcAddr), CUDA_ERROR_MISALIGNED_ADDRESS);
  EXPECT_EQ(Trap(W::kOorReg), CUDA_ERROR_ILLEGAL_INSTRUCTION);
  EXPECT_EQ(Trap(W::kInvalidConstAddr), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(Trap(W::kInvalidAddrSpace), CUDA_ERROR_INVALID_ADDRESS_SPACE);
  EXPECT_EQ(Trap(W::kWarpExit), CUDA_ERROR_LAUNCH_FAILED);
  // A warp error wins over global bits; unknown codes and no reason are launch failures.
  EXPECT_EQ(Trap(W::kMisalignedAddr, pg::kMpGlobalBptPause), CUDA_ERROR_MISALIGNED_ADDRESS);
  EXPECT_EQ(CuResultForTrap(0x7777, 0), CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_EQ(CuResultForTrap(0, 0), CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_EQ(CuResultForTrap(0, pg::kMpGlobalL1Error), CUDA_ERROR_LAUNCH_FAILED);
}

TEST(RuntimeFaultCodes, FaultKinds) {
  guest::GpuFault f;
  f.kind = guest::GpuFault::Kind::kMmuFault;
  EXPECT_EQ(CuResultForFault(f), CUDA_ERROR_ILLEGAL_ADDRESS);
  // Full virtualization's "no VRAM left for this page" (an over-committed GPU): out of memory.
  f.reason = gf100::kFaultReasonGpuvmOutOfVram;
  EXPECT_EQ(CuResultForFault(f), CUDA_ERROR_OUT_OF_MEMORY);
  f.reason = uint32_t(gf100::FaultReason::kPageNotPresent);
  EXPECT_EQ(CuResultForFault(f), CUDA_ERROR_ILLEGAL_ADDRESS);
  f.kind = guest::GpuFault::Kind::kCommandError;
  EXPECT_EQ(CuResultForFault(f), CUDA_ERROR_LAUNCH_FAILED);
  // gpuvm's host failing a channel's work: the operator's kill-work, or the kernel time limit.
  f.subfifo_intr = gf100::pfifo::kSubfifoIntrGpuvmKilled;
  EXPECT_EQ(CuResultForFault(f), CUDA_ERROR_LAUNCH_FAILED);
  f.subfifo_intr = gf100::pfifo::kSubfifoIntrGpuvmTimeLimit;
  EXPECT_EQ(CuResultForFault(f), CUDA_ERROR_LAUNCH_TIMEOUT);
  f.subfifo_intr = 0;
  f.kind = guest::GpuFault::Kind::kComputeTrap;
  EXPECT_EQ(CuResultForFault(f), CUDA_ERROR_LAUNCH_FAILED);
  f.global_error = pg::kMpGlobalBptPause;
  EXPECT_EQ(CuResultForFault(f), CUDA_ERROR_ASSERT);
  f.global_error = 0;
  f.warp_error = uint32_t(W::kMisalignedAddr);
  EXPECT_EQ(CuResultForFault(f), CUDA_ERROR_MISALIGNED_ADDRESS);
}

}  // namespace
}  // namespace gpuvm::runtime
