// libcuda.so.1, streams and events: creation and destruction, synchronization, queries, waits and
// elapsed time (driver_api.h has the shared checks).
//
// Threading: every entry point may be called from any thread (see runtime/core/objects.h).
#include "runtime/driver_api.h"
#include "runtime/driver_api_graph.h"

using gpuvm::runtime::driver_api::CapturedEvent;
using gpuvm::runtime::driver_api::CaptureEventRecord;
using gpuvm::runtime::driver_api::CaptureEventWait;
using gpuvm::runtime::driver_api::CaptureNode;
using gpuvm::runtime::driver_api::Capturing;
using gpuvm::runtime::driver_api::ForgetCapture;
using gpuvm::runtime::driver_api::RefuseInCapture;

GPUVM_EXPORT CUresult cuStreamCreate(CUstream* out, unsigned int flags) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (out == nullptr || (flags & ~unsigned(CU_STREAM_NON_BLOCKING)) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  auto channel = ctx->gctx->CreateChannel();
  if (!channel.ok()) return ContextError(ctx, channel.status(), CUDA_ERROR_OUT_OF_MEMORY);
  auto event = ctx->gctx->CreateEvent();
  if (!event.ok()) {
    (void)ctx->gctx->DestroyChannel(*channel);
    return ContextError(ctx, event.status(), CUDA_ERROR_OUT_OF_MEMORY);
  }
  auto* s = new CUstream_st;
  s->ctx = ctx;
  s->channel = *channel;
  s->flags = flags;
  s->order_event = *event;
  Track(ctx, ctx->streams, s, Process::Kind::kStream);
  *out = s;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(s, Process::Kind::kStream)) return CUDA_ERROR_INVALID_HANDLE;
  CUctx_st* ctx = s->ctx;
  ForgetCapture(s);
  gpuvm::runtime::driver_api::ForgetPoolStream(s);
  Untrack(ctx, ctx->streams, s);
  ReleaseHostCallbacks(s);
  // CUDA returns at once and lets queued work finish; the driver waits (bounded) for it instead.
  Status st = ctx->gctx->DestroyChannel(s->channel);
  (void)ctx->gctx->DestroyEvent(s->order_event);
  delete s;
  return st.ok() ? CUDA_SUCCESS : ContextError(ctx, st);
}

GPUVM_EXPORT CUresult cuStreamSynchronize(CUstream handle) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx, /*check_health=*/false);
  if (r != CUDA_SUCCESS) return r;
  CUstream_st* s;
  if ((r = StreamFor(ctx, handle, &s)) != CUDA_SUCCESS) return r;
  if (Capturing(s)) return RefuseInCapture(s);
  Status st = s->is_default ? ctx->gctx->Synchronize() : s->channel->Synchronize();
  if (!st.ok()) return ContextError(ctx, st);
  gpuvm::runtime::DrainPrintf(ctx);
  gpuvm::runtime::driver_api::TrimPools(ctx);
  return ContextHealth(ctx);
}

GPUVM_EXPORT CUresult cuStreamQuery(CUstream handle) {
  CUctx_st* ctx;
  CUstream_st* s;
  CUresult r = CurrentStream(handle, &ctx, &s);
  if (r != CUDA_SUCCESS) return r;
  if (Capturing(s)) return RefuseInCapture(s);
  auto done = s->channel->IsDone(s->channel->last_fence());
  if (!done.ok()) return ContextError(ctx, done.status());
  return *done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

GPUVM_EXPORT CUresult cuStreamWaitEvent(CUstream handle, CUevent event, unsigned int flags) {
  CUctx_st* ctx;
  CUstream_st* s;
  CUresult r = CurrentStream(handle, &ctx, &s);
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(event, Process::Kind::kEvent) || event->ctx != ctx) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (Capturing(s) || CapturedEvent(event)) return CaptureEventWait(s, event);
  return ContextError(ctx, s->channel->WaitEvent(event->event));
}

// ---- stream queries, priorities ----

