// libcudart.so.13, stream-ordered allocation and memory pools: the runtime's forms of the driver's
// (runtime/driver_api_pool.cc has the model). The runtime's structures and attribute numbers are
// the driver's, field for field, so each call passes them through; each call's error is recorded
// as the thread's last error.
//
// Threading: every entry point may be called from any thread.
#include "runtime/cudart/cudart_internal.h"
#include "runtime/include/cuda.h"
#include "runtime/include/cuda_runtime_api.h"

#define GPUVM_EXPORT extern "C" __attribute__((visibility("default")))

static_assert(sizeof(cudaMemPoolProps) == sizeof(CUmemPoolProps));
static_assert(sizeof(cudaMemAccessDesc) == sizeof(CUmemAccessDesc));
static_assert(sizeof(cudaMemLocation) == sizeof(CUmemLocation));

using gpuvm::cudart::InContext;

GPUVM_EXPORT cudaError_t cudaMallocAsync(void** ptr, size_t size, cudaStream_t stream) {
  if (ptr == nullptr) return gpuvm::cudart::RecordLastError(cudaErrorInvalidValue);
  return InContext(cuMemAllocAsync, reinterpret_cast<CUdeviceptr*>(ptr), size, stream);
}
GPUVM_EXPORT cudaError_t cudaMallocAsync_ptsz(void** ptr, size_t size, cudaStream_t stream) {
  return cudaMallocAsync(ptr, size, stream);
}
GPUVM_EXPORT cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t pool,
                                                 cudaStream_t stream) {
  if (ptr == nullptr) return gpuvm::cudart::RecordLastError(cudaErrorInvalidValue);
  return InContext(cuMemAllocFromPoolAsync, reinterpret_cast<CUdeviceptr*>(ptr), size, pool,
                   stream);
}
GPUVM_EXPORT cudaError_t cudaMallocFromPoolAsync_ptsz(void** ptr, size_t size, cudaMemPool_t pool,
                                                      cudaStream_t stream) {
  return cudaMallocFromPoolAsync(ptr, size, pool, stream);
}
GPUVM_EXPORT cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  return InContext(cuMemFreeAsync, reinterpret_cast<CUdeviceptr>(ptr), stream);
}
GPUVM_EXPORT cudaError_t cudaFreeAsync_ptsz(void* ptr, cudaStream_t stream) {
  return cudaFreeAsync(ptr, stream);
}

GPUVM_EXPORT cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  return InContext(cuDeviceGetDefaultMemPool, pool, CUdevice(device));
}
GPUVM_EXPORT cudaError_t cudaDeviceGetMemPool(cudaMemPool_t* pool, int device) {
  return InContext(cuDeviceGetMemPool, pool, CUdevice(device));
}
GPUVM_EXPORT cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t pool) {
  return InContext(cuDeviceSetMemPool, CUdevice(device), pool);
}
GPUVM_EXPORT cudaError_t cudaMemPoolCreate(cudaMemPool_t* pool, const cudaMemPoolProps* props) {
  return InContext(cuMemPoolCreate, pool, reinterpret_cast<const CUmemPoolProps*>(props));
}
GPUVM_EXPORT cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  return InContext(cuMemPoolDestroy, pool);
}
GPUVM_EXPORT cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep) {
  return InContext(cuMemPoolTrimTo, pool, keep);
}
GPUVM_EXPORT cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr,
                                                 void* value) {
  return InContext(cuMemPoolSetAttribute, pool, CUmemPool_attribute(attr), value);
}
GPUVM_EXPORT cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr,
                                                 void* value) {
  return InContext(cuMemPoolGetAttribute, pool, CUmemPool_attribute(attr), value);
}
GPUVM_EXPORT cudaError_t cudaMemPoolSetAccess(cudaMemPool_t pool, const cudaMemAccessDesc* map,
                                              size_t count) {
  return InContext(cuMemPoolSetAccess, pool, reinterpret_cast<const CUmemAccessDesc*>(map), count);
}
GPUVM_EXPORT cudaError_t cudaMemPoolGetAccess(cudaMemAccessFlags* flags, cudaMemPool_t pool,
                                              cudaMemLocation* location) {
  return InContext(cuMemPoolGetAccess, reinterpret_cast<CUmemAccess_flags*>(flags), pool,
                   reinterpret_cast<CUmemLocation*>(location));
}
