// What cudart.cc offers the other files of libcudart.so.13 (cudart_graph.cc,
// cudart_not_supported.cc). Internal: libcudart.map exports only the API.
//
// Threading: every function may be called from any thread.
#ifndef GPUVM_RUNTIME_CUDART_CUDART_INTERNAL_H_
#define GPUVM_RUNTIME_CUDART_CUDART_INTERNAL_H_

#include "runtime/include/cuda.h"
#include "runtime/include/cuda_runtime_api.h"

namespace gpuvm::cudart {

// Records `e` as the calling thread's last error (when it is one) and returns it.
cudaError_t RecordLastError(cudaError_t e);
// The same for a driver result (the runtime's codes share the driver's numbering).
cudaError_t RecordDriverResult(CUresult r);
// Makes sure the calling thread has a current context (its own, or the primary one).
CUresult EnsureCurrentContext();
// The function of kernel `func` (its host stub) in the current context; errors recorded.
cudaError_t KernelFunction(const void* func, CUfunction* f);
// The host stub of a registered kernel whose function in some context is `f`; null if none.
const void* HostFunctionOf(CUfunction f);
// The driver's description of a copy (arrays too); a copy of nothing is all zeroes. Errors recorded.
cudaError_t DriverCopy(const cudaMemcpy3DParms* p, CUDA_MEMCPY3D* c);

// A runtime call that is the driver's `call` with the same arguments, in the current context (made
// sure of first, as for every runtime call); its result recorded as the last error.
template <typename... Params, typename... Args>
cudaError_t InContext(CUresult (*call)(Params...), Args... args) {
  const CUresult r = EnsureCurrentContext();
  if (r != CUDA_SUCCESS) return RecordDriverResult(r);
  return RecordDriverResult(call(args...));
}

}  // namespace gpuvm::cudart

#endif  // GPUVM_RUNTIME_CUDART_CUDART_INTERNAL_H_
