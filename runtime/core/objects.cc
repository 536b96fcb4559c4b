#include "runtime/core/objects.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/align.h"
#include "gpu/isa/encoding.h"
#include "gpu/isa/module.h"
#include "runtime/core/errors.h"
#include "runtime/core/fault_codes.h"
#include "runtime/core/jit.h"
#include "runtime/fatbin/fatbin.h"

namespace gpuvm::runtime {

uint64_t NextObjectId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

namespace {

// The PTX target the JIT asks fat binaries for (docs/RUNTIME.md "Compute capability").
constexpr uint32_t kPtxTargetArch = 75;
// Kernel images are placed at this alignment inside a module's code allocation (our choice).
constexpr uint64_t kCodeAlign = 256;
// A module variable's zero tail up to this size is written with its initializer (one copy); a
// longer one is a GPU memset (our choice: a copy of 64 KiB costs about what a submission does).
constexpr uint64_t kZeroByCopyBytes = 64 << 10;
// PTX handed to cuModuleLoadData must be NUL-terminated within the parser's module limit.
constexpr size_t kMaxPtxBytes = 8u << 20;

}  // namespace

Process& Process::Get() {
  static Process* process = new Process();  // never destroyed, see the header
  return *process;
}

CUresult Process::Init() {
  std::lock_guard<std::mutex> lock(mu_);
  if (init_attempted_) return init_result_.load();
  init_attempted_ = true;
  CUresult result = CUDA_SUCCESS;
  auto options = ConnectionOptionsFromEnvironment();
  if (!options.ok()) {
    fprintf(stderr, "gpuvm: %s\n", options.status().ToString().c_str());
    result = CUDA_ERROR_NO_DEVICE;
  } else {
    bus_mode_ = options->mode;
    auto connection = OpenGpuConnection(*options);
    if (!connection.ok()) {
      fprintf(stderr, "gpuvm: %s\n", connection.status().ToString().c_str());
      result = CUDA_ERROR_NO_DEVICE;
    } else {
      connection_ = std::move(*connection);
      auto driver = connection_->drm() != nullptr ? guest::Driver::CreateOnDrm(connection_->drm())
                                                  : guest::Driver::Create(connection_->bus());
      if (!driver.ok()) {
        fprintf(stderr, "gpuvm: the guest driver failed: %s\n", driver.status().ToString().c_str());
        result = CUDA_ERROR_NO_DEVICE;
      } else {
        driver_ = std::move(*driver);
        const guest::DeviceInfo& info = driver_->info();
        facts_.name = (info.name.empty() ? std::string("GF100") : info.name) + " (gpuvm " +
                      BusModeName(bus_mode_) + ")";
        facts_.vram_bytes = info.vram_bytes;
      }
    }
  }
  init_result_.store(result, std::memory_order_release);
  return result;
}

void Process::Register(const void* handle, Kind kind) {
  std::lock_guard<std::mutex> lock(mu_);
  live_[handle] = kind;
}

void Process::Unregister(const void* handle) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.erase(handle);
}

bool Process::IsLive(const void* handle, Kind kind) const {
  if (handle == nullptr) return false;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(handle);
  return it != live_.end() && it->second == kind;
}

Result<CUctx_st*> Process::CreateContext(CUdevice device, unsigned flags, bool primary) {
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<guest::Context> gctx, driver_->CreateContext());
  auto ctx = std::make_unique<CUctx_st>();
  ctx->device = device;
  ctx->flags = flags;
  ctx->primary = primary;
  ctx->gctx = std::move(gctx);
  auto stream = std::make_unique<CUstream_st>();
  stream->ctx = ctx.get();
  stream->channel = ctx->gctx->default_channel();
  stream->is_default = true;
  GPUVM_ASSIGN_OR_RETURN(stream->order_event, ctx->gctx->CreateEvent());
  ctx->default_stream = std::move(stream);
  CUctx_st* raw = ctx.release();
  Register(raw, Kind::kContext);
  return raw;
}

