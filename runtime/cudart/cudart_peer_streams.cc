// libcudart.so.13, peer access with a single device's answers (runtime/driver_api_peer.cc has the
// model: no device is another's peer), stream priorities and queries, kernel names, and the
// occupancy question of how much dynamic shared memory a block may have: the runtime's forms of
// the driver's calls. Each call's error is recorded as the thread's last error.
//
// Threading: every entry point may be called from any thread.
#include "runtime/cudart/cudart_internal.h"
#include "runtime/include/cuda.h"
#include "runtime/include/cuda_runtime_api.h"

#define GPUVM_EXPORT extern "C" __attribute__((visibility("default")))

using gpuvm::cudart::InContext;
using gpuvm::cudart::RecordDriverResult;
using gpuvm::cudart::RecordLastError;

namespace {

// Whether `device` names a device (the driver initialized first); the driver's error otherwise.
cudaError_t CheckDevice(int device) {
  const CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return RecordDriverResult(r);
  CUdevice dev;
  if (cuDeviceGet(&dev, device) != CUDA_SUCCESS) return RecordLastError(cudaErrorInvalidDevice);
  return cudaSuccess;
}

// The current device (its primary context made current first).
cudaError_t CurrentDevice(int* device) {
  const CUresult r = gpuvm::cudart::EnsureCurrentContext();
  if (r != CUDA_SUCCESS) return RecordDriverResult(r);
  CUdevice dev;
  const CUresult got = cuCtxGetDevice(&dev);
  if (got != CUDA_SUCCESS) return RecordDriverResult(got);
  *device = dev;
  return cudaSuccess;
}

}  // namespace

// ---- peer access ----

GPUVM_EXPORT cudaError_t cudaDeviceCanAccessPeer(int* can_access, int device, int peer) {
  if (cudaError_t e = CheckDevice(device); e != cudaSuccess) return e;
  if (cudaError_t e = CheckDevice(peer); e != cudaSuccess) return e;
  return RecordDriverResult(cuDeviceCanAccessPeer(can_access, device, peer));
}

GPUVM_EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  if (cudaError_t e = CheckDevice(peer); e != cudaSuccess) return e;
  int current = 0;
  if (cudaError_t e = CurrentDevice(&current); e != cudaSuccess) return e;
  if (flags != 0) return RecordLastError(cudaErrorInvalidValue);
  int can = 0;
  const CUresult r = cuDeviceCanAccessPeer(&can, current, peer);
  if (r != CUDA_SUCCESS) return RecordDriverResult(r);
  // CUDA: cudaErrorInvalidDevice when the current device cannot reach the peer, which with one
  // device (not its own peer) is always.
  return RecordLastError(can ? cudaSuccess : cudaErrorInvalidDevice);
}

GPUVM_EXPORT cudaError_t cudaDeviceDisablePeerAccess(int peer) {
  if (cudaError_t e = CheckDevice(peer); e != cudaSuccess) return e;
  int current = 0;
  if (cudaError_t e = CurrentDevice(&current); e != cudaSuccess) return e;
  return RecordLastError(cudaErrorPeerAccessNotEnabled);  // never enabled
}

GPUVM_EXPORT cudaError_t cudaDeviceGetP2PAttribute(int* value, cudaDeviceP2PAttr attr, int src,
                                                   int dst) {
  const CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return RecordDriverResult(r);
  return RecordDriverResult(
      cuDeviceGetP2PAttribute(value, CUdevice_P2PAttribute(int(attr)), src, dst));
}

// Both devices must be valid; with one device this is a copy within its memory.
GPUVM_EXPORT cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device,
                                        size_t count) {
  if (cudaError_t e = CheckDevice(dst_device); e != cudaSuccess) return e;
  if (cudaError_t e = CheckDevice(src_device); e != cudaSuccess) return e;
  return InContext(cuMemcpyDtoD_v2, CUdeviceptr(dst), CUdeviceptr(src), count);
}

GPUVM_EXPORT cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src,
                                             int src_device, size_t count, cudaStream_t stream) {
  if (cudaError_t e = CheckDevice(dst_device); e != cudaSuccess) return e;
  if (cudaError_t e = CheckDevice(src_device); e != cudaSuccess) return e;
  return InContext(cuMemcpyDtoDAsync_v2, CUdeviceptr(dst), CUdeviceptr(src), count, stream);
}

