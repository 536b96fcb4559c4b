// libcuda.so.1: the exported driver API (runtime/include/cuda.h). Each function checks its
// arguments the way CUDA documents (initialization, current context, handles, null pointers, sizes,
// ranges) and then calls the objects of runtime/core/objects.h, which sit on the guest driver.
//
// Threading: every entry point may be called from any thread (see objects.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/core/errors.h"
#include "runtime/core/objects.h"
#include "runtime/include/cuda.h"

using gpuvm::Status;
using gpuvm::StatusCode;
using gpuvm::runtime::ContextError;
using gpuvm::runtime::ContextHealth;
using gpuvm::runtime::ContextStack;
using gpuvm::runtime::Process;
using gpuvm::runtime::ResolveStream;
using gpuvm::runtime::ToCuResult;

#define GPUVM_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// CUDA reports this driver version (13.0) from cuDriverGetVersion.
constexpr int kDriverVersion = 13000;

CUresult CheckInit() { return Process::Get().initialized(); }

bool ValidDevice(CUdevice dev) { return dev >= 0 && dev < Process::Get().device_count(); }

// The calling thread's current context, checked: initialized, present, alive, not faulted.
CUresult Current(CUctx_st** out, bool check_health = true) {
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

// [va, va + bytes) lies inside one allocation of ctx.
bool InRange(CUctx_st* ctx, uint64_t va, uint64_t bytes) {
  auto a = ctx->gctx->Find(va);
  if (!a.ok()) return false;
  uint64_t offset = va - a->va;
  return offset <= a->size && bytes <= a->size - offset;
}

// The pinned/registered host allocation of ctx that contains [p, p + bytes), if any.
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
  *out = s;
  return CUDA_SUCCESS;
}

CUresult Ordered(CUstream_st* s) {
  Status st = gpuvm::runtime::OrderForLegacy(s);
  return st.ok() ? CUDA_SUCCESS : ContextError(s->ctx, st);
}

CUresult CopyHtoD(CUdeviceptr dst, const void* src, size_t n, CUstream handle, bool async) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  CUstream_st* s;
  if ((r = StreamFor(ctx, handle, &s)) != CUDA_SUCCESS) return r;
  if (n == 0) return CUDA_SUCCESS;
  if (src == nullptr || !InRange(ctx, dst, n)) return CUDA_ERROR_INVALID_VALUE;
  if ((r = Ordered(s)) != CUDA_SUCCESS) return r;
  uint64_t src_va;
  if (async && InPinnedHost(ctx, src, n, &src_va)) {
    auto fence = s->channel->CopyAsync(dst, src_va, n);
    return fence.ok() ? CUDA_SUCCESS : ContextError(ctx, fence.status());
  }
  // Pageable memory: the copy is staged and complete on return (as CUDA does for pageable sources).
  // The driver serializes staged copies of one channel itself.
  return ContextError(ctx, s->channel->CopyHostToDevice(dst, src, n));
}

CUresult CopyDtoH(void* dst, CUdeviceptr src, size_t n, CUstream handle, bool async) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  CUstream_st* s;
  if ((r = StreamFor(ctx, handle, &s)) != CUDA_SUCCESS) return r;
  if (n == 0) return CUDA_SUCCESS;
  if (dst == nullptr || !InRange(ctx, src, n)) return CUDA_ERROR_INVALID_VALUE;
  if ((r = Ordered(s)) != CUDA_SUCCESS) return r;
  uint64_t dst_va;
  if (async && InPinnedHost(ctx, dst, n, &dst_va)) {
    auto fence = s->channel->CopyAsync(dst_va, src, n);
    return fence.ok() ? CUDA_SUCCESS : ContextError(ctx, fence.status());
  }
  return ContextError(ctx, s->channel->CopyDeviceToHost(dst, src, n));
}

