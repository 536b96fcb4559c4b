// libcuda.so.1, stream-ordered allocation: cuMemAllocAsync / cuMemFreeAsync, memory pools
// (cuMemPoolCreate ..., the context's default pool) and cuMemAllocFromPoolAsync.
//
// The model. A pool belongs to the context it was made in (CUDA's pools belong to a device; here a
// device's contexts are separate GPU address spaces, so a pool's memory is one context's). An
// allocation is made at once — memory that exists before the stream reaches the allocation is
// valid for everything after it — from the pool's free blocks when one is large enough and free
// for reuse, else from the context (AllocDevice). A stream-ordered free puts the block on the
// pool's free list with the stream and its fence. An allocation on the same stream reuses it at
// once: the stream's order puts everything before the free ahead of everything after the allocation
// (CUDA's rule too). Another stream reuses it only once the GPU passed that fence (CUDA may reuse
// earlier, following event dependencies; never this late). At the synchronizing calls
// (cuCtxSynchronize, cuStreamSynchronize, cuEventSynchronize) and cuMemPoolTrimTo the pool gives
// free blocks back to the context, keeping up to its release threshold (default 0, as in CUDA).
// cuMemFree of a stream-ordered allocation frees it at once (CUDA allows it; the driver's free
// waits for the GPU). A free block of a stream that is destroyed counts as reusable (destroying a
// stream waits for its work).
//
// Not here: allocations in a stream capture (allocation nodes: the capture is refused as CUDA
// refuses unsupported calls), IPC export of pools, pools of other locations than the device,
// cudaMemPoolSetAccess for other devices (there are none).
//
// Threading: every entry point may be called from any thread; g_pool_mu guards every pool.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "runtime/driver_api.h"
#include "runtime/driver_api_graph.h"

struct CUmemPoolHandle_st {
  CUctx_st* ctx = nullptr;
  bool is_default = false;
  uint64_t release_threshold = 0;
  int reuse_follow_event_dependencies = 1;
  int reuse_allow_opportunistic = 1;
  int reuse_allow_internal_dependencies = 1;
  // Allocations handed out (va -> block size) and free blocks waiting for reuse or release.
  struct FreeBlock {
    uint64_t va;
    uint64_t size;
    CUstream_st* stream;  // its free's stream (null: free already)
    gpuvm::guest::Fence fence;
  };
  std::map<uint64_t, uint64_t> used;  // change only through Hand and Take
  std::vector<FreeBlock> free;        // change only through Park and Unpark
  uint64_t used_high = 0, reserved_high = 0;

  uint64_t used_bytes() const { return used_total_; }
  uint64_t free_bytes() const { return free_total_; }
  uint64_t reserved_bytes() const { return used_total_ + free_total_; }

  // An allocation of `size` bytes at `va` is handed out.
  void Hand(uint64_t va, uint64_t size) {
    used[va] = size;
    used_total_ += size;
    used_high = std::max(used_high, used_bytes());
    reserved_high = std::max(reserved_high, reserved_bytes());
  }
  // The handed-out allocation at `va` comes back; its size.
  uint64_t Take(uint64_t va) {
    auto it = used.find(va);
    const uint64_t size = it->second;
    used.erase(it);
    used_total_ -= size;
    return size;
  }
  void Park(const FreeBlock& b) {
    free.push_back(b);
    free_total_ += b.size;
  }
  FreeBlock Unpark(size_t i) {
    const FreeBlock b = free[i];
    free.erase(free.begin() + i);
    free_total_ -= b.size;
    return b;
  }

 private:
  uint64_t used_total_ = 0, free_total_ = 0;  // the byte sums of `used` and `free`
};

