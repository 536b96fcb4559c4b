// Built when ptx/translator/ is not part of the tree yet: PTX cannot be run, and says so.
#include "runtime/core/jit_translate.h"

namespace gpuvm::runtime {

Result<isa::Module> TranslateToIsa(const ptx::Module&) {
  return Status::Unavailable("the PTX translator (ptx/translator) is not built into this runtime");
}

bool TranslatorAvailable() { return false; }

}  // namespace gpuvm::runtime
