// Text form of GVISA (docs/ISA.md "Assembly syntax"), for debugging, tests and fault reports.
//
// DisassembleKernel prints directives for the header and one instruction per line with `L<n>:`
// labels at branch targets; its output goes back through Assemble (assembler.h) to the identical
// bytes.
//
// Threading: pure functions; safe from any thread.
#ifndef GPUVM_GPU_ISA_DISASSEMBLER_H_
#define GPUVM_GPU_ISA_DISASSEMBLER_H_

#include <string>

#include "gpu/isa/encoding.h"

namespace gpuvm::isa {

// One instruction; a branch prints its target as `L<target>`.
std::string Disassemble(const Instruction& inst);

// A whole kernel: header directives, labels, instructions.
std::string DisassembleKernel(const Kernel& kernel);

}  // namespace gpuvm::isa

#endif  // GPUVM_GPU_ISA_DISASSEMBLER_H_