namespace {

// The stream a query names: a stream of any live context, or for the special handles (null,
// CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) the current context's null stream.
CUresult QueriedStream(CUstream handle, CUstream_st** out) {
  if (handle == nullptr || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD) {
    CUctx_st* ctx;
    CUresult r = Current(&ctx, /*check_health=*/false);
    if (r != CUDA_SUCCESS) return r;
    *out = ctx->default_stream.get();
    return CUDA_SUCCESS;
  }
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(handle, Process::Kind::kStream)) return CUDA_ERROR_INVALID_HANDLE;
  *out = handle;
  return CUDA_SUCCESS;
}

// A query's answer about the stream `handle` names: get(stream) into *out.
template <typename T, typename Get>
CUresult AnswerAbout(CUstream handle, T* out, Get get) {
  CUstream_st* s;
  CUresult r = QueriedStream(handle, &s);
  if (r != CUDA_SUCCESS) return r;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *out = get(s);
  return CUDA_SUCCESS;
}

}  // namespace

// The device has no stream priorities: CUDA's range for such a device is [0, 0], and a priority
// outside the range is clamped into it.
GPUVM_EXPORT CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx, /*check_health=*/false);
  if (r != CUDA_SUCCESS) return r;
  if (least != nullptr) *least = 0;
  if (greatest != nullptr) *greatest = 0;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuStreamCreateWithPriority(CUstream* out, unsigned int flags, int priority) {
  (void)priority;  // clamped to the range [0, 0]
  return cuStreamCreate(out, flags);
}

GPUVM_EXPORT CUresult cuStreamGetPriority(CUstream handle, int* priority) {
  return AnswerAbout(handle, priority, [](CUstream_st*) { return 0; });
}

GPUVM_EXPORT CUresult cuStreamGetPriority_ptsz(CUstream handle, int* priority) {
  return cuStreamGetPriority(handle, priority);
}

GPUVM_EXPORT CUresult cuStreamGetFlags(CUstream handle, unsigned int* flags) {
  // The null stream's: CU_STREAM_DEFAULT.
  return AnswerAbout(handle, flags, [](CUstream_st* s) { return s->flags; });
}

GPUVM_EXPORT CUresult cuStreamGetFlags_ptsz(CUstream handle, unsigned int* flags) {
  return cuStreamGetFlags(handle, flags);
}

GPUVM_EXPORT CUresult cuStreamGetCtx(CUstream handle, CUcontext* ctx) {
  return AnswerAbout(handle, ctx, [](CUstream_st* s) { return CUcontext(s->ctx); });
}

GPUVM_EXPORT CUresult cuStreamGetCtx_ptsz(CUstream handle, CUcontext* ctx) {
  return cuStreamGetCtx(handle, ctx);
}

GPUVM_EXPORT CUresult cuStreamGetCtx_v2(CUstream handle, CUcontext* ctx, CUgreenCtx* green) {
  if (ctx == nullptr || green == nullptr) {
    CUresult r = CheckInit();
    return r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE;
  }
  CUresult r = cuStreamGetCtx(handle, ctx);
  if (r == CUDA_SUCCESS) *green = nullptr;  // no green contexts are made
  return r;
}

GPUVM_EXPORT CUresult cuStreamGetCtx_v2_ptsz(CUstream handle, CUcontext* ctx, CUgreenCtx* green) {
  return cuStreamGetCtx_v2(handle, ctx, green);
}

GPUVM_EXPORT CUresult cuStreamGetId(CUstream handle, unsigned long long* id) {
  return AnswerAbout(handle, id, [](CUstream_st* s) { return (unsigned long long)s->id; });
}

GPUVM_EXPORT CUresult cuStreamGetId_ptsz(CUstream handle, unsigned long long* id) {
  return cuStreamGetId(handle, id);
}

GPUVM_EXPORT CUresult cuStreamGetDevice(CUstream handle, CUdevice* device) {
  return AnswerAbout(handle, device, [](CUstream_st* s) { return s->ctx->device; });
}

GPUVM_EXPORT CUresult cuStreamGetDevice_ptsz(CUstream handle, CUdevice* device) {
  return cuStreamGetDevice(handle, device);
}

// ---- events ----

