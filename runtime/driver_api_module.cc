// libcuda.so.1, modules and functions: loading PTX/cubin/fat binaries (the JIT runs here),
// unloading, looking up functions and globals, function attributes (driver_api.h has the shared
// checks).
//
// Threading: every entry point may be called from any thread (see runtime/core/objects.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime/driver_api.h"

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
  gpuvm::runtime::UnloadModule(module);  // waits for the context's work (Free does)
  gpuvm::runtime::DrainPrintf(ctx);      // module unload is a device printf sync point
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule module, const char* name) {
  CUresult r = CheckInit(hfunc == nullptr || name == nullptr);
  if (r != CUDA_SUCCESS) return r;
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
  CUresult r = CheckInit(name == nullptr);
  if (r != CUDA_SUCCESS) return r;
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

namespace {
// The dynamic shared memory a launch of `f` may add: what its own static memory leaves of the
// device's 48 KiB per block (there is no opt-in beyond it).
int DynamicSharedLeft(const CUfunc_st* f) {
  using gpuvm::guest::kMaxSharedBytesPerBlock;
  return int(kMaxSharedBytesPerBlock - std::min<uint32_t>(gpuvm::isa::ProgramSharedBytes(f->header),
                                                          kMaxSharedBytesPerBlock));
}
}  // namespace

// The kernel's name as its module names it (nvcc's: the mangled name); valid while the module is
// loaded.
GPUVM_EXPORT CUresult cuFuncGetName(const char** name, CUfunction f) {
  CUresult r = CheckInit(name == nullptr);
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(f, Process::Kind::kFunction)) return CUDA_ERROR_INVALID_HANDLE;
  *name = f->kernel->name.c_str();
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuFuncGetAttribute(int* pi, CUfunction_attribute attrib, CUfunction f) {
  using namespace gpuvm::guest;
  CUresult r = CheckInit(pi == nullptr);
  if (r != CUDA_SUCCESS) return r;
  if (!Process::Get().IsLive(f, Process::Kind::kFunction)) return CUDA_ERROR_INVALID_HANDLE;
  const gpuvm::isa::KernelHeader& h = f->header;
  switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *pi = h.max_threads ? int(h.max_threads) : int(kMaxThreadsPerBlock);
      break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
      *pi = int(gpuvm::isa::ProgramSharedBytes(h));
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
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: {
      const int set = f->max_dynamic_shared.load(std::memory_order_relaxed);
      *pi = set >= 0 ? set : DynamicSharedLeft(f);
      break;
    }
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      *pi = f->preferred_carveout.load(std::memory_order_relaxed);
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// The two attributes a program may set: a dynamic size up to DynamicSharedLeft is accepted and more
// is refused, as CUDA refuses more than the opt-in
// (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN answers 48 KiB here); the carveout is a
// hint (percent of L1 for shared memory, or -1).
GPUVM_EXPORT CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute attrib, int value) {
  CUresult r = LiveFunction(f);
  if (r != CUDA_SUCCESS) return r;
  switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      if (value < 0 || value > DynamicSharedLeft(f)) return CUDA_ERROR_INVALID_VALUE;
      f->max_dynamic_shared.store(value, std::memory_order_relaxed);
      return CUDA_SUCCESS;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      if (value < -1 || value > 100) return CUDA_ERROR_INVALID_VALUE;
      f->preferred_carveout.store(value, std::memory_order_relaxed);
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;  // read-only, or not an attribute
  }
}

// Fermi's L1/shared split and bank width are chosen by the hardware here: valid preferences are
// accepted and change nothing (as cudaFuncSetCacheConfig).
GPUVM_EXPORT CUresult cuFuncSetCacheConfig(CUfunction f, CUfunc_cache config) {
  CUresult r = LiveFunction(f);
  if (r != CUDA_SUCCESS) return r;
  if (config < CU_FUNC_CACHE_PREFER_NONE || config > CU_FUNC_CACHE_PREFER_EQUAL)
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

// The context-wide shared memory bank width: accepted and kept as the hardware's (four bytes on
// Fermi), like the per-function setting below.
GPUVM_EXPORT CUresult cuCtxGetSharedMemConfig(CUsharedconfig* config) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx, /*check_health=*/false);
  if (r != CUDA_SUCCESS) return r;
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *config = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuCtxSetSharedMemConfig(CUsharedconfig config) {
  CUctx_st* ctx;
  CUresult r = Current(&ctx, /*check_health=*/false);
  if (r != CUDA_SUCCESS) return r;
  if (config < CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE ||
      config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

GPUVM_EXPORT CUresult cuFuncSetSharedMemConfig(CUfunction f, CUsharedconfig config) {
  CUresult r = LiveFunction(f);
  if (r != CUDA_SUCCESS) return r;
  if (config < CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE ||
      config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
