// Register allocation for the translator: liveness over the control-flow graph of a VCode, one live
// interval per vreg, linear-scan assignment of register rows (64-bit values take two adjacent rows)
// and predicates, move coalescing, and emission of the final isa::Kernel.
//
// Correctness under SIMT: each lane is a scalar thread following one path of the same CFG, and the
// engine writes only the lanes that execute an instruction, so an allocation that is correct for
// every scalar path is correct for the warp. Guarded writes to registers visible across
// instructions keep the old value in lanes whose guard is false, so they count as a use too.
//
// Threading: pure function.
#ifndef GPUVM_PTX_TRANSLATOR_REGALLOC_H_
#define GPUVM_PTX_TRANSLATOR_REGALLOC_H_

#include <string>

#include "base/status.h"
#include "gpu/isa/encoding.h"
#include "ptx/translator/vcode.h"

namespace gpuvm::ptx::translator {

struct AllocationStats {
  uint32_t rows = 0;  // register rows used
  uint32_t predicates = 0;
  uint32_t moves_removed = 0;  // coalesced copies
  uint32_t instructions = 0;   // emitted
};

// `header` provides everything but the code and the register/predicate counts. `where` prefixes
// errors
// ("in kernel 'k'"). Fails when more than 255 rows or 63 predicates are live at once.
Result<isa::Kernel> AllocateRegisters(const VCode& vcode, const isa::KernelHeader& header,
                                      const std::string& where, AllocationStats* stats = nullptr);

}  // namespace gpuvm::ptx::translator

#endif  // GPUVM_PTX_TRANSLATOR_REGALLOC_H_