namespace {

std::atomic<void (*)(CUctx_st*)> g_teardown_hook{nullptr};

// Destroys the children of a context (not the guest context itself). Context lock not held.
void DestroyChildren(CUctx_st* ctx) {
  if (auto hook = g_teardown_hook.load()) hook(ctx);
  ClosePrintf(ctx);  // CUDA prints buffered device printf output at context teardown
  Process& p = Process::Get();
  std::set<CUmod_st*> modules;
  std::set<CUstream_st*> streams;
  std::set<CUevent_st*> events;
  std::set<CUarray_st*> arrays;
  {
    std::lock_guard<std::mutex> lock(ctx->mu);
    modules.swap(ctx->modules);
    streams.swap(ctx->streams);
    events.swap(ctx->events);
    arrays.swap(ctx->arrays);
  }
  for (CUarray_st* a : arrays) {  // their memory goes with the guest context's
    p.Unregister(a);
    delete a;
  }
  for (CUmod_st* m : modules) {
    p.Unregister(m);
    for (auto& f : m->functions) p.Unregister(f.get());
    UnloadModule(m);
  }
  for (CUstream_st* s : streams) {
    p.Unregister(s);
    ReleaseHostCallbacks(s);
    (void)ctx->gctx->DestroyChannel(s->channel);
    delete s;
  }
  for (CUevent_st* e : events) {
    p.Unregister(e);
    (void)ctx->gctx->DestroyEvent(e->event);
    delete e;
  }
}

}  // namespace

void SetContextTeardownHook(void (*hook)(CUctx_st* ctx)) { g_teardown_hook.store(hook); }

void Process::DestroyContext(CUctx_st* ctx) {
  Unregister(ctx);
  DestroyChildren(ctx);
  if (ctx->default_stream) ReleaseHostCallbacks(ctx->default_stream.get());
  ctx->default_stream.reset();
  ctx->gctx.reset();
  // Forget it in this thread's stack; other threads find it dead through the registry.
  auto& stack = ContextStack();
  std::erase(stack, ctx);
  delete ctx;
}

void Process::ResetContext(CUctx_st* ctx) {
  std::lock_guard<std::mutex> lock(revive_mu_);
  DestroyChildren(ctx);
  ctx->blocking_captures.store(0);  // its streams, captures among them, are gone
  if (ctx->default_stream) ReleaseHostCallbacks(ctx->default_stream.get());
  ctx->default_stream.reset();
  ctx->gctx.reset();
}

void ReleaseHostCallbacks(CUstream_st* stream) {
  std::unique_ptr<HostCallbacks> callbacks;
  {
    std::lock_guard lock(stream->callbacks_mu);
    callbacks.swap(stream->callbacks);
  }
  callbacks.reset();  // runs what is queued, joins the worker
}

Status Process::ReviveContext(CUctx_st* ctx) {
  std::lock_guard<std::mutex> lock(revive_mu_);
  if (ctx->gctx) return Status::Ok();  // another thread did it
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<guest::Context> gctx, driver_->CreateContext());
  auto stream = std::make_unique<CUstream_st>();
  stream->ctx = ctx;
  stream->channel = gctx->default_channel();
  stream->is_default = true;
  GPUVM_ASSIGN_OR_RETURN(stream->order_event, gctx->CreateEvent());
  ctx->gctx = std::move(gctx);
  ctx->default_stream = std::move(stream);
  return Status::Ok();
}

CUresult Process::RetainPrimary(CUdevice device, CUctx_st** out) {
  std::unique_lock<std::mutex> lock(mu_);
  if (primary_ == nullptr) {
    lock.unlock();  // CreateContext registers the handle under mu_
    auto ctx = CreateContext(device, primary_flags_, /*primary=*/true);
    if (!ctx.ok()) return ToCuResult(ctx.status());
    lock.lock();
    if (primary_ != nullptr) {  // another thread won the race
      lock.unlock();
      DestroyContext(*ctx);
      lock.lock();
    } else {
      primary_ = *ctx;
    }
  }
  ++primary_refs_;
  *out = primary_;
  return CUDA_SUCCESS;
}

CUresult Process::ReleasePrimary(CUdevice) {
  std::lock_guard<std::mutex> lock(mu_);
  if (primary_refs_ == 0) return CUDA_ERROR_INVALID_CONTEXT;
  // (our choice) the primary context stays alive when its last reference goes: CUDA would destroy
  // it, but programs commonly release and retain again, and keeping it costs only memory.
  --primary_refs_;
  return CUDA_SUCCESS;
}

