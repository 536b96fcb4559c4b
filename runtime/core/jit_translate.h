// The one place that calls the ptx/ translator. Two implementations, picked by CMake:
// jit_translate.cc when the translator library is part of the build, jit_translate_none.cc
// (kUnavailable: no JIT compiler) when it is not.
//
// Threading: pure functions.
#ifndef GPUVM_RUNTIME_CORE_JIT_TRANSLATE_H_
#define GPUVM_RUNTIME_CORE_JIT_TRANSLATE_H_

#include "base/status.h"
#include "gpu/isa/module.h"
#include "ptx/ast.h"

namespace gpuvm::runtime {

Result<isa::Module> TranslateToIsa(const ptx::Module& module);
bool TranslatorAvailable();

}  // namespace gpuvm::runtime

#endif  // GPUVM_RUNTIME_CORE_JIT_TRANSLATE_H_