GPUVM_EXPORT CUresult cuEventCreate(CUevent* out, unsigned int flags) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (out == nullptr || (flags & ~unsigned(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                                           CU_EVENT_INTERPROCESS)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // CUDA requires interprocess events to have timing disabled.
  if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING))
    return CUDA_ERROR_INVALID_VALUE;
  auto event = ctx->gctx->CreateEvent();
  if (!event.ok()) return ContextError(ctx, event.status(), CUDA_ERROR_OUT_OF_MEMORY);
  auto* e = new CUevent_st;
  e->ctx = ctx;
  e->event = *event;
  e->flags = flags;
  Track(ctx, ctx->events, e, Process::Kind::kEvent);
  *out = e;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(e, Process::Kind::kEvent)) return CUDA_ERROR_INVALID_HANDLE;
  CUctx_st* ctx = e->ctx;
  Untrack(ctx, ctx->events, e);
  Status st = ctx->gctx->DestroyEvent(e->event);
  delete e;
  return st.ok() ? CUDA_SUCCESS : ContextError(ctx, st);
}

GPUVM_EXPORT CUresult cuEventRecord(CUevent e, CUstream handle) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(e, Process::Kind::kEvent) || e->ctx != ctx)
    return CUDA_ERROR_INVALID_HANDLE;
  CUstream_st* s;
  if ((r = StreamFor(ctx, handle, &s)) != CUDA_SUCCESS) return r;
  if (Capturing(s)) return CaptureEventRecord(s, e);
  gpuvm::runtime::driver_api::ForgetEventCapture(e);
  if ((r = Ordered(s)) != CUDA_SUCCESS) return r;
  auto fence = s->channel->Record(e->event);
  if (!fence.ok()) return ContextError(ctx, fence.status());
  e->recorded.store(true);
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuEventRecord_ptsz(CUevent e, CUstream handle) {
  return cuEventRecord(e, handle);
}

// CU_EVENT_RECORD_EXTERNAL matters only in a capture, where CUDA records an external event node;
// outside one the record is the same as cuEventRecord's. In a capture it is not supported: the
// capture here records events as dependencies between its nodes only.
GPUVM_EXPORT CUresult cuEventRecordWithFlags(CUevent e, CUstream handle, unsigned int flags) {
  if (flags != CU_EVENT_RECORD_DEFAULT && flags != CU_EVENT_RECORD_EXTERNAL) {
    return CheckInit(true);
  }
  if (flags == CU_EVENT_RECORD_EXTERNAL) {
    CUctx_st* ctx;
    CUstream_st* s;
    CUresult r = CurrentStream(handle, &ctx, &s);
    if (r != CUDA_SUCCESS) return r;
    if (Capturing(s)) return CUDA_ERROR_NOT_SUPPORTED;
  }
  return cuEventRecord(e, handle);
}

GPUVM_EXPORT CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream handle, unsigned int flags) {
  return cuEventRecordWithFlags(e, handle, flags);
}

GPUVM_EXPORT CUresult cuEventQuery(CUevent e) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(e, Process::Kind::kEvent)) return CUDA_ERROR_INVALID_HANDLE;
  if (CapturedEvent(e)) return CUDA_ERROR_CAPTURED_EVENT;
  if ((r = ContextHealth(e->ctx)) != CUDA_SUCCESS) return r;
  auto done = e->event->Query();
  if (!done.ok()) return ContextError(e->ctx, done.status());
  return *done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

GPUVM_EXPORT CUresult cuEventSynchronize(CUevent e) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(e, Process::Kind::kEvent)) return CUDA_ERROR_INVALID_HANDLE;
  if (CapturedEvent(e)) return CUDA_ERROR_CAPTURED_EVENT;
  Status st = e->event->Wait(e->ctx->gctx->options().default_timeout);
  if (!st.ok()) return ContextError(e->ctx, st);
  gpuvm::runtime::DrainPrintf(e->ctx);
  gpuvm::runtime::driver_api::TrimPools(e->ctx);
  return ContextHealth(e->ctx);
}

