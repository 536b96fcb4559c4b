// The one place that calls the ptx/ translator: fills CompiledKernel::image for every kernel of a
// laid-out module. Two implementations, picked by CMake: jit_translate.cc when the translator
// library is part of the build, jit_translate_none.cc (kUnavailable: no JIT compiler) when it is
// not.
//
// Threading: pure functions.
#ifndef GPUVM_RUNTIME_CORE_JIT_TRANSLATE_H_
#define GPUVM_RUNTIME_CORE_JIT_TRANSLATE_H_

#include "base/status.h"
#include "ptx/ast.h"
#include "runtime/core/module_image.h"

namespace gpuvm::runtime {

// `module` is parsed and checked; `out` comes from LayOutModule(module). Sets each kernel's image.
Status TranslateKernels(const ptx::Module& module, CompiledModule* out);
bool TranslatorAvailable();

}  // namespace gpuvm::runtime

#endif  // GPUVM_RUNTIME_CORE_JIT_TRANSLATE_H_
