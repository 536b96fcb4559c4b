#include "gpu/sim/copy_engine.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "gpu/hw/classes.h"

namespace gpuvm::sim {

namespace m2mf = gf100::m2mf;
namespace copy = gf100::copy;
using gf100::pfifo::Engine;

namespace {

// Copies large runs with non-temporal stores: a DMA engine does not pull its destination into the
// CPU's caches, and skipping the read-for-ownership is what lets a chunked copy keep up with one
// big memcpy (glibc switches to streaming stores only for copies far larger than our chunks). Small
// or overlapping runs use memmove.
void CopyRun(uint8_t* dst, const uint8_t* src, uint64_t n) {
#if defined(__SSE2__)
  constexpr uint64_t kStreamThreshold = 64 << 10;
  const bool overlap = dst < src + n && src < dst + n;
  if (n >= kStreamThreshold && !overlap) {
    const uint64_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
    std::memcpy(dst, src, head);
    uint64_t i = head;
    for (; i + 64 <= n; i += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
      const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
    }
    std::memcpy(dst + i, src + i, n - i);
    _mm_sfence();  // streaming stores are visible before whatever the channel writes next
    return;
  }
#endif
  std::memmove(dst, src, n);  // source and destination may overlap, as they may on hardware
}

}  // namespace

CopyJob::Progress CopyJob::Chunk(const VmView& vm, MemoryFault* fault) {
  uint64_t n = std::min(kChunk, request_.line_length - offset_);
  // Unsigned arithmetic wraps; an address past 2^40 faults with VSPACE_LIMIT.
  uint64_t src = request_.src + line_ * request_.pitch_in + offset_;
  uint64_t dst = request_.dst + line_ * request_.pitch_out + offset_;
  while (n > 0) {
    uint64_t src_run = 0;
    uint64_t dst_run = 0;
    const uint8_t* s = vm.Run(src, n, false, source_.privileged, &src_run, fault);
    if (s == nullptr) return Progress::kFaulted;
    uint8_t* d = vm.Run(dst, src_run, true, source_.privileged, &dst_run, fault);
    if (d == nullptr) return Progress::kFaulted;
    const uint64_t m = std::min(src_run, dst_run);
    CopyRun(d, s, m);
    src += m;
    dst += m;
    n -= m;
    offset_ += m;
    bytes_copied_ += m;
  }
  if (offset_ == request_.line_length) {
    ++line_;
    offset_ = 0;
  }
  return Progress::kMore;
}

// ---- M2MF
// ----------------------------------------------------------------------------------------------

MethodStatus M2mfObject::Method(uint32_t method, uint32_t data, ObjectContext* ctx, bool* ignored) {
  switch (method) {
    case m2mf::kOffsetOutHigh:
      offset_out_ = (offset_out_ & 0xffffffffull) | (uint64_t(data & 0xff) << 32);
      return MethodStatus::kDone;
    case m2mf::kOffsetOutLow:
      offset_out_ = (offset_out_ & ~0xffffffffull) | data;
      return MethodStatus::kDone;
    case m2mf::kOffsetInHigh:
      offset_in_ = (offset_in_ & 0xffffffffull) | (uint64_t(data & 0xff) << 32);
      return MethodStatus::kDone;
    case m2mf::kOffsetInLow:
      offset_in_ = (offset_in_ & ~0xffffffffull) | data;
      return MethodStatus::kDone;
    case m2mf::kPitchIn:
      pitch_in_ = data;
      return MethodStatus::kDone;
    case m2mf::kPitchOut:
      pitch_out_ = data;
      return MethodStatus::kDone;
    case m2mf::kLineLengthIn:
      line_length_ = data;
      return MethodStatus::kDone;
    case m2mf::kLineCount:
      line_count_ = data;
      return MethodStatus::kDone;
    case m2mf::kQueryAddressHigh:
      query_address_ = (query_address_ & 0xffffffffull) | (uint64_t(data & 0xff) << 32);
      return MethodStatus::kDone;
    case m2mf::kQueryAddressLow:
      query_address_ = (query_address_ & ~0xffffffffull) | data;
      return MethodStatus::kDone;
    case m2mf::kQuerySequence:
      query_sequence_ = data;
      return MethodStatus::kDone;
    case m2mf::kExec:
      return Exec(data, ctx);
    case m2mf::kData:
      if (!pushing_) {
        *ignored = true;  // DATA without a PUSH in progress: nothing to write
        return MethodStatus::kDone;
      }
      return PushData(data, ctx);
  }
  *ignored = true;  // tiling and other state we do not model
  return MethodStatus::kDone;
}

namespace {
CopyCompletion M2mfCompletion(uint32_t exec, uint64_t address, uint32_t sequence) {
  CopyCompletion c;
  if (((exec >> m2mf::kExecQueryShift) & m2mf::kExecQueryMask) == m2mf::kExecQueryYes) {
    c.report = {(exec & m2mf::kExecQueryShort) ? Report::Size::kShort : Report::Size::kLong,
                address, sequence};
  }
  c.notify = ((exec >> m2mf::kExecInterruptShift) & m2mf::kExecInterruptMask) != 0;
  return c;
}
}  // namespace

MethodStatus M2mfObject::Exec(uint32_t data, ObjectContext* ctx) {
  exec_ = data;
  pushing_ = false;  // (our choice) a new EXEC abandons an unfinished PUSH
  const bool push = (data & m2mf::kExecPush) != 0;
  if (!(data & m2mf::kExecLinearOut) || (!push && !(data & m2mf::kExecLinearIn))) {
    return ctx->Fail(ChannelError::Kind::kIllegalMethod,
                     "M2MF EXEC with a block-linear layout, which is not modelled");
  }
  if (push) {
    if (line_length_ == 0 || line_count_ == 0) return Finish(ctx);
    pushing_ = true;
    push_line_ = 0;
    push_offset_ = 0;
    return MethodStatus::kDone;
  }
  CopyRequest request{offset_in_, offset_out_, pitch_in_, pitch_out_, line_length_, line_count_};
  return ctx->StartCopy(
      std::make_unique<CopyJob>(kM2mfSource, Engine::kPgraph, request,
                                M2mfCompletion(exec_, query_address_, query_sequence_)));
}

MethodStatus M2mfObject::PushData(uint32_t data, ObjectContext* ctx) {
  const uint32_t n = std::min<uint32_t>(4, line_length_ - push_offset_);
  const uint64_t va = offset_out_ + uint64_t(push_line_) * pitch_out_ + push_offset_;
  MemoryFault fault;
  if (!ctx->vm().Write(va, &data, n, kM2mfSource.privileged, &fault)) {
    pushing_ = false;
    return ctx->Fault(kM2mfSource, fault);
  }
  push_offset_ += n;
  if (push_offset_ >= line_length_) {
    push_offset_ = 0;
    if (++push_line_ >= line_count_) {
      pushing_ = false;
      return Finish(ctx);
    }
  }
  return MethodStatus::kDone;
}

MethodStatus M2mfObject::Finish(ObjectContext* ctx) {
  const CopyCompletion c = M2mfCompletion(exec_, query_address_, query_sequence_);
  if (ctx->WriteReport(kM2mfSource, c.report) == MethodStatus::kError) return MethodStatus::kError;
  if (c.notify) ctx->RaiseNonStall(Engine::kPgraph);
  return MethodStatus::kDone;
}

// ---- PCOPY
// ---------------------------------------------------------------------------------------------

MethodStatus CopyObject::Method(uint32_t method, uint32_t data, ObjectContext* ctx, bool* ignored) {
  switch (method) {
    case copy::kSetSemaphoreA:
      semaphore_address_ = (semaphore_address_ & 0xffffffffull) | (uint64_t(data & 0xff) << 32);
      return MethodStatus::kDone;
    case copy::kSetSemaphoreB:
      semaphore_address_ = (semaphore_address_ & ~0xffffffffull) | data;
      return MethodStatus::kDone;
    case copy::kSetSemaphorePayload:
      semaphore_payload_ = data;
      return MethodStatus::kDone;
    case copy::kOffsetInUpper:
      offset_in_ = (offset_in_ & 0xffffffffull) | (uint64_t(data & 0xff) << 32);
      return MethodStatus::kDone;
    case copy::kOffsetInLower:
      offset_in_ = (offset_in_ & ~0xffffffffull) | data;
      return MethodStatus::kDone;
    case copy::kOffsetOutUpper:
      offset_out_ = (offset_out_ & 0xffffffffull) | (uint64_t(data & 0xff) << 32);
      return MethodStatus::kDone;
    case copy::kOffsetOutLower:
      offset_out_ = (offset_out_ & ~0xffffffffull) | data;
      return MethodStatus::kDone;
    case copy::kPitchIn:
      pitch_in_ = data;
      return MethodStatus::kDone;
    case copy::kPitchOut:
      pitch_out_ = data;
      return MethodStatus::kDone;
    case copy::kLineLengthIn:
      line_length_ = data;
      return MethodStatus::kDone;
    case copy::kLineCount:
      line_count_ = data;
      return MethodStatus::kDone;
    case copy::kLaunchDma:
      return Launch(data, ctx);
  }
  *ignored = true;
  return MethodStatus::kDone;
}

MethodStatus CopyObject::Launch(uint32_t data, ObjectContext* ctx) {
  const uint32_t transfer = data & copy::kTransferTypeMask;
  const uint32_t semaphore = (data >> copy::kSemaphoreTypeShift) & copy::kSemaphoreTypeMask;
  const uint32_t interrupt = (data >> copy::kInterruptTypeShift) & copy::kInterruptTypeMask;
  if (transfer == 3 || semaphore == 3 || interrupt == 3) {
    return ctx->Fail(ChannelError::Kind::kIllegalMethod, "LAUNCH_DMA with a reserved field value");
  }
  CopyCompletion completion;
  if (semaphore == copy::kSemaphoreOneWord) {
    completion.report = {Report::Size::kShort, semaphore_address_, semaphore_payload_};
  } else if (semaphore == copy::kSemaphoreFourWord) {
    completion.report = {Report::Size::kLong, semaphore_address_, semaphore_payload_};
  }
  completion.notify = interrupt != 0;
  CopyRequest request;  // transfer type NONE: only the semaphore / interrupt
  if (transfer != 0) {
    if (!(data & copy::kSrcPitch) || !(data & copy::kDstPitch)) {
      return ctx->Fail(ChannelError::Kind::kIllegalMethod,
                       "LAUNCH_DMA with a block-linear layout, which is not modelled");
    }
    if (data & copy::kRemap) {
      return ctx->Fail(ChannelError::Kind::kIllegalMethod,
                       "LAUNCH_DMA with component remapping, which is not modelled");
    }
    request = {offset_in_, offset_out_,  pitch_in_,
               pitch_out_, line_length_, (data & copy::kMultiLine) ? line_count_ : 1u};
  }
  return ctx->StartCopy(
      std::make_unique<CopyJob>(kCopySource, Engine::kPcopy0, request, completion));
}

}  // namespace gpuvm::sim
