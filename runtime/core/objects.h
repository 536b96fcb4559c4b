// The objects behind the driver API's handles (CUcontext, CUmodule, CUfunction, CUstream, CUevent)
// and the process-wide state libcuda keeps: the connection to the GPU (gpu_connection.h), the guest
// driver on top of it, the primary context, and the registry of live handles that lets every API
// call tell a valid handle from a stale or forged one (CUDA_ERROR_INVALID_HANDLE / _CONTEXT instead
// of a crash).
//
// Mapping onto the guest driver (guest-pv-driver/driver.h): a CUcontext is a guest::Context (one
// GPU address space), a CUstream a guest::Channel (the null stream is the context's default
// channel), a CUevent a guest::Event, device pointers are the context's GPU virtual addresses. A
// CUmodule is a CompiledModule (module_image.h) whose kernel images live in one code allocation,
// plus its variables and constant banks.
//
// Threading: the registry and the primary context are guarded by Process::mu. A context's child
// sets are guarded by its own mutex. The objects themselves are used from any thread, relying on
// the guest driver's thread safety; destroying an object while another thread still uses it is the
// caller's error, as in CUDA. The current-context stack is per thread.
#ifndef GPUVM_RUNTIME_CORE_OBJECTS_H_
#define GPUVM_RUNTIME_CORE_OBJECTS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "gpu/isa/isa.h"
#include "guest-pv-driver/driver.h"
#include "runtime/core/gpu_connection.h"
#include "runtime/core/host_callbacks.h"
#include "runtime/core/managed_advice.h"
#include "runtime/core/module_image.h"
#include "runtime/core/printf_fifo.h"
#include "runtime/include/cuda.h"

namespace gpuvm::runtime {
struct Capture;  // a stream capture in progress (runtime/driver_api_graph.cc)
// The next id of a context or stream (cuCtxGetId, cuStreamGetId): unique in the process, from 1,
// never reused. Thread-safe.
uint64_t NextObjectId();
}  // namespace gpuvm::runtime

struct CUstream_st {
  const uint64_t id = gpuvm::runtime::NextObjectId();
  CUctx_st* ctx = nullptr;
  gpuvm::guest::Channel* channel = nullptr;
  unsigned flags = 0;
  bool is_default = false;
  // Internal marker for ordering against the legacy null stream (objects.cc, OrderForLegacy).
  gpuvm::guest::Event* order_event = nullptr;
  // Host functions queued on the stream (host_callbacks.h); made on first use (under
  // callbacks_mu), and gone before the channel is destroyed (ReleaseHostCallbacks).
  std::mutex callbacks_mu;
  std::unique_ptr<gpuvm::runtime::HostCallbacks> callbacks;
  // Stream capture (driver_api_graph.cc): the capture this stream records into, or null; guarded by
  // the graph layer's lock, read without it only through `capturing`.
  std::shared_ptr<gpuvm::runtime::Capture> capture;
  std::atomic<bool> capturing{false};
};

struct CUevent_st {
  CUctx_st* ctx = nullptr;
  gpuvm::guest::Event* event = nullptr;
  unsigned flags = 0;
  std::atomic<bool> recorded{false};
  // Recorded in a capturing stream: the capture and the nodes a stream that waits for the event
  // depends on (driver_api_graph.cc; guarded by its lock).
  std::shared_ptr<gpuvm::runtime::Capture> capture;
  std::vector<CUgraphNode_st*> capture_nodes;
};

struct CUfunc_st {
  CUmod_st* module = nullptr;
  const gpuvm::runtime::CompiledKernel* kernel = nullptr;
  gpuvm::isa::KernelHeader header;
  uint32_t entry_offset = 0;  // from the module's code allocation

  // The legacy execution control API's state (cuFuncSetBlockShape, cuFuncSetSharedSize,
  // cuParamSetSize, cuParamSet{i,f,v}), which cuLaunch/cuLaunchGrid/cuLaunchGridAsync launch with.
  // Parameters are written before their size is set (the usual order), so the buffer is kept at
  // its 4 KiB maximum. Guarded by legacy_mu.
  static constexpr size_t kLegacyParamBytes = 4096;
  std::mutex legacy_mu;
  unsigned legacy_block[3] = {0, 0, 0};  // unset: a launch before cuFuncSetBlockShape is refused
  unsigned legacy_shared_bytes = 0;
  size_t legacy_param_size = 0;
  std::vector<uint8_t> legacy_params = std::vector<uint8_t>(kLegacyParamBytes, 0);