namespace {

std::mutex g_pool_mu;
// Every pool and each context's default and current pool. Guarded by g_pool_mu.
std::map<CUctx_st*, CUmemoryPool> g_default;
std::map<CUctx_st*, CUmemoryPool> g_current;
std::vector<std::unique_ptr<CUmemPoolHandle_st>> g_pools;
// Set by the first pool: until then the hooks of cuMemFree and the synchronizing calls skip the
// lock (a program that never uses pools pays nothing for them).
std::atomic<bool> g_any_pool{false};

// A new pool joins g_pools. g_pool_mu held.
CUmemoryPool AddPool(std::unique_ptr<CUmemPoolHandle_st> pool) {
  g_any_pool.store(true, std::memory_order_release);
  g_pools.push_back(std::move(pool));
  return g_pools.back().get();
}

CUmemoryPool LivePool(CUmemoryPool pool) {
  for (const auto& p : g_pools) {
    if (p.get() == pool) return pool;
  }
  return nullptr;
}

// The context's default pool, made on first use. g_pool_mu held.
CUmemoryPool DefaultPool(CUctx_st* ctx) {
  CUmemoryPool& pool = g_default[ctx];
  if (pool == nullptr) {
    auto made = std::make_unique<CUmemPoolHandle_st>();
    made->ctx = ctx;
    made->is_default = true;
    pool = AddPool(std::move(made));
  }
  return pool;
}

CUmemoryPool CurrentPool(CUctx_st* ctx) {
  auto it = g_current.find(ctx);
  return it != g_current.end() ? it->second : DefaultPool(ctx);
}

// Whether a free block may be reused by work on `s` (null: released): `s` is the stream it was
// freed on, or that stream passed the free. g_pool_mu held.
bool Reusable(const CUmemPoolHandle_st::FreeBlock& b, const CUstream_st* s = nullptr) {
  if (b.stream == nullptr || (s != nullptr && b.stream == s)) return true;
  auto done = b.stream->channel->IsDone(b.fence);
  return done.ok() && *done;
}

// Gives reusable free blocks back to the context until at most `keep` bytes of them stay.
// g_pool_mu held.
void Trim(CUmemoryPool pool, uint64_t keep) {
  for (size_t i = 0; i < pool->free.size() && pool->free_bytes() > keep;) {
    if (!Reusable(pool->free[i])) {
      ++i;
      continue;
    }
    (void)pool->ctx->gctx->FreeIdle(pool->Unpark(i).va);
  }
}

// The pool of ctx that handed out `va` (an allocation's first byte), or null. g_pool_mu held.
CUmemoryPool OwnerOf(CUctx_st* ctx, uint64_t va) {
  for (const auto& p : g_pools) {
    if (p->ctx == ctx && p->used.count(va) != 0) return p.get();
  }
  return nullptr;
}

CUresult AllocFrom(CUmemoryPool pool, CUdeviceptr* dptr, size_t bytes, CUstream handle) {
  CUctx_st* ctx;
  CUstream_st* s;
  CUresult r = CurrentStream(handle, &ctx, &s);
  if (r != CUDA_SUCCESS) return r;
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (gpuvm::runtime::driver_api::Capturing(s)) {
    return gpuvm::runtime::driver_api::RefuseInCapture(s);  // no allocation nodes
  }
  std::lock_guard lock(g_pool_mu);
  if (pool == nullptr) pool = CurrentPool(ctx);
  if (LivePool(pool) == nullptr || pool->ctx != ctx) return CUDA_ERROR_INVALID_VALUE;
  // The smallest reusable free block that fits, if it is not more than twice the size.
  size_t best = pool->free.size();
  for (size_t i = 0; i < pool->free.size(); ++i) {
    const auto& b = pool->free[i];
    if (b.size >= bytes && b.size <= 2 * uint64_t(bytes) &&
        (best == pool->free.size() || b.size < pool->free[best].size) && Reusable(b, s)) {
      best = i;
    }
  }
  uint64_t va, size;
  if (best != pool->free.size()) {
    const CUmemPoolHandle_st::FreeBlock b = pool->Unpark(best);
    va = b.va;
    size = b.size;
  } else {
    auto a = ctx->gctx->AllocDevice(bytes);
    if (!a.ok()) {
      // Out of memory: give back what is free and try once more.
      Trim(pool, 0);
      a = ctx->gctx->AllocDevice(bytes);
    }
    if (!a.ok()) return ContextError(ctx, a.status(), CUDA_ERROR_OUT_OF_MEMORY);
    va = a->va;
    size = a->size;
  }
  pool->Hand(va, size);
  *dptr = va;
  return CUDA_SUCCESS;
}

}  // namespace

