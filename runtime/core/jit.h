// The JIT a module load runs on PTX: parse (ptx/parser.h), lay out kernel parameters and module
// variables (the constant-bank contract in module_image.h), and translate each kernel to GVISA with
// the ptx/ translator. The layout half is ours and always available; the translation half needs the
// translator library (ptx/translator/), and a build without it answers every PTX load with
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

// Parameter layout of every kernel and the bank layout of every module variable; kernels get no
// image. Errors: kUnimplemented for variables the loader cannot place (function-pointer
// initializers, parameters beyond 4 KiB), kInvalidArgument for the impossible.
Result<CompiledModule> LayOutModule(const ptx::Module& module);

// The whole JIT: parse, lay out, translate. Errors: the parser's (kInvalidArgument,
// kUnimplemented, kResourceExhausted), the translator's, and kUnavailable when the translator is
// not built (nothing else returns kUnavailable).
Result<CompiledModule> CompilePtx(std::string_view ptx_text);

// Whether this build can translate PTX.
bool HaveTranslator();

}  // namespace gpuvm::runtime

#endif  // GPUVM_RUNTIME_CORE_JIT_H_
