// libcudart.so.13: the CUDA runtime API and the ABI nvcc's generated host code calls, on top of our
// driver API (libcuda.so.1), the way NVIDIA's runtime sits on theirs.
//
//   Registration  nvcc's constructor hands every translation unit's fat binary wrapper to
//                 __cudaRegisterFatBinary and names its kernels (__cudaRegisterFunction) and
//                 variables
//                 (__cudaRegisterVar) by their host-side addresses. Nothing is loaded then: like
//                 CUDA's lazy loading, a fat binary becomes a CUmodule (JIT of its PTX) in the
//                 current context on its first use.
//   Launch        CUDA 13's stubs call __cudaGetKernel once (we hand back the kernel's registration
//                 record as its cudaKernel_t), then __cudaPopCallConfiguration (what <<<...>>>
//                 pushed) and __cudaLaunchKernel; older stubs call cudaLaunchKernel with the host
//                 function.
//   Context       the device's primary context, made current on a thread's first call, unless the
//                 thread already has a current context (driver API interop).
//   Errors        each call records its error as the thread's last error (cudaGetLastError);
//                 errors of a faulted context keep coming back from the driver (sticky).
//
// Threading: every entry point may be called from any thread; the registries are guarded by one
// mutex, the launch configuration stack, current device and last error are per thread.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/core/errors.h"
#include "runtime/cudart/cudart_internal.h"
#include "runtime/include/cuda.h"
#include "runtime/include/cuda_runtime_api.h"

#define GPUVM_EXPORT extern "C" __attribute__((visibility("default")))

// nvcc-built binaries pass these structures by address; our layout must be CUDA 13's.
static_assert(sizeof(cudaDeviceProp) == 1008, "cudaDeviceProp layout differs from CUDA 13");
static_assert(offsetof(cudaDeviceProp, totalGlobalMem) == 288);
static_assert(offsetof(cudaDeviceProp, multiProcessorCount) == 384);
static_assert(offsetof(cudaDeviceProp, hostNumaMultinodeIpcSupported) == 780);
static_assert(sizeof(cudaFuncAttributes) == 144, "cudaFuncAttributes layout differs from CUDA 13");
static_assert(sizeof(dim3) == 12 && sizeof(uint3) == 12);

namespace {

constexpr int kRuntimeVersion = 13000;

// A `__managed__` variable: nvcc's host code reaches it through a pointer of its own
// (`static T* name` in section __nv_managed_data__), which the loaded module's managed address is
// written into (after __cudaInitModule, which that host code calls before its first access).
struct ManagedRecord {
  void** host_pointer = nullptr;
  std::string name;
  size_t size = 0;
  CUdeviceptr device_address = 0;  // where kernels reach it (the host's address, but under PVDRM)
};

struct FatbinRecord {
  const void* wrapper = nullptr;  // &__fatDeviceText of the registering translation unit
  std::map<CUcontext, CUmodule> modules;
  std::vector<ManagedRecord> managed;
  bool unregistered = false;
};

struct KernelRecord {
  FatbinRecord* fatbin = nullptr;
  std::string name;  // the mangled device name
  std::map<CUcontext, CUfunction> functions;
};

struct VariableRecord {
  FatbinRecord* fatbin = nullptr;
  std::string name;
  size_t size = 0;
  bool constant = false;
};

struct Registry {
  std::mutex mu;
  std::vector<std::unique_ptr<FatbinRecord>> fatbins;
  std::map<const void*, std::unique_ptr<KernelRecord>> kernels;  // by host function
  std::map<const void*, VariableRecord> variables;               // by host shadow variable
};

Registry& Reg() {
  static Registry* registry = new Registry();  // never destroyed: used from atexit handlers
  return *registry;
}

struct LaunchConfig {
  dim3 grid, block;
  size_t shared = 0;
  cudaStream_t stream = nullptr;
};

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_device = 0;
thread_local std::vector<LaunchConfig> t_configs;

cudaError_t Record(cudaError_t e) {
  if (e != cudaSuccess) t_last_error = e;
  return e;
}

// The runtime's codes share the driver's numbering wherever both have the condition (CUDA keeps
// them aligned), so the translation is the identity.
cudaError_t FromCu(CUresult r) { return cudaError_t(int(r)); }

cudaError_t Rec(CUresult r) { return Record(FromCu(r)); }

}  // namespace

// For cudart_not_supported.cc: its entry points set the thread's last error like every call here.
// (Not exported: libcudart.map keeps everything but the API local.)
namespace gpuvm::cudart {
cudaError_t RecordLastError(cudaError_t e) { return Record(e); }
}  // namespace gpuvm::cudart

namespace {

CUcontext g_primary = nullptr;
std::once_flag g_primary_once;
CUresult g_primary_result = CUDA_SUCCESS;

// Makes sure the calling thread has a current context: its own (driver interop) or the primary one.
CUresult EnsureContext() {
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return r;
  CUcontext current = nullptr;
  if ((r = cuCtxGetCurrent(&current)) != CUDA_SUCCESS) return r;
  if (current != nullptr) return CUDA_SUCCESS;
  std::call_once(g_primary_once, [] {
    CUdevice dev;
    g_primary_result = cuDeviceGet(&dev, 0);
    if (g_primary_result == CUDA_SUCCESS)
      g_primary_result = cuDevicePrimaryCtxRetain(&g_primary, dev);
  });
  if (g_primary_result != CUDA_SUCCESS) return g_primary_result;
  return cuCtxSetCurrent(g_primary);
}

#define ENSURE_CONTEXT()                              \
  do {                                                \
    CUresult ensure_ = EnsureContext();               \
    if (ensure_ != CUDA_SUCCESS) return Rec(ensure_); \
  } while (0)

using gpuvm::cudart::InContext;  // cudart_internal.h

// Creates a stream or an event (`create`: cuStreamCreate, cuEventCreate) with `flags`.
template <typename Handle>
cudaError_t CreateInContext(CUresult (*create)(Handle*, unsigned int), Handle* handle,
                            unsigned int flags) {
  if (handle == nullptr) return Record(cudaErrorInvalidValue);
  return InContext(create, handle, flags);
}

// The same for a query: CUDA_ERROR_NOT_READY is its answer (cudaErrorNotReady), not an error.
template <typename... Params, typename... Args>
cudaError_t QueryInContext(CUresult (*call)(Params...), Args... args) {
  ENSURE_CONTEXT();
  const CUresult r = call(args...);
  return r == CUDA_ERROR_NOT_READY ? cudaErrorNotReady : Rec(r);
}

// What `cache` holds for the current context, made by `make` on first use there: modules and
// functions are per context, as in CUDA. Registry lock held.
template <typename T, typename Make>
CUresult PerContext(std::map<CUcontext, T>& cache, T* out, Make make) {
  CUcontext ctx = nullptr;
  CUresult r = cuCtxGetCurrent(&ctx);
  if (r != CUDA_SUCCESS) return r;
  auto it = cache.find(ctx);
  if (it != cache.end()) {
    *out = it->second;
    return CUDA_SUCCESS;
  }
  T made = nullptr;
  if ((r = make(&made)) != CUDA_SUCCESS) return r;
  cache[ctx] = made;
  *out = made;
  return CUDA_SUCCESS;
}

// The module of `fatbin` in the current context, loading (JIT) it on first use. Registry lock held.
CUresult ModuleFor(FatbinRecord* fatbin, CUmodule* out) {
  return PerContext(fatbin->modules, out, [fatbin](CUmodule* module) {
    CUresult r = cuModuleLoadData(module, fatbin->wrapper);
    if (r != CUDA_SUCCESS) return r;
    // Managed variables: one per process in CUDA; here the module of the context that loaded it
    // last (with one device, the primary context's).
    for (ManagedRecord& m : fatbin->managed) {
      CUdeviceptr address = 0;
      size_t size = 0;
      void* host = nullptr;
      if ((r = cuModuleGetGlobal(&address, &size, *module, m.name.c_str())) != CUDA_SUCCESS ||
          (r = cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, address)) !=
              CUDA_SUCCESS) {
        (void)cuModuleUnload(*module);
        return r;
      }
      m.device_address = address;
      *m.host_pointer = host;
    }
    return CUDA_SUCCESS;
  });
}

CUresult FunctionFor(KernelRecord* k, CUfunction* out) {
  return PerContext(k->functions, out, [k](CUfunction* f) {
    CUmodule module;
    const CUresult r = ModuleFor(k->fatbin, &module);
    if (r != CUDA_SUCCESS) return r;
    return cuModuleGetFunction(f, module, k->name.c_str());
  });
}

// A launch of kernel `k` after the runtime's own checks; with `attrs` (cudaLaunchKernelExC) through
// cuLaunchKernelEx, which checks them.
cudaError_t Launch(KernelRecord* k, dim3 grid, dim3 block, void** args, size_t shared,
                   cudaStream_t stream, const cudaLaunchAttribute* attrs = nullptr,
                   unsigned num_attrs = 0) {
  ENSURE_CONTEXT();
  if (k == nullptr) return Record(cudaErrorInvalidDeviceFunction);
  // The configuration checks CUDA's runtime makes before it reaches the driver.
  uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > 1024 || block.z > 64 ||
      shared > (48u << 10)) {
    return Record(cudaErrorInvalidConfiguration);
  }
  CUfunction f;
  {
    std::lock_guard<std::mutex> lock(Reg().mu);
    CUresult r = FunctionFor(k, &f);
    if (r == CUDA_ERROR_NOT_FOUND) return Record(cudaErrorInvalidDeviceFunction);
    if (r != CUDA_SUCCESS) return Rec(r);
  }
  int max_threads = 0;
  if (cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f) ==
          CUDA_SUCCESS &&
      threads > uint64_t(max_threads)) {
    return Record(cudaErrorInvalidConfiguration);
  }
  CUresult r;
  if (num_attrs > 0) {
    static_assert(sizeof(cudaLaunchAttribute) == sizeof(CUlaunchAttribute));
    const CUlaunchConfig config{
        grid.x,
        grid.y,
        grid.z,
        block.x,
        block.y,
        block.z,
        unsigned(shared),
        stream,
        reinterpret_cast<CUlaunchAttribute*>(const_cast<cudaLaunchAttribute*>(attrs)),
        num_attrs};
    r = cuLaunchKernelEx(&config, f, args, nullptr);
    if (r == CUDA_ERROR_NOT_SUPPORTED) return Record(cudaErrorNotSupported);
  } else {
    r = cuLaunchKernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z, unsigned(shared),
                       stream, args, nullptr);
  }
  if (r == CUDA_ERROR_INVALID_VALUE) return Record(cudaErrorInvalidConfiguration);
  if (r == CUDA_ERROR_INVALID_HANDLE) return Record(cudaErrorInvalidResourceHandle);
  return Rec(r);
}

KernelRecord* FindKernel(const void* host_fun) {
  std::lock_guard<std::mutex> lock(Reg().mu);
  auto it = Reg().kernels.find(host_fun);
  return it == Reg().kernels.end() ? nullptr : it->second.get();
}

// The function of kernel `func` (its host stub) in the current context.
cudaError_t FunctionOf(const void* func, CUfunction* f) {
  KernelRecord* k = FindKernel(func);
  if (k == nullptr) return Record(cudaErrorInvalidDeviceFunction);
  std::lock_guard<std::mutex> lock(Reg().mu);
  return Rec(FunctionFor(k, f));
}