namespace {
cudaError_t Memcpy3DPeer(const cudaMemcpy3DPeerParms* p, cudaStream_t stream, bool async) {
  if (p == nullptr) return RecordLastError(cudaErrorInvalidValue);
  if (cudaError_t e = CheckDevice(p->dstDevice); e != cudaSuccess) return e;
  if (cudaError_t e = CheckDevice(p->srcDevice); e != cudaSuccess) return e;
  cudaMemcpy3DParms plain{};
  plain.srcArray = p->srcArray;
  plain.srcPos = p->srcPos;
  plain.srcPtr = p->srcPtr;
  plain.dstArray = p->dstArray;
  plain.dstPos = p->dstPos;
  plain.dstPtr = p->dstPtr;
  plain.extent = p->extent;
  plain.kind = cudaMemcpyDeviceToDevice;
  return async ? cudaMemcpy3DAsync(&plain, stream) : cudaMemcpy3D(&plain);
}
}  // namespace

GPUVM_EXPORT cudaError_t cudaMemcpy3DPeer(const cudaMemcpy3DPeerParms* p) {
  return Memcpy3DPeer(p, nullptr, false);
}
GPUVM_EXPORT cudaError_t cudaMemcpy3DPeer_ptds(const cudaMemcpy3DPeerParms* p) {
  return Memcpy3DPeer(p, nullptr, false);
}
GPUVM_EXPORT cudaError_t cudaMemcpy3DPeerAsync(const cudaMemcpy3DPeerParms* p,
                                               cudaStream_t stream) {
  return Memcpy3DPeer(p, stream, true);
}
GPUVM_EXPORT cudaError_t cudaMemcpy3DPeerAsync_ptsz(const cudaMemcpy3DPeerParms* p,
                                                    cudaStream_t stream) {
  return Memcpy3DPeer(p, stream, true);
}

// ---- stream priorities and queries ----

GPUVM_EXPORT cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  return InContext(cuCtxGetStreamPriorityRange, least, greatest);
}

GPUVM_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags,
                                                      int priority) {
  if (stream == nullptr) return RecordLastError(cudaErrorInvalidValue);
  return InContext(cuStreamCreateWithPriority, stream, flags, priority);
}

GPUVM_EXPORT cudaError_t cudaStreamGetPriority(cudaStream_t stream, int* priority) {
  return InContext(cuStreamGetPriority, stream, priority);
}
GPUVM_EXPORT cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t stream, int* priority) {
  return cudaStreamGetPriority(stream, priority);
}

GPUVM_EXPORT cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int* flags) {
  return InContext(cuStreamGetFlags, stream, flags);  // the same bits as cudaStreamNonBlocking
}
GPUVM_EXPORT cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t stream, unsigned int* flags) {
  return cudaStreamGetFlags(stream, flags);
}

GPUVM_EXPORT cudaError_t cudaStreamGetId(cudaStream_t stream, unsigned long long* id) {
  return InContext(cuStreamGetId, stream, id);
}
GPUVM_EXPORT cudaError_t cudaStreamGetId_ptsz(cudaStream_t stream, unsigned long long* id) {
  return cudaStreamGetId(stream, id);
}

GPUVM_EXPORT cudaError_t cudaStreamGetDevice(cudaStream_t stream, int* device) {
  if (device == nullptr) return RecordLastError(cudaErrorInvalidValue);
  CUdevice dev;
  const cudaError_t e = InContext(cuStreamGetDevice, stream, &dev);
  if (e == cudaSuccess) *device = dev;
  return e;
}
GPUVM_EXPORT cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t stream, int* device) {
  return cudaStreamGetDevice(stream, device);
}

// ---- kernels ----

GPUVM_EXPORT cudaError_t cudaFuncGetName(const char** name, const void* func) {
  if (name == nullptr) return RecordLastError(cudaErrorInvalidValue);
  CUfunction f;
  if (cudaError_t e = gpuvm::cudart::KernelFunction(func, &f); e != cudaSuccess) return e;
  return RecordDriverResult(cuFuncGetName(name, f));
}

GPUVM_EXPORT cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t* dynamic_shared,
                                                                   const void* func, int num_blocks,
                                                                   int block_size) {
  if (dynamic_shared == nullptr) return RecordLastError(cudaErrorInvalidValue);
  CUfunction f;
  if (cudaError_t e = gpuvm::cudart::KernelFunction(func, &f); e != cudaSuccess) return e;
  return RecordDriverResult(
      cuOccupancyAvailableDynamicSMemPerBlock(dynamic_shared, f, num_blocks, block_size));
}
