// Device printf FIFOs of contexts (printf_fifo.h): set-up at the load of a printf module, draining
// at sync points, the size limit, and the last drain at program exit.
#include "runtime/core/printf_fifo.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "gpu/isa/device_printf.h"
#include "runtime/core/objects.h"
#include "runtime/core/printf_format.h"

namespace gpuvm::runtime {
namespace {

// How long the exit-time drain waits for a context's work.
constexpr std::chrono::seconds kExitWait(10);

// Contexts with a FIFO, for the drain at exit (a program may end without synchronizing or
// destroying its contexts; CUDA still prints what its kernels printed).
std::mutex registry_mu;
std::set<CUctx_st*>& Registry() {
  static auto* contexts = new std::set<CUctx_st*>;  // never destroyed: used from atexit
  return *contexts;
}

void DrainAtExit();

void Register(CUctx_st* ctx) {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(DrainAtExit); });
  std::lock_guard lock(registry_mu);
  Registry().insert(ctx);
}

void Unregister(CUctx_st* ctx) {
  std::lock_guard lock(registry_mu);
  Registry().erase(ctx);
}

// The FIFO header as the driver writes it: empty.
std::vector<uint8_t> FreshHeader(uint64_t fifo_bytes) {
  std::vector<uint8_t> h(isa::kPrintfFifoHeaderBytes, 0);
  const uint32_t magic = isa::kPrintfFifoMagic, version = isa::kPrintfFifoVersion;
  const uint64_t capacity = fifo_bytes - isa::kPrintfFifoHeaderBytes;
  std::memcpy(h.data(), &magic, 4);
  std::memcpy(h.data() + 4, &version, 4);
  std::memcpy(h.data() + isa::kPrintfFifoCapacityOffset, &capacity, 8);
  return h;
}

// Every channel of ctx has finished its work: no kernel can be writing records.
bool Idle(CUctx_st* ctx) {
  auto done = [](guest::Channel* ch) {
    Result<bool> r = ch->IsDone(ch->last_fence());
    return r.ok() && *r;
  };
  if (!ctx->gctx || !ctx->gctx->status().ok() || !done(ctx->default_stream->channel)) return false;
  std::lock_guard lock(ctx->mu);
  for (CUstream_st* s : ctx->streams) {
    if (!done(s->channel)) return false;
  }
  return true;
}

// Copies the records back, resets the FIFO and prints them. st.mu held, the context idle.
void DrainLocked(CUctx_st* ctx) {
  PrintfFifoState& st = ctx->printf_fifo;
  guest::Channel* ch = ctx->default_stream->channel;
  uint8_t header[isa::kPrintfFifoHeaderBytes];
  if (!ch->CopyDeviceToHost(header, st.va, sizeof header).ok()) return;
  uint64_t used, dropped;
  std::memcpy(&used, header + isa::kPrintfFifoUsedOffset, 8);
  std::memcpy(&dropped, header + isa::kPrintfFifoDroppedOffset, 8);
  // The header is in kernel-writable memory: the driver's own capacity bounds the copy.
  used = std::min(used, st.bytes - isa::kPrintfFifoHeaderBytes);
  std::vector<uint8_t> area(used);
  if (used != 0 &&
      !ch->CopyDeviceToHost(area.data(), st.va + isa::kPrintfFifoHeaderBytes, used).ok()) {
    return;
  }
  if (used != 0 || dropped != 0) {
    const std::vector<uint8_t> fresh = FreshHeader(st.bytes);
    if (!ch->CopyHostToDevice(st.va, fresh.data(), fresh.size()).ok()) return;
  }
  st.pending.store(false, std::memory_order_relaxed);
  const PrintfText out = FormatPrintfRecords(area);
  if (!out.text.empty()) {
    std::fwrite(out.text.data(), 1, out.text.size(), stdout);
    std::fflush(stdout);
  }
  if (!out.error.empty()) {
    std::fprintf(stderr,
                 "gpuvm: device printf: the record at offset %llu of the FIFO is malformed (%s); "
                 "it and the output after it are dropped\n",
                 static_cast<unsigned long long>(out.bad_offset), out.error.c_str());
  }
  if (dropped != 0 && VerboseLog()) {
    std::fprintf(stderr,
                 "gpuvm: device printf: the FIFO (%llu bytes) was full; %llu records dropped "
                 "(cudaLimitPrintfFifoSize)\n",
                 static_cast<unsigned long long>(st.bytes),
                 static_cast<unsigned long long>(dropped));
  }
}

// Waits for ctx's work (bounded), prints and frees the FIFO. st.mu held.
void CloseLocked(CUctx_st* ctx, std::chrono::nanoseconds wait) {
  PrintfFifoState& st = ctx->printf_fifo;
  if (st.va == 0) return;
  if (ctx->gctx->Synchronize(wait).ok() && Idle(ctx)) DrainLocked(ctx);
  (void)ctx->gctx->Free(st.va);
  st.va = 0;
  st.pending.store(false, std::memory_order_relaxed);
}

// Allocates the FIFO if there is none (st.mu held). Copies on `ch`, which must not wait behind
// work that could need another thread's launch (the caller holds the printf mutex).
CUresult EnsureFifoLocked(CUctx_st* ctx, guest::Channel* ch) {
  PrintfFifoState& st = ctx->printf_fifo;
  if (st.va != 0) return CUDA_SUCCESS;
  Result<guest::Allocation> a = ctx->gctx->AllocDevice(st.bytes);
  if (!a.ok()) return ContextError(ctx, a.status(), CUDA_ERROR_OUT_OF_MEMORY);
  const std::vector<uint8_t> fresh = FreshHeader(st.bytes);
  Status s = ch->CopyHostToDevice(a->va, fresh.data(), fresh.size());
  if (!s.ok()) {
    (void)ctx->gctx->Free(a->va);
    return ContextError(ctx, s);
  }
  st.va = a->va;
  Register(ctx);
  return CUDA_SUCCESS;
}