// The device address and size of a registered variable in the current context.
cudaError_t SymbolAddress(const void* symbol, CUdeviceptr* address, size_t* size) {
  ENSURE_CONTEXT();
  std::lock_guard<std::mutex> lock(Reg().mu);
  auto it = Reg().variables.find(symbol);
  if (it == Reg().variables.end()) {
    // A managed variable: host code names it by its managed address (nvcc's host accesses go
    // through the pointer cudart filled in), which is its device address too.
    for (const auto& fatbin : Reg().fatbins) {
      for (const ManagedRecord& m : fatbin->managed) {
        if (*m.host_pointer != nullptr && *m.host_pointer == symbol) {
          *address = m.device_address;
          *size = m.size;
          return cudaSuccess;
        }
      }
    }
    return Record(cudaErrorInvalidSymbol);
  }
  CUmodule module;
  CUresult r = ModuleFor(it->second.fatbin, &module);
  if (r != CUDA_SUCCESS) return Rec(r);
  r = cuModuleGetGlobal(address, size, module, it->second.name.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) return Record(cudaErrorInvalidSymbol);
  return Rec(r);
}

// Where a copy of `count` bytes to or from `symbol` at `offset` goes on the device, after CUDA's
// checks: the range inside the variable, and `kind` either `direction` (host to device for a copy
// to the symbol, device to host for one from it), device to device or default.
cudaError_t SymbolRange(const void* symbol, size_t count, size_t offset, cudaMemcpyKind kind,
                        cudaMemcpyKind direction, CUdeviceptr* at) {
  CUdeviceptr address;
  size_t size;
  const cudaError_t e = SymbolAddress(symbol, &address, &size);
  if (e != cudaSuccess) return e;
  if (offset > size || count > size - offset) return Record(cudaErrorInvalidValue);
  if (kind != direction && kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault) {
    return Record(cudaErrorInvalidMemcpyDirection);
  }
  *at = address + offset;
  return cudaSuccess;
}

// Host (1) or device (2) memory, for cudaMemcpyDefault.
bool IsDevicePointer(const void* p);

// What cudaMemcpyDefault means for a copy between these sides.
cudaMemcpyKind DefaultKind(bool dst_device, bool src_device) {
  return dst_device ? (src_device ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                    : (src_device ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
}

cudaError_t Copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream,
                 bool async) {
  if (count == 0) return cudaSuccess;
  if (kind == cudaMemcpyDefault) {
    ENSURE_CONTEXT();
    kind = DefaultKind(IsDevicePointer(dst), IsDevicePointer(src));
  }
  if (dst == nullptr || src == nullptr) return Record(cudaErrorInvalidValue);
  switch (kind) {
    case cudaMemcpyHostToHost:
      std::memmove(dst, src, count);
      return cudaSuccess;
    case cudaMemcpyHostToDevice:
      ENSURE_CONTEXT();
      return Rec(async ? cuMemcpyHtoDAsync(CUdeviceptr(dst), src, count, stream)
                       : cuMemcpyHtoD(CUdeviceptr(dst), src, count));
    case cudaMemcpyDeviceToHost:
      ENSURE_CONTEXT();
      return Rec(async ? cuMemcpyDtoHAsync(dst, CUdeviceptr(src), count, stream)
                       : cuMemcpyDtoH(dst, CUdeviceptr(src), count));
    case cudaMemcpyDeviceToDevice:
      ENSURE_CONTEXT();
      return Rec(async ? cuMemcpyDtoDAsync(CUdeviceptr(dst), CUdeviceptr(src), count, stream)
                       : cuMemcpyDtoD(CUdeviceptr(dst), CUdeviceptr(src), count));
    default:
      return Record(cudaErrorInvalidMemcpyDirection);
  }
}

}  // namespace

namespace {
bool IsDevicePointer(const void* p) {
  unsigned type = 0;
  return cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CUdeviceptr(p)) ==
             CUDA_SUCCESS &&
         type == CU_MEMORYTYPE_DEVICE;
}
}  // namespace

// =====================================================================================================
// The nvcc host ABI

GPUVM_EXPORT void** __cudaRegisterFatBinary(void* fat_cubin) {
  auto record = std::make_unique<FatbinRecord>();
  record->wrapper = fat_cubin;
  std::lock_guard<std::mutex> lock(Reg().mu);
  Reg().fatbins.push_back(std::move(record));
  return reinterpret_cast<void**>(Reg().fatbins.back().get());
}

GPUVM_EXPORT void __cudaRegisterFatBinaryEnd(void** /*handle*/) {
  // Nothing to do: modules load lazily on first use.
}

GPUVM_EXPORT void __cudaUnregisterFatBinary(void** handle) {
  auto* fatbin = reinterpret_cast<FatbinRecord*>(handle);
  std::lock_guard<std::mutex> lock(Reg().mu);
  for (auto it = Reg().kernels.begin(); it != Reg().kernels.end();) {
    it = it->second->fatbin == fatbin ? Reg().kernels.erase(it) : std::next(it);
  }
  for (auto it = Reg().variables.begin(); it != Reg().variables.end();) {
    it = it->second.fatbin == fatbin ? Reg().variables.erase(it) : std::next(it);
  }
  // The modules stay with their contexts (they go when the context or process does); a library
  // unloaded by dlclose could be reloaded at the same address, so its registrations must go now.
  fatbin->modules.clear();
  fatbin->unregistered = true;
}

GPUVM_EXPORT void __cudaRegisterFunction(void** handle, const char* host_fun, char* /*device_fun*/,
                                         const char* device_name, int /*thread_limit*/, uint3*,
                                         uint3*, dim3*, dim3*, int*) {
  if (handle == nullptr || host_fun == nullptr || device_name == nullptr) return;
  auto k = std::make_unique<KernelRecord>();
  k->fatbin = reinterpret_cast<FatbinRecord*>(handle);
  k->name = device_name;
  std::lock_guard<std::mutex> lock(Reg().mu);
  Reg().kernels[host_fun] = std::move(k);
}

GPUVM_EXPORT void __cudaRegisterVar(void** handle, char* host_var, char* /*device_address*/,
                                    const char* device_name, int /*ext*/, size_t size, int constant,
                                    int /*global*/) {
  if (handle == nullptr || host_var == nullptr || device_name == nullptr) return;
  VariableRecord v;
  v.fatbin = reinterpret_cast<FatbinRecord*>(handle);
  v.name = device_name;
  v.size = size;
  v.constant = constant != 0;
  std::lock_guard<std::mutex> lock(Reg().mu);
  Reg().variables[host_var] = std::move(v);
}

GPUVM_EXPORT void __cudaRegisterManagedVar(void** handle, void** host_pointer,
                                           char* /*device_address*/, const char* device_name,
                                           int /*ext*/, size_t size, int /*constant*/,
                                           int /*global*/) {
  if (handle == nullptr || host_pointer == nullptr || device_name == nullptr) return;
  auto* fatbin = reinterpret_cast<FatbinRecord*>(handle);
  std::lock_guard<std::mutex> lock(Reg().mu);
  fatbin->managed.push_back({host_pointer, device_name, size});
}

GPUVM_EXPORT char __cudaInitModule(void** handle) {
  // Loads the module now (CUDA uses this for managed variables); true on success.
  if (EnsureContext() != CUDA_SUCCESS || handle == nullptr) return 0;
  std::lock_guard<std::mutex> lock(Reg().mu);
  CUmodule module;
  return ModuleFor(reinterpret_cast<FatbinRecord*>(handle), &module) == CUDA_SUCCESS;
}

GPUVM_EXPORT unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared,
                                                  struct CUstream_st* stream) {
  t_configs.push_back({grid, block, shared, stream});
  return 0;
}

GPUVM_EXPORT cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shared,
                                                    void* stream) {
  if (t_configs.empty()) return Record(cudaErrorMissingConfiguration);
  LaunchConfig c = t_configs.back();
  t_configs.pop_back();
  if (grid) *grid = c.grid;
  if (block) *block = c.block;
  if (shared) *shared = c.shared;
  if (stream) *static_cast<cudaStream_t*>(stream) = c.stream;
  return cudaSuccess;
}

GPUVM_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* host_fun) {
  if (kernel == nullptr) return Record(cudaErrorInvalidValue);
  KernelRecord* k = FindKernel(host_fun);
  if (k == nullptr) return Record(cudaErrorInvalidDeviceFunction);
  *kernel = reinterpret_cast<cudaKernel_t>(k);
  return cudaSuccess;
}

GPUVM_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                                            size_t shared, cudaStream_t stream) {
  // A handle is a KernelRecord we handed out; check it is still registered before using it.
  KernelRecord* k = nullptr;
  {
    std::lock_guard<std::mutex> lock(Reg().mu);
    for (auto& [fun, record] : Reg().kernels) {
      if (record.get() == reinterpret_cast<KernelRecord*>(kernel)) k = record.get();
    }
  }
  return Launch(k, grid, block, args, shared, stream);
}

// --default-stream per-thread builds call the _ptsz forms; gpuvm treats the per-thread default
// stream as the legacy one (docs/RUNTIME.md).
GPUVM_EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block,
                                                 void** args, size_t shared, cudaStream_t stream) {
  return __cudaLaunchKernel(kernel, grid, block, args, shared, stream);
}

// =====================================================================================================
// Errors and versions

GPUVM_EXPORT cudaError_t cudaGetLastError(void) {
  cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

GPUVM_EXPORT cudaError_t cudaPeekAtLastError(void) { return t_last_error; }

GPUVM_EXPORT const char* cudaGetErrorName(cudaError_t error) {
  const char* name = gpuvm::runtime::CudaErrorName(error);
  return name ? name : "cudaErrorUnknown";
}

GPUVM_EXPORT const char* cudaGetErrorString(cudaError_t error) {
  const char* s = gpuvm::runtime::CudaErrorString(error);
  return s ? s : "unrecognized error code";
}

GPUVM_EXPORT cudaError_t cudaDriverGetVersion(int* version) {
  if (version == nullptr) return Record(cudaErrorInvalidValue);
  return Rec(cuDriverGetVersion(version));
}

namespace {

// cudaGetDriverEntryPoint(ByVersion): the driver's cuGetProcAddress_v2 with the runtime's words.
// `per_thread_default`: the _ptsz entry point, which a program compiled for per-thread default
// streams calls, makes cudaEnableDefault mean per-thread.
cudaError_t DriverEntryPoint(const char* symbol, void** func, unsigned cuda_version,
                             unsigned long long flags, cudaDriverEntryPointQueryResult* status,
                             bool per_thread_default) {
  if (symbol == nullptr || func == nullptr || flags > cudaEnablePerThreadDefaultStream) {
    return Record(cudaErrorInvalidValue);
  }
  cuuint64_t driver_flags = flags;
  if (flags == cudaEnableDefault && per_thread_default) {
    driver_flags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  }
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  const CUresult r =
      cuGetProcAddress_v2(symbol, func, static_cast<int>(cuda_version), driver_flags, &found);
  if (r != CUDA_SUCCESS) return Rec(r);
  if (status != nullptr) *status = static_cast<cudaDriverEntryPointQueryResult>(found);
  return cudaSuccess;
}

}  // namespace

GPUVM_EXPORT cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** func,
                                                 unsigned long long flags,
                                                 cudaDriverEntryPointQueryResult* status) {
  return DriverEntryPoint(symbol, func, kRuntimeVersion, flags, status, false);
}
GPUVM_EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** func,
                                                      unsigned long long flags,
                                                      cudaDriverEntryPointQueryResult* status) {
  return DriverEntryPoint(symbol, func, kRuntimeVersion, flags, status, true);
}
GPUVM_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** func,
                                                          unsigned int cuda_version,
                                                          unsigned long long flags,
                                                          cudaDriverEntryPointQueryResult* status) {
  return DriverEntryPoint(symbol, func, cuda_version, flags, status, false);
}
GPUVM_EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(
    const char* symbol, void** func, unsigned int cuda_version, unsigned long long flags,
    cudaDriverEntryPointQueryResult* status) {
  return DriverEntryPoint(symbol, func, cuda_version, flags, status, true);
}

