// libcuda.so.1, memory: device, pinned host and managed allocations, host registration, pointer
// attributes and address ranges, managed memory's hints (prefetch, advice, stream attachment),
// copies and memsets, synchronous and on streams (driver_api.h has the shared checks).
//
// Threading: every entry point may be called from any thread (see runtime/core/objects.h).
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "base/align.h"
#include "runtime/driver_api.h"
#include "runtime/driver_api_graph.h"

namespace {
// Managed memory's advice is kept per page (runtime/core/managed_advice.h): ranges round out.
constexpr uint64_t kAdvicePage = 4096;
uint64_t PageFloor(uint64_t address) { return address & ~(kAdvicePage - 1); }
uint64_t PageCeil(uint64_t address) { return gpuvm::AlignUp(address, kAdvicePage); }

// A location CheckLocation accepted, as the advice record keeps it (the current NUMA node is node
// 0).
gpuvm::runtime::AdviceLocation AdviceLocationOf(const CUmemLocation& location) {
  int type;
  std::memcpy(&type, &location.type, sizeof type);
  if (type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT) return {CU_MEM_LOCATION_TYPE_HOST_NUMA, 0};
  if (type == CU_MEM_LOCATION_TYPE_HOST) return {CU_MEM_LOCATION_TYPE_HOST, 0};
  return {type, location.id};
}

using gpuvm::runtime::driver_api::CaptureNode;
using gpuvm::runtime::driver_api::Capturing;
using gpuvm::runtime::driver_api::Replay;

// Runs `op(ctx, stream)` after the checks every copy and memset makes, in CUDA's order: a current,
// healthy context and a live stream; nothing to do for 0 bytes; `valid(ctx)` (the arguments, else
// CUDA_ERROR_INVALID_VALUE); the stream's earlier work ordered before this. A blocking (not
// `async`) copy or memset is a sync point where device printf output is printed. On a capturing
// stream the checked operation becomes a node of `type` whose work is `make_replay()`
// (driver_api_graph.h): the same call again, on the stream a graph launch uses.
template <typename Valid, typename Op, typename MakeReplay>
CUresult OnStream(CUstream handle, size_t n, bool async, Valid valid, Op op, CUgraphNodeType type,
                  MakeReplay make_replay) {
  CUctx_st* ctx;
  CUstream_st* s;
  CUresult r = CurrentStream(handle, &ctx, &s);
  if (r != CUDA_SUCCESS) return r;
  if (n == 0) return CUDA_SUCCESS;
  if (!valid(ctx)) return CUDA_ERROR_INVALID_VALUE;
  if (Capturing(s)) return CaptureNode(s, type, make_replay());
  if ((r = Ordered(s)) != CUDA_SUCCESS) return r;
  r = op(ctx, s);
  if (r == CUDA_SUCCESS && !async) gpuvm::runtime::DrainPrintf(ctx);
  return r;
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
      handle, n, async, [&](CUctx_st* ctx) { return src != nullptr && InRange(ctx, dst, n); },
      [&](CUctx_st* ctx, CUstream_st* s) {
        uint64_t src_va;
        if (async && InPinnedHost(ctx, src, n, &src_va)) {
          return Queued(ctx, s, s->channel->CopyAsync(dst, src_va, n), true);
        }
        // Pageable memory: the copy is staged and complete on return (as CUDA does for pageable
        // sources). The driver serializes staged copies of one channel itself.
        return ContextError(ctx, s->channel->CopyHostToDevice(dst, src, n));
      },
      CU_GRAPH_NODE_TYPE_MEMCPY,
      [=] { return Replay([=](CUstream t) { return CopyHtoD(dst, src, n, t, true); }); });
}

CUresult CopyDtoH(void* dst, CUdeviceptr src, size_t n, CUstream handle, bool async) {
  return OnStream(
      handle, n, async, [&](CUctx_st* ctx) { return dst != nullptr && InRange(ctx, src, n); },
      [&](CUctx_st* ctx, CUstream_st* s) {
        uint64_t dst_va;
        if (async && InPinnedHost(ctx, dst, n, &dst_va)) {
          return Queued(ctx, s, s->channel->CopyAsync(dst_va, src, n), true);
        }
        return ContextError(ctx, s->channel->CopyDeviceToHost(dst, src, n));
      },
      CU_GRAPH_NODE_TYPE_MEMCPY,
      [=] { return Replay([=](CUstream t) { return CopyDtoH(dst, src, n, t, true); }); });
}

CUresult CopyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream handle, bool async) {
  return OnStream(
      handle, n, async, [&](CUctx_st* ctx) { return InRange(ctx, dst, n) && InRange(ctx, src, n); },
      [&](CUctx_st* ctx, CUstream_st* s) {
        return Queued(ctx, s, s->channel->CopyAsync(dst, src, n), async);
      },
      CU_GRAPH_NODE_TYPE_MEMCPY,
      [=] { return Replay([=](CUstream t) { return CopyDtoD(dst, src, n, t, true); }); });
}

