// A small assembler for the GVISA text form (docs/ISA.md "Assembly syntax"), the inverse of
// DisassembleKernel. Tests write kernels in it; it is not on the JIT path (the translator builds
// Instructions directly).
//
//   .regs 8            // optional: otherwise the smallest count the code needs
//   .shared 1024
//   start:
//     s2r.u32 r0, %tid.x
//     setp.lt.u32 p0, r0, 16
//   @p0 bra start
//     exit
//
// Threading: pure functions; safe from any thread.
#ifndef GPUVM_GPU_ISA_ASSEMBLER_H_
#define GPUVM_GPU_ISA_ASSEMBLER_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "gpu/isa/encoding.h"

namespace gpuvm::isa {

// Parses and validates; errors name the line.
Result<Kernel> AssembleKernel(std::string_view text);

// AssembleKernel + EncodeKernel.
Result<std::vector<uint8_t>> Assemble(std::string_view text);

}  // namespace gpuvm::isa

#endif  // GPUVM_GPU_ISA_ASSEMBLER_H_
