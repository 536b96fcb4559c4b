// The GVISA module image: what the PTX JIT (ptx/translator) produces for one PTX module and what a
// loader (the CUDA runtime) consumes: the kernels (each a complete kernel image, isa.h), their
// parameter layouts, the module-scope global variables the loader must allocate, and the initial
// contents of constant bank 1. docs/ISA.md "Module image" is the prose version.
//
// The loader's duties: allocate every global (size, alignment), write its initializer and
// relocations (addresses of other globals), write the 8-byte addresses of all globals, in order,
// into a buffer bound as constant bank 2; upload const_image and bind it as bank 1; copy the whole
// image (or each kernel image) into GPU memory and launch with CP_START_ID pointing at a kernel
// image; bind the parameters as bank 0; set SHARED_SIZE = kernel shared_bytes (header) + dynamic
// bytes (dynamic shared memory starts at shared_bytes).
//
// Threading: pure functions over values.
#ifndef GPUVM_GPU_ISA_MODULE_H_
#define GPUVM_GPU_ISA_MODULE_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "gpu/isa/isa.h"

namespace gpuvm::isa {

inline constexpr uint32_t kModuleMagic = 0x444D5647;  // "GVMD" as little-endian bytes
inline constexpr uint32_t kModuleHeaderBytes = 64;

struct ModuleParam {
  uint32_t offset = 0;  // in constant bank 0
  uint32_t size = 0;
  uint32_t align = 0;
};

struct ModuleKernel {
  std::string name;            // the PTX .entry name (mangled as written)
  std::vector<uint8_t> image;  // a kernel image (header + code), isa.h
  std::vector<ModuleParam> params;
};

// An initializer element that holds the address of another global (index into Module::globals).
struct ModuleRelocation {
  uint32_t offset = 0;  // inside the variable's initial bytes
  uint32_t size = 8;    // 4 (low half) or 8
  uint32_t target = 0;
  int64_t addend = 0;
};

struct ModuleGlobal {
  std::string name;
  uint64_t size = 0;
  uint32_t align = 1;
  std::vector<uint8_t> init;  // a prefix of the variable; the rest is zero
  std::vector<ModuleRelocation> relocations;
};

struct Module {
  std::vector<ModuleKernel> kernels;
  std::vector<ModuleGlobal> globals;  // addresses go to constant bank 2 at 8 * index
  std::vector<uint8_t> const_image;   // constant bank 1 (module-scope .const variables)

  // The kernel with this name, or nullptr.
  const ModuleKernel* FindKernel(std::string_view name) const;
};

// Limits a decoder enforces on hostile images.
inline constexpr uint32_t kMaxModuleKernels = 4096;
inline constexpr uint32_t kMaxModuleGlobals = 65536;
inline constexpr uint32_t kMaxConstImageBytes = 64 * 1024;

Result<std::vector<uint8_t>> EncodeModule(const Module& module);
// Validates the container and every kernel image in it (DecodeKernel).
Result<Module> DecodeModule(std::span<const uint8_t> bytes);

}  // namespace gpuvm::isa

#endif  // GPUVM_GPU_ISA_MODULE_H_