CUresult CopyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream handle, bool async) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  CUstream_st* s;
  if ((r = StreamFor(ctx, handle, &s)) != CUDA_SUCCESS) return r;
  if (n == 0) return CUDA_SUCCESS;
  if (!InRange(ctx, dst, n) || !InRange(ctx, src, n)) return CUDA_ERROR_INVALID_VALUE;
  if ((r = Ordered(s)) != CUDA_SUCCESS) return r;
  auto fence = s->channel->CopyAsync(dst, src, n);
  if (!fence.ok()) return ContextError(ctx, fence.status());
  if (async) return CUDA_SUCCESS;
  return ContextError(ctx, s->channel->Wait(*fence));
}

CUresult Memset(CUdeviceptr dst, uint32_t value, size_t n, unsigned width, CUstream handle,
                bool async) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  CUstream_st* s;
  if ((r = StreamFor(ctx, handle, &s)) != CUDA_SUCCESS) return r;
  if (n == 0) return CUDA_SUCCESS;
  if (n > std::numeric_limits<uint64_t>::max() / width) return CUDA_ERROR_INVALID_VALUE;
  if ((width == 4 && dst % 4 != 0) || !InRange(ctx, dst, uint64_t(n) * width)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if ((r = Ordered(s)) != CUDA_SUCCESS) return r;
  auto fence = width == 1 ? s->channel->Memset8Async(dst, uint8_t(value), n)
                          : s->channel->Memset32Async(dst, value, n);
  if (!fence.ok()) return ContextError(ctx, fence.status());
  if (async) return CUDA_SUCCESS;
  return ContextError(ctx, s->channel->Wait(*fence));
}

}  // namespace

// =====================================================================================================
// Initialization, version, errors

GPUVM_EXPORT CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
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

// =====================================================================================================
// Devices

GPUVM_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuDeviceGetCount(int* count) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = Process::Get().device_count();
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  const std::string& n = Process::Get().facts().name;
  size_t copy = std::min<size_t>(n.size(), size_t(len) - 1);
  std::memcpy(name, n.data(), copy);
  name[copy] = '\0';
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = Process::Get().facts().vram_bytes;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  using namespace gpuvm::guest;
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  const gpuvm::runtime::DeviceFacts& f = Process::Get().facts();
  int v = 0;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      v = kMaxThreadsPerBlock;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
      v = kMaxBlockDim[0];
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      v = kMaxBlockDim[1];
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      v = kMaxBlockDim[2];
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      v = kMaxGridDim[0];
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
      v = kMaxGridDim[1];
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      v = kMaxGridDim[2];
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      v = kMaxSharedBytesPerBlock;
      break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
      v = 64 << 10;
      break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
      v = std::numeric_limits<int>::max();
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
      v = 32768;
      break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
      v = f.clock_khz;
      break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
      v = 512;
      break;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      v = f.multiprocessors;
      break;
    case CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT:
      v = 512;
      break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      v = f.pci_bus;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
      v = f.pci_device;
      break;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
      v = f.memory_clock_khz;
      break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
      v = f.memory_bus_width;
      break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      v = f.l2_bytes;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
      v = 1536;
      break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
      v = f.pci_domain;
      break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT:
      v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      v = f.cc_major;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      v = f.cc_minor;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
      v = kMaxSharedBytesPerBlock;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
      v = 32768;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      v = kMaxSharedBytesPerBlock;
      break;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
      v = 8;
      break;
    default:
      // Every other documented attribute is a feature this device does not have.
      if (int(attrib) <= 0 || int(attrib) >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
      v = 0;
  }
  *pi = v;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (major == nullptr || minor == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *major = Process::Get().facts().cc_major;
  *minor = Process::Get().facts().cc_minor;
  return CUDA_SUCCESS;
}

// =====================================================================================================
// Contexts

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
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
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

GPUVM_EXPORT CUresult cuCtxSynchronize(void) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx, /*check_health=*/false);
  if (r != CUDA_SUCCESS) return r;
  Status s = ctx->gctx->Synchronize();
  if (!s.ok()) return ContextError(ctx, s);
  return ContextHealth(ctx);
}

GPUVM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
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
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Process::Get().PrimaryState(flags, active);
  return CUDA_SUCCESS;
}

// =====================================================================================================
// Modules

namespace {

CUresult LoadCommon(CUmodule* module, const void* image, size_t length, std::string* log) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return gpuvm::runtime::LoadModule(ctx, image, length, module, log);
}

}  // namespace

