// Fuzz target: PTX text through the parser and the JIT. An input the parser accepts must either
// translate into a module whose kernels all decode (the translator never emits invalid code) or
// fail with a clear, non-internal error; nothing may crash.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gpu/isa/encoding.h"
#include "gpu/isa/module.h"
#include "ptx/parser.h"
#include "ptx/translator/translator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  gpuvm::Result<gpuvm::ptx::Module> module = gpuvm::ptx::ParseModule(text);
  if (!module.ok()) return 0;
  gpuvm::ptx::TranslateOptions options;
  options.max_instructions = 1u << 16;  // keeps every input fast
  gpuvm::Result<gpuvm::isa::Module> m = gpuvm::ptx::Translate(*module, options);
  if (!m.ok()) {
    if (m.status().code() == gpuvm::StatusCode::kInternal || m.status().message().empty()) abort();
    return 0;
  }
  for (const gpuvm::isa::ModuleKernel& k : m->kernels) {
    if (!gpuvm::isa::DecodeKernel(k.image).ok()) abort();
  }
  if (!gpuvm::isa::EncodeModule(*m).ok()) abort();
  return 0;
}
