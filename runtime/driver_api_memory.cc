// libcuda.so.1, memory: device and pinned host allocations, host registration, pointer attributes,
// copies and memsets, synchronous and on streams (driver_api.h has the shared checks).
//
// Threading: every entry point may be called from any thread (see runtime/core/objects.h).
#include <cstdint>
#include <limits>

#include "runtime/driver_api.h"

namespace {

// Runs `op(ctx, stream)` after the checks every copy and memset makes, in CUDA's order: a current,
// healthy context and a live stream; nothing to do for 0 bytes; `valid(ctx)` (the arguments, else
// CUDA_ERROR_INVALID_VALUE); the stream's earlier work ordered before this.
template <typename Valid, typename Op>
CUresult OnStream(CUstream handle, size_t n, Valid valid, Op op) {
  CUctx_st* ctx;
  CUstream_st* s;
  CUresult r = CurrentStream(handle, &ctx, &s);
  if (r != CUDA_SUCCESS) return r;
  if (n == 0) return CUDA_SUCCESS;
  if (!valid(ctx)) return CUDA_ERROR_INVALID_VALUE;
  if ((r = Ordered(s)) != CUDA_SUCCESS) return r;
  return op(ctx, s);
}

// The end of an operation queued on the channel: its error, or for a synchronous call the wait.
template <typename Fence>
CUresult Queued(CUctx_st* ctx, CUstream_st* s, const Fence& fence, bool async) {
  if (!fence.ok()) return ContextError(ctx, fence.status());
  if (async) return CUDA_SUCCESS;
  return ContextError(ctx, s->channel->Wait(*fence));
}

CUresult CopyHtoD(CUdeviceptr dst, const void* src, size_t n, CUstream handle, bool async) {
  return OnStream(
      handle, n, [&](CUctx_st* ctx) { return src != nullptr && InRange(ctx, dst, n); },
      [&](CUctx_st* ctx, CUstream_st* s) {
        uint64_t src_va;
        if (async && InPinnedHost(ctx, src, n, &src_va)) {
          return Queued(ctx, s, s->channel->CopyAsync(dst, src_va, n), true);
        }
        // Pageable memory: the copy is staged and complete on return (as CUDA does for pageable
        // sources). The driver serializes staged copies of one channel itself.
        return ContextError(ctx, s->channel->CopyHostToDevice(dst, src, n));
      });
}

CUresult CopyDtoH(void* dst, CUdeviceptr src, size_t n, CUstream handle, bool async) {
  return OnStream(
      handle, n, [&](CUctx_st* ctx) { return dst != nullptr && InRange(ctx, src, n); },
      [&](CUctx_st* ctx, CUstream_st* s) {
        uint64_t dst_va;
        if (async && InPinnedHost(ctx, dst, n, &dst_va)) {
          return Queued(ctx, s, s->channel->CopyAsync(dst_va, src, n), true);
        }
        return ContextError(ctx, s->channel->CopyDeviceToHost(dst, src, n));
      });
}

CUresult CopyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream handle, bool async) {
  return OnStream(
      handle, n, [&](CUctx_st* ctx) { return InRange(ctx, dst, n) && InRange(ctx, src, n); },
      [&](CUctx_st* ctx, CUstream_st* s) {
        return Queued(ctx, s, s->channel->CopyAsync(dst, src, n), async);
      });
}

CUresult Memset(CUdeviceptr dst, uint32_t value, size_t n, unsigned width, CUstream handle,
                bool async) {
  return OnStream(
      handle, n,
      [&](CUctx_st* ctx) {
        return n <= std::numeric_limits<uint64_t>::max() / width && (width != 4 || dst % 4 == 0) &&
               InRange(ctx, dst, uint64_t(n) * width);
      },
      [&](CUctx_st* ctx, CUstream_st* s) {
        return Queued(ctx, s,
                      width == 1 ? s->channel->Memset8Async(dst, uint8_t(value), n)
                                 : s->channel->Memset32Async(dst, value, n),
                      async);
      });
}

}  // namespace