GPUVM_EXPORT cudaError_t cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return Record(cudaErrorInvalidValue);
  *version = kRuntimeVersion;
  return cudaSuccess;
}

// =====================================================================================================
// Devices

GPUVM_EXPORT cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return Record(cudaErrorInvalidValue);
  *count = 0;
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return Record(cudaErrorNoDevice);
  return Rec(cuDeviceGetCount(count));
}

GPUVM_EXPORT cudaError_t cudaSetDevice(int device) {
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return Rec(r);
  int count = 0;
  cuDeviceGetCount(&count);
  if (device < 0 || device >= count) return Record(cudaErrorInvalidDevice);
  t_device = device;
  ENSURE_CONTEXT();
  return cudaSuccess;
}

// The device that best matches `prop`: with one device, that one (any property it lacks changes
// nothing: CUDA's choice is the closest, not an exact match).
GPUVM_EXPORT cudaError_t cudaChooseDevice(int* device, const cudaDeviceProp* prop) {
  if (device == nullptr || prop == nullptr) return Record(cudaErrorInvalidValue);
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return Rec(r);
  int count = 0;
  if ((r = cuDeviceGetCount(&count)) != CUDA_SUCCESS) return Rec(r);
  if (count <= 0) return Record(cudaErrorNoDevice);
  *device = 0;
  return cudaSuccess;
}

// Only devices that exist may be listed; the list changes nothing with one device.
GPUVM_EXPORT cudaError_t cudaSetValidDevices(int* devices, int len) {
  if (len < 0 || (len > 0 && devices == nullptr)) return Record(cudaErrorInvalidValue);
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return Rec(r);
  for (int i = 0; i < len; ++i) {
    CUdevice dev;
    if (cuDeviceGet(&dev, devices[i]) != CUDA_SUCCESS) return Record(cudaErrorInvalidDevice);
  }
  return cudaSuccess;
}

// Sets the device's flags (as cudaSetDeviceFlags) without making it current; its primary context
// is made on first use. `flags` is reserved (0).
GPUVM_EXPORT cudaError_t cudaInitDevice(int device, unsigned int device_flags, unsigned int flags) {
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return Rec(r);
  CUdevice dev;
  if (cuDeviceGet(&dev, device) != CUDA_SUCCESS) return Record(cudaErrorInvalidDevice);
  if (flags != 0) return Record(cudaErrorInvalidValue);
  if (device_flags == 0) return cudaSuccess;
  const unsigned schedule = device_flags & cudaDeviceScheduleMask;
  const unsigned known = cudaDeviceScheduleMask | cudaDeviceMapHost | cudaDeviceLmemResizeToMax;
  if ((device_flags & ~known) != 0 || (schedule != 0 && (schedule & (schedule - 1)) != 0)) {
    return Record(cudaErrorInvalidValue);
  }
  return Rec(cuDevicePrimaryCtxSetFlags(dev, device_flags));
}

GPUVM_EXPORT cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int len, int device) {
  if (bus_id == nullptr || len <= 0) return Record(cudaErrorInvalidValue);
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return Rec(r);
  CUdevice dev;
  if (cuDeviceGet(&dev, device) != CUDA_SUCCESS) return Record(cudaErrorInvalidDevice);
  return Rec(cuDeviceGetPCIBusId(bus_id, len, dev));
}

GPUVM_EXPORT cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* bus_id) {
  if (device == nullptr || bus_id == nullptr) return Record(cudaErrorInvalidValue);
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return Rec(r);
  CUdevice dev;
  if ((r = cuDeviceGetByPCIBusId(&dev, bus_id)) != CUDA_SUCCESS) return Rec(r);
  *device = dev;
  return cudaSuccess;
}

GPUVM_EXPORT cudaError_t cudaDeviceGetSharedMemConfig(cudaSharedMemConfig* config) {
  if (config == nullptr) return Record(cudaErrorInvalidValue);
  CUsharedconfig c;
  const cudaError_t e = InContext(cuCtxGetSharedMemConfig, &c);
  if (e == cudaSuccess) *config = cudaSharedMemConfig(int(c));  // the same numbering
  return e;
}

GPUVM_EXPORT cudaError_t cudaDeviceSetSharedMemConfig(cudaSharedMemConfig config) {
  return InContext(cuCtxSetSharedMemConfig, CUsharedconfig(int(config)));
}

GPUVM_EXPORT cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return Record(cudaErrorInvalidValue);
  *device = t_device;
  return cudaSuccess;
}

GPUVM_EXPORT cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return Record(cudaErrorInvalidValue);
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return Rec(r);
  CUdevice dev;
  if (cuDeviceGet(&dev, device) != CUDA_SUCCESS) return Record(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  cuDeviceGetName(prop->name, sizeof prop->name, dev);
  size_t total = 0;
  cuDeviceTotalMem(&total, dev);
  prop->totalGlobalMem = total;
  auto attr = [dev](CUdevice_attribute a) {
    int v = 0;
    cuDeviceGetAttribute(&v, a, dev);
    return v;
  };
  prop->sharedMemPerBlock = size_t(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK));
  prop->regsPerBlock = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  prop->warpSize = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  prop->memPitch = size_t(attr(CU_DEVICE_ATTRIBUTE_MAX_PITCH));
  prop->maxThreadsPerBlock = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  prop->maxThreadsDim[0] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
  prop->maxThreadsDim[1] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
  prop->maxThreadsDim[2] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
  prop->maxGridSize[0] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
  prop->maxGridSize[1] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
  prop->maxGridSize[2] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
  prop->totalConstMem = size_t(attr(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY));
  prop->major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  prop->minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  prop->textureAlignment = size_t(attr(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT));
  prop->texturePitchAlignment = size_t(attr(CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT));
  prop->multiProcessorCount = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  prop->canMapHostMemory = attr(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY);
  prop->surfaceAlignment = size_t(attr(CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT));
  prop->concurrentKernels = attr(CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS);
  prop->pciBusID = attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
  prop->pciDeviceID = attr(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
  prop->pciDomainID = attr(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
  prop->asyncEngineCount = attr(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT);
  prop->unifiedAddressing = attr(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
  prop->managedMemory = attr(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
  prop->memoryPoolsSupported = attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED);
  prop->concurrentManagedAccess = attr(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS);
  prop->memoryBusWidth = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  prop->l2CacheSize = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  prop->maxThreadsPerMultiProcessor = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  prop->sharedMemPerMultiprocessor =
      size_t(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR));
  prop->regsPerMultiprocessor = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  prop->sharedMemPerBlockOptin =
      size_t(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
  prop->maxBlocksPerMultiProcessor = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
  prop->hostRegisterSupported = attr(CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED);
  return cudaSuccess;
}

GPUVM_EXPORT cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (value == nullptr) return Record(cudaErrorInvalidValue);
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return Rec(r);
  CUdevice dev;
  if (cuDeviceGet(&dev, device) != CUDA_SUCCESS) return Record(cudaErrorInvalidDevice);
  // The runtime's attribute numbers are the driver's.
  return Rec(cuDeviceGetAttribute(value, CUdevice_attribute(int(attr)), dev));
}

// The flags of the current device's primary context (how a wait spins, mapped host memory).
GPUVM_EXPORT cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  const unsigned schedule = flags & cudaDeviceScheduleMask;
  const unsigned known = cudaDeviceScheduleMask | cudaDeviceMapHost | cudaDeviceLmemResizeToMax;
  if ((flags & ~known) != 0 || (schedule != 0 && (schedule & (schedule - 1)) != 0)) {
    return Record(cudaErrorInvalidValue);
  }
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return Rec(r);
  CUdevice dev;
  if (cuDeviceGet(&dev, t_device) != CUDA_SUCCESS) return Record(cudaErrorInvalidDevice);
  return Rec(cuDevicePrimaryCtxSetFlags(dev, flags));  // same bits as CU_CTX_*
}

GPUVM_EXPORT cudaError_t cudaGetDeviceFlags(unsigned int* flags) {
  if (flags == nullptr) return Record(cudaErrorInvalidValue);
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return Rec(r);
  CUdevice dev;
  if (cuDeviceGet(&dev, t_device) != CUDA_SUCCESS) return Record(cudaErrorInvalidDevice);
  int active = 0;
  return Rec(cuDevicePrimaryCtxGetState(dev, flags, &active));
}

// Fermi's L1/shared split. The software GPU has none, so a preference changes nothing; it is
// checked, kept and reported back, as programs that set and read it expect.
namespace {
std::atomic<int> g_device_cache_config{cudaFuncCachePreferNone};

bool ValidCacheConfig(cudaFuncCache c) {
  return c >= cudaFuncCachePreferNone && c <= cudaFuncCachePreferEqual;
}
}  // namespace

GPUVM_EXPORT cudaError_t cudaDeviceSetCacheConfig(cudaFuncCache config) {
  if (!ValidCacheConfig(config)) return Record(cudaErrorInvalidValue);
  ENSURE_CONTEXT();
  g_device_cache_config.store(config, std::memory_order_relaxed);
  return cudaSuccess;
}

GPUVM_EXPORT cudaError_t cudaDeviceGetCacheConfig(cudaFuncCache* config) {
  if (config == nullptr) return Record(cudaErrorInvalidValue);
  ENSURE_CONTEXT();
  *config = cudaFuncCache(g_device_cache_config.load(std::memory_order_relaxed));
  return cudaSuccess;
}

// There is no profiler to start: the calls succeed and do nothing, like CUDA's without one
// attached.
GPUVM_EXPORT cudaError_t cudaProfilerStart(void) {
  ENSURE_CONTEXT();
  return cudaSuccess;
}

GPUVM_EXPORT cudaError_t cudaProfilerStop(void) {
  ENSURE_CONTEXT();
  return cudaSuccess;
}

GPUVM_EXPORT cudaError_t cudaDeviceSynchronize(void) { return InContext(cuCtxSynchronize); }

GPUVM_EXPORT cudaError_t cudaDeviceGetLimit(size_t* value, cudaLimit limit) {
  return InContext(cuCtxGetLimit, value, CUlimit(limit));
}

GPUVM_EXPORT cudaError_t cudaDeviceSetLimit(cudaLimit limit, size_t value) {
  return InContext(cuCtxSetLimit, CUlimit(limit), value);
}