  // cuFuncSetAttribute's settable attributes (-1: never set, the default applies).
  std::atomic<int> max_dynamic_shared{-1};
  std::atomic<int> preferred_carveout{-1};
};

struct CUmod_st {
  CUctx_st* ctx = nullptr;
  gpuvm::runtime::CompiledModule compiled;
  uint64_t code_va = 0;
  uint64_t const_bank_va = 0;         // bank 1, 0 if none
  uint64_t address_bank_va = 0;       // bank 2, 0 if none
  std::vector<uint64_t> variable_va;  // per CompiledModule::variables
  std::vector<uint64_t> allocations;  // every va to Free at unload
  std::vector<std::unique_ptr<CUfunc_st>> functions;
  gpuvm::runtime::ModulePrintf printf_info;  // its kernels' device printf (printf_fifo.h)
};

// A CUDA array: pitched rows in the context's device memory.
struct CUarray_st {
  CUctx_st* ctx = nullptr;
  uint64_t va = 0;                 // its memory: slices of desc.Height (at least 1) rows
  size_t pitch = 0;                // bytes from one row to the next
  size_t row_bytes = 0;            // Width * NumChannels * bytes per channel
  size_t rows = 0;                 // in all slices
  size_t rows_per_slice = 0;       // max(Height, 1)
  CUDA_ARRAY3D_DESCRIPTOR desc{};  // as created (Height/Depth 0 for fewer dimensions)
};

struct CUctx_st {
  const uint64_t id = gpuvm::runtime::NextObjectId();
  CUdevice device = 0;
  unsigned flags = 0;
  bool primary = false;
  // Both null after a reset of the primary context until its next use (Process::ReviveContext).
  std::unique_ptr<gpuvm::guest::Context> gctx;
  std::unique_ptr<CUstream_st> default_stream;
  std::mutex mu;  // guards the sets below
  std::set<CUmod_st*> modules;
  std::set<CUstream_st*> streams;  // excluding the default stream
  std::set<CUevent_st*> events;
  std::set<CUarray_st*> arrays;
  // cuMemHostAlloc's flags per pinned allocation (its GPU address), for cuMemHostGetFlags.
  std::map<uint64_t, unsigned> host_alloc_flags;
  // cuMemAdvise / cuMemPrefetchAsync on managed memory, for cuMemRangeGetAttribute(s); its own
  // lock.
  gpuvm::runtime::ManagedAdvice managed_advice;
  gpuvm::runtime::PrintfFifoState printf_fifo;  // device printf (printf_fifo.h)
  // Blocking streams of this context capturing now: the legacy null stream may not be used then
  // (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT; driver_api_graph.cc).
  std::atomic<int> blocking_captures{0};
};

namespace gpuvm::runtime {

// Device properties the API reports (cuDeviceGetAttribute, cudaGetDeviceProperties).
struct DeviceFacts {
  std::string name;
  uint64_t vram_bytes = 0;
  int cc_major = 7, cc_minor = 5;  // see docs/RUNTIME.md "Compute capability"
  int multiprocessors = 14;        // a Quadro 6000 has 14 SMs
  int clock_khz = 1147000;         // Quadro 6000 shader clock
  int memory_clock_khz = 1494000;
  int memory_bus_width = 384;
  int l2_bytes = 768 << 10;
  int pci_bus = 0, pci_device = 0, pci_domain = 0;
};

class Process {
 public:
  // The one instance; never destroyed (CUDA programs call into the library from atexit handlers and
  // static destructors, so it must outlive them).
  static Process& Get();

  // cuInit: connects to the GPU and creates the driver once; later calls return the first result.
  CUresult Init();
  // CUDA_SUCCESS after a successful Init, CUDA_ERROR_NOT_INITIALIZED before, the failure after a
  // failed one.
  CUresult initialized() const { return init_result_.load(std::memory_order_acquire); }

  guest::Driver* driver() { return driver_.get(); }
  const DeviceFacts& facts() const { return facts_; }
  BusMode bus_mode() const { return bus_mode_; }
  int device_count() const { return initialized() == CUDA_SUCCESS ? 1 : 0; }

  // ---- handle registry ----
  enum class Kind : uint8_t {
    kContext,
    kModule,
    kFunction,
    kStream,
    kEvent,
    kGraph,
    kGraphNode,
    kGraphExec,
    kArray,
    kUserObject
  };
  void Register(const void* handle, Kind kind);
  void Unregister(const void* handle);
  bool IsLive(const void* handle, Kind kind) const;

