// The JIT a module load runs on PTX: parse (ptx/parser.h), translate every kernel to GVISA with the
// ptx/ translator (ptx/translator/translator.h, producing an isa::Module), and add what the runtime
// needs beyond the translator's output: the names and bank-1 offsets of module-scope .const
// variables (for cuModuleGetGlobal / cudaMemcpyToSymbol on __constant__ data), which we lay out
// ourselves the way docs/ISA.md says and check against the translator's const image and parameter
// layouts.
//
// A build without the translator (ptx/translator/ not in the tree yet) answers every PTX load with
// kUnavailable ("the PTX translator is not built"), which the driver API reports as
// CUDA_ERROR_JIT_COMPILER_NOT_FOUND.
//
// PTX is untrusted: the caller passes its own copy; every failure is a Status naming the line and
// kernel (the parser's and translator's messages).
//
// Threading: pure functions; call from any thread.
#ifndef GPUVM_RUNTIME_CORE_JIT_H_
#define GPUVM_RUNTIME_CORE_JIT_H_

#include <string_view>

#include "base/status.h"
#include "ptx/ast.h"
#include "runtime/core/module_image.h"

namespace gpuvm::runtime {

// Our layout of a parsed module: each kernel's parameters (PTX order, natural or declared
// alignment, in bank 0) and each module-scope .const variable (declaration order, its alignment, in
// bank 1). Kernels get no image; no .global variables (the translator's output carries those).
Result<CompiledModule> LayOutModule(const ptx::Module& module);

// Adds the .const variables of `layout` to `compiled` after checking the two agree: the same
// kernels with the same parameter layouts, a const image covering every variable and holding its
// initializer at our offset. kInternal when they disagree (a runtime/translator contract bug).
Status MergeLayout(const CompiledModule& layout, CompiledModule* compiled);

// Parse, translate, merge. Errors: the parser's (kInvalidArgument, kUnimplemented,
// kResourceExhausted), the translator's, and kUnavailable when the translator is not built
// (nothing else returns kUnavailable).
Result<CompiledModule> CompilePtx(std::string_view ptx_text);

// Whether this build can translate PTX.
bool HaveTranslator();

}  // namespace gpuvm::runtime

#endif  // GPUVM_RUNTIME_CORE_JIT_H_