CUresult Process::ResetPrimary(CUdevice) {
  CUctx_st* ctx;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ctx = primary_;
  }
  if (ctx != nullptr) ResetContext(ctx);
  return CUDA_SUCCESS;
}

CUresult Process::SetPrimaryFlags(CUdevice, unsigned flags) {
  std::lock_guard<std::mutex> lock(mu_);
  primary_flags_ = flags;
  if (primary_) primary_->flags = flags;
  return CUDA_SUCCESS;
}

void Process::PrimaryState(unsigned* flags, int* active) {
  std::lock_guard<std::mutex> lock(mu_);
  if (flags) *flags = primary_flags_;
  if (active) *active = primary_refs_ > 0 ? 1 : 0;
}

std::vector<CUctx_st*>& ContextStack() {
  thread_local std::vector<CUctx_st*> stack;
  return stack;
}

CUresult ContextHealth(CUctx_st* ctx) {
  if (!ctx->gctx) return CUDA_ERROR_INVALID_CONTEXT;
  std::optional<guest::GpuFault> fault = ctx->gctx->fault();
  if (!fault) return CUDA_SUCCESS;
  return CuResultForFault(*fault);
}

CUresult ContextError(CUctx_st* ctx, const Status& status, CUresult invalid) {
  if (status.ok()) return CUDA_SUCCESS;
  if (status.code() == StatusCode::kAborted) {
    CUresult health = ContextHealth(ctx);
    if (health != CUDA_SUCCESS) return health;
  }
  return ToCuResult(status, invalid);
}

CUstream_st* ResolveStream(CUctx_st* ctx, CUstream handle) {
  if (handle == nullptr || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD) {
    return ctx->default_stream.get();
  }
  if (!Process::Get().IsLive(handle, Process::Kind::kStream)) return nullptr;
  return handle->ctx == ctx ? handle : nullptr;
}

Status OrderForLegacy(CUstream_st* stream) {
  CUctx_st* ctx = stream->ctx;
  CUstream_st* null_stream = ctx->default_stream.get();
  auto pending = [](CUstream_st* s) -> Result<bool> {
    GPUVM_ASSIGN_OR_RETURN(bool done, s->channel->IsDone(s->channel->last_fence()));
    return !done;
  };
  if (stream->is_default) {
    // ctx->mu stays held: another thread may cuStreamDestroy one of these streams, and it takes the
    // stream out of ctx->streams (under ctx->mu) before freeing it. Only submissions happen here,
    // which block only while a ring is full.
    std::lock_guard<std::mutex> lock(ctx->mu);
    for (CUstream_st* s : ctx->streams) {
      if (s->flags & CU_STREAM_NON_BLOCKING) continue;
      GPUVM_ASSIGN_OR_RETURN(bool busy, pending(s));
      if (!busy) continue;
      GPUVM_RETURN_IF_ERROR(s->channel->Record(s->order_event).status());
      GPUVM_RETURN_IF_ERROR(stream->channel->WaitEvent(s->order_event));
    }
    return Status::Ok();
  }
  if (stream->flags & CU_STREAM_NON_BLOCKING) return Status::Ok();
  GPUVM_ASSIGN_OR_RETURN(bool busy, pending(null_stream));
  if (!busy) return Status::Ok();
  GPUVM_RETURN_IF_ERROR(null_stream->channel->Record(null_stream->order_event).status());
  return stream->channel->WaitEvent(null_stream->order_event);
}

// ---------------------------------------------------------------------------------------------------
// Modules