GPUVM_EXPORT cudaError_t cudaDeviceReset(void) {
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return Rec(r);
  {
    // Every module and function of the primary context goes with the reset.
    std::lock_guard<std::mutex> lock(Reg().mu);
    for (auto& f : Reg().fatbins) f->modules.erase(g_primary);
    for (auto& [fun, k] : Reg().kernels) k->functions.erase(g_primary);
  }
  if (g_primary == nullptr) return cudaSuccess;
  t_last_error = cudaSuccess;
  return Rec(cuDevicePrimaryCtxReset(0));
}

// =====================================================================================================
// Memory

GPUVM_EXPORT cudaError_t cudaMalloc(void** ptr, size_t size) {
  if (ptr == nullptr) return Record(cudaErrorInvalidValue);
  ENSURE_CONTEXT();
  if (size == 0) {
    *ptr = nullptr;
    return cudaSuccess;
  }
  CUdeviceptr d = 0;
  CUresult r = cuMemAlloc(&d, size);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return Record(cudaErrorMemoryAllocation);
  if (r != CUDA_SUCCESS) return Rec(r);
  *ptr = reinterpret_cast<void*>(d);
  return cudaSuccess;
}

GPUVM_EXPORT cudaError_t cudaFree(void* ptr) {
  ENSURE_CONTEXT();
  if (ptr == nullptr) return cudaSuccess;
  CUresult r = cuMemFree(CUdeviceptr(ptr));
  if (r == CUDA_ERROR_INVALID_VALUE) return Record(cudaErrorInvalidDevicePointer);
  return Rec(r);
}

GPUVM_EXPORT cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int flags) {
  if (ptr == nullptr) return Record(cudaErrorInvalidValue);
  ENSURE_CONTEXT();
  CUresult r = cuMemHostAlloc(ptr, size, flags);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return Record(cudaErrorMemoryAllocation);
  return Rec(r);
}

GPUVM_EXPORT cudaError_t cudaHostGetFlags(unsigned int* flags, void* ptr) {
  return InContext(cuMemHostGetFlags, flags, ptr);  // the same flag bits as cudaHostAlloc*
}

GPUVM_EXPORT cudaError_t cudaMallocHost(void** ptr, size_t size) {
  return cudaHostAlloc(ptr, size, 0);
}

GPUVM_EXPORT cudaError_t cudaFreeHost(void* ptr) {
  ENSURE_CONTEXT();
  CUresult r = cuMemFreeHost(ptr);
  if (r == CUDA_ERROR_INVALID_VALUE) return Record(cudaErrorInvalidValue);
  return Rec(r);
}

GPUVM_EXPORT cudaError_t cudaHostGetDevicePointer(void** device, void* host, unsigned int flags) {
  if (device == nullptr || host == nullptr || flags != 0) return Record(cudaErrorInvalidValue);
  ENSURE_CONTEXT();
  CUdeviceptr d;
  CUresult r = cuMemHostGetDevicePointer(&d, host, 0);
  if (r != CUDA_SUCCESS) return Rec(r);
  *device = reinterpret_cast<void*>(d);
  return cudaSuccess;
}

GPUVM_EXPORT cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  const unsigned known = cudaHostRegisterPortable | cudaHostRegisterMapped |
                         cudaHostRegisterIoMemory | cudaHostRegisterReadOnly;
  if (ptr == nullptr || size == 0 || (flags & ~known) != 0) return Record(cudaErrorInvalidValue);
  return InContext(cuMemHostRegister, ptr, size, flags);  // same bits as CU_MEMHOSTREGISTER_*
}

GPUVM_EXPORT cudaError_t cudaHostUnregister(void* ptr) {
  if (ptr == nullptr) return Record(cudaErrorInvalidValue);
  return InContext(cuMemHostUnregister, ptr);
}

GPUVM_EXPORT cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  return InContext(cuMemGetInfo, free, total);
}

// ---- managed memory (docs/RUNTIME.md, "Managed memory") ----

GPUVM_EXPORT cudaError_t cudaMallocManaged(void** ptr, size_t size, unsigned int flags) {
  if (ptr == nullptr || size == 0) return Record(cudaErrorInvalidValue);
  ENSURE_CONTEXT();
  CUdeviceptr d = 0;
  CUresult r = cuMemAllocManaged(&d, size, flags);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return Record(cudaErrorMemoryAllocation);
  if (r != CUDA_SUCCESS) return Rec(r);
  *ptr = reinterpret_cast<void*>(d);
  return cudaSuccess;
}

GPUVM_EXPORT cudaError_t cudaStreamAttachMemAsync(cudaStream_t stream, void* ptr, size_t length,
                                                  unsigned int flags) {
  return InContext(cuStreamAttachMemAsync, stream, CUdeviceptr(ptr), length, flags);
}

GPUVM_EXPORT cudaError_t cudaStreamAttachMemAsync_ptsz(cudaStream_t stream, void* ptr,
                                                       size_t length, unsigned int flags) {
  return cudaStreamAttachMemAsync(stream, ptr, length, flags);
}

namespace {
// The runtime's memory locations are the driver's, field by field and value by value.
CUmemLocation ToDriver(cudaMemLocation location) {
  return CUmemLocation{CUmemLocationType(location.type), location.id};
}
}  // namespace

GPUVM_EXPORT cudaError_t cudaMemPrefetchAsync(const void* ptr, size_t count,
                                              cudaMemLocation location, unsigned int flags,
                                              cudaStream_t stream) {
  return InContext(cuMemPrefetchAsync_v2, CUdeviceptr(ptr), count, ToDriver(location), flags,
                   stream);
}

GPUVM_EXPORT cudaError_t cudaMemPrefetchAsync_ptsz(const void* ptr, size_t count,
                                                   cudaMemLocation location, unsigned int flags,
                                                   cudaStream_t stream) {
  return cudaMemPrefetchAsync(ptr, count, location, flags, stream);
}

GPUVM_EXPORT cudaError_t cudaMemAdvise(const void* ptr, size_t count, cudaMemoryAdvise advice,
                                       cudaMemLocation location) {
  return InContext(cuMemAdvise_v2, CUdeviceptr(ptr), count, CUmem_advise(advice),
                   ToDriver(location));
}

GPUVM_EXPORT cudaError_t cudaMemRangeGetAttributes(void** data, size_t* sizes,
                                                   cudaMemRangeAttribute* attributes, size_t n,
                                                   const void* ptr, size_t count) {
  // The enumerations share their values; the caller's bytes go through as they are.
  return InContext(cuMemRangeGetAttributes, data, sizes,
                   reinterpret_cast<CUmem_range_attribute*>(attributes), n, CUdeviceptr(ptr),
                   count);
}

GPUVM_EXPORT cudaError_t cudaMemRangeGetAttribute(void* data, size_t size,
                                                  cudaMemRangeAttribute attribute, const void* ptr,
                                                  size_t count) {
  return cudaMemRangeGetAttributes(&data, &size, &attribute, 1, ptr, count);
}

GPUVM_EXPORT cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes,
                                                  const void* ptr) {
  if (attributes == nullptr) return Record(cudaErrorInvalidValue);
  ENSURE_CONTEXT();
  CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                 CU_POINTER_ATTRIBUTE_HOST_POINTER,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  unsigned type = 0, managed = 0;
  CUdeviceptr device_pointer = 0;
  void* host_pointer = nullptr;
  int ordinal = cudaInvalidDeviceId;
  void* data[] = {&type, &managed, &device_pointer, &host_pointer, &ordinal};
  const CUresult r = cuPointerGetAttributes(5, which, data, CUdeviceptr(ptr));
  if (r != CUDA_SUCCESS) return Rec(r);
  *attributes = cudaPointerAttributes{};
  // Memory CUDA does not know (type 0) is no error since CUDA 11: cudaMemoryTypeUnregistered.
  attributes->type = managed                        ? cudaMemoryTypeManaged
                     : type == CU_MEMORYTYPE_DEVICE ? cudaMemoryTypeDevice
                     : type == CU_MEMORYTYPE_HOST   ? cudaMemoryTypeHost
                                                    : cudaMemoryTypeUnregistered;
  attributes->device = ordinal;
  attributes->devicePointer = reinterpret_cast<void*>(device_pointer);
  attributes->hostPointer = host_pointer;
  return cudaSuccess;
}

GPUVM_EXPORT cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  return Copy(dst, src, count, kind, nullptr, false);
}

GPUVM_EXPORT cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count,
                                         cudaMemcpyKind kind, cudaStream_t stream) {
  return Copy(dst, src, count, kind, stream, true);
}

GPUVM_EXPORT cudaError_t cudaMemset(void* ptr, int value, size_t count) {
  return InContext(cuMemsetD8, CUdeviceptr(ptr), static_cast<unsigned char>(value), count);
}

GPUVM_EXPORT cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
  return InContext(cuMemsetD8Async, CUdeviceptr(ptr), static_cast<unsigned char>(value), count,
                   stream);
}

GPUVM_EXPORT cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count,
                                            size_t offset, cudaMemcpyKind kind) {
  CUdeviceptr at;
  const cudaError_t e = SymbolRange(symbol, count, offset, kind, cudaMemcpyHostToDevice, &at);
  if (e != cudaSuccess) return e;
  return Copy(reinterpret_cast<void*>(at), src, count, kind, nullptr, false);
}

GPUVM_EXPORT cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count,
                                              size_t offset, cudaMemcpyKind kind) {
  CUdeviceptr at;
  const cudaError_t e = SymbolRange(symbol, count, offset, kind, cudaMemcpyDeviceToHost, &at);
  if (e != cudaSuccess) return e;
  return Copy(dst, reinterpret_cast<const void*>(at), count, kind, nullptr, false);
}

GPUVM_EXPORT cudaError_t cudaMemcpyToSymbol_ptds(const void* symbol, const void* src, size_t count,
                                                 size_t offset, cudaMemcpyKind kind) {
  return cudaMemcpyToSymbol(symbol, src, count, offset, kind);
}

GPUVM_EXPORT cudaError_t cudaMemcpyFromSymbol_ptds(void* dst, const void* symbol, size_t count,
                                                   size_t offset, cudaMemcpyKind kind) {
  return cudaMemcpyFromSymbol(dst, symbol, count, offset, kind);
}

GPUVM_EXPORT cudaError_t cudaMemcpyToSymbolAsync(const void* symbol, const void* src, size_t count,
                                                 size_t offset, cudaMemcpyKind kind,
                                                 cudaStream_t stream) {
  CUdeviceptr at;
  const cudaError_t e = SymbolRange(symbol, count, offset, kind, cudaMemcpyHostToDevice, &at);
  if (e != cudaSuccess) return e;
  return Copy(reinterpret_cast<void*>(at), src, count, kind, stream, true);
}

GPUVM_EXPORT cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void* symbol, const void* src,
                                                      size_t count, size_t offset,
                                                      cudaMemcpyKind kind, cudaStream_t stream) {
  return cudaMemcpyToSymbolAsync(symbol, src, count, offset, kind, stream);
}

GPUVM_EXPORT cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const void* symbol, size_t count,
                                                   size_t offset, cudaMemcpyKind kind,
                                                   cudaStream_t stream) {
  CUdeviceptr at;
  const cudaError_t e = SymbolRange(symbol, count, offset, kind, cudaMemcpyDeviceToHost, &at);
  if (e != cudaSuccess) return e;
  return Copy(dst, reinterpret_cast<const void*>(at), count, kind, stream, true);
}