// ---- what the other entry points call (driver_api.h) ----

namespace gpuvm::runtime::driver_api {

bool ForgetPoolAllocation(CUctx_st* ctx, uint64_t va) {
  if (!g_any_pool.load(std::memory_order_acquire)) return false;
  std::lock_guard lock(g_pool_mu);
  CUmemoryPool pool = OwnerOf(ctx, va);
  if (pool == nullptr) return false;
  (void)pool->Take(va);
  return true;
}

void TrimPools(CUctx_st* ctx) {
  if (!g_any_pool.load(std::memory_order_acquire)) return;
  std::lock_guard lock(g_pool_mu);
  for (const auto& p : g_pools) {
    if (p->ctx == ctx) Trim(p.get(), p->release_threshold);
  }
}

void ForgetPoolStream(CUstream_st* s) {
  if (!g_any_pool.load(std::memory_order_acquire)) return;
  std::lock_guard lock(g_pool_mu);
  for (const auto& p : g_pools) {
    for (auto& b : p->free) {
      if (b.stream == s) b.stream = nullptr;  // destroying the stream waits for its work
    }
  }
}

void ForgetPools(CUctx_st* ctx) {
  if (!g_any_pool.load(std::memory_order_acquire)) return;
  std::lock_guard lock(g_pool_mu);
  g_default.erase(ctx);
  g_current.erase(ctx);
  std::erase_if(g_pools, [ctx](const auto& p) { return p->ctx == ctx; });
}

}  // namespace gpuvm::runtime::driver_api

// ---- stream-ordered allocation ----

GPUVM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream handle) {
  return AllocFrom(nullptr, dptr, bytes, handle);
}
GPUVM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream handle) {
  return cuMemAllocAsync(dptr, bytes, handle);
}

GPUVM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                              CUstream handle) {
  if (pool == nullptr) return CheckInit(true);
  return AllocFrom(pool, dptr, bytes, handle);
}
GPUVM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes,
                                                   CUmemoryPool pool, CUstream handle) {
  return cuMemAllocFromPoolAsync(dptr, bytes, pool, handle);
}

GPUVM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream handle) {
  CUctx_st* ctx;
  CUstream_st* s;
  CUresult r = CurrentStream(handle, &ctx, &s);
  if (r != CUDA_SUCCESS) return r;
  if (gpuvm::runtime::driver_api::Capturing(s)) {
    return gpuvm::runtime::driver_api::RefuseInCapture(s);
  }
  if ((r = Ordered(s)) != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_pool_mu);
  CUmemoryPool pool = OwnerOf(ctx, dptr);
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;  // not a stream-ordered allocation
  const uint64_t size = pool->Take(dptr);
  pool->Park({dptr, size, s, s->channel->last_fence()});
  return CUDA_SUCCESS;
}
GPUVM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream handle) {
  return cuMemFreeAsync(dptr, handle);
}

// ---- pools ----