GPUVM_EXPORT CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  CUresult r = CheckInit(ms == nullptr);
  if (r != CUDA_SUCCESS) return r;
  Process& p = Process::Get();
  if (!p.IsLive(start, Process::Kind::kEvent) || !p.IsLive(end, Process::Kind::kEvent)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (start->ctx != end->ctx) return CUDA_ERROR_INVALID_HANDLE;
  if ((start->flags | end->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (!start->recorded.load() || !end->recorded.load()) return CUDA_ERROR_INVALID_HANDLE;
  if ((r = ContextHealth(start->ctx)) != CUDA_SUCCESS) return r;
  auto t0 = start->event->TimestampNs();
  auto t1 = end->event->TimestampNs();
  for (auto* t : {&t0, &t1}) {
    if (!t->ok()) {
      if (t->status().code() == StatusCode::kUnavailable) return CUDA_ERROR_NOT_READY;
      return ContextError(start->ctx, t->status(), CUDA_ERROR_INVALID_HANDLE);
    }
  }
  *ms = float(double(int64_t(*t1 - *t0)) / 1e6);
  return CUDA_SUCCESS;
}

// ---- host functions ----

namespace {

// Queues `fn(status)` on the stream (host_callbacks.h), after the legacy ordering of its work.
CUresult EnqueueHostFunction(CUstream handle, gpuvm::runtime::HostCallbacks::Function fn) {
  CUctx_st* ctx;
  CUstream_st* s;
  CUresult r = CurrentStream(handle, &ctx, &s);
  if (r != CUDA_SUCCESS) return r;
  if ((r = Ordered(s)) != CUDA_SUCCESS) return r;
  std::lock_guard lock(s->callbacks_mu);
  if (s->callbacks == nullptr) {
    auto gate = ctx->gctx->CreateEvent();
    if (!gate.ok()) return ContextError(ctx, gate.status(), CUDA_ERROR_OUT_OF_MEMORY);
    s->callbacks =
        std::make_unique<gpuvm::runtime::HostCallbacks>(ctx->gctx.get(), s->channel, *gate);
  }
  return ContextError(ctx, s->callbacks->Enqueue(std::move(fn)));
}

}  // namespace

GPUVM_EXPORT CUresult cuLaunchHostFunc(CUstream handle, CUhostFn fn, void* user_data) {
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  {
    CUctx_st* ctx;
    CUstream_st* s;
    CUresult r = CurrentStream(handle, &ctx, &s);
    if (r != CUDA_SUCCESS) return r;
    if (Capturing(s)) {
      return CaptureNode(s, CU_GRAPH_NODE_TYPE_HOST, [fn, user_data](CUstream t) {
        return cuLaunchHostFunc(t, fn, user_data);
      });
    }
  }
  return EnqueueHostFunction(handle, [fn, user_data](const Status& status) {
    // CUDA: a host function is not run when the stream's earlier work failed to finish.
    if (status.code() != StatusCode::kDeadlineExceeded) fn(user_data);
  });
}
GPUVM_EXPORT CUresult cuLaunchHostFunc_ptsz(CUstream handle, CUhostFn fn, void* user_data) {
  return cuLaunchHostFunc(handle, fn, user_data);
}

GPUVM_EXPORT CUresult cuStreamAddCallback(CUstream handle, CUstreamCallback callback,
                                          void* user_data, unsigned int flags) {
  if (callback == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  {
    CUctx_st* ctx;
    CUstream_st* s;
    CUresult r = CurrentStream(handle, &ctx, &s);
    if (r != CUDA_SUCCESS) return r;
    if (Capturing(s)) return RefuseInCapture(s);  // CUDA: callbacks are not captured
  }
  // The callback is told the stream's state: the context's error when its work failed.
  CUctx_st* ctx = nullptr;
  if (Current(&ctx, /*check_health=*/false) != CUDA_SUCCESS) ctx = nullptr;
  return EnqueueHostFunction(handle, [callback, user_data, handle, ctx](const Status& status) {
    CUresult result = CUDA_SUCCESS;
    if (status.code() == StatusCode::kDeadlineExceeded) {
      result = CUDA_ERROR_LAUNCH_TIMEOUT;
    } else if (!status.ok()) {
      result = ctx != nullptr ? ContextError(ctx, status) : CUDA_ERROR_LAUNCH_FAILED;
    }
    callback(handle, result, user_data);
  });
}
GPUVM_EXPORT CUresult cuStreamAddCallback_ptsz(CUstream handle, CUstreamCallback callback,
                                               void* user_data, unsigned int flags) {
  return cuStreamAddCallback(handle, callback, user_data, flags);
}