GPUVM_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  std::string log;
  return LoadCommon(module, image, 0, &log);
}

GPUVM_EXPORT CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fat_cubin) {
  std::string log;
  return LoadCommon(module, fat_cubin, 0, &log);
}

GPUVM_EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image,
                                         unsigned int num_options, CUjit_option* options,
                                         void** values) {
  if (num_options > 0 && (options == nullptr || values == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  char* error_log = nullptr;
  size_t error_log_size = 0;
  char* info_log = nullptr;
  size_t info_log_size = 0;
  for (unsigned i = 0; i < num_options; ++i) {
    // Option values are passed in the pointer-sized slot itself for scalar options.
    switch (options[i]) {
      case CU_JIT_ERROR_LOG_BUFFER:
        error_log = static_cast<char*>(values[i]);
        break;
      case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
        error_log_size = reinterpret_cast<uintptr_t>(values[i]);
        break;
      case CU_JIT_INFO_LOG_BUFFER:
        info_log = static_cast<char*>(values[i]);
        break;
      case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
        info_log_size = reinterpret_cast<uintptr_t>(values[i]);
        break;
      default:
        if (int(options[i]) < 0 || int(options[i]) >= CU_JIT_NUM_OPTIONS)
          return CUDA_ERROR_INVALID_VALUE;
        break;  // accepted and ignored: the JIT has no tunables
    }
  }
  std::string log;
  CUresult r = LoadCommon(module, image, 0, &log);
  auto write_log = [](char* buf, size_t size, const std::string& text) {
    if (buf == nullptr || size == 0) return;
    size_t n = std::min(text.size(), size - 1);
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  };
  write_log(error_log, error_log_size, r == CUDA_SUCCESS ? std::string() : log);
  write_log(info_log, info_log_size, r == CUDA_SUCCESS ? "gpuvm: PTX translated to GVISA" : "");
  return r;
}

GPUVM_EXPORT CUresult cuModuleLoad(CUmodule* module, const char* fname) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (module == nullptr || fname == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int fd = open(fname, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_FILE_NOT_FOUND;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > (256 << 20)) {
    close(fd);
    return CUDA_ERROR_INVALID_IMAGE;
  }
  // One NUL past the end so PTX text is terminated like cuModuleLoadData wants it.
  std::vector<char> bytes(size_t(st.st_size) + 1, '\0');
  size_t got = 0;
  while (got < size_t(st.st_size)) {
    ssize_t n = read(fd, bytes.data() + got, size_t(st.st_size) - got);
    if (n <= 0) break;
    got += size_t(n);
  }
  close(fd);
  if (got != size_t(st.st_size)) return CUDA_ERROR_FILE_NOT_FOUND;
  std::string log;
  return gpuvm::runtime::LoadModule(ctx, bytes.data(), got, module, &log);
}

GPUVM_EXPORT CUresult cuModuleUnload(CUmodule module) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  Process& p = Process::Get();
  if (!p.IsLive(module, Process::Kind::kModule)) return CUDA_ERROR_INVALID_HANDLE;
  CUctx_st* ctx = module->ctx;
  {
    std::lock_guard<std::mutex> lock(ctx->mu);
    ctx->modules.erase(module);
  }
  p.Unregister(module);
  for (auto& f : module->functions) p.Unregister(f.get());
  gpuvm::runtime::UnloadModule(module);
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule module, const char* name) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (hfunc == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!Process::Get().IsLive(module, Process::Kind::kModule)) return CUDA_ERROR_INVALID_HANDLE;
  for (auto& f : module->functions) {
    if (f->kernel->name == name) {
      *hfunc = f.get();
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

GPUVM_EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr* dptr, size_t* bytes, CUmodule module,
                                           const char* name) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!Process::Get().IsLive(module, Process::Kind::kModule)) return CUDA_ERROR_INVALID_HANDLE;
  const auto& vars = module->compiled.variables;
  for (size_t i = 0; i < vars.size(); ++i) {
    if (vars[i].name != name) continue;
    if (dptr) *dptr = gpuvm::runtime::VariableAddress(module, i);
    if (bytes) *bytes = vars[i].size;
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_NOT_FOUND;
}

GPUVM_EXPORT CUresult cuFuncGetAttribute(int* pi, CUfunction_attribute attrib, CUfunction f) {
  using namespace gpuvm::guest;
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!Process::Get().IsLive(f, Process::Kind::kFunction)) return CUDA_ERROR_INVALID_HANDLE;
  const gpuvm::isa::KernelHeader& h = f->header;
  switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *pi = h.max_threads ? int(h.max_threads) : int(kMaxThreadsPerBlock);
      break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
      *pi = int(h.shared_bytes);
      break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
      *pi = int(f->module->compiled.const_image.size());
      break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
      *pi = int(h.local_bytes);
      break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
      *pi = int(h.reg_count);
      break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
      *pi = 75;
      break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
      *pi = 75;
      break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
      *pi = 0;
      break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *pi = int(kMaxSharedBytesPerBlock -
                std::min<uint32_t>(h.shared_bytes, kMaxSharedBytesPerBlock));
      break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      *pi = -1;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// =====================================================================================================
// Memory

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
  // The driver maps whole pages; CUDA (since 4.1) accepts any range and pins the pages around it.
  uint64_t begin = reinterpret_cast<uintptr_t>(p);
  if (begin % gpuvm::guest::kPageSize != 0 || bytes % gpuvm::guest::kPageSize != 0) {
    return CUDA_ERROR_INVALID_VALUE;  // (documented limitation, docs/RUNTIME.md)
  }
  if (ctx->gctx->FindHost(p).ok()) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  auto a = ctx->gctx->RegisterHost(p, bytes);
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

// =====================================================================================================
// Execution

GPUVM_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                     unsigned int gz, unsigned int bx, unsigned int by,
                                     unsigned int bz, unsigned int shared_bytes, CUstream handle,
                                     void** params, void** extra) {
  using namespace gpuvm::guest;
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(f, Process::Kind::kFunction)) return CUDA_ERROR_INVALID_HANDLE;
  if (f->module->ctx != ctx) return CUDA_ERROR_INVALID_CONTEXT;
  CUstream_st* s;
  if ((r = StreamFor(ctx, handle, &s)) != CUDA_SUCCESS) return r;
  // Launch configuration, as CUDA checks it.
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (gx > kMaxGridDim[0] || gy > kMaxGridDim[1] || gz > kMaxGridDim[2])
    return CUDA_ERROR_INVALID_VALUE;
  if (bx > kMaxBlockDim[0] || by > kMaxBlockDim[1] || bz > kMaxBlockDim[2])
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t threads = uint64_t(bx) * by * bz;
  uint32_t limit = f->header.max_threads ? f->header.max_threads : kMaxThreadsPerBlock;
  if (threads > kMaxThreadsPerBlock || threads > limit) return CUDA_ERROR_INVALID_VALUE;
  if (uint64_t(shared_bytes) + f->header.shared_bytes > kMaxSharedBytesPerBlock) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // Parameters: either an array of pointers (one per parameter) or one packed buffer in `extra`.
  const gpuvm::runtime::CompiledKernel& k = *f->kernel;
  std::vector<uint8_t> buffer(k.param_bytes, 0);
  if (params != nullptr && extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (extra != nullptr) {
    const void* packed = nullptr;
    size_t packed_size = 0;
    bool have_size = false;
    for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (i >= 64) return CUDA_ERROR_INVALID_VALUE;  // no END marker in sight
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
        packed = extra[i + 1];
      } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
        if (extra[i + 1] == nullptr) return CUDA_ERROR_INVALID_VALUE;
        packed_size = *static_cast<const size_t*>(extra[i + 1]);
        have_size = true;
      } else {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    if (k.param_bytes > 0 && (packed == nullptr || !have_size || packed_size < k.param_bytes)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (k.param_bytes > 0) std::memcpy(buffer.data(), packed, k.param_bytes);
  } else if (!k.params.empty()) {
    if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < k.params.size(); ++i) {
      if (params[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
      std::memcpy(buffer.data() + k.params[i].offset, params[i], k.params[i].size);
    }
  }
  if ((r = Ordered(s)) != CUDA_SUCCESS) return r;
  LaunchParams launch;
  launch.code_address = f->module->code_va;
  launch.entry_offset = f->entry_offset;
  launch.grid = {gx, gy, gz};
  launch.block = {bx, by, bz};
  // SHARED_SIZE covers the kernel's static shared memory and the dynamic bytes after it
  // (gpu/isa/module.h); the driver programs what it is given.
  launch.shared_bytes = f->header.shared_bytes + shared_bytes;
  launch.local_bytes_per_thread = f->header.local_bytes;
  launch.params = buffer;
  if (f->module->const_bank_va) {
    launch.banks.push_back(
        {1, f->module->const_bank_va, uint32_t(f->module->compiled.const_image.size())});
  }
  if (f->module->address_bank_va) {
    launch.banks.push_back({2, f->module->address_bank_va, f->module->compiled.address_bank_bytes});
  }
  auto fence = s->channel->Launch(launch);
  return fence.ok() ? CUDA_SUCCESS : ContextError(ctx, fence.status());
}

// =====================================================================================================
// Streams

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
  {
    std::lock_guard<std::mutex> lock(ctx->mu);
    ctx->streams.insert(s);
  }
  Process::Get().Register(s, Process::Kind::kStream);
  *out = s;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(s, Process::Kind::kStream)) return CUDA_ERROR_INVALID_HANDLE;
  CUctx_st* ctx = s->ctx;
  {
    std::lock_guard<std::mutex> lock(ctx->mu);
    ctx->streams.erase(s);
  }
  Process::Get().Unregister(s);
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
  Status st = s->is_default ? ctx->gctx->Synchronize() : s->channel->Synchronize();
  if (!st.ok()) return ContextError(ctx, st);
  return ContextHealth(ctx);
}

