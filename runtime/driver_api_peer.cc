// libcuda.so.1, peer access with the answers of a single device: no device is another's peer (a
// device is not its own peer: cuDeviceCanAccessPeer says 0 and a P2P attribute query of a device
// with itself is CUDA_ERROR_INVALID_DEVICE, as CUDA documents), so enabling access from a context
// to another context is CUDA_ERROR_PEER_ACCESS_UNSUPPORTED and disabling it
// CUDA_ERROR_PEER_ACCESS_NOT_ENABLED. Copies between contexts (cuMemcpyPeer) work: within one
// context they are device-to-device copies; between two (two GPU address spaces here) they are
// staged through host memory after both contexts' earlier work.
//
// Threading: every entry point may be called from any thread (see runtime/core/objects.h).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/driver_api.h"

namespace {

bool LiveContext(CUcontext c) {
  return c != nullptr && Process::Get().IsLive(c, Process::Kind::kContext);
}

// Runs `call` with `ctx` current on this thread, then restores the thread's stack.
template <typename Call>
CUresult WithCurrent(CUcontext ctx, Call call) {
  CUresult r = cuCtxPushCurrent(ctx);
  if (r != CUDA_SUCCESS) return r;
  const CUresult result = call();
  CUcontext popped = nullptr;
  r = cuCtxPopCurrent(&popped);
  return result != CUDA_SUCCESS ? result : r;
}

// A copy between two contexts' memory: after both contexts' earlier work, chunk by chunk through
// host memory (each context is its own GPU address space, which no copy engine spans).
CUresult StagedPeerCopy(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                        size_t bytes) {
  // Both pointers are checked whole first: nothing is copied unless all of it can be. (Current
  // also brings back a primary context that was reset, before its memory is looked at.)
  auto check = [](CUdeviceptr va, size_t n) {
    CUctx_st* ctx;
    CUresult r = Current(&ctx);
    if (r != CUDA_SUCCESS) return r;
    return InRange(ctx, va, n) ? cuCtxSynchronize() : CUDA_ERROR_INVALID_VALUE;
  };
  CUresult r = WithCurrent(src_ctx, [&] { return check(src, bytes); });
  if (r != CUDA_SUCCESS) return r;
  r = WithCurrent(dst_ctx, [&] { return check(dst, bytes); });
  if (r != CUDA_SUCCESS) return r;
  constexpr size_t kChunk = 4 << 20;
  std::vector<uint8_t> bounce(std::min(bytes, kChunk));
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(kChunk, bytes - done);
    r = WithCurrent(src_ctx, [&] { return cuMemcpyDtoH_v2(bounce.data(), src + done, n); });
    if (r != CUDA_SUCCESS) return r;
    r = WithCurrent(dst_ctx, [&] { return cuMemcpyHtoD_v2(dst + done, bounce.data(), n); });
    if (r != CUDA_SUCCESS) return r;
    done += n;
  }
  return CUDA_SUCCESS;
}

CUresult MemcpyPeer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,
                    size_t bytes, CUstream stream, bool async) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!LiveContext(dst_ctx) || !LiveContext(src_ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  if (bytes == 0) return CUDA_SUCCESS;
  if (dst_ctx == src_ctx) {
    return WithCurrent(src_ctx, [&] {
      return async ? cuMemcpyDtoDAsync_v2(dst, src, bytes, stream)
                   : cuMemcpyDtoD_v2(dst, src, bytes);
    });
  }
  if (async) {
    // Behind the stream's earlier work (a stream of the current context), then as cuMemcpyPeer.
    CUctx_st* ctx;
    CUstream_st* s;
    if ((r = CurrentStream(stream, &ctx, &s)) != CUDA_SUCCESS) return r;
    if ((r = cuStreamSynchronize(stream)) != CUDA_SUCCESS) return r;
  }
  return StagedPeerCopy(dst, dst_ctx, src, src_ctx, bytes);
}

static_assert(sizeof(CUDA_MEMCPY3D_PEER) == sizeof(CUDA_MEMCPY3D));

