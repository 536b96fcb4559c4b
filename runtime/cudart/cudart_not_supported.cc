// libcudart.so.13: the runtime API functions gpuvm does not implement (runtime/abi/
// libcudart_not_supported.def), each exported under NVIDIA's name and version node so that an
// nvcc-built program importing it still starts, and answering cudaErrorNotSupported — recorded as
// the thread's last error like any failed call — with its name on stderr the first time.
//
// Threading: any thread; each function's "said it" flag is an atomic.
#include <atomic>

#include "runtime/abi/not_supported_stub.h"
#include "runtime/cudart/cudart_internal.h"
#include "runtime/include/cuda_runtime_api.h"

namespace {

int NotSupported(const char* name, std::atomic<bool>* said) {
  gpuvm::runtime::SayNotSupportedOnce(name, "cudaErrorNotSupported", said);
  return gpuvm::cudart::RecordLastError(cudaErrorNotSupported);
}

}  // namespace

#include "runtime/abi/libcudart_not_supported.def"
#undef GPUVM_NOT_SUPPORTED