GPUVM_EXPORT cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void* dst, const void* symbol, size_t count,
                                                        size_t offset, cudaMemcpyKind kind,
                                                        cudaStream_t stream) {
  return cudaMemcpyFromSymbolAsync(dst, symbol, count, offset, kind, stream);
}

GPUVM_EXPORT cudaError_t cudaGetSymbolSize(size_t* size, const void* symbol) {
  if (size == nullptr) return Record(cudaErrorInvalidValue);
  CUdeviceptr address;
  size_t bytes;
  cudaError_t e = SymbolAddress(symbol, &address, &bytes);
  if (e == cudaSuccess) *size = bytes;
  return e;
}

GPUVM_EXPORT cudaError_t cudaGetSymbolAddress(void** dev_ptr, const void* symbol) {
  if (dev_ptr == nullptr) return Record(cudaErrorInvalidValue);
  CUdeviceptr address;
  size_t size;
  cudaError_t e = SymbolAddress(symbol, &address, &size);
  if (e == cudaSuccess) *dev_ptr = reinterpret_cast<void*>(address);
  return e;
}

// =====================================================================================================
// Streams and events

GPUVM_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  return CreateInContext(cuStreamCreate, stream, flags);
}

GPUVM_EXPORT cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

GPUVM_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  ENSURE_CONTEXT();
  if (stream == nullptr) return Record(cudaErrorInvalidResourceHandle);
  return Rec(cuStreamDestroy(stream));
}

GPUVM_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return InContext(cuStreamSynchronize, stream);
}

GPUVM_EXPORT cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return QueryInContext(cuStreamQuery, stream);
}

GPUVM_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                             unsigned int flags) {
  return InContext(cuStreamWaitEvent, stream, event, flags);
}

GPUVM_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  return CreateInContext(cuEventCreate, event, flags);
}

GPUVM_EXPORT cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

GPUVM_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event) {
  return InContext(cuEventDestroy, event);
}

GPUVM_EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  return InContext(cuEventRecord, event, stream);
}

GPUVM_EXPORT cudaError_t cudaEventQuery(cudaEvent_t event) {
  return QueryInContext(cuEventQuery, event);
}

GPUVM_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return InContext(cuEventSynchronize, event);
}

GPUVM_EXPORT cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  return InContext(cuEventElapsedTime, ms, start, end);
}

// =====================================================================================================
// Execution

GPUVM_EXPORT cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args,
                                          size_t shared, cudaStream_t stream) {
  KernelRecord* k = FindKernel(func);
  if (k == nullptr) return Record(cudaErrorInvalidDeviceFunction);
  return Launch(k, grid, block, args, shared, stream);
}

GPUVM_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func,
                                             void** args) {
  if (config == nullptr || (config->numAttrs > 0 && config->attrs == nullptr)) {
    return Record(cudaErrorInvalidValue);
  }
  KernelRecord* k = FindKernel(func);
  if (k == nullptr) return Record(cudaErrorInvalidDeviceFunction);
  return Launch(k, config->gridDim, config->blockDim, args, config->dynamicSmemBytes,
                config->stream, config->attrs, config->numAttrs);
}
GPUVM_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* config,
                                                  const void* func, void** args) {
  return cudaLaunchKernelExC(config, func, args);
}

GPUVM_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 grid, dim3 block, void** args,
                                               size_t shared, cudaStream_t stream) {
  return cudaLaunchKernel(func, grid, block, args, shared, stream);
}

GPUVM_EXPORT cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
  if (attr == nullptr) return Record(cudaErrorInvalidValue);
  ENSURE_CONTEXT();
  CUfunction f;
  if (const cudaError_t e = FunctionOf(func, &f); e != cudaSuccess) return e;
  std::memset(attr, 0, sizeof *attr);
  int v = 0;
  auto get = [&](CUfunction_attribute a) {
    v = 0;
    cuFuncGetAttribute(&v, a, f);
    return v;
  };
  attr->sharedSizeBytes = size_t(get(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES));
  attr->constSizeBytes = size_t(get(CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES));
  attr->localSizeBytes = size_t(get(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES));
  attr->maxThreadsPerBlock = get(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  attr->numRegs = get(CU_FUNC_ATTRIBUTE_NUM_REGS);
  attr->ptxVersion = get(CU_FUNC_ATTRIBUTE_PTX_VERSION);
  attr->binaryVersion = get(CU_FUNC_ATTRIBUTE_BINARY_VERSION);
  attr->maxDynamicSharedSizeBytes = get(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  attr->preferredShmemCarveout = get(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT);
  return cudaSuccess;
}

// The settable attributes share the driver's numbers; the driver checks the values.
GPUVM_EXPORT cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
  ENSURE_CONTEXT();
  CUfunction f;
  if (const cudaError_t e = FunctionOf(func, &f); e != cudaSuccess) return e;
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize &&
      attr != cudaFuncAttributePreferredSharedMemoryCarveout) {
    return Record(cudaErrorInvalidValue);
  }
  return Rec(cuFuncSetAttribute(f, static_cast<CUfunction_attribute>(attr), value));
}

GPUVM_EXPORT cudaError_t cudaFuncSetSharedMemConfig(const void* func, cudaSharedMemConfig config) {
  ENSURE_CONTEXT();
  if (FindKernel(func) == nullptr) return Record(cudaErrorInvalidDeviceFunction);
  if (config < cudaSharedMemBankSizeDefault || config > cudaSharedMemBankSizeEightByte)
    return Record(cudaErrorInvalidValue);
  return cudaSuccess;  // the bank width is the hardware's (see cudaFuncSetCacheConfig)
}

GPUVM_EXPORT cudaError_t cudaFuncSetCacheConfig(const void* func, cudaFuncCache config) {
  ENSURE_CONTEXT();
  if (FindKernel(func) == nullptr) return Record(cudaErrorInvalidDeviceFunction);
  if (!ValidCacheConfig(config)) return Record(cudaErrorInvalidValue);
  return cudaSuccess;  // no L1/shared split to configure (see cudaDeviceSetCacheConfig)
}

// A channel format descriptor (used by texture and array code, which gpuvm does not have; the
// value is plain data, and programs build one before deciding what to do with it).
GPUVM_EXPORT cudaChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w,
                                                         cudaChannelFormatKind f) {
  return cudaChannelFormatDesc{x, y, z, w, f};
}

// The per-thread-default-stream (_ptds/_ptsz) spellings of the calls above.
GPUVM_EXPORT cudaError_t cudaMemcpy_ptds(void* dst, const void* src, size_t count,
                                         cudaMemcpyKind kind) {
  return cudaMemcpy(dst, src, count, kind);
}
GPUVM_EXPORT cudaError_t cudaMemcpyAsync_ptsz(void* dst, const void* src, size_t count,
                                              cudaMemcpyKind kind, cudaStream_t stream) {
  return cudaMemcpyAsync(dst, src, count, kind, stream);
}
GPUVM_EXPORT cudaError_t cudaMemset_ptds(void* ptr, int value, size_t count) {
  return cudaMemset(ptr, value, count);
}
GPUVM_EXPORT cudaError_t cudaMemsetAsync_ptsz(void* ptr, int value, size_t count,
                                              cudaStream_t stream) {
  return cudaMemsetAsync(ptr, value, count, stream);
}
GPUVM_EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream) {
  return cudaStreamSynchronize(stream);
}
GPUVM_EXPORT cudaError_t cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream) {
  return cudaEventRecord(event, stream);
}
GPUVM_EXPORT cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream,
                                                  unsigned int flags) {
  return InContext(cuEventRecordWithFlags, event, stream, flags);  // the same flag values
}
GPUVM_EXPORT cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream,
                                                       unsigned int flags) {
  return cudaEventRecordWithFlags(event, stream, flags);
}

// =====================================================================================================
// Pitched memory, 2D/3D copies and memsets, occupancy, host functions on streams: the driver's
// functions under the runtime's names and argument shapes.

namespace {

// The driver's memory types for a runtime copy `kind` (cudaMemcpyDefault: asked of the pointers).
// A side that is a CUDA array (`dst_array`, `src_array`) is device memory: false when the kind
// says otherwise.
bool MemoryTypes(cudaMemcpyKind kind, const void* dst, const void* src, CUmemorytype* dst_type,
                 CUmemorytype* src_type, bool dst_array = false, bool src_array = false) {
  if (kind == cudaMemcpyDefault) {
    kind = DefaultKind(dst_array || IsDevicePointer(dst), src_array || IsDevicePointer(src));
  }
  const bool device_to = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool device_from = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if ((dst_array && !device_to) || (src_array && !device_from)) return false;
  switch (kind) {
    case cudaMemcpyHostToHost:
      *src_type = CU_MEMORYTYPE_HOST, *dst_type = CU_MEMORYTYPE_HOST;
      return true;
    case cudaMemcpyHostToDevice:
      *src_type = CU_MEMORYTYPE_HOST, *dst_type = CU_MEMORYTYPE_DEVICE;
      return true;
    case cudaMemcpyDeviceToHost:
      *src_type = CU_MEMORYTYPE_DEVICE, *dst_type = CU_MEMORYTYPE_HOST;
      return true;
    case cudaMemcpyDeviceToDevice:
      *src_type = CU_MEMORYTYPE_DEVICE, *dst_type = CU_MEMORYTYPE_DEVICE;
      return true;
    default:
      return false;
  }
}

// Fills one side of a driver copy description from a runtime pointer of memory type `type`.
template <typename HostPtr>
void SetSide(CUmemorytype type, void* ptr, CUmemorytype* out_type, HostPtr* host,
             CUdeviceptr* device) {
  *out_type = type;
  if (type == CU_MEMORYTYPE_DEVICE) {
    *device = CUdeviceptr(ptr);
  } else {
    *host = static_cast<HostPtr>(ptr);
  }
}

cudaError_t Copy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                   size_t height, cudaMemcpyKind kind, cudaStream_t stream, bool async) {
  ENSURE_CONTEXT();
  if (width == 0 || height == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr) return Record(cudaErrorInvalidValue);
  CUmemorytype dst_type, src_type;
  if (!MemoryTypes(kind, dst, src, &dst_type, &src_type)) {
    return Record(cudaErrorInvalidMemcpyDirection);
  }
  if (height > 1 && (dpitch < width || spitch < width)) return Record(cudaErrorInvalidPitchValue);
  CUDA_MEMCPY2D c{};
  SetSide(src_type, const_cast<void*>(src), &c.srcMemoryType, &c.srcHost, &c.srcDevice);
  SetSide(dst_type, dst, &c.dstMemoryType, &c.dstHost, &c.dstDevice);
  c.srcPitch = spitch;
  c.dstPitch = dpitch;
  c.WidthInBytes = width;
  c.Height = height;
  return Rec(async ? cuMemcpy2DAsync_v2(&c, stream) : cuMemcpy2D_v2(&c));
}

// Bytes of one element of `array` (its channels' bytes together); 0 if it is no live array.
size_t ElementBytes(cudaArray_const_t array) {
  CUDA_ARRAY3D_DESCRIPTOR d;
  if (cuArray3DGetDescriptor_v2(&d, reinterpret_cast<CUarray>(const_cast<cudaArray*>(array))) !=
      CUDA_SUCCESS) {
    return 0;
  }
  switch (d.Format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return d.NumChannels;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2 * d.NumChannels;
    default:
      return 4 * d.NumChannels;
  }
}