GPUVM_EXPORT CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *free = Process::Get().driver()->vram_free();
  *total = Process::Get().facts().vram_bytes;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  auto a = ctx->gctx->AllocDevice(bytes);
  if (!a.ok()) return ContextError(ctx, a.status(), CUDA_ERROR_OUT_OF_MEMORY);
  *dptr = a->va;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (dptr == 0) return CUDA_SUCCESS;
  auto a = ctx->gctx->Find(dptr);
  if (!a.ok() || a->va != dptr || a->kind != gpuvm::guest::MemoryKind::kDevice) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return ContextError(ctx, ctx->gctx->Free(dptr));
}

namespace {

CUresult HostAlloc(void** pp, size_t bytes) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (pp == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  auto a = ctx->gctx->AllocHost(bytes);
  if (!a.ok()) return ContextError(ctx, a.status(), CUDA_ERROR_OUT_OF_MEMORY);
  *pp = a->host;
  return CUDA_SUCCESS;
}

}  // namespace

GPUVM_EXPORT CUresult cuMemAllocHost_v2(void** pp, size_t bytes) { return HostAlloc(pp, bytes); }

GPUVM_EXPORT CUresult cuMemHostAlloc(void** pp, size_t bytes, unsigned int flags) {
  if ((flags & ~unsigned(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                         CU_MEMHOSTALLOC_WRITECOMBINED)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return HostAlloc(pp, bytes);
}

GPUVM_EXPORT CUresult cuMemFreeHost(void* p) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx, /*check_health=*/false);
  if (r != CUDA_SUCCESS) return r;
  if (p == nullptr) return CUDA_SUCCESS;
  auto a = ctx->gctx->FindHost(p);
  if (!a.ok() || a->host != p || a->kind != gpuvm::guest::MemoryKind::kHost) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return ContextError(ctx, ctx->gctx->Free(a->va));
}

GPUVM_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p,
                                                   unsigned int flags) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (pdptr == nullptr || p == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  uint64_t va;
  if (!InPinnedHost(ctx, p, 1, &va)) return CUDA_ERROR_INVALID_VALUE;
  *pdptr = va;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuMemHostRegister_v2(void* p, size_t bytes, unsigned int flags) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (p == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & ~unsigned(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                         CU_MEMHOSTREGISTER_READ_ONLY)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Any range, as CUDA (since 4.1): the driver maps the pages around it, and bytes registered
  // twice are refused.
  auto a = ctx->gctx->RegisterHost(p, bytes);
  if (!a.ok() && a.status().code() == gpuvm::StatusCode::kAlreadyExists) {
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  if (!a.ok()) return ContextError(ctx, a.status());
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuMemHostUnregister(void* p) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto a = ctx->gctx->FindHost(p);
  if (!a.ok() || a->host != p || a->kind != gpuvm::guest::MemoryKind::kRegisteredHost) {
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  }
  return ContextError(ctx, ctx->gctx->Free(a->va));
}

GPUVM_EXPORT CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute,
                                            CUdeviceptr ptr) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  void* host = nullptr;
  uint64_t va = 0;
  unsigned type;
  if (auto a = ctx->gctx->Find(ptr); a.ok()) {
    va = ptr;
    type = a->kind == gpuvm::guest::MemoryKind::kDevice ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    if (a->host) host = static_cast<uint8_t*>(a->host) + (ptr - a->va);
  } else if (InPinnedHost(ctx, reinterpret_cast<const void*>(ptr), 1, &va)) {
    type = CU_MEMORYTYPE_HOST;
    host = reinterpret_cast<void*>(ptr);
  } else {
    return CUDA_ERROR_INVALID_VALUE;
  }
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = ctx;
      break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned*>(data) = type;
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = va;
      break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (host == nullptr) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = host;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  return CopyHtoD(dst, src, n, nullptr, false);
}
GPUVM_EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  return CopyDtoH(dst, src, n, nullptr, false);
}
GPUVM_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return CopyDtoD(dst, src, n, nullptr, false);
}
GPUVM_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  return CopyHtoD(dst, src, n, s, true);
}
GPUVM_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  return CopyDtoH(dst, src, n, s, true);
}
GPUVM_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return CopyDtoD(dst, src, n, s, true);
}
GPUVM_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
  return Memset(dst, v, n, 1, nullptr, false);
}
GPUVM_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int v, size_t n) {
  return Memset(dst, v, n, 4, nullptr, false);
}
GPUVM_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  return Memset(dst, v, n, 1, s, true);
}
GPUVM_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) {
  return Memset(dst, v, n, 4, s, true);
}