GPUVM_EXPORT CUresult cuStreamQuery(CUstream handle) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  CUstream_st* s;
  if ((r = StreamFor(ctx, handle, &s)) != CUDA_SUCCESS) return r;
  auto done = s->channel->IsDone(s->channel->last_fence());
  if (!done.ok()) return ContextError(ctx, done.status());
  return *done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

GPUVM_EXPORT CUresult cuStreamWaitEvent(CUstream handle, CUevent event, unsigned int flags) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx);
  if (r != CUDA_SUCCESS) return r;
  CUstream_st* s;
  if ((r = StreamFor(ctx, handle, &s)) != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(event, Process::Kind::kEvent) || event->ctx != ctx) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return ContextError(ctx, s->channel->WaitEvent(event->event));
}

// =====================================================================================================
// Events

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
  {
    std::lock_guard<std::mutex> lock(ctx->mu);
    ctx->events.insert(e);
  }
  Process::Get().Register(e, Process::Kind::kEvent);
  *out = e;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(e, Process::Kind::kEvent)) return CUDA_ERROR_INVALID_HANDLE;
  CUctx_st* ctx = e->ctx;
  {
    std::lock_guard<std::mutex> lock(ctx->mu);
    ctx->events.erase(e);
  }
  Process::Get().Unregister(e);
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
  if ((r = Ordered(s)) != CUDA_SUCCESS) return r;
  auto fence = s->channel->Record(e->event);
  if (!fence.ok()) return ContextError(ctx, fence.status());
  e->recorded.store(true);
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuEventQuery(CUevent e) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(e, Process::Kind::kEvent)) return CUDA_ERROR_INVALID_HANDLE;
  if ((r = ContextHealth(e->ctx)) != CUDA_SUCCESS) return r;
  auto done = e->event->Query();
  if (!done.ok()) return ContextError(e->ctx, done.status());
  return *done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

GPUVM_EXPORT CUresult cuEventSynchronize(CUevent e) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(e, Process::Kind::kEvent)) return CUDA_ERROR_INVALID_HANDLE;
  Status st = e->event->Wait(e->ctx->gctx->options().default_timeout);
  if (!st.ok()) return ContextError(e->ctx, st);
  return ContextHealth(e->ctx);
}

GPUVM_EXPORT CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
  CUresult r = CheckInit();
  if (r != CUDA_SUCCESS) return r;
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
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
