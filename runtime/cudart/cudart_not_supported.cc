// libcudart.so.13: the runtime API functions gpuvm does not implement (runtime/abi/
// libcudart_not_supported.def), each exported under NVIDIA's name and version node so that an
// nvcc-built program importing it still starts, and answering cudaErrorNotSupported — recorded as
// the thread's last error like any failed call — with its name on stderr the first time.
//
// Threading: any thread; each function's "said it" flag is an atomic.
#include <atomic>
#include <cstdio>

#include "runtime/include/cuda_runtime_api.h"

namespace gpuvm::cudart {
cudaError_t RecordLastError(cudaError_t e);  // cudart.cc
}  // namespace gpuvm::cudart

namespace {

int NotSupported(const char* name, std::atomic<bool>* said) {
  if (!said->exchange(true, std::memory_order_relaxed)) {
    std::fprintf(stderr, "gpuvm: %s is not supported (cudaErrorNotSupported)\n", name);
  }
  return gpuvm::cudart::RecordLastError(cudaErrorNotSupported);
}

}  // namespace

#define GPUVM_NOT_SUPPORTED(name)                                \
  extern "C" __attribute__((visibility("default"))) int name() { \
    static std::atomic<bool> said{false};                        \
    return NotSupported(#name, &said);                           \
  }
#include "runtime/abi/libcudart_not_supported.def"
#undef GPUVM_NOT_SUPPORTED
