// The PTX -> GVISA translator: the JIT a driver runs at module load. It turns a parsed, checked PTX
// module (ptx/ast.h) into an isa::Module (gpu/isa/module.h): one kernel image per .entry, the
// parameter layout of each kernel, the module's global variables and its constant-bank image.
// docs/JIT.md describes the translation; docs/ISA.md the target.
//
// What it does: lays out memory (kernel parameters in constant bank 0, .const variables in bank 1,
// .global variable addresses in bank 2, .shared variables in the block's shared window, .local
// variables and call-sequence .param slots in the thread's local window), inlines every .func call
// (recursion is refused), lowers each PTX instruction to GVISA over virtual registers (expanding
// the ones the ISA has no single instruction for: carry chains, lop3, dp4a, sad, mul24, bfind,
// bar.red, ...), then allocates registers (ptx/translator/regalloc.h).
//
// Anything it cannot translate fails with a Status naming the line, the kernel and the instruction
// (kUnimplemented for valid PTX outside the subset, kResourceExhausted for limits).
//
// Threading: pure functions; call from any thread.
#ifndef GPUVM_PTX_TRANSLATOR_TRANSLATOR_H_
#define GPUVM_PTX_TRANSLATOR_TRANSLATOR_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "gpu/isa/module.h"
#include "ptx/ast.h"

namespace gpuvm::ptx {

struct TranslateOptions {
  // Upper bound on GVISA instructions per kernel after inlining (guards against call-tree blow-up).
  uint32_t max_instructions = 1u << 20;
};

struct KernelStats {
  std::string name;
  uint32_t instructions = 0;  // GVISA instructions
  uint32_t registers = 0;     // 32-bit rows
  uint32_t predicates = 0;
  uint32_t moves_removed = 0;  // copies the allocator coalesced away
};

// Translates every kernel (.entry) of `module`.
Result<isa::Module> Translate(const Module& module, const TranslateOptions& options = {},
                              std::vector<KernelStats>* stats = nullptr);

// ParseModule + Translate.
Result<isa::Module> CompilePtx(std::string_view text, const TranslateOptions& options = {},
                               std::vector<KernelStats>* stats = nullptr);

}  // namespace gpuvm::ptx

#endif  // GPUVM_PTX_TRANSLATOR_TRANSLATOR_H_
