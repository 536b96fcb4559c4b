// What a loaded CUDA module is made of, independent of where it came from: GVISA kernel images (the
// software GPU's machine code, docs/ISA.md) with their parameter layouts, and module-scope
// variables with their constant-bank slots. Produced by the PTX JIT (jit.h) from PTX text, or
// decoded from gpuvm's native module format ("GVMD", below), which plays the role a cubin plays for
// NVIDIA: code already compiled for the device, loadable without the JIT.
//
// Constant-bank contract between the JIT and the loader (docs/ISA.md "Constant banks"):
//   bank 0: the kernel's parameters, laid out as `params` says (PTX declaration order, natural or
//           declared alignment);
//   bank 1: module-scope .const variables, each at `bank_offset`;
//   bank 2: one 8-byte slot per module-scope .global variable at `bank_offset`, holding the
//           variable's GPU address (the loader allocates the variable and writes the slot).
//
// GVMD, version 1, little endian:
//   header  u32 magic 0x444d5647 ("GVMD"), u16 version 1, u16 header_bytes 16, u32 kernel_count,
//           u32 total_bytes (the whole module; cuModuleLoadData passes no length)
//   kernel  u32 name_bytes, name, u32 param_count, param_count x {u32 offset, u32 size},
//           u32 image_bytes, image (a GVISA kernel image)
// Variables are not part of version 1 (a GVMD module has none).
//
// Threading: plain values and pure functions.
#ifndef GPUVM_RUNTIME_CORE_MODULE_IMAGE_H_
#define GPUVM_RUNTIME_CORE_MODULE_IMAGE_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace gpuvm::runtime {

inline constexpr uint32_t kNativeModuleMagic = 0x444d5647;  // "GVMD"

struct KernelParam {
  uint32_t offset = 0;  // in constant bank 0
  uint32_t size = 0;
};

struct CompiledKernel {
  std::string name;
  std::vector<KernelParam> params;
  uint32_t param_bytes = 0;    // end of the last parameter
  std::vector<uint8_t> image;  // GVISA kernel image: 64-byte header + code
};

// An address to patch into a variable's initial bytes: the GPU address of another global variable.
struct VariableRelocation {
  uint64_t offset = 0;  // within the variable
  uint32_t size = 8;    // 4 or 8 bytes
  uint32_t target = 0;  // index into CompiledModule::variables
  int64_t addend = 0;
};

struct ModuleVariable {
  enum class Space : uint8_t { kGlobal, kConst };
  std::string name;
  Space space = Space::kGlobal;
  uint64_t size = 0;
  uint32_t align = 1;
  std::vector<uint8_t> init;  // a prefix of the initial bytes (the rest is zero)
  std::vector<VariableRelocation> relocations;
  uint32_t bank_offset = 0;  // kConst: offset in bank 1; kGlobal: offset of its slot in bank 2
};

struct CompiledModule {
  std::vector<CompiledKernel> kernels;
  std::vector<ModuleVariable> variables;
  uint32_t const_bank_bytes = 0;    // bank 1 size (0: no bank 1)
  uint32_t address_bank_bytes = 0;  // bank 2 size (0: no bank 2)
};

// GVMD (see above). Decode validates every length against the input and each image with the GVISA
// decoder; errors are kInvalidArgument.
std::vector<uint8_t> EncodeNativeModule(const CompiledModule& module);
Result<CompiledModule> DecodeNativeModule(std::span<const uint8_t> bytes);
// The total size a GVMD header (16 bytes) claims; kInvalidArgument when it is not one or the size
// is implausible (< 16 or > 256 MiB).
Result<uint64_t> NativeModuleSize(std::span<const uint8_t> header);

}  // namespace gpuvm::runtime

#endif  // GPUVM_RUNTIME_CORE_MODULE_IMAGE_H_
