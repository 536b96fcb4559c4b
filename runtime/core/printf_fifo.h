// Device printf, the driver's side: each CUDA context has one printf FIFO in device memory
// (gpu/isa/device_printf.h has its layout), set up when the first module that calls vprintf is
// loaded, and printed to the program's stdout at the sync points CUDA documents —
// cuCtxSynchronize, cuStreamSynchronize, cuEventSynchronize, blocking copies and memsets, module
// load and unload, context destroy or reset, and program exit.
//
// Draining copies the used part of the FIFO back, resets it and formats the records on the host
// (printf_format.h). It happens only when every channel of the context is idle (no kernel could be
// writing records at that moment), which the sync point usually guarantees; when another stream
// still runs, the output waits for a later sync point. Launches of printf kernels and drains take
// the context's printf mutex, so no launch slips in between the idle check and the reset.
//
// The FIFO's size is the context's CU_LIMIT_PRINTF_FIFO_SIZE (default 1 MiB, header included).
// Changing it synchronizes the context, prints what is buffered and makes a FIFO of the new size
// for the loaded printf modules (CUDA asks for the limit to be set before printf launches and
// refuses it after; gpuvm takes it at any time).
//
// Threading: every function may be called from any thread; the state is guarded by
// PrintfFifoState::mu (`pending` is also read without it as a cheap hint). Lock order: a
// context's printf mutex before its CUctx_st::mu.
#ifndef GPUVM_RUNTIME_CORE_PRINTF_FIFO_H_
#define GPUVM_RUNTIME_CORE_PRINTF_FIFO_H_

#include <atomic>
#include <cstdint>
#include <mutex>

#include "runtime/include/cuda.h"

struct CUctx_st;
struct CUmod_st;
struct CUstream_st;

namespace gpuvm::runtime {

inline constexpr uint64_t kDefaultPrintfFifoBytes = 1 << 20;  // CUDA's default
// Bounds of CU_LIMIT_PRINTF_FIFO_SIZE (our choice): room for a header and a small record; at most
// 256 MiB of device memory.
inline constexpr uint64_t kMinPrintfFifoBytes = 64;
inline constexpr uint64_t kMaxPrintfFifoBytes = 256ull << 20;

// Per context (CUctx_st::printf).
struct PrintfFifoState {
  std::mutex mu;
  uint64_t bytes = kDefaultPrintfFifoBytes;  // the limit; the FIFO's size once allocated
  uint64_t va = 0;                           // 0 until a module that calls vprintf is loaded
  // A printf kernel was launched since the last drain (so a sync point has something to do).
  std::atomic<bool> pending{false};
};

// Per module (CUmod_st::printf).
struct ModulePrintf {
  int64_t variable = -1;      // index of the hidden FIFO global in the module's variables, or -1
  uint64_t fifo_written = 0;  // the FIFO address last written into it
};

// At module load, once its variables exist: when the module calls vprintf (it has the hidden
// FIFO global), allocates the context's FIFO if needed and writes its address into that global.
// CUDA_SUCCESS or the allocation's / copy's error.
CUresult AttachPrintfModule(CUmod_st* module);

// Before a launch of a kernel of `module` on `stream`: when the module calls vprintf, marks output
// pending and locks *hold (the context's printf mutex) until the caller has submitted the launch,
// so that no drain resets the FIFO in between. Nothing here waits for the GPU (a launch must not
// wait behind other streams while holding the mutex), except the repair of a module a failed
// limit change left without a FIFO.
CUresult PreparePrintfLaunch(CUmod_st* module, CUstream_st* stream,
                             std::unique_lock<std::mutex>* hold);

// A sync point of `ctx`: prints the buffered output when a printf kernel ran since the last drain
// and the context is idle. Errors (a faulted context) leave the output where it is.
void DrainPrintf(CUctx_st* ctx);

// Teardown of ctx's children (destroy or reset): waits for the context's work (bounded), prints
// what is buffered, frees the FIFO and puts the limit back to its default.
void ClosePrintf(CUctx_st* ctx);

// cuCtxGetLimit / cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE).
uint64_t PrintfFifoSize(CUctx_st* ctx);
CUresult SetPrintfFifoSize(CUctx_st* ctx, uint64_t bytes);

}  // namespace gpuvm::runtime

#endif  // GPUVM_RUNTIME_CORE_PRINTF_FIFO_H_