// Points the module's hidden global at the context's FIFO, allocating it first (st.mu held).
CUresult AttachLocked(CUmod_st* module, guest::Channel* ch) {
  CUctx_st* ctx = module->ctx;
  PrintfFifoState& st = ctx->printf_fifo;
  if (CUresult r = EnsureFifoLocked(ctx, ch); r != CUDA_SUCCESS) return r;
  if (module->printf_info.fifo_written == st.va) return CUDA_SUCCESS;
  const uint64_t at = VariableAddress(module, static_cast<size_t>(module->printf_info.variable));
  Status s = ch->CopyHostToDevice(at, &st.va, sizeof st.va);
  if (!s.ok()) return ContextError(ctx, s);
  module->printf_info.fifo_written = st.va;
  return CUDA_SUCCESS;
}

void DrainAtExit() {
  std::set<CUctx_st*> contexts;
  {
    std::lock_guard lock(registry_mu);
    contexts = Registry();
  }
  for (CUctx_st* ctx : contexts) {
    // A thread still inside a launch or drain holds the lock: leave that context alone rather
    // than wait at exit.
    std::unique_lock lock(ctx->printf_fifo.mu, std::try_to_lock);
    if (!lock.owns_lock() || ctx->printf_fifo.va == 0 || !ctx->gctx) continue;
    if (!ctx->printf_fifo.pending.load(std::memory_order_relaxed)) continue;
    if (ctx->gctx->Synchronize(kExitWait).ok() && Idle(ctx)) DrainLocked(ctx);
  }
}

}  // namespace

CUresult AttachPrintfModule(CUmod_st* module) {
  const std::vector<ModuleVariable>& vars = module->compiled.variables;
  for (size_t i = 0; i < vars.size(); ++i) {
    if (vars[i].name == isa::kPrintfFifoGlobal && vars[i].space == ModuleVariable::Space::kGlobal &&
        vars[i].size == 8) {
      module->printf_info.variable = static_cast<int64_t>(i);
    }
  }
  if (module->printf_info.variable < 0) return CUDA_SUCCESS;
  std::lock_guard lock(module->ctx->printf_fifo.mu);
  // Module loading copies on the default channel already; so do these.
  return AttachLocked(module, module->ctx->default_stream->channel);
}

CUresult PreparePrintfLaunch(CUmod_st* module, CUstream_st* stream,
                             std::unique_lock<std::mutex>* hold) {
  if (module->printf_info.variable < 0) return CUDA_SUCCESS;
  PrintfFifoState& st = module->ctx->printf_fifo;
  std::unique_lock lock(st.mu);
  // Normally attached at load (or again when the limit changed); only a failed re-allocation
  // leaves it to be done here, on the launch's channel so that it lands before the kernel.
  if (st.va == 0 || module->printf_info.fifo_written != st.va) {
    if (CUresult r = AttachLocked(module, stream->channel); r != CUDA_SUCCESS) return r;
  }
  st.pending.store(true, std::memory_order_relaxed);
  *hold = std::move(lock);
  return CUDA_SUCCESS;
}

void DrainPrintf(CUctx_st* ctx) {
  PrintfFifoState& st = ctx->printf_fifo;
  if (!st.pending.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(st.mu);
  if (st.va == 0 || !st.pending.load(std::memory_order_relaxed) || !Idle(ctx)) return;
  DrainLocked(ctx);
}

void ClosePrintf(CUctx_st* ctx) {
  {
    std::lock_guard lock(ctx->printf_fifo.mu);
    if (ctx->gctx) CloseLocked(ctx, ctx->gctx->options().default_timeout);
    ctx->printf_fifo.bytes = kDefaultPrintfFifoBytes;  // a reset context starts with CUDA's default
  }
  Unregister(ctx);
}

uint64_t PrintfFifoSize(CUctx_st* ctx) {
  std::lock_guard lock(ctx->printf_fifo.mu);
  return ctx->printf_fifo.bytes;
}

CUresult SetPrintfFifoSize(CUctx_st* ctx, uint64_t bytes) {
  if (bytes < kMinPrintfFifoBytes || bytes > kMaxPrintfFifoBytes) return CUDA_ERROR_INVALID_VALUE;
  bytes = (bytes + 7) & ~uint64_t{7};  // records are 8-byte aligned
  PrintfFifoState& st = ctx->printf_fifo;
  std::lock_guard lock(st.mu);
  if (st.va == 0 || bytes == st.bytes) {
    st.bytes = bytes;
    return CUDA_SUCCESS;
  }
  // The context is idle after CloseLocked's synchronize: the new FIFO and the modules' globals
  // can be written at once, and no launch has to do it later.
  CloseLocked(ctx, ctx->gctx->options().default_timeout);
  if (!ctx->gctx->status().ok()) return ContextHealth(ctx);
  st.bytes = bytes;
  std::vector<CUmod_st*> modules;
  {
    std::lock_guard ctx_lock(ctx->mu);
    for (CUmod_st* m : ctx->modules) {
      if (m->printf_info.variable >= 0) modules.push_back(m);
    }
  }
  for (CUmod_st* m : modules) {
    if (CUresult r = AttachLocked(m, ctx->default_stream->channel); r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

}  // namespace gpuvm::runtime