namespace {

struct LoadError {
  CUresult code;
  std::string message;
};

// Finds the PTX in a fat binary container at `container` (whose length is bounded by its header)
// and compiles it.
Result<CompiledModule> CompileFatbin(const uint8_t* container, size_t known_length,
                                     CUresult* code) {
  fatbin::FatbinLimits limits;
  std::span<const uint8_t> header(container, fatbin::kContainerHeaderBytes);
  if (known_length != 0 && known_length < fatbin::kContainerHeaderBytes) {
    *code = CUDA_ERROR_INVALID_IMAGE;
    return Status::InvalidArgument("fat binary is truncated");
  }
  auto size = fatbin::ContainerSize(header, limits);
  if (!size.ok()) {
    *code = CUDA_ERROR_INVALID_IMAGE;
    return size.status();
  }
  if (known_length != 0 && *size > known_length) {
    *code = CUDA_ERROR_INVALID_IMAGE;
    return Status::InvalidArgument("fat binary claims more bytes than the file has");
  }
  auto parsed = fatbin::ParseContainer(std::span<const uint8_t>(container, *size), limits);
  if (!parsed.ok()) {
    *code = CUDA_ERROR_INVALID_IMAGE;
    return parsed.status();
  }
  const fatbin::Entry* entry = fatbin::SelectPtx(*parsed, kPtxTargetArch);
  if (entry == nullptr) {
    *code = CUDA_ERROR_NO_BINARY_FOR_GPU;
    return Status::NotFound(
        "the fat binary carries no PTX (only NVIDIA machine code, which the software GPU cannot "
        "run); build with a compute_XX PTX target (nvcc's default) and without -rdc");
  }
  auto text = fatbin::ExtractPtx(*entry, limits);
  if (!text.ok()) {
    *code = CUDA_ERROR_INVALID_IMAGE;
    return text.status();
  }
  *code = CUDA_ERROR_INVALID_PTX;
  return CompilePtx(*text);
}

// A GVISA module image (gpu/isa/module.h): code compiled for the device, no JIT.
Result<CompiledModule> CompileNative(const uint8_t* bytes, size_t length, CUresult* code) {
  *code = CUDA_ERROR_INVALID_IMAGE;
  uint64_t size = length;
  if (size == 0) {
    GPUVM_ASSIGN_OR_RETURN(size, NativeModuleSize(std::span<const uint8_t>(bytes, 16)));
  }
  GPUVM_ASSIGN_OR_RETURN(isa::Module module,
                         isa::DecodeModule(std::span<const uint8_t>(bytes, size)));
  return FromIsaModule(module);
}

Result<CompiledModule> Compile(const void* image, size_t length, CUresult* code) {
  const uint8_t* bytes = static_cast<const uint8_t*>(image);
  uint32_t magic = 0;
  if (length == 0 || length >= 4) std::memcpy(&magic, bytes, 4);
  if (magic == fatbin::kWrapperMagic) {
    auto wrapper = fatbin::ParseWrapper(std::span<const uint8_t>(bytes, fatbin::kWrapperBytes));
    if (!wrapper.ok()) {
      *code = CUDA_ERROR_INVALID_IMAGE;
      return wrapper.status();
    }
    // The wrapper points into the program's own image; no length is known there. (gpuvm extension:
    // the data may also be a GVISA module image, which lets tests register precompiled code.)
    const uint8_t* data = reinterpret_cast<const uint8_t*>(wrapper->data);
    uint32_t data_magic;
    std::memcpy(&data_magic, data, 4);
    if (data_magic == isa::kModuleMagic) return CompileNative(data, 0, code);
    return CompileFatbin(data, 0, code);
  }
  if (magic == fatbin::kContainerMagic) return CompileFatbin(bytes, length, code);
  if (magic == isa::kModuleMagic) return CompileNative(bytes, length, code);
  if (magic == 0x464c457f) {  // "\x7fELF": an NVIDIA cubin
    *code = CUDA_ERROR_NO_BINARY_FOR_GPU;
    return Status::Unimplemented(
        "an NVIDIA cubin holds machine code the software GPU cannot run; "
        "load PTX or a fat binary with PTX instead");
  }
  // PTX text: NUL-terminated (or the whole file when the length is known).
  size_t n = length ? strnlen(static_cast<const char*>(image), length)
                    : strnlen(static_cast<const char*>(image), kMaxPtxBytes + 1);
  if (n > kMaxPtxBytes) {
    *code = CUDA_ERROR_INVALID_IMAGE;
    return Status::ResourceExhausted("PTX text is not NUL-terminated within 8 MiB");
  }
  std::string text(static_cast<const char*>(image), n);  // our own copy
  *code = CUDA_ERROR_INVALID_PTX;
  return CompilePtx(text);
}

// Undo of a partly loaded module.
void FreeAll(CUctx_st* ctx, const std::vector<uint64_t>& allocations) {
  for (auto it = allocations.rbegin(); it != allocations.rend(); ++it) {
    // A __managed__ variable's advice goes with it (a later allocation may get its address).
    if (auto a = ctx->gctx->Find(*it); a.ok()) {
      ctx->managed_advice.Forget(a->va, a->va + AlignUp(a->size, 4096));
    }
    (void)ctx->gctx->Free(*it);
  }
}

}  // namespace