// The driver's description of a copy; cudaSuccess with *empty for nothing to copy. A CUDA array
// side (the runtime's cudaArray_t is the driver's CUarray) counts its position and the extent's
// width in elements; a pointer side counts x in bytes, as CUDA does.
cudaError_t ToDriverCopy(const cudaMemcpy3DParms* p, CUDA_MEMCPY3D* c, bool* empty) {
  *empty = false;
  if (p == nullptr) return Record(cudaErrorInvalidValue);
  const bool src_array = p->srcArray != nullptr, dst_array = p->dstArray != nullptr;
  if (p->extent.width == 0 || p->extent.height == 0 || p->extent.depth == 0) {
    *empty = true;
    return cudaSuccess;
  }
  if ((!src_array && p->srcPtr.ptr == nullptr) || (!dst_array && p->dstPtr.ptr == nullptr)) {
    return Record(cudaErrorInvalidValue);
  }
  // Element size: the array's (the source's when both are arrays), else bytes.
  size_t element = 1;
  if (src_array || dst_array) {
    element = ElementBytes(src_array ? p->srcArray : p->dstArray);
    if (element == 0) return Record(cudaErrorInvalidResourceHandle);
  }
  CUmemorytype dst_type, src_type;
  if (!MemoryTypes(p->kind, p->dstPtr.ptr, p->srcPtr.ptr, &dst_type, &src_type, dst_array,
                   src_array)) {
    return Record(cudaErrorInvalidMemcpyDirection);
  }
  if (p->extent.width > SIZE_MAX / element || p->srcPos.x > SIZE_MAX / element ||
      p->dstPos.x > SIZE_MAX / element) {
    return Record(cudaErrorInvalidValue);
  }
  // A pitched pointer's ysize is the height of its slices.
  *c = CUDA_MEMCPY3D{};
  if (src_array) {
    c->srcMemoryType = CU_MEMORYTYPE_ARRAY;
    c->srcArray = reinterpret_cast<CUarray>(p->srcArray);
    c->srcXInBytes = p->srcPos.x * element;
  } else {
    SetSide(src_type, p->srcPtr.ptr, &c->srcMemoryType, &c->srcHost, &c->srcDevice);
    c->srcXInBytes = p->srcPos.x;
    c->srcPitch = p->srcPtr.pitch, c->srcHeight = p->srcPtr.ysize;
  }
  if (dst_array) {
    c->dstMemoryType = CU_MEMORYTYPE_ARRAY;
    c->dstArray = reinterpret_cast<CUarray>(p->dstArray);
    c->dstXInBytes = p->dstPos.x * element;
  } else {
    SetSide(dst_type, p->dstPtr.ptr, &c->dstMemoryType, &c->dstHost, &c->dstDevice);
    c->dstXInBytes = p->dstPos.x;
    c->dstPitch = p->dstPtr.pitch, c->dstHeight = p->dstPtr.ysize;
  }
  c->srcY = p->srcPos.y, c->srcZ = p->srcPos.z;
  c->dstY = p->dstPos.y, c->dstZ = p->dstPos.z;
  c->WidthInBytes = p->extent.width * element, c->Height = p->extent.height;
  c->Depth = p->extent.depth;
  return cudaSuccess;
}

cudaError_t Copy3D(const cudaMemcpy3DParms* p, cudaStream_t stream, bool async) {
  ENSURE_CONTEXT();
  CUDA_MEMCPY3D c;
  bool empty;
  const cudaError_t e = ToDriverCopy(p, &c, &empty);
  if (e != cudaSuccess || empty) return e;
  return Rec(async ? cuMemcpy3DAsync_v2(&c, stream) : cuMemcpy3D_v2(&c));
}

// cudaStreamAddCallback's callback behind the driver's (same numbering of the status).
struct StreamCallback {
  cudaStreamCallback_t callback;
  void* user_data;
  cudaStream_t stream;
};
void CUDAAPI CallStreamCallback(CUstream, CUresult status, void* data) {
  std::unique_ptr<StreamCallback> c(static_cast<StreamCallback*>(data));
  c->callback(c->stream, FromCu(status), c->user_data);
}

}  // namespace

GPUVM_EXPORT cudaError_t cudaMallocPitch(void** ptr, size_t* pitch, size_t width, size_t height) {
  if (ptr == nullptr || pitch == nullptr) return Record(cudaErrorInvalidValue);
  ENSURE_CONTEXT();
  CUdeviceptr d = 0;
  const cudaError_t e = Rec(cuMemAllocPitch_v2(&d, pitch, width, height, 4));
  if (e == cudaSuccess) *ptr = reinterpret_cast<void*>(d);
  return e;
}
GPUVM_EXPORT cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch,
                                      size_t width, size_t height, cudaMemcpyKind kind) {
  return Copy2D(dst, dpitch, src, spitch, width, height, kind, nullptr, false);
}
GPUVM_EXPORT cudaError_t cudaMemcpy2D_ptds(void* dst, size_t dpitch, const void* src, size_t spitch,
                                           size_t width, size_t height, cudaMemcpyKind kind) {
  return cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind);
}
GPUVM_EXPORT cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                                           size_t width, size_t height, cudaMemcpyKind kind,
                                           cudaStream_t stream) {
  return Copy2D(dst, dpitch, src, spitch, width, height, kind, stream, true);
}
GPUVM_EXPORT cudaError_t cudaMemcpy2DAsync_ptsz(void* dst, size_t dpitch, const void* src,
                                                size_t spitch, size_t width, size_t height,
                                                cudaMemcpyKind kind, cudaStream_t stream) {
  return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, stream);
}
GPUVM_EXPORT cudaError_t cudaMemcpy3D(const cudaMemcpy3DParms* p) {
  return Copy3D(p, nullptr, false);
}
GPUVM_EXPORT cudaError_t cudaMemcpy3D_ptds(const cudaMemcpy3DParms* p) { return cudaMemcpy3D(p); }
GPUVM_EXPORT cudaError_t cudaMemcpy3DAsync(const cudaMemcpy3DParms* p, cudaStream_t stream) {
  return Copy3D(p, stream, true);
}
GPUVM_EXPORT cudaError_t cudaMemcpy3DAsync_ptsz(const cudaMemcpy3DParms* p, cudaStream_t stream) {
  return cudaMemcpy3DAsync(p, stream);
}

// ---- CUDA arrays: the driver's (runtime/driver_api_array.cc); a cudaArray_t is a CUarray ----

namespace {

// The driver's array formats and the channel descriptions that name them (kind, bits a channel).
struct ArrayFormatName {
  int kind;
  int bits;
  CUarray_format format;
};
constexpr ArrayFormatName kArrayFormats[] = {
    {cudaChannelFormatKindSigned, 8, CU_AD_FORMAT_SIGNED_INT8},
    {cudaChannelFormatKindSigned, 16, CU_AD_FORMAT_SIGNED_INT16},
    {cudaChannelFormatKindSigned, 32, CU_AD_FORMAT_SIGNED_INT32},
    {cudaChannelFormatKindUnsigned, 8, CU_AD_FORMAT_UNSIGNED_INT8},
    {cudaChannelFormatKindUnsigned, 16, CU_AD_FORMAT_UNSIGNED_INT16},
    {cudaChannelFormatKindUnsigned, 32, CU_AD_FORMAT_UNSIGNED_INT32},
    {cudaChannelFormatKindFloat, 16, CU_AD_FORMAT_HALF},
    {cudaChannelFormatKindFloat, 32, CU_AD_FORMAT_FLOAT},
};

// The driver's format and channel count of a channel description: 1, 2 or 4 channels of the same
// 8, 16 or 32 bits, signed, unsigned or float (16-bit float: half). False for anything else.
bool ToArrayFormat(const cudaChannelFormatDesc& d, CUarray_format* format, unsigned* channels) {
  const int bits[4] = {d.x, d.y, d.z, d.w};
  unsigned n = 0;
  while (n < 4 && bits[n] != 0) ++n;
  for (unsigned i = 0; i < 4; ++i) {
    if (i < n ? bits[i] != d.x : bits[i] != 0) return false;  // unequal channels, or a gap
  }
  if (n != 1 && n != 2 && n != 4) return false;
  int kind;  // the caller's value, which may be no cudaChannelFormatKind: read as an int
  std::memcpy(&kind, &d.f, sizeof kind);
  for (const ArrayFormatName& f : kArrayFormats) {
    if (f.kind == kind && f.bits == d.x) {
      *format = f.format;
      *channels = n;
      return true;
    }
  }
  return false;
}

cudaChannelFormatDesc FromArrayFormat(CUarray_format format, unsigned channels) {
  cudaChannelFormatDesc d{};
  for (const ArrayFormatName& f : kArrayFormats) {
    if (f.format != format) continue;
    d.x = f.bits;
    d.y = channels >= 2 ? f.bits : 0;
    d.z = d.w = channels >= 4 ? f.bits : 0;
    d.f = cudaChannelFormatKind(f.kind);
  }
  return d;
}

cudaError_t MakeArray(cudaArray_t* array, const cudaChannelFormatDesc* desc, size_t width,
                      size_t height, size_t depth, unsigned flags) {
  if (array == nullptr || desc == nullptr) return Record(cudaErrorInvalidValue);
  ENSURE_CONTEXT();
  CUDA_ARRAY3D_DESCRIPTOR d{};
  if (!ToArrayFormat(*desc, &d.Format, &d.NumChannels))
    return Record(cudaErrorInvalidChannelDescriptor);
  d.Width = width;
  d.Height = height;
  d.Depth = depth;
  d.Flags = flags;  // the same bits as CUDA_ARRAY3D_*
  CUarray a = nullptr;
  const cudaError_t e = Rec(cuArray3DCreate_v2(&a, &d));
  if (e == cudaSuccess) *array = reinterpret_cast<cudaArray_t>(a);
  return e;
}

// A 2D copy with an array on one or both sides: offsets and width in bytes, as CUDA's
// cudaMemcpy2D{To,From}Array count them.
cudaError_t ArrayCopy2D(CUDA_MEMCPY2D c, cudaMemcpyKind kind, bool src_array, bool dst_array,
                        const void* src, void* dst, cudaStream_t stream, bool async) {
  ENSURE_CONTEXT();
  if (c.WidthInBytes == 0 || c.Height == 0) return cudaSuccess;
  if ((!src_array && src == nullptr) || (!dst_array && dst == nullptr)) {
    return Record(cudaErrorInvalidValue);
  }
  CUmemorytype dst_type, src_type;
  if (!MemoryTypes(kind, dst, src, &dst_type, &src_type, dst_array, src_array)) {
    return Record(cudaErrorInvalidMemcpyDirection);
  }
  if (!src_array)
    SetSide(src_type, const_cast<void*>(src), &c.srcMemoryType, &c.srcHost, &c.srcDevice);
  if (!dst_array) SetSide(dst_type, dst, &c.dstMemoryType, &c.dstHost, &c.dstDevice);
  return Rec(async ? cuMemcpy2DAsync_v2(&c, stream) : cuMemcpy2D_v2(&c));
}

CUDA_MEMCPY2D ToArraySide(cudaArray_t dst, size_t x, size_t y, size_t spitch, size_t width,
                          size_t height) {
  CUDA_MEMCPY2D c{};
  c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
  c.dstArray = reinterpret_cast<CUarray>(dst);
  c.dstXInBytes = x;
  c.dstY = y;
  c.srcPitch = spitch;
  c.WidthInBytes = width;
  c.Height = height;
  return c;
}

CUDA_MEMCPY2D FromArraySide(cudaArray_const_t src, size_t x, size_t y, size_t dpitch, size_t width,
                            size_t height) {
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  c.srcArray = reinterpret_cast<CUarray>(const_cast<cudaArray*>(src));
  c.srcXInBytes = x;
  c.srcY = y;
  c.dstPitch = dpitch;
  c.WidthInBytes = width;
  c.Height = height;
  return c;
}

}  // namespace

