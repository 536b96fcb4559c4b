// libcuda.so.1: the driver API functions gpuvm does not implement (runtime/abi/
// libcuda_not_supported.def), each exported under NVIDIA's name so that a program importing it
// still starts, and answering CUDA_ERROR_NOT_SUPPORTED, with its name on stderr the first time.
//
// This file does not include cuda.h on purpose: NVIDIA's list holds the old unsuffixed ABI names
// too (cuMemAlloc, cuCtxCreate, ...), which cuda.h renames to the suffixed functions we implement.
//
// Threading: any thread; each function's "said it" flag is an atomic.
#include <atomic>

#include "runtime/abi/not_supported_stub.h"

namespace {

constexpr int kNotSupported = 801;  // CUDA_ERROR_NOT_SUPPORTED

int NotSupported(const char* name, std::atomic<bool>* said) {
  gpuvm::runtime::SayNotSupportedOnce(name, "CUDA_ERROR_NOT_SUPPORTED", said);
  return kNotSupported;
}

}  // namespace

#include "runtime/abi/libcuda_not_supported.def"
#undef GPUVM_NOT_SUPPORTED
