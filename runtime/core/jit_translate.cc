// The runtime's JIT step when the ptx/ translator is in the build.
#include "runtime/core/jit_translate.h"

#include "ptx/translator/translator.h"

namespace gpuvm::runtime {

Result<isa::Module> TranslateToIsa(const ptx::Module& module) { return ptx::Translate(module); }

bool TranslatorAvailable() { return true; }

}  // namespace gpuvm::runtime