GPUVM_EXPORT cudaError_t cudaMallocArray(cudaArray_t* array, const cudaChannelFormatDesc* desc,
                                         size_t width, size_t height, unsigned int flags) {
  return MakeArray(array, desc, width, height, 0, flags);
}

GPUVM_EXPORT cudaError_t cudaMalloc3DArray(cudaArray_t* array, const cudaChannelFormatDesc* desc,
                                           cudaExtent extent, unsigned int flags) {
  return MakeArray(array, desc, extent.width, extent.height, extent.depth, flags);
}

GPUVM_EXPORT cudaError_t cudaFreeArray(cudaArray_t array) {
  if (array == nullptr) return cudaSuccess;  // CUDA: nothing to do
  ENSURE_CONTEXT();
  const CUresult r = cuArrayDestroy(reinterpret_cast<CUarray>(array));
  return Rec(r == CUDA_ERROR_INVALID_HANDLE ? CUDA_ERROR_INVALID_VALUE : r);
}

GPUVM_EXPORT cudaError_t cudaArrayGetInfo(cudaChannelFormatDesc* desc, cudaExtent* extent,
                                          unsigned int* flags, cudaArray_t array) {
  ENSURE_CONTEXT();
  CUDA_ARRAY3D_DESCRIPTOR d;
  const CUresult r = cuArray3DGetDescriptor_v2(&d, reinterpret_cast<CUarray>(array));
  if (r != CUDA_SUCCESS) return Record(cudaErrorInvalidResourceHandle);
  if (desc != nullptr) *desc = FromArrayFormat(d.Format, d.NumChannels);
  if (extent != nullptr) *extent = cudaExtent{d.Width, d.Height, d.Depth};
  if (flags != nullptr) *flags = d.Flags;
  return cudaSuccess;
}

GPUVM_EXPORT cudaError_t cudaGetChannelDesc(cudaChannelFormatDesc* desc, cudaArray_const_t array) {
  if (desc == nullptr) return Record(cudaErrorInvalidValue);
  return cudaArrayGetInfo(desc, nullptr, nullptr, const_cast<cudaArray_t>(array));
}

GPUVM_EXPORT cudaError_t cudaMemcpy2DToArray(cudaArray_t dst, size_t x, size_t y, const void* src,
                                             size_t spitch, size_t width, size_t height,
                                             cudaMemcpyKind kind) {
  return ArrayCopy2D(ToArraySide(dst, x, y, spitch, width, height), kind, false, true, src, nullptr,
                     nullptr, false);
}
GPUVM_EXPORT cudaError_t cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t x, size_t y,
                                                  const void* src, size_t spitch, size_t width,
                                                  size_t height, cudaMemcpyKind kind,
                                                  cudaStream_t stream) {
  return ArrayCopy2D(ToArraySide(dst, x, y, spitch, width, height), kind, false, true, src, nullptr,
                     stream, true);
}
GPUVM_EXPORT cudaError_t cudaMemcpy2DToArrayAsync_ptsz(cudaArray_t dst, size_t x, size_t y,
                                                       const void* src, size_t spitch, size_t width,
                                                       size_t height, cudaMemcpyKind kind,
                                                       cudaStream_t stream) {
  return cudaMemcpy2DToArrayAsync(dst, x, y, src, spitch, width, height, kind, stream);
}
GPUVM_EXPORT cudaError_t cudaMemcpy2DToArray_ptds(cudaArray_t dst, size_t x, size_t y,
                                                  const void* src, size_t spitch, size_t width,
                                                  size_t height, cudaMemcpyKind kind) {
  return cudaMemcpy2DToArray(dst, x, y, src, spitch, width, height, kind);
}

GPUVM_EXPORT cudaError_t cudaMemcpy2DFromArray(void* dst, size_t dpitch, cudaArray_const_t src,
                                               size_t x, size_t y, size_t width, size_t height,
                                               cudaMemcpyKind kind) {
  return ArrayCopy2D(FromArraySide(src, x, y, dpitch, width, height), kind, true, false, nullptr,
                     dst, nullptr, false);
}
GPUVM_EXPORT cudaError_t cudaMemcpy2DFromArrayAsync(void* dst, size_t dpitch, cudaArray_const_t src,
                                                    size_t x, size_t y, size_t width, size_t height,
                                                    cudaMemcpyKind kind, cudaStream_t stream) {
  return ArrayCopy2D(FromArraySide(src, x, y, dpitch, width, height), kind, true, false, nullptr,
                     dst, stream, true);
}
GPUVM_EXPORT cudaError_t cudaMemcpy2DFromArrayAsync_ptsz(void* dst, size_t dpitch,
                                                         cudaArray_const_t src, size_t x, size_t y,
                                                         size_t width, size_t height,
                                                         cudaMemcpyKind kind, cudaStream_t stream) {
  return cudaMemcpy2DFromArrayAsync(dst, dpitch, src, x, y, width, height, kind, stream);
}
GPUVM_EXPORT cudaError_t cudaMemcpy2DFromArray_ptds(void* dst, size_t dpitch, cudaArray_const_t src,
                                                    size_t x, size_t y, size_t width, size_t height,
                                                    cudaMemcpyKind kind) {
  return cudaMemcpy2DFromArray(dst, dpitch, src, x, y, width, height, kind);
}

GPUVM_EXPORT cudaError_t cudaMemcpy2DArrayToArray(cudaArray_t dst, size_t dst_x, size_t dst_y,
                                                  cudaArray_const_t src, size_t src_x, size_t src_y,
                                                  size_t width, size_t height,
                                                  cudaMemcpyKind kind) {
  CUDA_MEMCPY2D c = ToArraySide(dst, dst_x, dst_y, 0, width, height);
  c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  c.srcArray = reinterpret_cast<CUarray>(const_cast<cudaArray*>(src));
  c.srcXInBytes = src_x;
  c.srcY = src_y;
  if (kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault) {
    return Record(cudaErrorInvalidMemcpyDirection);
  }
  return ArrayCopy2D(c, cudaMemcpyDeviceToDevice, true, true, nullptr, nullptr, nullptr, false);
}
GPUVM_EXPORT cudaError_t cudaMemcpy2DArrayToArray_ptds(cudaArray_t dst, size_t dst_x, size_t dst_y,
                                                       cudaArray_const_t src, size_t src_x,
                                                       size_t src_y, size_t width, size_t height,
                                                       cudaMemcpyKind kind) {
  return cudaMemcpy2DArrayToArray(dst, dst_x, dst_y, src, src_x, src_y, width, height, kind);
}
// The deprecated linear array copies: `count` bytes from byte x of row y of the array, on through
// the following rows, as if the array's rows (its width in bytes each) were one run. Up to three 2D
// copies: the rest of the first row, whole rows, the start of the last one. Checked whole first.
namespace {
cudaError_t LinearArrayCopy(cudaArray_const_t array, size_t x, size_t y, void* linear, size_t count,
                            cudaMemcpyKind kind, bool to_array, cudaStream_t stream, bool async) {
  ENSURE_CONTEXT();
  if (count == 0) return cudaSuccess;
  CUDA_ARRAY3D_DESCRIPTOR d;
  if (cuArray3DGetDescriptor_v2(&d, reinterpret_cast<CUarray>(const_cast<cudaArray*>(array))) !=
      CUDA_SUCCESS) {
    return Record(cudaErrorInvalidResourceHandle);
  }
  const size_t row = d.Width * ElementBytes(array);
  const size_t rows = (d.Height == 0 ? 1 : d.Height) * (d.Depth == 0 ? 1 : d.Depth);
  if (x >= row || y >= rows || count > (rows - y) * row - x) return Record(cudaErrorInvalidValue);
  auto* bytes = static_cast<uint8_t*>(linear);
  auto copy = [&](size_t at_x, size_t at_y, uint8_t* p, size_t width, size_t height) {
    CUDA_MEMCPY2D c =
        to_array ? ToArraySide(const_cast<cudaArray_t>(array), at_x, at_y, width, width, height)
                 : FromArraySide(array, at_x, at_y, width, width, height);
    return to_array ? ArrayCopy2D(c, kind, false, true, p, nullptr, stream, async)
                    : ArrayCopy2D(c, kind, true, false, nullptr, p, stream, async);
  };
  const size_t first = std::min(count, row - x);
  if (cudaError_t e = copy(x, y, bytes, first, 1); e != cudaSuccess) return e;
  size_t done = first;
  const size_t whole = (count - done) / row;
  if (whole > 0) {
    if (cudaError_t e = copy(0, y + 1, bytes + done, row, whole); e != cudaSuccess) return e;
    done += whole * row;
  }
  if (done < count) return copy(0, y + 1 + whole, bytes + done, count - done, 1);
  return cudaSuccess;
}
}  // namespace

// The deprecated linear copy between arrays: `count` bytes on through the source's rows from
// (src_x bytes, row src_y) to the destination's from (dst_x, dst_y); the two may have rows of
// different widths, so the copy goes in pieces that end where a row of either side ends (one 2D
// copy for the whole rows between when both sides' rows line up). Both ranges are checked first.
GPUVM_EXPORT cudaError_t cudaMemcpyArrayToArray(cudaArray_t dst, size_t dst_x, size_t dst_y,
                                                cudaArray_const_t src, size_t src_x, size_t src_y,
                                                size_t count, cudaMemcpyKind kind) {
  ENSURE_CONTEXT();
  if (kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault) {
    return Record(cudaErrorInvalidMemcpyDirection);
  }
  if (count == 0) return cudaSuccess;
  auto geometry = [](cudaArray_const_t a, size_t* row, size_t* rows) {
    CUDA_ARRAY3D_DESCRIPTOR d;
    if (cuArray3DGetDescriptor_v2(&d, reinterpret_cast<CUarray>(const_cast<cudaArray*>(a))) !=
        CUDA_SUCCESS) {
      return false;
    }
    *row = d.Width * ElementBytes(a);
    *rows = (d.Height == 0 ? 1 : d.Height) * (d.Depth == 0 ? 1 : d.Depth);
    return true;
  };
  size_t src_row, src_rows, dst_row, dst_rows;
  if (!geometry(src, &src_row, &src_rows) || !geometry(dst, &dst_row, &dst_rows)) {
    return Record(cudaErrorInvalidResourceHandle);
  }
  if (src_x >= src_row || src_y >= src_rows || count > (src_rows - src_y) * src_row - src_x ||
      dst_x >= dst_row || dst_y >= dst_rows || count > (dst_rows - dst_y) * dst_row - dst_x) {
    return Record(cudaErrorInvalidValue);
  }
  size_t done = 0;
  while (done < count) {
    size_t n = std::min({count - done, src_row - src_x, dst_row - dst_x});
    size_t rows = 1;
    if (src_x == 0 && dst_x == 0 && src_row == dst_row && count - done >= 2 * src_row) {
      rows = (count - done) / src_row;  // whole rows on both sides: one 2D copy
      n = src_row;
    }
    if (cudaError_t e = cudaMemcpy2DArrayToArray(dst, dst_x, dst_y, src, src_x, src_y, n, rows,
                                                 cudaMemcpyDeviceToDevice);
        e != cudaSuccess) {
      return e;
    }
    done += n * rows;
    src_x += n * rows;
    dst_x += n * rows;
    src_y += src_x / src_row;
    src_x %= src_row;
    dst_y += dst_x / dst_row;
    dst_x %= dst_row;
  }
  return cudaSuccess;
}
GPUVM_EXPORT cudaError_t cudaMemcpyArrayToArray_ptds(cudaArray_t dst, size_t dst_x, size_t dst_y,
                                                     cudaArray_const_t src, size_t src_x,
                                                     size_t src_y, size_t count,
                                                     cudaMemcpyKind kind) {
  return cudaMemcpyArrayToArray(dst, dst_x, dst_y, src, src_x, src_y, count, kind);
}

