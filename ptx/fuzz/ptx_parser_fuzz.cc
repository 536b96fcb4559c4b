// libFuzzer target: any bytes into the PTX parser. It must return a module or an error, never
// crash, leak, hang or trip the sanitizers. A parsed module must also print and parse again (the
// printer only emits what the parser accepts). Seeds: the kernel corpus's PTX
// (copied in at build time, gpuvm_fuzz KERNEL_CORPUS_SEEDS) and ptx/fuzz/ptx_parser_fuzz/.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ptx/parser.h"
#include "ptx/printer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gpuvm::ptx::ParseLimits limits;
  // Small limits keep each run fast; the code paths are the same as with the defaults.
  limits.max_registers_per_function = 1u << 14;
  limits.max_registers_per_module = 1u << 16;
  limits.max_instructions = 1u << 14;
  limits.max_initializer_bytes = 1u << 20;
  limits.max_variable_bytes = 1ull << 32;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto module = gpuvm::ptx::ParseModule(text, limits);
  if (!module.ok()) return 0;
  const std::string printed = gpuvm::ptx::PrintModule(*module);
  auto again = gpuvm::ptx::ParseModule(printed, gpuvm::ptx::ParseLimits());
  if (!again.ok()) __builtin_trap();  // the printer wrote something the parser rejects
  return 0;
}