// The plain description of a peer copy (the contexts left out).
CUDA_MEMCPY3D Plain(const CUDA_MEMCPY3D_PEER& p) {
  CUDA_MEMCPY3D c{};
  c.srcXInBytes = p.srcXInBytes;
  c.srcY = p.srcY;
  c.srcZ = p.srcZ;
  c.srcLOD = p.srcLOD;
  c.srcMemoryType = p.srcMemoryType;
  c.srcHost = p.srcHost;
  c.srcDevice = p.srcDevice;
  c.srcArray = p.srcArray;
  c.srcPitch = p.srcPitch;
  c.srcHeight = p.srcHeight;
  c.dstXInBytes = p.dstXInBytes;
  c.dstY = p.dstY;
  c.dstZ = p.dstZ;
  c.dstLOD = p.dstLOD;
  c.dstMemoryType = p.dstMemoryType;
  c.dstHost = p.dstHost;
  c.dstDevice = p.dstDevice;
  c.dstArray = p.dstArray;
  c.dstPitch = p.dstPitch;
  c.dstHeight = p.dstHeight;
  c.WidthInBytes = p.WidthInBytes;
  c.Height = p.Height;
  c.Depth = p.Depth;
  return c;
}

bool OnDevice(CUmemorytype t) { return t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_ARRAY; }

CUresult Memcpy3DPeer(const CUDA_MEMCPY3D_PEER* p, CUstream stream, bool async) {
  CUresult r = CheckInit(p == nullptr);
  if (r != CUDA_SUCCESS) return r;
  // The context of each side in device memory must be live; a host side needs none.
  const bool src_device = OnDevice(p->srcMemoryType), dst_device = OnDevice(p->dstMemoryType);
  if ((src_device && !LiveContext(p->srcContext)) || (dst_device && !LiveContext(p->dstContext))) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  const CUDA_MEMCPY3D plain = Plain(*p);
  if (!src_device || !dst_device || p->srcContext == p->dstContext) {
    // One address space: the plain copy, in the context of the device side.
    const CUcontext ctx = src_device ? p->srcContext : dst_device ? p->dstContext : nullptr;
    auto copy = [&] { return async ? cuMemcpy3DAsync_v2(&plain, stream) : cuMemcpy3D_v2(&plain); };
    return ctx != nullptr ? WithCurrent(ctx, copy) : copy();
  }
  // CUDA arrays are not implemented (cuMemcpy3D answers the same for one).
  if (p->srcMemoryType == CU_MEMORYTYPE_ARRAY || p->dstMemoryType == CU_MEMORYTYPE_ARRAY) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (p->WidthInBytes == 0 || p->Height == 0 || p->Depth == 0) return CUDA_SUCCESS;
  if (async) {
    CUctx_st* ctx;
    CUstream_st* s;
    if ((r = CurrentStream(stream, &ctx, &s)) != CUDA_SUCCESS) return r;
    if ((r = cuStreamSynchronize(stream)) != CUDA_SUCCESS) return r;
  }
  // Two address spaces: slice by slice through host memory, after both contexts' earlier work.
  // Each side's whole box must lie in one allocation, checked before the first byte moves.
  if (p->Height > SIZE_MAX / p->WidthInBytes) return CUDA_ERROR_INVALID_VALUE;
  auto box_ok = [&](CUdeviceptr base, size_t x, size_t y, size_t z, size_t pitch, size_t height) {
    if (pitch < p->WidthInBytes || height < p->Height) return false;
    const unsigned __int128 first = (unsigned __int128)base + x + (unsigned __int128)y * pitch +
                                    (unsigned __int128)z * pitch * height;
    const unsigned __int128 last = first + (unsigned __int128)(p->Depth - 1) * pitch * height +
                                   (unsigned __int128)(p->Height - 1) * pitch + p->WidthInBytes;
    if (last > UINT64_MAX) return false;
    CUctx_st* ctx;
    return Current(&ctx) == CUDA_SUCCESS && InRange(ctx, uint64_t(first), uint64_t(last - first));
  };
  r = WithCurrent(p->srcContext, [&] {
    if (!box_ok(p->srcDevice, p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch, p->srcHeight)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    return cuCtxSynchronize();
  });
  if (r != CUDA_SUCCESS) return r;
  r = WithCurrent(p->dstContext, [&] {
    if (!box_ok(p->dstDevice, p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch, p->dstHeight)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    return cuCtxSynchronize();
  });
  if (r != CUDA_SUCCESS) return r;
  std::vector<uint8_t> slice(p->WidthInBytes * p->Height);
  CUDA_MEMCPY3D from = plain, to = plain;
  from.dstMemoryType = CU_MEMORYTYPE_HOST;
  from.dstHost = slice.data();
  from.dstXInBytes = from.dstY = from.dstZ = 0;
  from.dstPitch = p->WidthInBytes;
  from.dstHeight = p->Height;
  from.Depth = 1;
  to.srcMemoryType = CU_MEMORYTYPE_HOST;
  to.srcHost = slice.data();
  to.srcXInBytes = to.srcY = to.srcZ = 0;
  to.srcPitch = p->WidthInBytes;
  to.srcHeight = p->Height;
  to.Depth = 1;
  for (size_t z = 0; z < p->Depth; ++z) {
    from.srcZ = p->srcZ + z;
    to.dstZ = p->dstZ + z;
    r = WithCurrent(p->srcContext, [&] { return cuMemcpy3D_v2(&from); });
    if (r != CUDA_SUCCESS) return r;
    r = WithCurrent(p->dstContext, [&] { return cuMemcpy3D_v2(&to); });
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

}  // namespace

GPUVM_EXPORT CUresult cuDeviceCanAccessPeer(int* can_access, CUdevice dev, CUdevice peer) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!ValidDevice(dev) || !ValidDevice(peer)) return CUDA_ERROR_INVALID_DEVICE;
  if (can_access == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *can_access = 0;  // one device: it is not its own peer
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuDeviceGetP2PAttribute(int* value, CUdevice_P2PAttribute attribute,
                                              CUdevice src, CUdevice dst) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  // CUDA answers CUDA_ERROR_INVALID_DEVICE for an invalid device or the same device twice, which
  // with one device is every pair: there is no link to describe.
  (void)value;
  (void)attribute;
  (void)src;
  (void)dst;
  return CUDA_ERROR_INVALID_DEVICE;
}

GPUVM_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx, /*check_health=*/false);
  if (r != CUDA_SUCCESS) return r;
  if (!LiveContext(peer) || peer == ctx) return CUDA_ERROR_INVALID_CONTEXT;
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  // Both contexts are on the one device, which cuDeviceCanAccessPeer says is not its own peer.
  return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
}

