// libcuda.so.1: the exported driver API (runtime/include/cuda.h). Each function checks its
// arguments the way CUDA documents (initialization, current context, handles, null pointers, sizes,
// ranges) and then calls the objects of runtime/core/objects.h, which sit on the guest driver.
// One file per area: this one has the shared checks (driver_api.h) and initialization, version and
// errors; driver_api_device.cc, _context.cc, _module.cc, _memory.cc, _launch.cc and _stream.cc the
// rest.
//
// Threading: every entry point may be called from any thread (see runtime/core/objects.h).
#include "runtime/driver_api.h"

#include "runtime/driver_api_graph.h"

namespace gpuvm::runtime::driver_api {

CUresult CheckInit() { return Process::Get().initialized(); }

CUresult CheckInit(bool bad_args) {
  const CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  return bad_args ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

bool ValidDevice(CUdevice dev) { return dev >= 0 && dev < Process::Get().device_count(); }

CUresult LiveFunction(CUfunction f) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  return Process::Get().IsLive(f, Process::Kind::kFunction) ? CUDA_SUCCESS
                                                            : CUDA_ERROR_INVALID_HANDLE;
}

CUresult Current(CUctx_st** out, bool check_health) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  auto& stack = ContextStack();
  if (stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  CUctx_st* ctx = stack.back();
  if (!Process::Get().IsLive(ctx, Process::Kind::kContext)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  if (!ctx->gctx && ctx->primary) {
    // A reset primary context comes back on its first use after the reset.
    Status s = Process::Get().ReviveContext(ctx);
    if (!s.ok()) return ToCuResult(s);
  }
  if (check_health) {
    r = ContextHealth(ctx);
    if (r != CUDA_SUCCESS) return r;
  }
  *out = ctx;
  return CUDA_SUCCESS;
}

bool InRange(CUctx_st* ctx, uint64_t va, uint64_t bytes) {
  auto a = ctx->gctx->Find(va);
  if (!a.ok()) return false;
  uint64_t offset = va - a->va;
  return offset <= a->size && bytes <= a->size - offset;
}

bool InPinnedHost(CUctx_st* ctx, const void* p, uint64_t bytes, uint64_t* va) {
  auto a = ctx->gctx->FindHost(p);
  if (!a.ok()) return false;
  uint64_t offset = uint64_t(static_cast<const uint8_t*>(p) - static_cast<const uint8_t*>(a->host));
  if (offset > a->size || bytes > a->size - offset) return false;
  *va = a->va + offset;
  return true;
}

CUresult StreamFor(CUctx_st* ctx, CUstream handle, CUstream_st** out) {
  CUstream_st* s = ResolveStream(ctx, handle);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  // The legacy null stream synchronizes with every blocking stream, a capturing one too: CUDA
  // refuses it while one captures (driver_api_graph.h).
  if (LegacyStreamInCapture(ctx, s, handle)) return RefuseLegacyInCapture(ctx);
  *out = s;
  return CUDA_SUCCESS;
}

CUresult CurrentStream(CUstream handle, CUctx_st** ctx, CUstream_st** s) {
  const CUresult r = Current(ctx);
  if (r != CUDA_SUCCESS) return r;
  return StreamFor(*ctx, handle, s);
}

CUresult Ordered(CUstream_st* s) {
  Status st = gpuvm::runtime::OrderForLegacy(s);
  return st.ok() ? CUDA_SUCCESS : ContextError(s->ctx, st);
}

}  // namespace gpuvm::runtime::driver_api

namespace {

// CUDA reports this driver version (13.0) from cuDriverGetVersion.
constexpr int kDriverVersion = 13000;

}  // namespace

// ---- initialization, version, errors ----

GPUVM_EXPORT CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  // Memory pools are this library's state about a context's memory: they go with the context.
  static std::once_flag hooked;
  std::call_once(hooked, [] {
    gpuvm::runtime::SetContextTeardownHook(gpuvm::runtime::driver_api::ForgetPools);
  });
  return Process::Get().Init();
}

GPUVM_EXPORT CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = kDriverVersion;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuGetErrorString(CUresult error, const char** str) {
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *str = gpuvm::runtime::CuErrorString(error);
  return *str ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

GPUVM_EXPORT CUresult cuGetErrorName(CUresult error, const char** str) {
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *str = gpuvm::runtime::CuErrorName(error);
  return *str ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