GPUVM_EXPORT cudaError_t cudaMemcpyToArray(cudaArray_t dst, size_t x, size_t y, const void* src,
                                           size_t count, cudaMemcpyKind kind) {
  return LinearArrayCopy(dst, x, y, const_cast<void*>(src), count, kind, true, nullptr, false);
}
GPUVM_EXPORT cudaError_t cudaMemcpyToArray_ptds(cudaArray_t dst, size_t x, size_t y,
                                                const void* src, size_t count,
                                                cudaMemcpyKind kind) {
  return cudaMemcpyToArray(dst, x, y, src, count, kind);
}
GPUVM_EXPORT cudaError_t cudaMemcpyToArrayAsync(cudaArray_t dst, size_t x, size_t y,
                                                const void* src, size_t count, cudaMemcpyKind kind,
                                                cudaStream_t stream) {
  return LinearArrayCopy(dst, x, y, const_cast<void*>(src), count, kind, true, stream, true);
}
GPUVM_EXPORT cudaError_t cudaMemcpyToArrayAsync_ptsz(cudaArray_t dst, size_t x, size_t y,
                                                     const void* src, size_t count,
                                                     cudaMemcpyKind kind, cudaStream_t stream) {
  return cudaMemcpyToArrayAsync(dst, x, y, src, count, kind, stream);
}
GPUVM_EXPORT cudaError_t cudaMemcpyFromArray(void* dst, cudaArray_const_t src, size_t x, size_t y,
                                             size_t count, cudaMemcpyKind kind) {
  return LinearArrayCopy(src, x, y, dst, count, kind, false, nullptr, false);
}
GPUVM_EXPORT cudaError_t cudaMemcpyFromArray_ptds(void* dst, cudaArray_const_t src, size_t x,
                                                  size_t y, size_t count, cudaMemcpyKind kind) {
  return cudaMemcpyFromArray(dst, src, x, y, count, kind);
}
GPUVM_EXPORT cudaError_t cudaMemcpyFromArrayAsync(void* dst, cudaArray_const_t src, size_t x,
                                                  size_t y, size_t count, cudaMemcpyKind kind,
                                                  cudaStream_t stream) {
  return LinearArrayCopy(src, x, y, dst, count, kind, false, stream, true);
}
GPUVM_EXPORT cudaError_t cudaMemcpyFromArrayAsync_ptsz(void* dst, cudaArray_const_t src, size_t x,
                                                       size_t y, size_t count, cudaMemcpyKind kind,
                                                       cudaStream_t stream) {
  return cudaMemcpyFromArrayAsync(dst, src, x, y, count, kind, stream);
}

GPUVM_EXPORT cudaError_t cudaMemset2D(void* ptr, size_t pitch, int value, size_t width,
                                      size_t height) {
  return InContext(cuMemsetD2D8_v2, CUdeviceptr(ptr), pitch, static_cast<unsigned char>(value),
                   width, height);
}
GPUVM_EXPORT cudaError_t cudaMemset2D_ptds(void* ptr, size_t pitch, int value, size_t width,
                                           size_t height) {
  return cudaMemset2D(ptr, pitch, value, width, height);
}
GPUVM_EXPORT cudaError_t cudaMemset2DAsync(void* ptr, size_t pitch, int value, size_t width,
                                           size_t height, cudaStream_t stream) {
  return InContext(cuMemsetD2D8Async, CUdeviceptr(ptr), pitch, static_cast<unsigned char>(value),
                   width, height, stream);
}
GPUVM_EXPORT cudaError_t cudaMemset2DAsync_ptsz(void* ptr, size_t pitch, int value, size_t width,
                                                size_t height, cudaStream_t stream) {
  return cudaMemset2DAsync(ptr, pitch, value, width, height, stream);
}

// A 3D allocation is a pitched 2D one of height * depth rows (cudaMalloc3D's pitch and layout);
// cudaMemset3D sets the extent slice by slice, each slice a 2D memset of the pitched rows.
GPUVM_EXPORT cudaError_t cudaMalloc3D(cudaPitchedPtr* pitched, cudaExtent extent) {
  if (pitched == nullptr) return Record(cudaErrorInvalidValue);
  if (extent.width == 0 || extent.height == 0 || extent.depth == 0) {
    *pitched = cudaPitchedPtr{nullptr, 0, extent.width, extent.height};
    return cudaSuccess;
  }
  if (extent.depth > SIZE_MAX / extent.height) return Record(cudaErrorInvalidValue);
  void* ptr = nullptr;
  size_t pitch = 0;
  const cudaError_t e = cudaMallocPitch(&ptr, &pitch, extent.width, extent.height * extent.depth);
  if (e == cudaSuccess) *pitched = cudaPitchedPtr{ptr, pitch, extent.width, extent.height};
  return e;
}

namespace {
cudaError_t Memset3D(cudaPitchedPtr p, int value, cudaExtent extent, cudaStream_t stream,
                     bool async) {
  if (extent.width == 0 || extent.height == 0 || extent.depth == 0) return cudaSuccess;
  if (p.ptr == nullptr || extent.width > p.pitch || extent.height > p.ysize) {
    return Record(cudaErrorInvalidValue);
  }
  const size_t slice = p.pitch * p.ysize;
  const CUdeviceptr base = CUdeviceptr(p.ptr);
  // The whole extent must lie in one allocation, checked before anything is set: its last byte
  // is the last slice's last row's.
  CUdeviceptr first = 0;
  size_t bytes = 0;
  if (const cudaError_t e = InContext(cuMemGetAddressRange_v2, &first, &bytes, base);
      e != cudaSuccess) {
    return e;
  }
  const size_t last = (extent.depth - 1) * slice + (extent.height - 1) * p.pitch + extent.width;
  if (extent.depth - 1 > SIZE_MAX / slice || base - first > bytes ||
      last > bytes - (base - first)) {
    return Record(cudaErrorInvalidValue);
  }
  for (size_t z = 0; z < extent.depth; ++z) {
    const CUdeviceptr at = base + z * slice;
    const cudaError_t r =
        async ? InContext(cuMemsetD2D8Async, at, p.pitch, static_cast<unsigned char>(value),
                          extent.width, extent.height, stream)
              : InContext(cuMemsetD2D8_v2, at, p.pitch, static_cast<unsigned char>(value),
                          extent.width, extent.height);
    if (r != cudaSuccess) return r;
  }
  return cudaSuccess;
}
}  // namespace

GPUVM_EXPORT cudaError_t cudaMemset3D(cudaPitchedPtr p, int value, cudaExtent extent) {
  return Memset3D(p, value, extent, nullptr, false);
}
GPUVM_EXPORT cudaError_t cudaMemset3D_ptds(cudaPitchedPtr p, int value, cudaExtent extent) {
  return cudaMemset3D(p, value, extent);
}
GPUVM_EXPORT cudaError_t cudaMemset3DAsync(cudaPitchedPtr p, int value, cudaExtent extent,
                                           cudaStream_t stream) {
  return Memset3D(p, value, extent, stream, true);
}
GPUVM_EXPORT cudaError_t cudaMemset3DAsync_ptsz(cudaPitchedPtr p, int value, cudaExtent extent,
                                                cudaStream_t stream) {
  return cudaMemset3DAsync(p, value, extent, stream);
}

GPUVM_EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int* num_blocks, const void* func, int block_size, size_t dynamic_shared, unsigned int flags) {
  if (num_blocks == nullptr) return Record(cudaErrorInvalidValue);
  ENSURE_CONTEXT();
  CUfunction f;
  const cudaError_t e = FunctionOf(func, &f);
  if (e != cudaSuccess) return e;
  return Rec(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(num_blocks, f, block_size,
                                                                  dynamic_shared, flags));
}
GPUVM_EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* num_blocks,
                                                                       const void* func,
                                                                       int block_size,
                                                                       size_t dynamic_shared) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(num_blocks, func, block_size,
                                                                dynamic_shared, 0);
}

GPUVM_EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* data) {
  return InContext(cuLaunchHostFunc, stream, fn, data);
}
GPUVM_EXPORT cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void* data) {
  return cudaLaunchHostFunc(stream, fn, data);
}
GPUVM_EXPORT cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback,
                                               void* data, unsigned int flags) {
  if (callback == nullptr || flags != 0) return Record(cudaErrorInvalidValue);
  ENSURE_CONTEXT();
  auto* c = new StreamCallback{callback, data, stream};
  const CUresult r = cuStreamAddCallback(stream, CallStreamCallback, c, 0);
  if (r != CUDA_SUCCESS) delete c;  // never queued: never called
  return Rec(r);
}
GPUVM_EXPORT cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t stream,
                                                    cudaStreamCallback_t callback, void* data,
                                                    unsigned int flags) {
  return cudaStreamAddCallback(stream, callback, data, flags);
}

// For cudart_graph.cc (cudart_internal.h).
namespace gpuvm::cudart {
cudaError_t RecordDriverResult(CUresult r) { return Rec(r); }
CUresult EnsureCurrentContext() { return EnsureContext(); }
cudaError_t KernelFunction(const void* func, CUfunction* f) {
  const CUresult r = EnsureContext();
  if (r != CUDA_SUCCESS) return Rec(r);
  return FunctionOf(func, f);
}
const void* HostFunctionOf(CUfunction f) {
  std::lock_guard<std::mutex> lock(Reg().mu);
  for (const auto& [host, kernel] : Reg().kernels) {
    for (const auto& [ctx, function] : kernel->functions) {
      if (function == f) return host;
    }
  }
  return nullptr;
}
cudaError_t DriverCopy(const cudaMemcpy3DParms* p, CUDA_MEMCPY3D* c) {
  bool empty;
  const cudaError_t e = ToDriverCopy(p, c, &empty);
  if (e == cudaSuccess && empty) *c = CUDA_MEMCPY3D{};  // a copy of nothing
  return e;
}
}  // namespace gpuvm::cudart
