// libcuda.so.1, contexts: creation and destruction, the current-context stack, synchronization
// and primary contexts (driver_api.h has the shared checks).
//
// Threading: every entry point may be called from any thread (see runtime/core/objects.h).
#include "runtime/driver_api.h"

namespace {

CUresult CreateContextCommon(CUcontext* pctx, unsigned flags, CUdevice dev) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (pctx == nullptr || (flags & ~unsigned(CU_CTX_FLAGS_MASK)) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if ((flags & CU_CTX_SCHED_MASK) > CU_CTX_SCHED_BLOCKING_SYNC ||
      (flags & CU_CTX_SCHED_MASK) == 3) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  auto ctx = Process::Get().CreateContext(dev, flags, /*primary=*/false);
  if (!ctx.ok()) return ToCuResult(ctx.status());
  ContextStack().push_back(*ctx);
  *pctx = *ctx;
  return CUDA_SUCCESS;
}

}  // namespace

GPUVM_EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags,
                                     CUdevice dev) {
  if (params != nullptr && (params->execAffinityParams != nullptr ||
                            params->numExecAffinityParams != 0 || params->cigParams != nullptr)) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return CreateContextCommon(pctx, flags, dev);
}

// The three-argument form of CUDA 3.2 .. 12 (programs built against older headers import it).
GPUVM_EXPORT CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return CreateContextCommon(pctx, flags, dev);
}

GPUVM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(ctx, Process::Kind::kContext)) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
  Process::Get().DestroyContext(ctx);
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuCtxGetCurrent(CUcontext* pctx) {
  CUresult r = CheckInit(pctx == nullptr);
  if (r != CUDA_SUCCESS) return r;
  auto& stack = ContextStack();
  *pctx = stack.empty() ? nullptr : stack.back();
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  auto& stack = ContextStack();
  if (ctx == nullptr) {
    if (!stack.empty()) stack.pop_back();
    return CUDA_SUCCESS;
  }
  if (!Process::Get().IsLive(ctx, Process::Kind::kContext)) return CUDA_ERROR_INVALID_CONTEXT;
  if (stack.empty()) {
    stack.push_back(ctx);
  } else {
    stack.back() = ctx;
  }
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(ctx, Process::Kind::kContext)) return CUDA_ERROR_INVALID_CONTEXT;
  ContextStack().push_back(ctx);
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  auto& stack = ContextStack();
  if (stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx) *pctx = stack.back();
  stack.pop_back();
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuCtxGetDevice(CUdevice* device) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx, /*check_health=*/false);
  if (r != CUDA_SUCCESS) return r;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *device = ctx->device;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuCtxGetId(CUcontext ctx, unsigned long long* id) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (ctx == nullptr) {
    CUctx_st* current;
    if ((r = Current(&current, /*check_health=*/false)) != CUDA_SUCCESS) return r;
    ctx = current;
  } else if (!Process::Get().IsLive(ctx, Process::Kind::kContext)) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *id = ctx->id;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuCtxSynchronize(void) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx, /*check_health=*/false);
  if (r != CUDA_SUCCESS) return r;
  Status s = ctx->gctx->Synchronize();
  if (!s.ok()) return ContextError(ctx, s);
  gpuvm::runtime::DrainPrintf(ctx);
  gpuvm::runtime::driver_api::TrimPools(ctx);
  return ContextHealth(ctx);
}

// Context limits: the device printf FIFO's size is real (runtime/core/printf_fifo.h); the others
// (stack, heap, device runtime, L2, shared memory, CIG) have no meaning the software GPU can honour
// and answer CUDA_ERROR_UNSUPPORTED_LIMIT, CUDA's code for a limit a device does not have.
GPUVM_EXPORT CUresult cuCtxGetLimit(size_t* value, CUlimit limit) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx, /*check_health=*/false);
  if (r != CUDA_SUCCESS) return r;
  if (value == nullptr || limit < 0 || limit >= CU_LIMIT_MAX) return CUDA_ERROR_INVALID_VALUE;
  if (limit != CU_LIMIT_PRINTF_FIFO_SIZE) return CUDA_ERROR_UNSUPPORTED_LIMIT;
  *value = gpuvm::runtime::PrintfFifoSize(ctx);
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (limit < 0 || limit >= CU_LIMIT_MAX) return CUDA_ERROR_INVALID_VALUE;
  if (limit != CU_LIMIT_PRINTF_FIFO_SIZE) return CUDA_ERROR_UNSUPPORTED_LIMIT;
  return gpuvm::runtime::SetPrintfFifoSize(ctx, value);
}

GPUVM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  CUresult r = CheckInit(pctx == nullptr);
  if (r != CUDA_SUCCESS) return r;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  return Process::Get().RetainPrimary(dev, pctx);
}

GPUVM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  return Process::Get().ReleasePrimary(dev);
}

GPUVM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  return Process::Get().ResetPrimary(dev);
}

GPUVM_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if ((flags & ~unsigned(CU_CTX_FLAGS_MASK)) != 0) return CUDA_ERROR_INVALID_VALUE;
  return Process::Get().SetPrimaryFlags(dev, flags);
}

GPUVM_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  CUresult r = CheckInit(flags == nullptr || active == nullptr);
  if (r != CUDA_SUCCESS) return r;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Process::Get().PrimaryState(flags, active);
  return CUDA_SUCCESS;
}