GPUVM_EXPORT CUresult cuCtxDisablePeerAccess(CUcontext peer) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx, /*check_health=*/false);
  if (r != CUDA_SUCCESS) return r;
  if (!LiveContext(peer)) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;  // never enabled: see cuCtxEnablePeerAccess
}

GPUVM_EXPORT CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                                   CUcontext src_ctx, size_t bytes) {
  return MemcpyPeer(dst, dst_ctx, src, src_ctx, bytes, nullptr, false);
}

GPUVM_EXPORT CUresult cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                                        CUcontext src_ctx, size_t bytes) {
  return MemcpyPeer(dst, dst_ctx, src, src_ctx, bytes, nullptr, false);
}

GPUVM_EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                                        CUcontext src_ctx, size_t bytes, CUstream stream) {
  return MemcpyPeer(dst, dst_ctx, src, src_ctx, bytes, stream, true);
}

GPUVM_EXPORT CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                                             CUcontext src_ctx, size_t bytes, CUstream stream) {
  return MemcpyPeer(dst, dst_ctx, src, src_ctx, bytes, stream, true);
}

GPUVM_EXPORT CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER* p) {
  return Memcpy3DPeer(p, nullptr, false);
}

GPUVM_EXPORT CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER* p) {
  return Memcpy3DPeer(p, nullptr, false);
}

GPUVM_EXPORT CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER* p, CUstream stream) {
  return Memcpy3DPeer(p, stream, true);
}

GPUVM_EXPORT CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER* p, CUstream stream) {
  return Memcpy3DPeer(p, stream, true);
}
