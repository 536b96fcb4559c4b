#include "gpu/sim/channel.h"

#include <cstdio>
#include <string>

#include "base/enum_names.h"
#include "base/hex.h"
#include "gpu/hw/classes.h"
#include "gpu/hw/ramin.h"

namespace gpuvm::sim {

namespace gp = gf100::gpfifo;
namespace host = gf100::host;
namespace ramin = gf100::ramin;
namespace userd = gf100::userd;
using gf100::pfifo::Engine;
using Kind = ChannelError::Kind;

namespace {

// Pushbuffer words fetched per batch (copied out of memory before they are decoded).
constexpr uint32_t kFetchWords = 512;

}  // namespace

const char* ChannelErrorKindName(ChannelError::Kind kind) {
  static constexpr EnumName<ChannelError::Kind> kNames[] = {
      {Kind::kNone, "none"},
      {Kind::kMmuFault, "mmu fault"},
      {Kind::kBadInstance, "bad instance block"},
      {Kind::kIbPutOverflow, "IB_PUT overflow"},
      {Kind::kIllegalCommand, "illegal command"},
      {Kind::kIllegalMethod, "illegal method"},
      {Kind::kEmptySubchannel, "empty subchannel"},
      {Kind::kIllegalSemaphore, "illegal semaphore"},
      {Kind::kNoComputeEngine, "no compute engine"},
      {Kind::kComputeFault, "compute fault"}};
  return NameOf(kNames, kind, "?");
}

MpTrapCodes MpTrapCodesFor(ComputeFault::Kind kind) {
  using FK = ComputeFault::Kind;
  using gf100::pgraph::MpWarpError;
  switch (kind) {
    case FK::kMisaligned:
      return {MpWarpError::kMisalignedAddr, 0};
    case FK::kInvalidCode:
      return {MpWarpError::kIllegalInstrEncoding, 0};
    case FK::kOutOfRange:
      return {MpWarpError::kOorAddr, 0};
    case FK::kInvalidLaunch:  // (our choice) Fermi has no SKED error register; an illegal parameter
      return {MpWarpError::kIllegalInstrParam, 0};
    case FK::kTrap:  // (our choice) the trap instruction is a breakpoint interrupt
      return {MpWarpError::kNone, gf100::pgraph::kMpGlobalBptInt};
    case FK::kAssert:  // (our choice) hardware traps the same way; we tell assert apart
      return {MpWarpError::kNone, gf100::pgraph::kMpGlobalBptPause};
    case FK::kBarrierDeadlock:  // (our choice) hardware would hang until its watchdog fires
      return {MpWarpError::kNone, gf100::pgraph::kMpGlobalTimeout};
    case FK::kNone:
    case FK::kMmu:  // reported through VM_FAULT, not here
      break;
  }
  return {};
}

uint8_t* Channel::JobMemory::Translate(uint64_t va, uint32_t len, bool write, MemoryFault* fault) {
  return vm_->mmu->Translate(vm_->space, vm_->limit, va, len, write, kComputeSource.privileged,
                             fault);
}

uint64_t Channel::JobMemory::AddressSpaceId() const {
  return vm_->space != nullptr ? vm_->space->id() : 0;
}

Channel::Channel(uint32_t chid, ChannelEnvironment* env) : chid_(chid), env_(env), compute_(chid) {
  vm_.mmu = env->mmu();
}

Channel::~Channel() = default;

void Channel::Unload() {
  compute_job_.reset();
  context_.clear();
  copy_job_.reset();
  loaded_ = false;
  inst_address_ = 0;
  userd_ = nullptr;
  ib_base_ = 0;
  ib_entries_ = 1;
  vm_.space = nullptr;
  vm_.limit = 0;
  ib_get_ = ib_put_ = 0;
  segment_va_ = 0;
  segment_words_ = 0;
  decoder_.Reset();
  current_ = {};
  subchannel_class_.fill(0);
  semaphore_address_ = 0;
  semaphore_payload_ = 0;
  acquire_operation_ = 0;
  acquire_pending_ = false;
  reference_ = 0;
  m2mf_ = M2mfObject();
  copy_ = CopyObject();
  compute_ = ComputeObject(chid_);
  error_ = ChannelError();
}

bool Channel::Load(uint64_t inst_address) {
  Unload();
  inst_address_ = inst_address;
  // Instance blocks live in VRAM (the CHAN_TABLE entry has no target field).
  const uint8_t* ramfc =
      env_->memory()->Resolve(gf100::vm::Target::kVram, inst_address, ramin::kSize);
  if (ramfc == nullptr) {
    Fail(Kind::kBadInstance, "instance block " + Hex(inst_address) + " is outside VRAM");
    return false;
  }
  const uint32_t signature = Load32(ramfc + ramin::kSignature) & ramin::kSignatureMask;
  if (signature != ramin::kSignatureValue) {
    Fail(Kind::kBadInstance, "RAMFC signature is " + Hex(signature) + ", not 0xface");
    return false;
  }
  const uint64_t userd_address =
      Load32(ramfc + ramin::kUserdLo) | (uint64_t(Load32(ramfc + ramin::kUserdHi)) << 32);
  userd_ = env_->memory()->Resolve(gf100::vm::Target::kVram, userd_address, 0x100);
  if (userd_ == nullptr || (userd_address & 3) != 0) {
    userd_ = nullptr;
    Fail(Kind::kBadInstance, "USERD " + Hex(userd_address) + " is not an aligned VRAM address");
    return false;
  }
  const uint32_t ib_hi = Load32(ramfc + ramin::kIbBaseHi);
  ib_base_ = Load32(ramfc + ramin::kIbBaseLo) | (uint64_t(ib_hi & ramin::kIbBaseHiAddrMask) << 32);
  ib_entries_ = 1u << ((ib_hi >> ramin::kIbOrderShift) & ramin::kIbOrderMask);

  const uint32_t pd_lo = Load32(ramfc + ramin::kPageDirLo);
  const uint32_t pd_hi = Load32(ramfc + ramin::kPageDirHi);
  PageDirectory pd{
      gf100::vm::Target(pd_lo & ramin::kPageDirTargetMask),
      (pd_lo & ramin::kPageDirAddrLoMask) | (uint64_t(pd_hi & ramin::kPageDirAddrHiMask) << 32)};
  // An unreachable page directory leaves the space unset: every access then faults with NO_CHANNEL.
  vm_.space = env_->mmu()->GetSpace(pd);
  vm_.limit =
      Load32(ramfc + ramin::kVmLimitLo) | (uint64_t(Load32(ramfc + ramin::kVmLimitHi)) << 32);

  ib_get_ = Load32(userd_ + userd::kIbGet) & (ib_entries_ - 1);
  ib_put_ = ib_get_;
  loaded_ = true;
  return true;
}

void Channel::WriteUserd(uint32_t offset, uint32_t value) { Store32(userd_ + offset, value); }

uint64_t Channel::NowNs() { return env_->NowNs(); }

MethodStatus Channel::Fail(Kind kind, std::string message) {
  if (error_.ok()) {
    error_.kind = kind;
    error_.subchannel = current_.subchannel;
    error_.method = current_.method;
    error_.data = current_.data;
    error_.message = "channel " + std::to_string(chid_) + ": " + std::move(message);
  }
  return MethodStatus::kError;
}

MethodStatus Channel::Fault(const FaultSource& source, const MemoryFault& fault) {
  env_->RecordFault(source, inst_address_, fault);
  const bool first = error_.ok();
  Fail(Kind::kMmuFault, std::string(fault.write ? "write" : "read") + " fault at " + Hex(fault.va) +
                            " (reason " + std::to_string(static_cast<int>(fault.reason)) + ")");
  if (first) error_.fault = fault;
  return MethodStatus::kError;
}

void Channel::RaiseNonStall(Engine engine) { env_->RaiseNonStall(engine); }

MethodStatus Channel::WriteReport(const FaultSource& source, const Report& report) {
  MemoryFault fault;
  switch (report.size) {
    case Report::Size::kNone:
      return MethodStatus::kDone;
    case Report::Size::kShort:
      if (!vm_.Write(report.address, &report.value, 4, source.privileged, &fault)) {
        return Fault(source, fault);
      }
      return MethodStatus::kDone;
    case Report::Size::kLong: {
      // {value, 0, 64-bit timestamp in ns}; the value word last, so a poller that sees it sees the
      // rest.
      const uint64_t timestamp = env_->NowNs();
      const uint32_t rest[3] = {0, uint32_t(timestamp), uint32_t(timestamp >> 32)};
      if (!vm_.Write(report.address + 4, rest, sizeof(rest), source.privileged, &fault) ||
          !vm_.Write(report.address, &report.value, 4, source.privileged, &fault)) {
        return Fault(source, fault);
      }
      return MethodStatus::kDone;
    }
  }
  return MethodStatus::kDone;
}

MethodStatus Channel::StartCopy(std::unique_ptr<CopyJob> job) {
  copy_job_ = std::move(job);
  return MethodStatus::kYield;
}

MethodStatus Channel::StartCompute(const ComputeLaunch& launch) {
  ComputeEngine* engine = env_->compute_engine();
  if (engine == nullptr) {
    return Fail(Kind::kNoComputeEngine,
                "compute LAUNCH, but the device has no compute engine injected");
  }
  compute_job_ = engine->Start(launch, &job_memory_);
  if (compute_job_ == nullptr) {
    return Fail(Kind::kComputeFault, "the compute engine returned no job for LAUNCH");
  }
  return MethodStatus::kYield;
}

void Channel::FlushCode() {
  if (ComputeEngine* engine = env_->compute_engine()) engine->FlushCodeCache();
}

Channel::Outcome Channel::RunCopy(uint64_t deadline_ns) {
  const Engine engine = copy_job_->engine();
  env_->EngineActive(engine, chid_, inst_address_, true);
  const uint64_t start = env_->NowNs();
  MemoryFault fault;
  const CopyJob::Progress progress = copy_job_->Continue(
      vm_, deadline_ns, [this] { return env_->NowNs(); }, &fault);
  stats_.engine_busy_ns[static_cast<int>(engine)] += env_->NowNs() - start;
  env_->EngineActive(engine, chid_, inst_address_, false);
  switch (progress) {
    case CopyJob::Progress::kMore:
      return Outcome::kProgress;
    case CopyJob::Progress::kFaulted: {
      const FaultSource source = copy_job_->source();
      copy_job_.reset();
      Fault(source, fault);
      return Outcome::kError;
    }
    case CopyJob::Progress::kDone:
      break;
  }
  const std::unique_ptr<CopyJob> job = std::move(copy_job_);
  if (WriteReport(job->source(), job->completion().report) == MethodStatus::kError) {
    return Outcome::kError;
  }
  if (job->completion().notify) env_->RaiseNonStall(engine);
  return Outcome::kProgress;
}

bool Channel::Preempt(bool drain, size_t* saved_bytes) {
  *saved_bytes = 0;
  if (compute_job_ == nullptr) return true;
  if (drain) {
    compute_job_->Drain();
    if (!compute_job_->drained()) return false;
  }
  std::vector<uint8_t> image;
  if (!compute_job_->SaveContext(&image)) return true;  // not started yet, or cannot be saved
  compute_job_.reset();
  context_ = std::move(image);
  *saved_bytes = context_.size();
  ++stats_.context_saves;
  stats_.last_context_bytes = context_.size();
  return true;
}

Channel::Outcome Channel::RunCompute() {
  env_->EngineActive(Engine::kPgraph, chid_, inst_address_, true);
  const uint64_t start = env_->NowNs();
  if (compute_job_ == nullptr) {
    // The switched-out grid comes back (validated; a context that does not hold faults the grid).
    compute_job_ = env_->compute_engine()->Resume(context_, &job_memory_);
    context_.clear();
    ++stats_.context_restores;
    stats_.last_restore_ns = env_->NowNs() - start;
  }
  const SliceOutcome outcome = compute_job_->RunSlice();
  stats_.engine_busy_ns[static_cast<int>(Engine::kPgraph)] += env_->NowNs() - start;
  env_->EngineActive(Engine::kPgraph, chid_, inst_address_, false);
  switch (outcome) {
    case SliceOutcome::kMore:
      return Outcome::kProgress;
    case SliceOutcome::kDone:
      compute_job_.reset();
      return Outcome::kProgress;
    case SliceOutcome::kFaulted:
      break;
  }
  const ComputeFault fault = compute_job_->fault();
  compute_job_.reset();
  if (fault.kind == ComputeFault::Kind::kMmu) {
    Fault(kComputeSource, fault.mmu);
    if (!fault.message.empty()) error_.message += ": " + fault.message;
  } else {
    const MpTrapCodes codes = MpTrapCodesFor(fault.kind);
    env_->RaiseGraphTrap(chid_, inst_address_, uint32_t(codes.warp_error), codes.global_error);
    Fail(Kind::kComputeFault,
         "compute job faulted: " +
             (fault.message.empty() ? std::string("no reason given") : fault.message));
  }
  return Outcome::kError;
}

bool Channel::CheckAcquire(bool* satisfied) {
  uint32_t value = 0;
  MemoryFault fault;
  if (!vm_.Read(semaphore_address_, &value, 4, kPfifoSource.privileged, &fault)) {
    Fault(kPfifoSource, fault);
    return false;
  }
  switch (acquire_operation_) {
    case host::kSemOpAcquire:
      *satisfied = value == semaphore_payload_;
      break;
    case host::kSemOpAcqGeq:
      // Compared as a wrapping sequence number, so fences keep working across 2^32.
      *satisfied = int32_t(value - semaphore_payload_) >= 0;
      break;
    case host::kSemOpAcqAnd:
      *satisfied = (value & semaphore_payload_) != 0;
      break;
    default:
      *satisfied = true;
  }
  return true;
}

MethodStatus Channel::HostMethod(const MethodCall& call) {
  switch (call.method) {
    case host::kSetObject: {
      const uint32_t cls = call.data & host::kSetObjectClassMask;
      switch (cls) {
        case gf100::kClassM2mf:
        case gf100::kClassCopy:
        case gf100::kClassCompute:
        case gf100::kClass3d:  // bound, but their methods are not modelled (counted as ignored)
        case gf100::kClass2d:
          subchannel_class_[call.subchannel] = cls;
          return MethodStatus::kDone;
      }
      return Fail(Kind::kIllegalMethod, "SET_OBJECT with unknown class " + Hex(cls));
    }
    case host::kSemaphoreA:
      semaphore_address_ =
          (semaphore_address_ & 0xffffffffull) | (uint64_t(call.data & 0xff) << 32);
      return MethodStatus::kDone;
    case host::kSemaphoreB:
      semaphore_address_ = (semaphore_address_ & ~0xffffffffull) | (call.data & ~3u);
      return MethodStatus::kDone;
    case host::kSemaphoreC:
      semaphore_payload_ = call.data;
      return MethodStatus::kDone;
    case host::kSemaphoreD: {
      const uint32_t op = call.data & host::kSemOpMask;
      if (op == host::kSemOpRelease) {
        // Methods execute in order and a channel does not go past unfinished work, so the release
        // is always after everything before it (RELEASE_WFI holds whatever the bit says).
        const Report report{
            (call.data & host::kSemReleaseSize4) ? Report::Size::kShort : Report::Size::kLong,
            semaphore_address_, semaphore_payload_};
        return WriteReport(kPfifoSource, report);
      }
      if (op == host::kSemOpAcquire || op == host::kSemOpAcqGeq || op == host::kSemOpAcqAnd) {
        acquire_operation_ = op;
        bool satisfied = false;
        if (!CheckAcquire(&satisfied)) return MethodStatus::kError;
        if (satisfied) return MethodStatus::kDone;
        acquire_pending_ = true;  // (ACQUIRE_SWITCH or not) other channels run while we wait
        return MethodStatus::kYield;
      }
      return Fail(Kind::kIllegalSemaphore, "SEMAPHORED operation " + Hex(op));
    }
    case host::kNonStallInterrupt:
      env_->RaiseNonStall(Engine::kPgraph);
      return MethodStatus::kDone;
    case host::kSetReference:
      reference_ = call.data;
      WriteUserd(userd::kRef, reference_);
      return MethodStatus::kDone;
  }
  ++stats_.ignored_methods;  // other host methods (NOPs, SLI, ...) have no effect here
  return MethodStatus::kDone;
}

MethodStatus Channel::Execute(const MethodCall& call) {
  ++stats_.methods;
  current_ = call;
  if (call.method < host::kFirstClassMethod) return HostMethod(call);
  bool ignored = false;
  MethodStatus status = MethodStatus::kDone;
  switch (subchannel_class_[call.subchannel]) {
    case 0:
      return Fail(Kind::kEmptySubchannel, "method " + Hex(call.method) + " on empty subchannel " +
                                              std::to_string(call.subchannel));
    case gf100::kClassM2mf:
      status = m2mf_.Method(call.method, call.data, this, &ignored);
      break;
    case gf100::kClassCopy:
      status = copy_.Method(call.method, call.data, this, &ignored);
      break;
    case gf100::kClassCompute:
      status = compute_.Method(call.method, call.data, this, &ignored);
      break;
    default:
      ignored = true;
  }
  if (ignored) ++stats_.ignored_methods;
  return status;
}

MethodStatus Channel::FetchIbEntry(uint32_t ib_put) {
  uint32_t words[2];
  MemoryFault fault;
  const uint64_t va = ib_base_ + uint64_t(ib_get_) * gp::kIbEntrySize;
  if (!vm_.Read(va, words, sizeof(words), kPfifoSource.privileged, &fault)) {
    return Fault(kPfifoSource, fault);
  }
  ib_put_ = ib_put;
  ib_get_ = (ib_get_ + 1) & (ib_entries_ - 1);
  WriteUserd(userd::kIbGet, ib_get_);
  ++stats_.ib_entries;
  const gp::IbEntry entry = gp::DecodeIbEntry(words[0], words[1]);
  segment_va_ = entry.address;
  segment_words_ = entry.words;  // a zero-length entry is a no-op
  return MethodStatus::kDone;
}

MethodStatus Channel::RunSegment(uint64_t deadline_ns) {
  uint32_t words[kFetchWords];
  while (segment_words_ > 0) {
    const uint32_t n = std::min(segment_words_, kFetchWords);
    MemoryFault fault;
    // Copy first, then decode: the driver may rewrite the pushbuffer while we work on it.
    if (!vm_.Read(segment_va_, words, uint64_t(n) * 4, kPfifoSource.privileged, &fault)) {
      return Fault(kPfifoSource, fault);
    }
    for (uint32_t i = 0; i < n; ++i) {
      MethodCall call;
      const MethodDecoder::Result r = decoder_.Feed(words[i], &call);
      segment_va_ += 4;
      --segment_words_;
      switch (r) {
        case MethodDecoder::Result::kNone:
          continue;
        case MethodDecoder::Result::kEndSegment:
          segment_va_ += uint64_t(segment_words_) * 4;
          segment_words_ = 0;
          break;
        case MethodDecoder::Result::kIllegal:
          current_ = {0, 0, words[i]};
          return Fail(Kind::kIllegalCommand,
                      "illegal pushbuffer header " + Hex(words[i]) + " at " + Hex(segment_va_ - 4));
        case MethodDecoder::Result::kMethod: {
          const MethodStatus s = Execute(call);
          if (s != MethodStatus::kDone) {
            WriteUserd(userd::kDmaGet, uint32_t(segment_va_));
            return s;
          }
          continue;
        }
      }
      break;  // END_PB_SEGMENT
    }
    WriteUserd(userd::kDmaGet, uint32_t(segment_va_));
    WriteUserd(userd::kDmaMget, uint32_t(segment_va_));
    if (env_->NowNs() >= deadline_ns) break;
  }
  return MethodStatus::kDone;
}

Channel::Outcome Channel::Run(uint64_t deadline_ns) {
  if (!loaded_ || !error_.ok()) return error_.ok() ? Outcome::kIdle : Outcome::kError;
  bool progressed = false;
  while (true) {
    if (compute_job_ != nullptr || !context_.empty()) return RunCompute();
    if (copy_job_ != nullptr) {
      const Outcome o = RunCopy(deadline_ns);
      if (o == Outcome::kError || copy_job_ != nullptr) return o;
      progressed = true;
    }
    if (acquire_pending_) {
      bool satisfied = false;
      if (!CheckAcquire(&satisfied)) return Outcome::kError;
      if (!satisfied) return progressed ? Outcome::kProgress : Outcome::kBlocked;
      acquire_pending_ = false;
      progressed = true;
    }
    if (progressed && env_->NowNs() >= deadline_ns) return Outcome::kProgress;
    if (segment_words_ > 0) {
      const MethodStatus s = RunSegment(deadline_ns);
      if (s == MethodStatus::kError) return Outcome::kError;
      progressed = true;
      if (s == MethodStatus::kDone && env_->NowNs() >= deadline_ns) return Outcome::kProgress;
      continue;
    }
    // Between segments: is there another IB entry? The driver publishes IB_PUT in USERD.
    const uint32_t ib_put = Load32(userd_ + userd::kIbPut);
    if (ib_put >= ib_entries_) {
      current_ = {};
      Fail(Kind::kIbPutOverflow, "IB_PUT " + std::to_string(ib_put) + " is past the " +
                                     std::to_string(ib_entries_) + "-entry IB ring");
      return Outcome::kError;
    }
    ib_put_ = ib_put;
    if (ib_put == ib_get_) return progressed ? Outcome::kProgress : Outcome::kIdle;
    if (FetchIbEntry(ib_put) == MethodStatus::kError) return Outcome::kError;
    progressed = true;
  }
}

}  // namespace gpuvm::sim