uint64_t VariableAddress(const CUmod_st* module, size_t index) {
  return module->variable_va[index];
}

bool VerboseLog() {
  // Read each time (only error paths ask): a program may set it while it runs.
  const char* v = std::getenv("GPUVM_LOG");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

namespace {
CUresult LoadModuleOrSayWhy(CUctx_st* ctx, const void* image, size_t length, CUmod_st** out,
                            std::string* log);
}  // namespace

CUresult LoadModule(CUctx_st* ctx, const void* image, size_t length, CUmod_st** out,
                    std::string* log) {
  const CUresult r = LoadModuleOrSayWhy(ctx, image, length, out, log);
  if (r == CUDA_SUCCESS) DrainPrintf(ctx);  // module load is a device printf sync point
  // A program that never asks for the JIT log (cuModuleLoad, the runtime API's fat binaries) would
  // otherwise only see an error code: GPUVM_LOG (any value but "" and "0") prints why.
  if (r != CUDA_SUCCESS && VerboseLog()) {
    fprintf(stderr, "gpuvm: loading a module failed with %s: %s\n", CuErrorName(r),
            log->empty() ? "(no details)" : log->c_str());
  }
  return r;
}

namespace {
CUresult LoadModuleOrSayWhy(CUctx_st* ctx, const void* image, size_t length, CUmod_st** out,
                            std::string* log) {
  CUresult code = CUDA_ERROR_INVALID_IMAGE;
  auto compiled = Compile(image, length, &code);
  if (!compiled.ok()) {
    *log = compiled.status().message();
    if (compiled.status().code() == StatusCode::kUnavailable)
      return CUDA_ERROR_JIT_COMPILER_NOT_FOUND;
    if (compiled.status().code() == StatusCode::kResourceExhausted &&
        code == CUDA_ERROR_INVALID_PTX) {
      return CUDA_ERROR_INVALID_PTX;
    }
    return code;
  }
  auto module = std::make_unique<CUmod_st>();
  module->ctx = ctx;
  module->compiled = std::move(*compiled);
  CompiledModule& cm = module->compiled;
  guest::Context* g = ctx->gctx.get();
  guest::Channel* channel = ctx->default_stream->channel;

  auto fail = [&](const Status& s) {
    *log = s.message();
    FreeAll(ctx, module->allocations);
    return ContextError(ctx, s, CUDA_ERROR_INVALID_IMAGE);
  };

  // Code: every kernel image back to back, each at a 256-byte boundary.
  std::vector<uint8_t> code_bytes;
  std::vector<uint32_t> offsets;
  for (const CompiledKernel& k : cm.kernels) {
    code_bytes.resize(AlignUp(code_bytes.size(), kCodeAlign));
    offsets.push_back(uint32_t(code_bytes.size()));
    code_bytes.insert(code_bytes.end(), k.image.begin(), k.image.end());
  }
  if (!code_bytes.empty()) {
    auto code_alloc = g->LoadCode(code_bytes);
    if (!code_alloc.ok()) return fail(code_alloc.status());
    module->code_va = code_alloc->va;
    module->allocations.push_back(code_alloc->va);
  }
  for (size_t i = 0; i < cm.kernels.size(); ++i) {
    auto f = std::make_unique<CUfunc_st>();
    f->module = module.get();
    f->kernel = &cm.kernels[i];
    f->header = isa::ReadHeader(cm.kernels[i].image.data());
    f->entry_offset = offsets[i];
    module->functions.push_back(std::move(f));
  }

  // Variables: globals get their own allocation, constants live in bank 1.
  if (!cm.const_image.empty()) {
    auto bank = g->AllocDevice(cm.const_image.size());
    if (!bank.ok()) return fail(bank.status());
    module->const_bank_va = bank->va;
    module->allocations.push_back(bank->va);
  }
  module->variable_va.resize(cm.variables.size());
  for (size_t i = 0; i < cm.variables.size(); ++i) {
    const ModuleVariable& v = cm.variables[i];
    if (v.space == ModuleVariable::Space::kConst) {
      module->variable_va[i] = module->const_bank_va + v.bank_offset;
      continue;
    }
    // A managed variable lives in managed memory: the host reaches it at the same address. Where
    // there is none (a DRM kernel driver picks GPU addresses: PVDRM), in pinned host memory, which
    // the host reaches at an address of its own (cudart gives nvcc's host code that one).
    Result<guest::Allocation> a = Status::Internal("unset");
    if (v.managed) {
      a = g->AllocManaged(std::max<uint64_t>(v.size, 1));
      if (!a.ok() && a.status().code() == StatusCode::kUnimplemented) {
        a = g->AllocHost(std::max<uint64_t>(v.size, 1));
      }
    } else {
      a = g->AllocDevice(v.size);
    }
    if (!a.ok()) return fail(a.status());
    module->variable_va[i] = a->va;
    module->allocations.push_back(a->va);
  }
  std::vector<uint8_t> const_bank = cm.const_image;
  std::vector<uint8_t> address_bank(cm.address_bank_bytes, 0);
  guest::Fence zeroed{};  // the last memset of a variable's zero tail, when zeroing
  bool zeroing = false;
  for (size_t i = 0; i < cm.variables.size(); ++i) {
    const ModuleVariable& v = cm.variables[i];
    std::vector<uint8_t> bytes(v.init.begin(),
                               v.init.begin() + std::min<uint64_t>(v.init.size(), v.size));
    if (!v.relocations.empty()) bytes.resize(v.size, 0);
    for (const VariableRelocation& r : v.relocations) {
      uint64_t address = module->variable_va[r.target] + uint64_t(r.addend);
      std::memcpy(bytes.data() + r.offset, &address, r.size);  // little endian: low bytes first
    }
    if (v.space == ModuleVariable::Space::kConst) {
      continue;  // already in the const image
    } else {
      uint64_t va = module->variable_va[i];
      std::memcpy(address_bank.data() + v.bank_offset, &va, 8);
      // PTX (and C++) zero the part of a variable its initializer does not cover — nvcc's string
      // constants end in that zero: `.b8 $str[5] = {101, 118, 101, 110}` — and AllocDevice's
      // memory is undefined (reused memory keeps old bytes). Small tails go with the initializer
      // in one copy, large ones are a memset.
      const uint64_t tail = v.size - bytes.size();
      if (tail != 0 && tail <= kZeroByCopyBytes) bytes.resize(v.size, 0);
      if (!bytes.empty()) {
        Status s = channel->CopyHostToDevice(va, bytes.data(), bytes.size());
        if (!s.ok()) return fail(s);
      }
      if (bytes.size() < v.size) {
        auto fence = channel->Memset8Async(va + bytes.size(), 0, v.size - bytes.size());
        if (!fence.ok()) return fail(fence.status());
        zeroed = *fence;
        zeroing = true;
      }
    }
  }
  if (zeroing) {
    Status s = channel->Wait(zeroed);
    if (!s.ok()) return fail(s);
  }
  if (!const_bank.empty()) {
    Status s =
        channel->CopyHostToDevice(module->const_bank_va, const_bank.data(), const_bank.size());
    if (!s.ok()) return fail(s);
  }
  if (cm.address_bank_bytes) {
    auto bank = g->AllocDevice(cm.address_bank_bytes);
    if (!bank.ok()) return fail(bank.status());
    module->address_bank_va = bank->va;
    module->allocations.push_back(bank->va);
    Status s = channel->CopyHostToDevice(bank->va, address_bank.data(), address_bank.size());
    if (!s.ok()) return fail(s);
  }

  if (CUresult r = AttachPrintfModule(module.get()); r != CUDA_SUCCESS) {
    *log = "setting up the device printf FIFO failed";
    FreeAll(ctx, module->allocations);
    return r;
  }
  CUmod_st* raw = module.release();
  Process& p = Process::Get();
  for (auto& f : raw->functions) p.Register(f.get(), Process::Kind::kFunction);
  p.Register(raw, Process::Kind::kModule);
  {
    std::lock_guard<std::mutex> lock(ctx->mu);
    ctx->modules.insert(raw);
  }
  *out = raw;
  return CUDA_SUCCESS;
}
}  // namespace

void UnloadModule(CUmod_st* module) {
  FreeAll(module->ctx, module->allocations);
  delete module;
}

}  // namespace gpuvm::runtime
