// What the entry points of libcuda.so.1 (runtime/driver_api*.cc, one file per area of the driver
// API) share: the checks every function makes first — initialization, the calling thread's current
// context, device ordinals, streams, device ranges and pinned host ranges — and GPUVM_EXPORT.
//
// Internal to libcuda.so.1: libcuda.map exports only cu*, so nothing here is visible to programs.
//
// Threading: every function may be called from any thread (see runtime/core/objects.h).
#ifndef GPUVM_RUNTIME_DRIVER_API_H_
#define GPUVM_RUNTIME_DRIVER_API_H_

#include <cstdint>
#include <mutex>
#include <set>

#include "runtime/core/errors.h"
#include "runtime/core/objects.h"
#include "runtime/include/cuda.h"

#define GPUVM_EXPORT extern "C" __attribute__((visibility("default")))

namespace gpuvm::runtime::driver_api {

using ::gpuvm::Status;
using ::gpuvm::StatusCode;
using ::gpuvm::runtime::ContextError;
using ::gpuvm::runtime::ContextHealth;
using ::gpuvm::runtime::ContextStack;
using ::gpuvm::runtime::Process;
using ::gpuvm::runtime::ReleaseHostCallbacks;
using ::gpuvm::runtime::ResolveStream;
using ::gpuvm::runtime::ToCuResult;

// CUDA_SUCCESS once cuInit succeeded.
CUresult CheckInit();
// The first check of most entry points: CheckInit's error, else CUDA_ERROR_INVALID_VALUE when
// `bad_args` (a null out-pointer, a bad length), else CUDA_SUCCESS.
CUresult CheckInit(bool bad_args);

bool ValidDevice(CUdevice dev);

// CheckInit's error, else CUDA_ERROR_INVALID_HANDLE unless `f` is a live function.
CUresult LiveFunction(CUfunction f);

// The calling thread's current context, checked: initialized, present, alive, not faulted.
CUresult Current(CUctx_st** out, bool check_health = true);

// [va, va + bytes) lies inside one allocation of ctx.
bool InRange(CUctx_st* ctx, uint64_t va, uint64_t bytes);

// The pinned/registered host allocation of ctx that contains [p, p + bytes), if any.
bool InPinnedHost(CUctx_st* ctx, const void* p, uint64_t bytes, uint64_t* va);

// The stream `handle` names in ctx (0 and the legacy/per-thread handles included).
CUresult StreamFor(CUctx_st* ctx, CUstream handle, CUstream_st** out);

// True when `s`, named by `handle`, is the legacy null stream while a blocking stream of ctx
// captures: a use CUDA refuses (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT; driver_api_graph.h).
inline bool LegacyStreamInCapture(CUctx_st* ctx, const CUstream_st* s, CUstream handle) {
  return s->is_default && handle != CU_STREAM_PER_THREAD &&
         ctx->blocking_captures.load(std::memory_order_acquire) > 0;
}

// Orders work on `s` after the legacy default stream's, as CUDA's legacy semantics require.
CUresult Ordered(CUstream_st* s);

// Current (checked) and then StreamFor: how every call that queues work on a stream starts.
CUresult CurrentStream(CUstream handle, CUctx_st** ctx, CUstream_st** s);

// ---- memory pools (driver_api_pool.cc) ----
// cuMemFree of `va`: forgets it when a pool handed it out; true then.
bool ForgetPoolAllocation(CUctx_st* ctx, uint64_t va);
// At a synchronizing call: each pool of ctx gives its free blocks back down to its release
// threshold.
void TrimPools(CUctx_st* ctx);
// Stream `s` is being destroyed: its pending stream-ordered frees count as done.
void ForgetPoolStream(CUstream_st* s);
// Context teardown (SetContextTeardownHook): its pools go.
void ForgetPools(CUctx_st* ctx);

// A new stream or event joins its context's set (under the context's lock) and the live handles.
template <typename T>
void Track(CUctx_st* ctx, std::set<T*>& owned, T* object, Process::Kind kind) {
  {
    std::lock_guard<std::mutex> lock(ctx->mu);
    owned.insert(object);
  }
  Process::Get().Register(object, kind);
}

// The reverse of Track, before the object is destroyed.
template <typename T>
void Untrack(CUctx_st* ctx, std::set<T*>& owned, T* object) {
  {
    std::lock_guard<std::mutex> lock(ctx->mu);
    owned.erase(object);
  }
  Process::Get().Unregister(object);
}

}  // namespace gpuvm::runtime::driver_api

// The entry points are extern "C" functions at global scope, in the driver_api*.cc files only; they
// use these names unqualified.
using gpuvm::runtime::driver_api::CheckInit;
using gpuvm::runtime::driver_api::ContextError;
using gpuvm::runtime::driver_api::ContextHealth;
using gpuvm::runtime::driver_api::ContextStack;
using gpuvm::runtime::driver_api::Current;
using gpuvm::runtime::driver_api::CurrentStream;
using gpuvm::runtime::driver_api::InPinnedHost;
using gpuvm::runtime::driver_api::InRange;
using gpuvm::runtime::driver_api::LiveFunction;
using gpuvm::runtime::driver_api::Ordered;
using gpuvm::runtime::driver_api::Process;
using gpuvm::runtime::driver_api::ReleaseHostCallbacks;
using gpuvm::runtime::driver_api::ResolveStream;
using gpuvm::runtime::driver_api::Status;
using gpuvm::runtime::driver_api::StatusCode;
using gpuvm::runtime::driver_api::StreamFor;
using gpuvm::runtime::driver_api::ToCuResult;
using gpuvm::runtime::driver_api::Track;
using gpuvm::runtime::driver_api::Untrack;
using gpuvm::runtime::driver_api::ValidDevice;

#endif  // GPUVM_RUNTIME_DRIVER_API_H_
