// What a loaded CUDA module is made of, independent of where it came from: GVISA kernel images (the
// software GPU's machine code, docs/ISA.md) with their parameter layouts, and named module-scope
// variables with their constant-bank slots. Built from the isa::Module the PTX JIT produces
// (gpu/isa/module.h; jit.h), or from an isa::Module image a program hands to cuModuleLoadData
// directly
// ("GVMD": code already compiled for the device, the role a cubin plays for NVIDIA).
//
// Constant banks (docs/ISA.md "Constant banks", gpu/isa/module.h):
//   bank 0: the kernel's parameters, laid out as `params` says;
//   bank 1: module-scope .const variables (the module's const image), each at `bank_offset`;
//   bank 2: one 8-byte slot per module-scope .global variable at `bank_offset` (8 x its index),
//           holding the variable's GPU address (the loader allocates the variable and writes it).
//
// Threading: plain values and pure functions.
#ifndef GPUVM_RUNTIME_CORE_MODULE_IMAGE_H_
#define GPUVM_RUNTIME_CORE_MODULE_IMAGE_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "gpu/isa/module.h"

namespace gpuvm::runtime {

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
  // A `__managed__` variable (PTX .attribute(.managed)): placed in managed memory, at one address
  // for the host and the GPU (the loader; cudart hands the address to nvcc's host code).
  bool managed = false;
};

struct CompiledModule {
  std::vector<CompiledKernel> kernels;
  std::vector<ModuleVariable> variables;
  std::vector<uint8_t> const_image;  // bank 1 contents (empty: no bank 1)
  uint32_t address_bank_bytes = 0;   // bank 2 size (0: no bank 2)
};

// A CompiledModule from an isa::Module: kernels, globals (bank 2 slots) and the const image. The
// isa::Module names no .const variables; a PTX load adds them (jit.cc). Errors: kInvalidArgument
// for inconsistent input (duplicate kernel names, relocations out of range).
Result<CompiledModule> FromIsaModule(const isa::Module& module);

// The total size an isa::Module image claims in its header (the first 16 bytes), so a loader given
// only a pointer knows how much to read. kInvalidArgument when it is not one or the size is
// implausible (smaller than the header or above 256 MiB).
Result<uint64_t> NativeModuleSize(std::span<const uint8_t> header);

}  // namespace gpuvm::runtime

#endif  // GPUVM_RUNTIME_CORE_MODULE_IMAGE_H_