namespace {

// What the device-pool calls check first, in CUDA's order: a current context, the arguments, the
// device.
CUresult ForDevice(CUdevice dev, bool bad_args, CUctx_st** ctx) {
  CUresult r = Current(ctx);
  if (r != CUDA_SUCCESS) return r;
  if (bad_args) return CUDA_ERROR_INVALID_VALUE;
  return ValidDevice(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

}  // namespace

GPUVM_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* out, CUdevice dev) {
  CUctx_st* ctx;
  CUresult r = ForDevice(dev, out == nullptr, &ctx);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_pool_mu);
  *out = DefaultPool(ctx);
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool* out, CUdevice dev) {
  CUctx_st* ctx;
  CUresult r = ForDevice(dev, out == nullptr, &ctx);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_pool_mu);
  *out = CurrentPool(ctx);
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  CUctx_st* ctx;
  CUresult r = ForDevice(dev, false, &ctx);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_pool_mu);
  if (LivePool(pool) == nullptr || pool->ctx != ctx) return CUDA_ERROR_INVALID_VALUE;
  g_current[ctx] = pool;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuMemPoolCreate(CUmemoryPool* out, const CUmemPoolProps* props) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (out == nullptr || props == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!ValidDevice(props->location.id)) return CUDA_ERROR_INVALID_DEVICE;
  if (props->handleTypes != CU_MEM_HANDLE_TYPE_NONE) return CUDA_ERROR_NOT_SUPPORTED;  // IPC
  auto pool = std::make_unique<CUmemPoolHandle_st>();
  pool->ctx = ctx;
  std::lock_guard lock(g_pool_mu);
  *out = AddPool(std::move(pool));
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_pool_mu);
  if (LivePool(pool) == nullptr || pool->is_default) return CUDA_ERROR_INVALID_VALUE;
  // CUDA: outstanding allocations stay valid until freed; the pool's memory goes as they are.
  // Here blocks still in use simply stay the context's allocations (cuMemFree frees them).
  Trim(pool, 0);
  for (const auto& b : pool->free) {  // still on their way: wait for the streams, then free
    if (b.stream != nullptr) (void)b.stream->channel->Wait(b.fence);
    (void)pool->ctx->gctx->Free(b.va);
  }
  for (auto it = g_current.begin(); it != g_current.end();) {
    it = it->second == pool ? g_current.erase(it) : std::next(it);
  }
  std::erase_if(g_pools, [pool](const auto& p) { return p.get() == pool; });
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_pool_mu);
  if (LivePool(pool) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Trim(pool, keep);
  return CUDA_SUCCESS;
}

namespace {

// The pool's reuse flag `attr` names (an int attribute), or null for the others (64-bit sizes).
int* ReuseFlag(CUmemoryPool pool, CUmemPool_attribute attr) {
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      return &pool->reuse_follow_event_dependencies;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      return &pool->reuse_allow_opportunistic;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      return &pool->reuse_allow_internal_dependencies;
    default:
      return nullptr;
  }
}

}  // namespace

GPUVM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                            void* value) {
  CUresult r = CheckInit(value == nullptr);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_pool_mu);
  if (LivePool(pool) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // The value is an int for the flags and 64 bits for the sizes: read only what the attribute has.
  if (int* flag = ReuseFlag(pool, attr)) {
    *flag = *static_cast<const int*>(value) != 0;
    return CUDA_SUCCESS;
  }
  const uint64_t bytes = *static_cast<const cuuint64_t*>(value);
  switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      pool->release_threshold = bytes;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:  // only a reset to 0 is allowed
      if (bytes != 0) return CUDA_ERROR_INVALID_VALUE;
      pool->reserved_high = pool->reserved_bytes();
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      if (bytes != 0) return CUDA_ERROR_INVALID_VALUE;
      pool->used_high = pool->used_bytes();
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;  // the current sizes are read-only
  }
}

GPUVM_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                            void* value) {
  CUresult r = CheckInit(value == nullptr);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_pool_mu);
  if (LivePool(pool) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (const int* flag = ReuseFlag(pool, attr)) {
    *static_cast<int*>(value) = *flag;
    return CUDA_SUCCESS;
  }
  uint64_t bytes;
  switch (attr) {
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      bytes = pool->release_threshold;
      break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
      bytes = pool->reserved_bytes();
      break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      bytes = pool->reserved_high;
      break;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      bytes = pool->used_bytes();
      break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      bytes = pool->used_high;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  *static_cast<cuuint64_t*>(value) = bytes;
  return CUDA_SUCCESS;
}

// One device: it has read-write access to its own pools, and that cannot change.
GPUVM_EXPORT CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc* map,
                                         size_t count) {
  CUresult r = CheckInit(count > 0 && map == nullptr);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_pool_mu);
  if (LivePool(pool) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    if (map[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || !ValidDevice(map[i].location.id)) {
      return CUDA_ERROR_INVALID_DEVICE;
    }
    if (map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuMemPoolGetAccess(CUmemAccess_flags* flags, CUmemoryPool pool,
                                         CUmemLocation* location) {
  CUresult r = CheckInit(flags == nullptr || location == nullptr);
  if (r != CUDA_SUCCESS) return r;
  std::lock_guard lock(g_pool_mu);
  if (LivePool(pool) == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (location->type != CU_MEM_LOCATION_TYPE_DEVICE || !ValidDevice(location->id)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  *flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  return CUDA_SUCCESS;
}