CUresult Memset(CUdeviceptr dst, uint32_t value, size_t n, unsigned width, CUstream handle,
                bool async) {
  return OnStream(
      handle, n, async,
      [&](CUctx_st* ctx) {
        return n <= std::numeric_limits<uint64_t>::max() / width && dst % width == 0 &&
               InRange(ctx, dst, uint64_t(n) * width);
      },
      [&](CUctx_st* ctx, CUstream_st* s) {
        // 16-bit elements: the byte-granular memset with both halves of the pattern the value.
        return Queued(ctx, s,
                      width == 1 ? s->channel->Memset8Async(dst, uint8_t(value), n)
                      : width == 2
                          ? s->channel->Memset2DAsync(dst, uint64_t(n) * 2, value, n * 2, 1)
                          : s->channel->Memset32Async(dst, value, n),
                      async);
      },
      CU_GRAPH_NODE_TYPE_MEMSET,
      [=] { return Replay([=](CUstream t) { return Memset(dst, value, n, width, t, true); }); });
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
  // Device and managed memory (cudaFree frees both).
  auto a = ctx->gctx->Find(dptr);
  if (!a.ok() || a->va != dptr ||
      (a->kind != gpuvm::guest::MemoryKind::kDevice &&
       a->kind != gpuvm::guest::MemoryKind::kManaged)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // A stream-ordered allocation may be freed this way too (CUDA allows it).
  gpuvm::runtime::driver_api::ForgetPoolAllocation(ctx, dptr);
  // Managed memory's advice goes with it: a later allocation may get the same address.
  if (a->kind == gpuvm::guest::MemoryKind::kManaged) {
    ctx->managed_advice.Forget(a->va, a->va + gpuvm::AlignUp(a->size, kAdvicePage));
  }
  return ContextError(ctx, ctx->gctx->Free(dptr));
}

namespace {

CUresult HostAlloc(void** pp, size_t bytes, unsigned flags) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (pp == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  auto a = ctx->gctx->AllocHost(bytes);
  if (!a.ok()) return ContextError(ctx, a.status(), CUDA_ERROR_OUT_OF_MEMORY);
  {
    std::lock_guard lock(ctx->mu);
    ctx->host_alloc_flags[a->va] = flags;
  }
  *pp = a->host;
  return CUDA_SUCCESS;
}

}  // namespace

GPUVM_EXPORT CUresult cuMemAllocHost_v2(void** pp, size_t bytes) { return HostAlloc(pp, bytes, 0); }

GPUVM_EXPORT CUresult cuMemHostAlloc(void** pp, size_t bytes, unsigned int flags) {
  if ((flags & ~unsigned(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                         CU_MEMHOSTALLOC_WRITECOMBINED)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return HostAlloc(pp, bytes, flags);
}

// The flags a cuMemHostAlloc (or cuMemAllocHost: none) allocation containing `p` was made with.
GPUVM_EXPORT CUresult cuMemHostGetFlags(unsigned int* flags, void* p) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (flags == nullptr || p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto a = ctx->gctx->FindHost(p);
  if (!a.ok() || a->kind != gpuvm::guest::MemoryKind::kHost) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard lock(ctx->mu);
  auto it = ctx->host_alloc_flags.find(a->va);
  *flags = it != ctx->host_alloc_flags.end() ? it->second : 0;
  return CUDA_SUCCESS;
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
  {
    std::lock_guard lock(ctx->mu);
    ctx->host_alloc_flags.erase(a->va);
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

namespace {

// What the context knows of a pointer: a device, managed or pinned/registered host allocation
// holding it (by GPU address, or by host address for pinned memory).
struct PointerInfo {
  unsigned type = 0;         // CU_MEMORYTYPE_*
  bool managed = false;      // managed memory reports CU_MEMORYTYPE_DEVICE (CUDA's choice too)
  uint64_t va = 0;           // the GPU address of the byte
  void* host = nullptr;      // the host address of the byte, if the host reaches it
  uint64_t range_start = 0;  // the allocation's first byte, in the address space of `ptr`
  uint64_t range_size = 0;   // bytes as allocated
};

bool Describe(CUctx_st* ctx, CUdeviceptr ptr, PointerInfo* info) {
  using gpuvm::guest::MemoryKind;
  if (auto a = ctx->gctx->Find(ptr); a.ok()) {
    info->managed = a->kind == MemoryKind::kManaged;
    info->type =
        a->kind == MemoryKind::kDevice || info->managed ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    info->va = ptr;
    if (a->host) info->host = static_cast<uint8_t*>(a->host) + (ptr - a->va);
    info->range_start = a->va;
    info->range_size = a->size;
    return true;
  }
  if (auto a = ctx->gctx->FindHost(reinterpret_cast<const void*>(ptr)); a.ok()) {
    info->type = CU_MEMORYTYPE_HOST;
    info->host = reinterpret_cast<void*>(ptr);
    info->va = a->va + (ptr - reinterpret_cast<uintptr_t>(a->host));
    info->range_start = reinterpret_cast<uintptr_t>(a->host);
    info->range_size = a->size;
    return true;
  }
  return false;
}

// One attribute of a known pointer into `data`; CUDA_ERROR_INVALID_VALUE for attributes we do not
// answer and for a host pointer of memory the host cannot reach.
CUresult WriteAttribute(CUctx_st* ctx, const PointerInfo& info, CUpointer_attribute attribute,
                        void* data) {
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = ctx;
      break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned*>(data) = info.type;
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = info.va;
      break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (info.host == nullptr) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = info.host;
      break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<unsigned*>(data) = info.managed ? 1 : 0;
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = ctx->device;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = info.range_start;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = info.range_size;
      break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      *static_cast<unsigned*>(data) = 1;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// cuPointerGetAttributes' answer for a pointer nobody allocated: zero (null) of the attribute's
// type. CUDA_ERROR_INVALID_VALUE for attributes we do not answer.
CUresult WriteUnknown(CUpointer_attribute attribute, void* data) {
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_MAPPED:
      *static_cast<unsigned*>(data) = 0;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = CU_DEVICE_INVALID;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      static_assert(sizeof(CUcontext) == 8 && sizeof(CUdeviceptr) == 8 && sizeof(size_t) == 8);
      *static_cast<uint64_t*>(data) = 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace

GPUVM_EXPORT CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute,
                                            CUdeviceptr ptr) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  PointerInfo info;
  if (!Describe(ctx, ptr, &info)) return CUDA_ERROR_INVALID_VALUE;
  return WriteAttribute(ctx, info, attribute, data);
}

GPUVM_EXPORT CUresult cuPointerGetAttributes(unsigned int count, CUpointer_attribute* attributes,
                                             void** data, CUdeviceptr ptr) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (count == 0 || attributes == nullptr || data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < count; ++i) {
    if (data[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
  }
  // Unlike cuPointerGetAttribute, a pointer nobody allocated is no error: its attributes are null.
  PointerInfo info;
  const bool known = Describe(ctx, ptr, &info);
  for (unsigned i = 0; i < count; ++i) {
    // The caller's array holds integers: one outside our enumeration is refused, never loaded as
    // an enum value (undefined behaviour); WriteAttribute refuses the ones inside we do not answer.
    int raw;
    std::memcpy(&raw, &attributes[i], sizeof raw);
    if (raw < CU_POINTER_ATTRIBUTE_CONTEXT || raw > CU_POINTER_ATTRIBUTE_MAPPED)
      return CUDA_ERROR_INVALID_VALUE;
    const auto attribute = static_cast<CUpointer_attribute>(raw);
    // A host pointer of memory the host cannot reach is null here too.
    if (known && attribute == CU_POINTER_ATTRIBUTE_HOST_POINTER && info.host == nullptr) {
      *static_cast<void**>(data[i]) = nullptr;
      continue;
    }
    r = known ? WriteAttribute(ctx, info, attribute, data[i]) : WriteUnknown(attribute, data[i]);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  // Device and managed memory by GPU address (a managed pointer is both); either output may be
  // null.
  auto a = ctx->gctx->Find(ptr);
  if (!a.ok()) return CUDA_ERROR_NOT_FOUND;
  if (base != nullptr) *base = a->va;
  if (size != nullptr) *size = a->size;
  return CUDA_SUCCESS;
}

// ---- managed memory ----

namespace {

// The managed allocation of ctx holding [ptr, ptr + bytes), or false.
bool InManaged(CUctx_st* ctx, CUdeviceptr ptr, uint64_t bytes, gpuvm::guest::Allocation* out) {
  auto a = ctx->gctx->Find(ptr);
  if (!a.ok() || a->kind != gpuvm::guest::MemoryKind::kManaged) return false;
  if (bytes > a->size - (ptr - a->va)) return false;
  *out = *a;
  return true;
}

// A location of a prefetch or an advice. `numa`: host NUMA nodes may be named (prefetches and
// preferred locations; ACCESSED_BY takes a device or the host only). Device ordinals that do not
// exist are CUDA_ERROR_INVALID_DEVICE, as CUDA documents; every other bad location
// CUDA_ERROR_INVALID_VALUE.
CUresult CheckLocation(const CUmemLocation& location, bool numa) {
  // The caller's bytes, read as the integer they are: a value outside the enumeration must reach
  // `default`, not be a load of an invalid enum (undefined behaviour).
  int type;
  std::memcpy(&type, &location.type, sizeof type);
  switch (type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      return ValidDevice(location.id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    case CU_MEM_LOCATION_TYPE_HOST:
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      // One NUMA node as far as the GPU can tell: node 0.
      return numa && location.id == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
      return numa ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace

GPUVM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  // Either attachment is the same memory here: it is coherent for the host and every stream.
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  auto a = ctx->gctx->AllocManaged(bytes);
  if (!a.ok()) return ContextError(ctx, a.status(), CUDA_ERROR_OUT_OF_MEMORY);
  *dptr = a->va;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuStreamAttachMemAsync(CUstream handle, CUdeviceptr dptr, size_t length,
                                             unsigned int flags) {
  CUctx_st* ctx;
  CUstream_st* s;
  CUresult r = CurrentStream(handle, &ctx, &s);
  if (r != CUDA_SUCCESS) return r;
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST &&
      flags != CU_MEM_ATTACH_SINGLE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // The null stream is every stream: memory cannot be attached to it alone.
  if (flags == CU_MEM_ATTACH_SINGLE && s->is_default) return CUDA_ERROR_INVALID_VALUE;
  gpuvm::guest::Allocation a;
  if (!InManaged(ctx, dptr, 0, &a) || a.va != dptr || (length != 0 && length != a.size)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Nothing to change: the memory is coherent for the host and all streams whatever the
  // association (docs/RUNTIME.md, "Managed memory").
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuMemPrefetchAsync_v2(CUdeviceptr ptr, size_t count, CUmemLocation location,
                                            unsigned int flags, CUstream handle) {
  CUctx_st* ctx;
  CUstream_st* s;
  CUresult r = CurrentStream(handle, &ctx, &s);
  if (r != CUDA_SUCCESS) return r;
  gpuvm::guest::Allocation a;
  if (count == 0 || flags != 0 || !InManaged(ctx, ptr, count, &a)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // A hint only: the memory stays where it is, host memory every processor reaches coherently.
  // What was asked is remembered (cuMemRangeGetAttribute's last prefetch location).
  r = CheckLocation(location, /*numa=*/true);
  if (r != CUDA_SUCCESS) return r;
  const gpuvm::runtime::AdviceLocation where = AdviceLocationOf(location);
  ctx->managed_advice.Apply(PageFloor(ptr), PageCeil(ptr + count),
                            [&](gpuvm::runtime::PageAdvice& p) { p.last_prefetch = where; });
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr ptr, size_t count,
                                                 CUmemLocation location, unsigned int flags,
                                                 CUstream handle) {
  return cuMemPrefetchAsync_v2(ptr, count, location, flags, handle);
}

GPUVM_EXPORT CUresult cuMemAdvise_v2(CUdeviceptr ptr, size_t count, CUmem_advise advice,
                                     CUmemLocation location) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  gpuvm::guest::Allocation a;
  if (count == 0 || !InManaged(ctx, ptr, count, &a)) return CUDA_ERROR_INVALID_VALUE;
  // The memory does not move on our GPU; the advice is remembered for cuMemRangeGetAttribute.
  // The caller's bytes, read as the integer they are (a value outside the enumeration must reach
  // `default`, not be a load of an invalid enum).
  int what;
  std::memcpy(&what, &advice, sizeof what);
  std::function<void(gpuvm::runtime::PageAdvice&)> change;
  const gpuvm::runtime::AdviceLocation where = AdviceLocationOf(location);
  const bool host = where.type != CU_MEM_LOCATION_TYPE_DEVICE;
  switch (what) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY:
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY:  // the location is ignored
      change = [set = what == CU_MEM_ADVISE_SET_READ_MOSTLY](gpuvm::runtime::PageAdvice& p) {
        p.read_mostly = set;
      };
      break;
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
      change = [](gpuvm::runtime::PageAdvice& p) { p.preferred = {}; };
      break;
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
      if ((r = CheckLocation(location, /*numa=*/true)) != CUDA_SUCCESS) return r;
      change = [where](gpuvm::runtime::PageAdvice& p) { p.preferred = where; };
      break;
    case CU_MEM_ADVISE_SET_ACCESSED_BY:
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY:
      if ((r = CheckLocation(location, /*numa=*/false)) != CUDA_SUCCESS) return r;
      change = [host, set = what == CU_MEM_ADVISE_SET_ACCESSED_BY](gpuvm::runtime::PageAdvice& p) {
        (host ? p.accessed_by_host : p.accessed_by_device) = set;
      };
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  ctx->managed_advice.Apply(PageFloor(ptr), PageCeil(ptr + count), change);
  return CUDA_SUCCESS;
}

namespace {

// One attribute of [ptr, ptr + count) of managed memory into `out` (`size` bytes), from the advice
// the context recorded; every page of the range must agree for a location to be reported.
CUresult RangeAttribute(CUctx_st* ctx, std::vector<uint8_t>* out, size_t size, int attribute,
                        CUdeviceptr ptr, size_t count) {
  bool read_mostly = true, by_device = true, by_host = true;
  bool first = true;
  gpuvm::runtime::AdviceLocation preferred, prefetch;
  ctx->managed_advice.Visit(PageFloor(ptr), PageCeil(ptr + count),
                            [&](const gpuvm::runtime::PageAdvice& p) {
                              read_mostly = read_mostly && p.read_mostly;
                              by_device = by_device && p.accessed_by_device;
                              by_host = by_host && p.accessed_by_host;
                              if (first) {
                                preferred = p.preferred;
                                prefetch = p.last_prefetch;
                                first = false;
                                return;
                              }
                              if (!(p.preferred == preferred)) preferred = {};
                              if (!(p.last_prefetch == prefetch)) prefetch = {};
                            });
  // The legacy form of a location: a device ordinal, CU_DEVICE_CPU for the host (any node of it),
  // CU_DEVICE_INVALID for none or a disagreement.
  auto legacy = [](const gpuvm::runtime::AdviceLocation& l) -> int {
    if (l.type == CU_MEM_LOCATION_TYPE_DEVICE) return l.id;
    if (l.type == CU_MEM_LOCATION_TYPE_INVALID) return CU_DEVICE_INVALID;
    return CU_DEVICE_CPU;
  };
  int32_t value = 0;
  switch (attribute) {
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
      if (size == 0 || size % 4 != 0) return CUDA_ERROR_INVALID_VALUE;
      std::vector<int32_t> devices(size / 4, CU_DEVICE_INVALID);
      size_t n = 0;
      if (by_device && n < devices.size()) devices[n++] = 0;
      if (by_host && n < devices.size()) devices[n++] = CU_DEVICE_CPU;
      out->resize(size);
      std::memcpy(out->data(), devices.data(), size);
      return CUDA_SUCCESS;
    }
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
      value = read_mostly ? 1 : 0;
      break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
      value = legacy(preferred);
      break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
      value = legacy(prefetch);
      break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
      value = preferred.type;
      break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
      value = preferred.id;
      break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
      value = prefetch.type;
      break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
      value = prefetch.id;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  if (size != sizeof value) return CUDA_ERROR_INVALID_VALUE;
  out->resize(sizeof value);
  std::memcpy(out->data(), &value, sizeof value);
  return CUDA_SUCCESS;
}

}  // namespace

// All attributes are computed before any is written: a refused one leaves every buffer as it was.
GPUVM_EXPORT CUresult cuMemRangeGetAttributes(void** data, size_t* sizes,
                                              CUmem_range_attribute* attributes, size_t n,
                                              CUdeviceptr ptr, size_t count) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  gpuvm::guest::Allocation a;
  if (data == nullptr || sizes == nullptr || attributes == nullptr || n == 0 || count == 0 ||
      !InManaged(ctx, ptr, count, &a)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::vector<std::vector<uint8_t>> answers(n);
  for (size_t i = 0; i < n; ++i) {
    if (data[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
    int attribute;  // the caller's bytes, read as the integer they are
    std::memcpy(&attribute, &attributes[i], sizeof attribute);
    if ((r = RangeAttribute(ctx, &answers[i], sizes[i], attribute, ptr, count)) != CUDA_SUCCESS) {
      return r;
    }
  }
  for (size_t i = 0; i < n; ++i) std::memcpy(data[i], answers[i].data(), answers[i].size());
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuMemRangeGetAttribute(void* data, size_t size,
                                             CUmem_range_attribute attribute, CUdeviceptr ptr,
                                             size_t count) {
  return cuMemRangeGetAttributes(&data, &size, &attribute, 1, ptr, count);
}

// The forms older cuda.h headers bind (a device ordinal instead of a location; CU_DEVICE_CPU is the
// host). Our cuda.h maps the names to the _v2 functions above, so they are defined here by hand.
#undef cuMemPrefetchAsync
#undef cuMemAdvise

namespace {
CUmemLocation LocationOf(CUdevice device) {
  CUmemLocation location{};
  if (device == CU_DEVICE_CPU) {
    location.type = CU_MEM_LOCATION_TYPE_HOST;
  } else {
    location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = device;
  }
  return location;
}
}  // namespace

GPUVM_EXPORT CUresult cuMemPrefetchAsync(CUdeviceptr ptr, size_t count, CUdevice device,
                                         CUstream handle) {
  return cuMemPrefetchAsync_v2(ptr, count, LocationOf(device), 0, handle);
}

GPUVM_EXPORT CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr ptr, size_t count, CUdevice device,
                                              CUstream handle) {
  return cuMemPrefetchAsync_v2(ptr, count, LocationOf(device), 0, handle);
}

GPUVM_EXPORT CUresult cuMemAdvise(CUdeviceptr ptr, size_t count, CUmem_advise advice,
                                  CUdevice device) {
  return cuMemAdvise_v2(ptr, count, advice, LocationOf(device));
}

GPUVM_EXPORT CUresult cuStreamAttachMemAsync_ptsz(CUstream handle, CUdeviceptr dptr, size_t length,
                                                  unsigned int flags) {
  return cuStreamAttachMemAsync(handle, dptr, length, flags);
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
GPUVM_EXPORT CUresult cuMemsetD16_v2(CUdeviceptr dst, unsigned short v, size_t n) {
  return Memset(dst, v * 0x00010001u, n, 2, nullptr, false);
}
GPUVM_EXPORT CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short v, size_t n, CUstream s) {
  return Memset(dst, v * 0x00010001u, n, 2, s, true);
}

// The per-thread default stream's spellings (CUDA_API_PER_THREAD_DEFAULT_STREAM): the synchronous
// calls on the per-thread stream, the asynchronous ones as they are.
GPUVM_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void* src, size_t n) {
  return CopyHtoD(dst, src, n, CU_STREAM_PER_THREAD, false);
}
GPUVM_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, size_t n) {
  return CopyDtoH(dst, src, n, CU_STREAM_PER_THREAD, false);
}
GPUVM_EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return CopyDtoD(dst, src, n, CU_STREAM_PER_THREAD, false);
}
GPUVM_EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void* src, size_t n,
                                                CUstream s) {
  return cuMemcpyHtoDAsync_v2(dst, src, n, s);
}
GPUVM_EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  return cuMemcpyDtoHAsync_v2(dst, src, n, s);
}
GPUVM_EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                                CUstream s) {
  return cuMemcpyDtoDAsync_v2(dst, src, n, s);
}
GPUVM_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return cuMemcpyAsync(dst, src, n, s);
}
GPUVM_EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char v, size_t n) {
  return Memset(dst, v, n, 1, CU_STREAM_PER_THREAD, false);
}
GPUVM_EXPORT CUresult cuMemsetD16_v2_ptds(CUdeviceptr dst, unsigned short v, size_t n) {
  return Memset(dst, v * 0x00010001u, n, 2, CU_STREAM_PER_THREAD, false);
}
GPUVM_EXPORT CUresult cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int v, size_t n) {
  return Memset(dst, v, n, 4, CU_STREAM_PER_THREAD, false);
}
GPUVM_EXPORT CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  return cuMemsetD8Async(dst, v, n, s);
}
GPUVM_EXPORT CUresult cuMemsetD16Async_ptsz(CUdeviceptr dst, unsigned short v, size_t n,
                                            CUstream s) {
  return cuMemsetD16Async(dst, v, n, s);
}
GPUVM_EXPORT CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) {
  return cuMemsetD32Async(dst, v, n, s);
}

// ---- pitched memory, 2D and 3D copies and memsets ----

namespace {

// Rows of cuMemAllocPitch start this far apart at least (our choice: 256 bytes, so rows of any
// element size start aligned for every access width).
constexpr size_t kPitchAlignment = 256;

// One side of a 2D copy, resolved: GPU-addressable (device memory, or pinned/registered host
// memory of the context: `va`), or pageable host memory (`host`), first byte of the first row.
struct Side {
  bool gpu = false;
  uint64_t va = 0;
  uint8_t* host = nullptr;
  size_t pitch = 0;
};

// `span` bytes from the side's first byte (pitch * (height - 1) + width), overflow checked.
bool Span(size_t pitch, size_t width, size_t height, uint64_t* span) {
  if (height > 1 && pitch > (std::numeric_limits<uint64_t>::max() - width) / (height - 1)) {
    return false;
  }
  *span = uint64_t(pitch) * (height - 1) + width;
  return true;
}

// The array a copy side names (CU_MEMORYTYPE_ARRAY): a live array of the context, else null.
CUarray_st* ArrayOf(CUctx_st* ctx, CUarray array) {
  return Process::Get().IsLive(array, Process::Kind::kArray) && array->ctx == ctx ? array : nullptr;
}

CUresult Resolve(CUctx_st* ctx, CUmemorytype type, const void* host, CUdeviceptr device,
                 CUarray array, size_t x, size_t y, size_t pitch, size_t width, size_t height,
                 Side* out) {
  if (type == CU_MEMORYTYPE_ARRAY) {
    // Its own rows: x in bytes within a row, y a row of any of its slices (Copy3D folds z in).
    CUarray_st* a = ArrayOf(ctx, array);
    if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (x > a->row_bytes || width > a->row_bytes - x || y > a->rows || height > a->rows - y) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    out->gpu = true;
    out->pitch = a->pitch;
    out->va = a->va + uint64_t(y) * a->pitch + x;
    return CUDA_SUCCESS;
  }
  if (array != nullptr) return CUDA_ERROR_INVALID_VALUE;  // an array named for another type
  if (height > 1 && pitch < width) return CUDA_ERROR_INVALID_VALUE;
  if (y != 0 && pitch > std::numeric_limits<uint64_t>::max() / y) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t offset = uint64_t(y) * pitch + x;
  if (offset < x) return CUDA_ERROR_INVALID_VALUE;
  uint64_t span;
  if (!Span(pitch, width, height, &span)) return CUDA_ERROR_INVALID_VALUE;
  out->pitch = pitch;
  if (type == CU_MEMORYTYPE_UNIFIED) {
    // No unified addressing: a pointer of the context's device memory, else host memory.
    type = ctx->gctx->Find(device).ok() ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    host = reinterpret_cast<const void*>(device);
  }
  if (type == CU_MEMORYTYPE_DEVICE) {
    if (device + offset < device || !InRange(ctx, device + offset, span)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    out->gpu = true;
    out->va = device + offset;
    return CUDA_SUCCESS;
  }
  if (type != CU_MEMORYTYPE_HOST || host == nullptr) return CUDA_ERROR_INVALID_VALUE;
  out->host = const_cast<uint8_t*>(static_cast<const uint8_t*>(host)) + offset;
  out->gpu = InPinnedHost(ctx, out->host, span, &out->va);
  return CUDA_SUCCESS;
}

// One 2D copy (cuMemcpy2D's description) on `handle`'s stream. Between GPU-addressable sides it is
// one pitched copy on the copy engine; with pageable host memory on a side it is synchronous,
// staged row by row (one staged copy when the rows are contiguous on both sides).
// Both sides of a 2D copy in `ctx` (Resolve's checks): what Copy2D queues, and what Check2D checks.
CUresult ResolveSides(CUctx_st* ctx, const CUDA_MEMCPY2D& c, Side* src, Side* dst) {
  const CUresult r = Resolve(ctx, c.srcMemoryType, c.srcHost, c.srcDevice, c.srcArray,
                             c.srcXInBytes, c.srcY, c.srcPitch, c.WidthInBytes, c.Height, src);
  if (r != CUDA_SUCCESS) return r;
  return Resolve(ctx, c.dstMemoryType, c.dstHost, c.dstDevice, c.dstArray, c.dstXInBytes, c.dstY,
                 c.dstPitch, c.WidthInBytes, c.Height, dst);
}

CUresult Copy2D(const CUDA_MEMCPY2D* c, CUstream handle, bool async) {
  if (c == nullptr) return CheckInit(true);
  const size_t width = c->WidthInBytes, height = c->Height;
  uint64_t bytes = 0;
  if (height != 0 && width > std::numeric_limits<uint64_t>::max() / height) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  bytes = uint64_t(width) * height;
  Side src, dst;
  CUresult resolved = CUDA_SUCCESS;
  CUresult r = OnStream(
      handle, bytes, async,
      [&](CUctx_st* ctx) {
        resolved = ResolveSides(ctx, *c, &src, &dst);
        return resolved == CUDA_SUCCESS;
      },
      [&](CUctx_st* ctx, CUstream_st* s) -> CUresult {
        gpuvm::guest::Channel* ch = s->channel;
        if (src.gpu && dst.gpu) {
          return Queued(ctx, s,
                        ch->Copy2DAsync({dst.va, dst.pitch, src.va, src.pitch, width, height}),
                        async);
        }
        const bool packed = (height == 1 || (src.pitch == width && dst.pitch == width));
        const size_t rows = packed ? 1 : height;
        const size_t row_bytes = packed ? bytes : width;
        if (!src.gpu && !dst.gpu) {
          // Host to host: after the stream's earlier work, as a copy on the stream would be.
          Status st = ch->Synchronize();
          if (!st.ok()) return ContextError(ctx, st);
          for (size_t row = 0; row < rows; ++row) {
            std::memmove(dst.host + row * dst.pitch, src.host + row * src.pitch, row_bytes);
          }
          return CUDA_SUCCESS;
        }
        for (size_t row = 0; row < rows; ++row) {
          Status st = !src.gpu ? ch->CopyHostToDevice(dst.va + row * dst.pitch,
                                                      src.host + row * src.pitch, row_bytes)
                               : ch->CopyDeviceToHost(dst.host + row * dst.pitch,
                                                      src.va + row * src.pitch, row_bytes);
          if (!st.ok()) return ContextError(ctx, st);
        }
        return CUDA_SUCCESS;
      },
      CU_GRAPH_NODE_TYPE_MEMCPY,
      [c] {
        const CUDA_MEMCPY2D copy = *c;
        return Replay([copy](CUstream t) { return Copy2D(&copy, t, true); });
      });
  return r == CUDA_ERROR_INVALID_VALUE && resolved != CUDA_SUCCESS ? resolved : r;
}

// What Copy2D checks of `c` on `handle`'s stream before anything moves, without copying:
// CUDA_SUCCESS when Copy2D would accept it.
CUresult Check2D(const CUDA_MEMCPY2D& c, CUstream handle) {
  CUctx_st* ctx;
  CUstream_st* s;
  CUresult r = CurrentStream(handle, &ctx, &s);
  if (r != CUDA_SUCCESS) return r;
  const size_t width = c.WidthInBytes, height = c.Height;
  if (height != 0 && width > std::numeric_limits<uint64_t>::max() / height) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (uint64_t(width) * height == 0) return CUDA_SUCCESS;  // Copy2D has nothing to check either
  Side src, dst;
  return ResolveSides(ctx, c, &src, &dst);
}

// A 3D copy as one 2D copy per slice, all or nothing: every slice is checked as cuMemcpy2D checks
// it before the first one is copied or queued, so a copy refused for its last slice has changed
// nothing (a copy that fails while it runs, like any copy, may have moved part of its bytes).
CUresult Copy3D(const CUDA_MEMCPY3D* c, CUstream handle, bool async) {
  if (c == nullptr) return CheckInit(true);
  if (c->srcLOD != 0 || c->dstLOD != 0 || c->reserved0 != nullptr || c->reserved1 != nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // An array side's slices are its own: rows_per_slice rows apart, whatever srcHeight/dstHeight
  // say (CUDA ignores them for arrays). A dead array is caught by the slice's copy.
  auto slice_rows = [](CUmemorytype type, CUarray array, size_t height) -> size_t {
    if (type != CU_MEMORYTYPE_ARRAY) return height;
    return Process::Get().IsLive(array, Process::Kind::kArray) ? array->rows_per_slice : 0;
  };
  const size_t src_height = slice_rows(c->srcMemoryType, c->srcArray, c->srcHeight);
  const size_t dst_height = slice_rows(c->dstMemoryType, c->dstArray, c->dstHeight);
  std::vector<CUDA_MEMCPY2D> slices;
  for (size_t z = 0; z < c->Depth; ++z) {
    CUDA_MEMCPY2D slice{};
    const size_t src_z = c->srcZ + z, dst_z = c->dstZ + z;
    // Rows of slice z start at (z * height + y) * pitch: fold the slice into the row index.
    if ((src_height != 0 && src_z > std::numeric_limits<size_t>::max() / src_height) ||
        (dst_height != 0 && dst_z > std::numeric_limits<size_t>::max() / dst_height)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    slice.srcXInBytes = c->srcXInBytes;
    slice.srcY = src_z * src_height + c->srcY;
    slice.srcMemoryType = c->srcMemoryType;
    slice.srcHost = c->srcHost;
    slice.srcDevice = c->srcDevice;
    slice.srcArray = c->srcArray;
    slice.srcPitch = c->srcPitch;
    slice.dstXInBytes = c->dstXInBytes;
    slice.dstY = dst_z * dst_height + c->dstY;
    slice.dstMemoryType = c->dstMemoryType;
    slice.dstHost = c->dstHost;
    slice.dstDevice = c->dstDevice;
    slice.dstArray = c->dstArray;
    slice.dstPitch = c->dstPitch;
    slice.WidthInBytes = c->WidthInBytes;
    slice.Height = c->Height;
    if (c->Depth > 1 && (src_height < c->Height || dst_height < c->Height)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (const CUresult r = Check2D(slice, handle); r != CUDA_SUCCESS) return r;
    slices.push_back(slice);
  }
  for (const CUDA_MEMCPY2D& slice : slices) {
    const CUresult r = Copy2D(&slice, handle, async);
    if (r != CUDA_SUCCESS) return r;
  }
  return c->Depth == 0 ? CheckInit() : CUDA_SUCCESS;
}

// cuMemsetD2D8/32: `height` rows of `width` elements of `element` bytes, `pattern` repeated.
CUresult Memset2D(CUdeviceptr dst, size_t pitch, uint32_t pattern, size_t width, size_t height,
                  unsigned element, CUstream handle, bool async) {
  if (height != 0 && width > std::numeric_limits<uint64_t>::max() / element / height) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const uint64_t row = uint64_t(width) * element;
  return OnStream(
      handle, row * height, async,
      [&](CUctx_st* ctx) {
        uint64_t span;
        return (height <= 1 || pitch >= row) && Span(pitch, row, height, &span) &&
               dst % element == 0 && (height <= 1 || pitch % element == 0) &&
               InRange(ctx, dst, span);
      },
      [&](CUctx_st* ctx, CUstream_st* s) {
        return Queued(ctx, s, s->channel->Memset2DAsync(dst, pitch, pattern, row, height), async);
      },
      CU_GRAPH_NODE_TYPE_MEMSET,
      [=] {
        return Replay([=](CUstream t) {
          return Memset2D(dst, pitch, pattern, width, height, element, t, true);
        });
      });
}

// The unified-addressing copy: each side is the context's device memory when a pointer lies in
// it, host memory otherwise (CU_MEMORYTYPE_UNIFIED, as a 2D copy resolves it).
CUresult UnifiedCopy(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, bool async) {
  if (n == 0) return CheckInit();
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  c.srcDevice = src;
  c.dstDevice = dst;
  c.WidthInBytes = n;
  c.Height = 1;
  return Copy2D(&c, s, async);
}

}  // namespace

GPUVM_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return UnifiedCopy(dst, src, n, s, true);
}
GPUVM_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return UnifiedCopy(dst, src, n, nullptr, false);
}
GPUVM_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  return UnifiedCopy(dst, src, n, CU_STREAM_PER_THREAD, false);
}

GPUVM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width,
                                         size_t height, unsigned int element_bytes) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0 ||
      (element_bytes != 4 && element_bytes != 8 && element_bytes != 16)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (width > std::numeric_limits<size_t>::max() - kPitchAlignment) return CUDA_ERROR_INVALID_VALUE;
  const size_t row = (width + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
  if (height > std::numeric_limits<size_t>::max() / row) return CUDA_ERROR_OUT_OF_MEMORY;
  r = cuMemAlloc_v2(dptr, row * height);
  if (r == CUDA_SUCCESS) *pitch = row;
  return r;
}

GPUVM_EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D* c) { return Copy2D(c, nullptr, false); }
GPUVM_EXPORT CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D* c) { return cuMemcpy2D_v2(c); }
// No alignment constraints apply to our copy engines: Unaligned is the same copy.
GPUVM_EXPORT CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* c) {
  return Copy2D(c, nullptr, false);
}
GPUVM_EXPORT CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D* c) {
  return cuMemcpy2DUnaligned_v2(c);
}
GPUVM_EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* c, CUstream s) {
  return Copy2D(c, s, true);
}
GPUVM_EXPORT CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D* c, CUstream s) {
  return cuMemcpy2DAsync_v2(c, s);
}
GPUVM_EXPORT CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D* c) { return Copy3D(c, nullptr, false); }
GPUVM_EXPORT CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D* c) { return cuMemcpy3D_v2(c); }
GPUVM_EXPORT CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* c, CUstream s) {
  return Copy3D(c, s, true);
}
GPUVM_EXPORT CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D* c, CUstream s) {
  return cuMemcpy3DAsync_v2(c, s);
}
GPUVM_EXPORT CUresult cuMemsetD2D8_v2(CUdeviceptr dst, size_t pitch, unsigned char v, size_t width,
                                      size_t height) {
  return Memset2D(dst, pitch, v * 0x01010101u, width, height, 1, nullptr, false);
}
GPUVM_EXPORT CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr dst, size_t pitch, unsigned char v,
                                           size_t width, size_t height) {
  return cuMemsetD2D8_v2(dst, pitch, v, width, height);
}
GPUVM_EXPORT CUresult cuMemsetD2D32_v2(CUdeviceptr dst, size_t pitch, unsigned int v, size_t width,
                                       size_t height) {
  return Memset2D(dst, pitch, v, width, height, 4, nullptr, false);
}
GPUVM_EXPORT CUresult cuMemsetD2D32_v2_ptds(CUdeviceptr dst, size_t pitch, unsigned int v,
                                            size_t width, size_t height) {
  return cuMemsetD2D32_v2(dst, pitch, v, width, height);
}
GPUVM_EXPORT CUresult cuMemsetD2D16_v2(CUdeviceptr dst, size_t pitch, unsigned short v,
                                       size_t width, size_t height) {
  return Memset2D(dst, pitch, v * 0x00010001u, width, height, 2, nullptr, false);
}
GPUVM_EXPORT CUresult cuMemsetD2D16_v2_ptds(CUdeviceptr dst, size_t pitch, unsigned short v,
                                            size_t width, size_t height) {
  return Memset2D(dst, pitch, v * 0x00010001u, width, height, 2, CU_STREAM_PER_THREAD, false);
}
GPUVM_EXPORT CUresult cuMemsetD2D16Async(CUdeviceptr dst, size_t pitch, unsigned short v,
                                         size_t width, size_t height, CUstream s) {
  return Memset2D(dst, pitch, v * 0x00010001u, width, height, 2, s, true);
}
GPUVM_EXPORT CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr dst, size_t pitch, unsigned short v,
                                              size_t width, size_t height, CUstream s) {
  return cuMemsetD2D16Async(dst, pitch, v, width, height, s);
}
GPUVM_EXPORT CUresult cuMemsetD2D8Async(CUdeviceptr dst, size_t pitch, unsigned char v,
                                        size_t width, size_t height, CUstream s) {
  return Memset2D(dst, pitch, v * 0x01010101u, width, height, 1, s, true);
}
GPUVM_EXPORT CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr dst, size_t pitch, unsigned char v,
                                             size_t width, size_t height, CUstream s) {
  return cuMemsetD2D8Async(dst, pitch, v, width, height, s);
}
GPUVM_EXPORT CUresult cuMemsetD2D32Async(CUdeviceptr dst, size_t pitch, unsigned int v,
                                         size_t width, size_t height, CUstream s) {
  return Memset2D(dst, pitch, v, width, height, 4, s, true);
}
GPUVM_EXPORT CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr dst, size_t pitch, unsigned int v,
                                              size_t width, size_t height, CUstream s) {
  return cuMemsetD2D32Async(dst, pitch, v, width, height, s);
}