  // ---- contexts ----
  Result<CUctx_st*> CreateContext(CUdevice device, unsigned flags, bool primary);
  // Destroys everything the context owns (modules, streams, events, memory) and the context.
  void DestroyContext(CUctx_st* ctx);
  // Destroys what a context owns and its guest context (cuDevicePrimaryCtxReset): the handle stays
  // valid, and its next use through the current-context check gets a fresh GPU address space
  // (ReviveContext), as CUDA creates the primary context again on the next call after
  // cudaDeviceReset. Not eagerly: a program's last call is commonly cudaDeviceReset, and building
  // a context nobody uses cost each program's close a whole context bring-up (a channel, its
  // pushbuffer, an event) — in a VM, ~150 trapped accesses.
  void ResetContext(CUctx_st* ctx);
  // Gives a reset context a new guest context and default stream; Ok if it has one.
  Status ReviveContext(CUctx_st* ctx);

  CUresult RetainPrimary(CUdevice device, CUctx_st** out);
  CUresult ReleasePrimary(CUdevice device);
  CUresult ResetPrimary(CUdevice device);
  CUresult SetPrimaryFlags(CUdevice device, unsigned flags);
  void PrimaryState(unsigned* flags, int* active);

 private:
  Process() = default;

  mutable std::mutex mu_;
  std::mutex revive_mu_;  // serializes ResetContext/ReviveContext
  std::atomic<CUresult> init_result_{CUDA_ERROR_NOT_INITIALIZED};
  bool init_attempted_ = false;  // guarded by mu_
  std::unique_ptr<GpuConnection> connection_;
  std::unique_ptr<guest::Driver> driver_;
  DeviceFacts facts_;
  BusMode bus_mode_ = BusMode::kNative;
  std::map<const void*, Kind> live_;  // guarded by mu_
  CUctx_st* primary_ = nullptr;       // guarded by mu_
  int primary_refs_ = 0;              // guarded by mu_
  unsigned primary_flags_ = 0;        // guarded by mu_
};

// ---- the per-thread current-context stack ----
std::vector<CUctx_st*>& ContextStack();

// The CUresult for a context whose guest context recorded a GPU fault (sticky), or CUDA_SUCCESS.
CUresult ContextHealth(CUctx_st* ctx);
// Maps a failed Status from a call on `ctx` to a CUresult: a context fault becomes its sticky error
// code, anything else goes through ToCuResult with `invalid`.
CUresult ContextError(CUctx_st* ctx, const Status& status,
                      CUresult invalid = CUDA_ERROR_INVALID_VALUE);

// The stream a handle names in `ctx` (0, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD name the null
// stream), or nullptr when it is not a live stream of ctx.
CUstream_st* ResolveStream(CUctx_st* ctx, CUstream handle);
// Legacy null-stream semantics: work about to go to `stream` first waits (on the GPU) for pending
// work of the streams it must not overtake.
Status OrderForLegacy(CUstream_st* stream);
// Runs what is still queued of the stream's host functions and stops its worker: before its channel
// is destroyed.
void ReleaseHostCallbacks(CUstream_st* stream);
// Called with a context whose children (streams, events, modules, memory) are about to go (its
// destruction, a reset of the primary context), so state kept elsewhere about them goes too (the
// driver API's memory pools). One hook; set once, before the first context exists.
void SetContextTeardownHook(void (*hook)(CUctx_st* ctx));

// True when GPUVM_LOG is set to anything but "" or "0": errors CUDA reports only as a code (a
// module that fails to load, a refused launch configuration) are then explained on stderr.
bool VerboseLog();

// ---- modules ----
// Loads a module from `image`. `length` is the image size when known (cuModuleLoad), or 0 when the
// ABI passes none (cuModuleLoadData: the format's own header bounds it). On failure *log receives
// the reason (for CU_JIT_ERROR_LOG_BUFFER).
CUresult LoadModule(CUctx_st* ctx, const void* image, size_t length, CUmod_st** out,
                    std::string* log);
void UnloadModule(CUmod_st* module);  // the caller has unregistered it from the context

// The GPU address of a module variable (global or constant).
uint64_t VariableAddress(const CUmod_st* module, size_t index);

}  // namespace gpuvm::runtime

#endif  // GPUVM_RUNTIME_CORE_OBJECTS_H_
