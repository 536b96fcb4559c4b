// Channel: a PFIFO channel (instance block + RAMFC, USER page, IB ring and pushbuffer ring in
// pinned host memory), the commands it issues (copies, memsets, launches, events) and its fences.
#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>
#include <vector>

#include "base/align.h"
#include "gpu/hw/classes.h"
#include "gpu/hw/gpfifo.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/ramin.h"
#include "gpu/hw/vm.h"
#include "gpu/isa/isa.h"
#include "guest-pv-driver/driver_impl.h"
#include "guest-pv-driver/vm_geometry.h"

namespace gpuvm::guest {

namespace gp = gf100::gpfifo;
namespace host = gf100::host;
namespace m2mf = gf100::m2mf;
namespace copy = gf100::copy;
namespace cp = gf100::compute;
namespace ramin = gf100::ramin;
namespace userd = gf100::userd;

namespace {

uint32_t Hi(uint64_t v) { return uint32_t(v >> 32); }
uint32_t Lo(uint64_t v) { return uint32_t(v); }

// PCOPY LAUNCH_DMA DATA_TRANSFER_TYPE NON_PIPELINED (gpu/hw/classes.h: bits 0-1, 2 =
// non-pipelined): a copy waits for the previous one, so dependent copies stay ordered.
constexpr uint32_t kCopyNonPipelined = 2;
// (our choice) one copy command moves at most 1 GiB (LINE_LENGTH_IN is 32-bit).
constexpr uint64_t kCopyChunk = 1ull << 30;
// (our choice) a memset pushes at most 4 KiB of pattern inline, then replicates it by copying.
constexpr uint64_t kMemsetPush = 4096;
// The 0x90c0 LAUNCH method's data bits are not described in gpu/hw; the software GPU ignores them.
constexpr uint32_t kLaunchData = 0;
// (our choice) TEMP backs local memory for this many resident blocks.
constexpr uint64_t kTempResidentBlocks = 16;

}  // namespace

// ---- lifecycle
// ------------------------------------------------------------------------------------------

Result<std::unique_ptr<Channel>> Channel::Impl::Create(Context::Impl* context) {
  std::unique_ptr<Impl> impl(new Impl(context));
  Status s = impl->Init();
  if (!s.ok()) return s;  // the destructor undoes what Init reached
  return std::unique_ptr<Channel>(new Channel(std::move(impl)));
}

Status Channel::Impl::Init() {
  DrmDevice* drm = drv_->drm();
  if (drm != nullptr) {
    // The kernel makes the channel (its instance block, RAMFC, ring and place on the runlist).
    GPUVM_ASSIGN_OR_RETURN(drm_channel_, drm->ChannelAlloc(ctx_->drm_file()));
    chid_ = uint32_t(drm_channel_);
  } else {
    GPUVM_ASSIGN_OR_RETURN(chid_, drv_->AllocateChannelId());
    have_chid_ = true;
    GPUVM_ASSIGN_OR_RETURN(inst_, drv_->instmem()->Allocate(ramin::kSize));
  }
  const ContextOptions& o = ctx_->options();
  ib_entries_ = o.ib_entries;
  pb_base_ = AlignUp(uint64_t(ib_entries_) * gp::kIbEntrySize, kPage);
  pb_size_ = AlignUp(o.pushbuffer_bytes, kPage);
  GPUVM_ASSIGN_OR_RETURN(ring_, ctx_->AllocPinned(pb_base_ + pb_size_, /*internal=*/true));
  GPUVM_ASSIGN_OR_RETURN(fence_, ctx_->AllocateSlot());
  // Sequences continue from the slot's payload (report slots are never reset, context.cc).
  last_sequence_.store(fence_.Payload(), std::memory_order_release);
  next_sequence_ = fence_.Payload() + 1;
  GPUVM_ASSIGN_OR_RETURN(query_, ctx_->AllocateSlot());
  GPUVM_ASSIGN_OR_RETURN(cb_, ctx_->AllocVram(kMaxParamBytes, MemoryKind::kDevice, true));
  if (drm != nullptr) {
    enabled_ = true;
    return Setup();
  }

  // USERD starts zeroed (GET/PUT 0), through its BAR1 mapping.
  Bus* bus = drv_->bus();
  GPUVM_RETURN_IF_ERROR(
      bus->FillBlock(Bar::k1, drv_->user_bar1(chid_), 0, gf100::pfifo::kUserPageSize));

  // RAMFC and the VM binding, as nouveau's gf100 gpfifo constructor and gf100_vmm_join write them,
  // stored as one block through BAR3.
  uint32_t ramfc[(ramin::kVmLimitHi + 4) / 4] = {};
  const uint64_t userd_vram = drv_->userd_vram(chid_);
  uint32_t order = 0;
  while ((1u << order) < ib_entries_) ++order;
  ramfc[ramin::kUserdLo / 4] = Lo(userd_vram);
  ramfc[ramin::kUserdHi / 4] = Hi(userd_vram);
  ramfc[ramin::kSignature / 4] = ramin::kSignatureValue;
  ramfc[ramin::kIbBaseLo / 4] = Lo(ring_->va);
  ramfc[ramin::kIbBaseHi / 4] =
      (Hi(ring_->va) & ramin::kIbBaseHiAddrMask) | (order << ramin::kIbOrderShift);
  ctx_->space()->InstanceWords(&ramfc[ramin::kPageDirLo / 4]);
  GPUVM_RETURN_IF_ERROR(drv_->instmem()->Write(inst_, 0, ramfc, sizeof(ramfc)));

  GPUVM_RETURN_IF_ERROR(drv_->EnableChannel(chid_, inst_.vram, this));
  enabled_ = true;
  return Setup();
}

Status Channel::Impl::Setup() {
  const ContextOptions& o = ctx_->options();
  // Objects on their subchannels, and compute's generic-address windows.
  PushBuffer pb;
  pb.Method(kSubcCompute, host::kSetObject, gf100::kClassCompute);
  pb.Method(kSubcM2mf, host::kSetObject, gf100::kClassM2mf);
  pb.Method(kSubcCopy, host::kSetObject, gf100::kClassCopy);
  pb.Method(kSubcCompute, cp::kSharedBase, kSharedWindow);
  pb.Method(kSubcCompute, cp::kLocalBase, kLocalWindow);
  Fence setup;
  {
    std::lock_guard lock(mu_);
    code_epoch_seen_ = ctx_->code_epoch();
    GPUVM_ASSIGN_OR_RETURN(setup, Submit(pb));
  }
  // A new channel is idle to its user (CUDA: cuStreamQuery on a fresh stream is CUDA_SUCCESS), so
  // the setup must have run before the channel is handed out. It also means a channel that PFIFO
  // never runs fails here, with a clear error, instead of at its first use. The setup waits its
  // turn like any work, not the teardown drain's shorter limit: under a hypervisor, another VM's
  // kernel may hold the GPU for seconds (up to the aggregator's max_run) before the setup runs.
  // Bounded all the same (setup_timeout): a channel that never runs must not hang its creator.
  return WaitSequence(setup.sequence, std::min(o.setup_timeout, o.default_timeout));
}

Channel::Impl::~Impl() {
  if (enabled_) {
    if (!ctx_->abandoning()) {
      (void)Synchronize(
          std::min<std::chrono::nanoseconds>(ctx_->options().default_timeout, kChannelDrainWait));
    }
    if (drm_channel_ < 0) (void)drv_->DisableChannel(chid_);
  }
  if (drm_channel_ >= 0) (void)drv_->drm()->ChannelFree(ctx_->drm_file(), drm_channel_);
  for (auto* r : {&ring_, &cb_, &temp_, &staging_}) {
    if (*r != nullptr) (void)ctx_->Free((*r)->va, /*internal=*/true);
    r->reset();
  }
  // A fence release still queued (the channel did not drain) would move a new owner's payload: the
  // slot then stays reserved until the context goes.
  if (fence_.host != nullptr && Done(last_sequence_.load())) ctx_->FreeSlot(fence_);
  if (query_.host != nullptr) ctx_->FreeSlot(query_);
  if (drv_->instmem() != nullptr) drv_->instmem()->Free(inst_);
  if (have_chid_) drv_->ReleaseChannelId(chid_);
}

// ---- submission and fences
// ------------------------------------------------------------------------------

bool Channel::Impl::Done(uint32_t sequence) const {
  return int32_t(fence_.Payload() - sequence) >= 0;
}

void Channel::Impl::Reclaim() {
  while (!inflight_.empty() && Done(inflight_.front().sequence)) {
    ib_in_use_ -= inflight_.front().ib_count;
    inflight_.pop_front();
  }
}

Status Channel::Impl::CheckUsable() const { return ctx_->status(); }

Result<Fence> Channel::Impl::Submit(PushBuffer& pb, std::span<const CommandSegment> segments) {
  GPUVM_RETURN_IF_ERROR(CheckUsable());
  // Page-table updates (and stores) still queued go now; one the device refused fails this
  // submission, the first that could have used it.
  if (drv_->writer() != nullptr) GPUVM_RETURN_IF_ERROR(drv_->writer()->Commit());
  uint32_t sequence = next_sequence_;
  if (sequence == 0) sequence = 1;
  // The fence: a 4-byte semaphore release after everything before it (nouveau's nvc0_fence_emit).
  pb.Inc(0, host::kSemaphoreA,
         {Hi(fence_.va), Lo(fence_.va), sequence, host::kSemOpRelease | host::kSemReleaseSize4});
  const uint64_t bytes = pb.size() * 4;
  if (bytes > pb_size_) {
    return Status::InvalidArgument("a submission of " + std::to_string(bytes) +
                                   " bytes does not fit the pushbuffer");
  }
  // Room: one IB entry per segment plus one, and `bytes` contiguous bytes of pushbuffer; reclaimed
  // by fences, waiting for the oldest submission when full. One IB slot always stays empty (PUT ==
  // GET means an empty ring).
  const uint32_t ib_count = uint32_t(segments.size()) + 1;
  if (ib_count > ib_entries_ - 1) {
    return Status::InvalidArgument(std::to_string(segments.size()) +
                                   " segments do not fit the IB ring");
  }
  uint64_t offset = 0;
  for (;;) {
    Reclaim();
    bool fits = false;
    if (inflight_.empty()) {
      offset = pb_head_ + bytes <= pb_size_ ? pb_head_ : 0;
      fits = true;
    } else if (ib_in_use_ + ib_count <= ib_entries_ - 1) {
      const uint64_t tail = inflight_.front().pb_begin;
      if (pb_head_ > tail) {  // not wrapped: free space after head, and before tail
        if (pb_head_ + bytes <= pb_size_) {
          offset = pb_head_;
          fits = true;
        } else if (bytes <= tail) {
          offset = 0;
          fits = true;
        }
      } else if (pb_head_ + bytes <= tail) {  // wrapped: free space between head and tail
        offset = pb_head_;
        fits = true;
      }
    }
    if (fits) break;
    GPUVM_RETURN_IF_ERROR(
        WaitSequence(inflight_.front().sequence, ctx_->options().default_timeout));
  }
  uint8_t* ring = ring_->host;
  std::memcpy(ring + pb_base_ + offset, pb.words().data(), bytes);
  if (DrmDevice* drm = drv_->drm()) {
    // The kernel writes the IB entries: GEM_PUSHBUF names each segment by its object.
    std::vector<DrmDevice::Push> pushes;
    pushes.reserve(segments.size() + 1);
    for (const CommandSegment& segment : segments) {
      GPUVM_ASSIGN_OR_RETURN(std::shared_ptr<AllocRecord> r,
                             ctx_->Lookup(segment.va, uint64_t{segment.words} * 4, false));
      pushes.push_back({r->gem, segment.va - r->map_va(), uint64_t{segment.words} * 4});
    }
    pushes.push_back({ring_->gem, pb_base_ + offset, bytes});
    GPUVM_RETURN_IF_ERROR(drm->Pushbuf(ctx_->drm_file(), drm_channel_, pushes));
    ib_in_use_ += ib_count;
    inflight_.push_back({sequence, offset, offset + bytes, ib_count});
    pb_head_ = offset + bytes;
    next_sequence_ = sequence + 1;
    last_sequence_.store(sequence, std::memory_order_release);
    host_visible_sequence_.store(sequence, std::memory_order_release);
    return Fence{chid_, sequence};
  }
  auto push_entry = [&](uint64_t va, uint32_t words) {
    const uint64_t entry = gp::EncodeIbEntry(va, words);
    std::memcpy(ring + uint64_t(ib_put_) * gp::kIbEntrySize, &entry, sizeof(entry));
    ib_put_ = (ib_put_ + 1) & (ib_entries_ - 1);
  };
  for (const CommandSegment& segment : segments) push_entry(segment.va, segment.words);
  push_entry(ring_->va + pb_base_ + offset, uint32_t(pb.size()));
  ib_in_use_ += ib_count;
  inflight_.push_back({sequence, offset, offset + bytes, ib_count});
  pb_head_ = offset + bytes;
  next_sequence_ = sequence + 1;
  last_sequence_.store(sequence, std::memory_order_release);
  host_visible_sequence_.store(sequence, std::memory_order_release);
  // The commands and the IB entry must be in memory before the GPU learns of IB_PUT.
  std::atomic_thread_fence(std::memory_order_release);
  drv_->bus()->Write32(Bar::k1, drv_->user_bar1(chid_) + userd::kIbPut, ib_put_);
  return Fence{chid_, sequence};
}

Status Channel::Impl::WaitSequence(uint32_t sequence, std::chrono::nanoseconds timeout,
                                   WaitClock* clock) {
  std::optional<WaitClock> own;
  if (clock == nullptr) clock = &own.emplace(drv_);
  Backoff backoff;
  for (;;) {
    if (Done(sequence)) return ctx_->status();
    GPUVM_RETURN_IF_ERROR(ctx_->status());
    drv_->MaybeService();
    GPUVM_RETURN_IF_ERROR(ctx_->PollDrm());
    // Stalls of this process or of the path to the GPU do not count (WaitClock).
    GPUVM_ASSIGN_OR_RETURN(const bool expired, clock->Expired(timeout));
    if (expired) {
      drv_->ServiceInterrupts();
      GPUVM_RETURN_IF_ERROR(ctx_->status());
      if (Done(sequence)) return Status::Ok();
      return Status::DeadlineExceeded("channel " + std::to_string(chid_) + ": fence " +
                                      std::to_string(sequence) + " not reached before the timeout");
    }
    backoff.Pause();
  }
}

Result<bool> Channel::Impl::IsDone(Fence fence) {
  if (fence.channel != chid_)
    return Status::InvalidArgument("the fence belongs to another channel");
  GPUVM_RETURN_IF_ERROR(ctx_->status());
  if (fence.sequence == 0 || Done(fence.sequence)) return true;
  drv_->MaybeService();
  GPUVM_RETURN_IF_ERROR(ctx_->PollDrm());
  return false;
}

Status Channel::Impl::Wait(Fence fence, std::chrono::nanoseconds timeout) {
  if (fence.channel != chid_)
    return Status::InvalidArgument("the fence belongs to another channel");
  if (fence.sequence == 0) return ctx_->status();
  if (int32_t(fence.sequence - last_sequence_.load(std::memory_order_acquire)) > 0) {
    return Status::InvalidArgument("fence " + std::to_string(fence.sequence) +
                                   " was never issued on channel " + std::to_string(chid_));
  }
  return WaitSequence(fence.sequence, timeout);
}

Status Channel::Impl::Synchronize(std::chrono::nanoseconds timeout) {
  const uint32_t last = last_sequence_.load(std::memory_order_acquire);
  if (last == 0) return ctx_->status();
  return WaitSequence(last, timeout);
}

Status Channel::Impl::Synchronize(std::chrono::nanoseconds timeout, WaitClock& clock) {
  const uint32_t last = last_sequence_.load(std::memory_order_acquire);
  if (last == 0) return ctx_->status();
  return WaitSequence(last, timeout, &clock);
}

// ---- copies and memsets
// ---------------------------------------------------------------------------------

void Channel::Impl::EmitCopy(PushBuffer& pb, uint64_t dst, uint64_t src, uint64_t bytes) {
  const bool pcopy = ctx_->options().copy_engine == CopyEngine::kPcopy;
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(bytes - done, kCopyChunk);
    const uint64_t s = src + done;
    const uint64_t d = dst + done;
    if (pcopy) {
      // OFFSET_IN/OUT, PITCH_IN/OUT, LINE_LENGTH_IN, LINE_COUNT are consecutive (0x400-0x41c).
      pb.Inc(kSubcCopy, copy::kOffsetInUpper, {Hi(s), Lo(s), Hi(d), Lo(d), 0, 0, uint32_t(n), 1});
      pb.Method(kSubcCopy, copy::kLaunchDma, kCopyNonPipelined | copy::kSrcPitch | copy::kDstPitch);
    } else {
      pb.Inc(kSubcM2mf, m2mf::kOffsetOutHigh, {Hi(d), Lo(d)});
      // OFFSET_IN, PITCH_IN/OUT, LINE_LENGTH_IN, LINE_COUNT are consecutive (0x30c-0x320).
      pb.Inc(kSubcM2mf, m2mf::kOffsetInHigh, {Hi(s), Lo(s), 0, 0, uint32_t(n), 1});
      pb.Method(kSubcM2mf, m2mf::kExec, m2mf::kExecLinearIn | m2mf::kExecLinearOut);
    }
    done += n;
  }
}

Result<Fence> Channel::Impl::CopyAsync(uint64_t dst_va, uint64_t src_va, uint64_t bytes) {
  GPUVM_RETURN_IF_ERROR(CheckUsable());
  GPUVM_ASSIGN_OR_RETURN(auto dst, ctx_->Lookup(dst_va, bytes, false));
  GPUVM_ASSIGN_OR_RETURN(auto src, ctx_->Lookup(src_va, bytes, false));
  std::lock_guard lock(mu_);
  if (bytes == 0) return Fence{chid_, last_sequence_.load(std::memory_order_acquire)};
  PushBuffer pb;
  EmitCopy(pb, dst_va, src_va, bytes);
  return Submit(pb);
}

Result<Fence> Channel::Impl::SubmitSegments(std::span<const CommandSegment> segments) {
  GPUVM_RETURN_IF_ERROR(CheckUsable());
  if (segments.empty()) return Status::InvalidArgument("no command segments");
  for (const CommandSegment& segment : segments) {
    if (segment.words == 0 || segment.words > gp::kIbLengthMask || segment.va % 4 != 0) {
      return Status::InvalidArgument("a command segment needs 1 to " +
                                     std::to_string(gp::kIbLengthMask) +
                                     " words at a 4-byte aligned address");
    }
    // Inside one allocation of this context (what a DRM pushbuffer's object is); user memory only.
    GPUVM_RETURN_IF_ERROR(ctx_->Lookup(segment.va, uint64_t{segment.words} * 4, false).status());
  }
  std::lock_guard lock(mu_);
  PushBuffer pb;  // just the fence
  return Submit(pb, segments);
}

Result<Fence> Channel::Impl::Copy2DAsync(const Copy2D& c) {
  GPUVM_RETURN_IF_ERROR(CheckUsable());
  if (c.height == 0 || c.width == 0) {
    return Fence{chid_, last_sequence_.load(std::memory_order_acquire)};
  }
  if (c.height > 1 && (c.src_pitch < c.width || c.dst_pitch < c.width)) {
    return Status::InvalidArgument("a 2D copy's pitches must be at least its width");
  }
  // The span of each side: every row lies inside one allocation (checked, overflow included).
  auto span = [&](uint64_t pitch) -> Result<uint64_t> {
    const uint64_t rows = c.height - 1;
    if (rows != 0 && pitch > (UINT64_MAX - c.width) / rows) {
      return Status::OutOfRange("a 2D copy's span overflows");
    }
    return pitch * rows + c.width;
  };
  GPUVM_ASSIGN_OR_RETURN(const uint64_t dst_span, span(c.dst_pitch));
  GPUVM_ASSIGN_OR_RETURN(const uint64_t src_span, span(c.src_pitch));
  GPUVM_ASSIGN_OR_RETURN(auto dst, ctx_->Lookup(c.dst_va, dst_span, false));
  GPUVM_ASSIGN_OR_RETURN(auto src, ctx_->Lookup(c.src_va, src_span, false));
  std::lock_guard lock(mu_);
  PushBuffer pb;
  const bool pcopy = ctx_->options().copy_engine == CopyEngine::kPcopy;
  const bool pitched = c.src_pitch <= UINT32_MAX && c.dst_pitch <= UINT32_MAX &&
                       c.width <= kCopyChunk && c.height <= UINT32_MAX;
  if (!pitched) {
    // Rows too wide or pitches beyond the engines' 32-bit fields: a copy per row.
    for (uint64_t row = 0; row < c.height; ++row) {
      EmitCopy(pb, c.dst_va + row * c.dst_pitch, c.src_va + row * c.src_pitch, c.width);
    }
    return Submit(pb);
  }
  // Bands of rows of at most kCopyChunk bytes, like EmitCopy's chunks.
  const uint64_t band = std::max<uint64_t>(1, kCopyChunk / c.width);
  for (uint64_t row = 0; row < c.height; row += band) {
    const uint32_t lines = uint32_t(std::min(band, c.height - row));
    const uint64_t s = c.src_va + row * c.src_pitch;
    const uint64_t d = c.dst_va + row * c.dst_pitch;
    const uint32_t pin = uint32_t(c.src_pitch), pout = uint32_t(c.dst_pitch);
    if (pcopy) {
      pb.Inc(kSubcCopy, copy::kOffsetInUpper,
             {Hi(s), Lo(s), Hi(d), Lo(d), pin, pout, uint32_t(c.width), lines});
      pb.Method(kSubcCopy, copy::kLaunchDma,
                kCopyNonPipelined | copy::kSrcPitch | copy::kDstPitch | copy::kMultiLine);
    } else {
      pb.Inc(kSubcM2mf, m2mf::kOffsetOutHigh, {Hi(d), Lo(d)});
      pb.Inc(kSubcM2mf, m2mf::kOffsetInHigh, {Hi(s), Lo(s), pin, pout, uint32_t(c.width), lines});
      pb.Method(kSubcM2mf, m2mf::kExec, m2mf::kExecLinearIn | m2mf::kExecLinearOut);
    }
  }
  return Submit(pb);
}

Result<Fence> Channel::Impl::Memset(uint64_t dst_va, uint32_t pattern, uint64_t bytes) {
  GPUVM_RETURN_IF_ERROR(CheckUsable());
  GPUVM_ASSIGN_OR_RETURN(auto dst, ctx_->Lookup(dst_va, bytes, false));
  std::lock_guard lock(mu_);
  if (bytes == 0) return Fence{chid_, last_sequence_.load(std::memory_order_acquire)};
  PushBuffer pb;
  EmitMemset(pb, dst_va, pattern, bytes);
  return Submit(pb);
}

void Channel::Impl::EmitPush(PushBuffer& pb, uint64_t dst_va, std::span<const uint32_t> words,
                             uint64_t bytes) {
  pb.Inc(kSubcM2mf, m2mf::kOffsetOutHigh, {Hi(dst_va), Lo(dst_va)});
  pb.Inc(kSubcM2mf, m2mf::kLineLengthIn, {uint32_t(bytes), 1});
  pb.Method(kSubcM2mf, m2mf::kExec, m2mf::kExecPush | m2mf::kExecLinearOut);
  pb.NonInc(kSubcM2mf, m2mf::kData, words);
}

void Channel::Impl::EmitMemset(PushBuffer& pb, uint64_t dst_va, uint32_t pattern, uint64_t bytes) {
  // M2MF only, so the push and the copies that replicate it run on one engine, in order.
  const uint64_t push = std::min(bytes, kMemsetPush);
  EmitPush(pb, dst_va, std::vector<uint32_t>((push + 3) / 4, pattern), push);
  uint64_t rest = bytes - push;
  if (rest >= push) {
    // Replicate: every line reads the pushed block (PITCH_IN 0) and writes the next block.
    const uint64_t lines = rest / push;
    const uint64_t out = dst_va + push;
    pb.Inc(kSubcM2mf, m2mf::kOffsetOutHigh, {Hi(out), Lo(out)});
    pb.Inc(kSubcM2mf, m2mf::kOffsetInHigh,
           {Hi(dst_va), Lo(dst_va), 0, uint32_t(push), uint32_t(push), uint32_t(lines)});
    pb.Method(kSubcM2mf, m2mf::kExec, m2mf::kExecLinearIn | m2mf::kExecLinearOut);
    rest -= lines * push;
  }
  if (rest > 0) {
    const uint64_t out = dst_va + bytes - rest;
    pb.Inc(kSubcM2mf, m2mf::kOffsetOutHigh, {Hi(out), Lo(out)});
    pb.Inc(kSubcM2mf, m2mf::kOffsetInHigh, {Hi(dst_va), Lo(dst_va), 0, 0, uint32_t(rest), 1});
    pb.Method(kSubcM2mf, m2mf::kExec, m2mf::kExecLinearIn | m2mf::kExecLinearOut);
  }
}

Result<Fence> Channel::Impl::Memset2D(uint64_t dst_va, uint64_t pitch, uint32_t pattern,
                                      uint64_t width, uint64_t height) {
  GPUVM_RETURN_IF_ERROR(CheckUsable());
  if (width == 0 || height == 0) {
    return Fence{chid_, last_sequence_.load(std::memory_order_acquire)};
  }
  if (height > 1 && pitch < width) {
    return Status::InvalidArgument("a 2D memset's pitch must be at least its width");
  }
  if (height > 1 && pitch > (UINT64_MAX - width) / (height - 1)) {
    return Status::OutOfRange("a 2D memset's span overflows");
  }
  GPUVM_ASSIGN_OR_RETURN(auto dst, ctx_->Lookup(dst_va, pitch * (height - 1) + width, false));
  std::lock_guard lock(mu_);
  PushBuffer pb;
  EmitMemset(pb, dst_va, pattern, width);
  if (height > 1 && pitch <= UINT32_MAX && width <= UINT32_MAX && height <= UINT32_MAX) {
    // Every further row copies the first (PITCH_IN 0), on M2MF like the first row's writes.
    const uint64_t out = dst_va + pitch;
    pb.Inc(kSubcM2mf, m2mf::kOffsetOutHigh, {Hi(out), Lo(out)});
    pb.Inc(kSubcM2mf, m2mf::kOffsetInHigh,
           {Hi(dst_va), Lo(dst_va), 0, uint32_t(pitch), uint32_t(width), uint32_t(height - 1)});
    pb.Method(kSubcM2mf, m2mf::kExec, m2mf::kExecLinearIn | m2mf::kExecLinearOut);
  } else {
    for (uint64_t row = 1; row < height; ++row)
      EmitMemset(pb, dst_va + row * pitch, pattern, width);
  }
  return Submit(pb);
}

Result<std::shared_ptr<AllocRecord>> Channel::Impl::Staging(uint64_t bytes) {
  // Sized to the need rather than always the maximum: pinned memory is not free to make (in a VM
  // it is guest RAM to allocate and zero, then PTEs to write through a trapped BAR), and most
  // programs' staged copies are small — a 256 KiB upload paid for a 4 MiB buffer (lud's pt init
  // 8.5 -> 4.2 ms with a smaller buffer, native init + htod + close 5.2 -> 3.4 ms).
  constexpr uint64_t kMinStaging = 64 << 10;
  const uint64_t cap = ctx_->options().staging_bytes;
  const uint64_t want =
      bytes >= cap / 2 ? cap : std::min(cap, std::max(kMinStaging, 2 * std::bit_ceil(bytes)));
  if (staging_ != nullptr && staging_->size >= want) return staging_;
  if (staging_ != nullptr) {
    // Idle: staging_mu_ serializes staged copies and each waits for its last chunk.
    (void)ctx_->Free(staging_->va, /*internal=*/true);
    staging_.reset();
  }
  GPUVM_ASSIGN_OR_RETURN(staging_, ctx_->AllocPinned(want, true));
  return staging_;
}

Status Channel::Impl::CopyInline(uint64_t dst_va, const void* src, uint64_t bytes) {
  // CUDA synchronizes the stream before a copy from pageable memory, and returns once the source
  // is captured (here: in the pushbuffer), not once the bytes are in place. Earlier inline copies
  // are not waited for: nothing but later GPU work, which runs behind them, can read what they
  // wrote. So a run of small uploads costs no round trip to the GPU each.
  const uint32_t visible = host_visible_sequence_.load(std::memory_order_acquire);
  if (visible != 0) {
    GPUVM_RETURN_IF_ERROR(WaitSequence(visible, ctx_->options().default_timeout));
  }
  std::vector<uint32_t> words((bytes + 3) / 4, 0);
  std::memcpy(words.data(), src, bytes);
  std::lock_guard lock(mu_);
  const uint32_t before = host_visible_sequence_.load(std::memory_order_relaxed);
  PushBuffer pb;
  EmitPush(pb, dst_va, words, bytes);
  GPUVM_ASSIGN_OR_RETURN(const Fence fence, Submit(pb));
  (void)fence;
  host_visible_sequence_.store(before, std::memory_order_release);  // it wrote VRAM only
  return ctx_->status();
}

Status Channel::Impl::CopyHostToDevice(uint64_t dst_va, const void* src, uint64_t bytes) {
  GPUVM_RETURN_IF_ERROR(CheckUsable());
  if (src == nullptr && bytes != 0) return Status::InvalidArgument("null host pointer");
  GPUVM_ASSIGN_OR_RETURN(auto dst, ctx_->Lookup(dst_va, bytes, false));
  if (bytes == 0) return Status::Ok();
  const auto timeout = ctx_->options().default_timeout;
  const uint64_t dst_off = dst_va - dst->va;
  // Ordering: the paths where the GPU copies run behind this channel's earlier work and wait for
  // the copy, so that work is done when they return (CUDA's stream synchronization of a
  // synchronous copy); the CPU paths wait for it first.
  // 1. Source in pinned/registered memory of this context: one DMA.
  if (auto host = ctx_->LookupHost(src, bytes)) {
    const uint64_t src_va = host->va + (static_cast<const uint8_t*>(src) - host->host);
    GPUVM_ASSIGN_OR_RETURN(Fence f, CopyAsync(dst_va, src_va, bytes));
    return Wait(f, timeout);
  }
  // 2. Destination is host memory itself: the CPU copies.
  if (!dst->is_vram()) {
    GPUVM_RETURN_IF_ERROR(Synchronize(timeout));
    std::memmove(dst->host + dst_off, src, bytes);
    return Status::Ok();
  }
  if (bytes <= ctx_->options().bar1_copy_threshold) {
    // 3. Small: through BAR1 (Gdev's path for transfers up to 4 KiB).
    if (const uint64_t bar1 = ctx_->EnsureBar1(dst.get())) {
      GPUVM_RETURN_IF_ERROR(Synchronize(timeout));
      GPUVM_RETURN_IF_ERROR(drv_->bus()->WriteBlock(Bar::k1, bar1 + dst_off, src, bytes));
      return ctx_->status();
    }
    // 3b. Small, no BAR1 (DRM mode): the bytes ride in the pushbuffer.
    if (drv_->drm() != nullptr) return CopyInline(dst_va, src, bytes);
  }
  // 4. Staged through the two halves of the bounce buffer, copy i+1 filling while copy i runs.
  // The buffer is the channel's: one staged copy at a time (other work still submits meanwhile).
  std::lock_guard staging_lock(staging_mu_);
  std::shared_ptr<AllocRecord> staging;
  {
    std::lock_guard lock(mu_);
    GPUVM_ASSIGN_OR_RETURN(staging, Staging(bytes));
  }
  const uint64_t half = staging->size / 2;
  Fence pending[2] = {{chid_, 0}, {chid_, 0}};
  const auto* in = static_cast<const uint8_t*>(src);
  for (uint64_t done = 0, i = 0; done < bytes; ++i) {
    const uint64_t n = std::min(half, bytes - done);
    Fence& slot = pending[i % 2];
    GPUVM_RETURN_IF_ERROR(Wait(slot, timeout));
    std::memcpy(staging->host + (i % 2) * half, in + done, n);
    std::lock_guard lock(mu_);
    PushBuffer pb;
    EmitCopy(pb, dst_va + done, staging->va + (i % 2) * half, n);
    GPUVM_ASSIGN_OR_RETURN(slot, Submit(pb));
    done += n;
  }
  GPUVM_RETURN_IF_ERROR(Wait(pending[0], timeout));
  return Wait(pending[1], timeout);
}

Status Channel::Impl::CopyDeviceToHost(void* dst, uint64_t src_va, uint64_t bytes) {
  GPUVM_RETURN_IF_ERROR(CheckUsable());
  if (dst == nullptr && bytes != 0) return Status::InvalidArgument("null host pointer");
  GPUVM_ASSIGN_OR_RETURN(auto src, ctx_->Lookup(src_va, bytes, false));
  if (bytes == 0) return Status::Ok();
  const auto timeout = ctx_->options().default_timeout;
  const uint64_t src_off = src_va - src->va;
  // Ordering as in CopyHostToDevice: a GPU copy's wait covers the channel's earlier work (one wait
  // instead of two: the first read after a kernel waits for the kernel and the copy at once).
  if (auto host = ctx_->LookupHost(dst, bytes)) {
    const uint64_t dst_va = host->va + (static_cast<uint8_t*>(dst) - host->host);
    GPUVM_ASSIGN_OR_RETURN(Fence f, CopyAsync(dst_va, src_va, bytes));
    return Wait(f, timeout);
  }
  if (!src->is_vram()) {
    GPUVM_RETURN_IF_ERROR(Synchronize(timeout));
    std::memmove(dst, src->host + src_off, bytes);
    return Status::Ok();
  }
  if (bytes <= ctx_->options().bar1_copy_threshold) {
    if (const uint64_t bar1 = ctx_->EnsureBar1(src.get())) {
      GPUVM_RETURN_IF_ERROR(Synchronize(timeout));
      GPUVM_RETURN_IF_ERROR(drv_->bus()->ReadBlock(Bar::k1, bar1 + src_off, dst, bytes));
      return ctx_->status();
    }
  }
  std::lock_guard staging_lock(staging_mu_);  // as in CopyHostToDevice
  std::shared_ptr<AllocRecord> staging;
  {
    std::lock_guard lock(mu_);
    GPUVM_ASSIGN_OR_RETURN(staging, Staging(bytes));
  }
  const uint64_t half = staging->size / 2;
  auto* out = static_cast<uint8_t*>(dst);
  // Copy chunk i into half i % 2; while it runs, drain chunk i - 1 from the other half.
  struct Chunk {
    Fence fence;
    uint64_t offset = 0;
    uint64_t length = 0;
  };
  Chunk previous;
  previous.fence.channel = chid_;
  for (uint64_t done = 0, i = 0;; ++i) {
    Chunk current;
    if (done < bytes) {
      current.offset = done;
      current.length = std::min(half, bytes - done);
      std::lock_guard lock(mu_);
      PushBuffer pb;
      EmitCopy(pb, staging->va + (i % 2) * half, src_va + done, current.length);
      GPUVM_ASSIGN_OR_RETURN(current.fence, Submit(pb));
      done += current.length;
    }
    if (previous.length > 0) {
      GPUVM_RETURN_IF_ERROR(Wait(previous.fence, timeout));
      std::memcpy(out + previous.offset, staging->host + ((i + 1) % 2) * half, previous.length);
    }
    if (current.length == 0) break;
    previous = current;
  }
  return Status::Ok();
}

// ---- compute
// --------------------------------------------------------------------------------------------

Result<Fence> Channel::Impl::Launch(const LaunchParams& p) {
  GPUVM_RETURN_IF_ERROR(CheckUsable());
  uint64_t threads = 1;
  for (int i = 0; i < 3; ++i) {
    if (p.grid[i] == 0 || p.grid[i] > kMaxGridDim[i]) {
      return Status::InvalidArgument("grid dimension " + std::to_string(i) + " is " +
                                     std::to_string(p.grid[i]) + ", must be 1.." +
                                     std::to_string(kMaxGridDim[i]));
    }
    if (p.block[i] == 0 || p.block[i] > kMaxBlockDim[i]) {
      return Status::InvalidArgument("block dimension " + std::to_string(i) + " is " +
                                     std::to_string(p.block[i]) + ", must be 1.." +
                                     std::to_string(kMaxBlockDim[i]));
    }
    threads *= p.block[i];
  }
  if (threads > kMaxThreadsPerBlock) {
    return Status::InvalidArgument("a block of " + std::to_string(threads) +
                                   " threads exceeds 1024");
  }
  // The image's shared_bytes may include a few bytes its translator added for itself on top of the
  // program's 48 KiB (isa::KernelHeader::internal_shared_bytes); the runtime checks the program's.
  if (p.shared_bytes > kMaxSharedBytesPerBlock + isa::kMaxInternalSharedBytes) {
    return Status::InvalidArgument("shared memory per block exceeds 48 KiB");
  }
  if (p.local_bytes_per_thread > kMaxLocalBytesPerThread) {
    return Status::InvalidArgument("local memory per thread exceeds 16 KiB");
  }
  if (p.params.size() > kMaxParamBytes) {
    return Status::InvalidArgument("kernel parameters exceed 4 KiB");
  }
  const uint64_t entry = p.code_address + p.entry_offset;
  if (entry < p.code_address) return Status::InvalidArgument("code address overflows");
  {
    // The image header (64 bytes) must lie in one device/code allocation of this context.
    GPUVM_ASSIGN_OR_RETURN(auto code, ctx_->Lookup(entry, 64, false));
    if (!code->is_vram()) return Status::InvalidArgument("kernel code must be in device memory");
  }
  uint32_t bank_seen = 1;  // bank 0 is the parameters
  for (const ConstBankBinding& b : p.banks) {
    if (b.index == 0 || b.index >= kConstBanks || (bank_seen & (1u << b.index))) {
      return Status::InvalidArgument("constant bank index " + std::to_string(b.index) +
                                     " is 0, past 15 or bound twice");
    }
    bank_seen |= 1u << b.index;
    if (b.size == 0 || b.size % 4 != 0 || b.size > (64u << 10)) {
      return Status::InvalidArgument("constant bank size must be a multiple of 4 up to 64 KiB");
    }
    GPUVM_ASSIGN_OR_RETURN(auto mem, ctx_->Lookup(b.va, b.size, false));
    (void)mem;
  }

  std::lock_guard lock(mu_);
  const uint64_t blocks = uint64_t(p.grid[0]) * p.grid[1] * p.grid[2];
  const uint64_t temp_bytes = p.local_bytes_per_thread == 0
                                  ? 0
                                  : AlignUp(uint64_t(p.local_bytes_per_thread) * threads *
                                                std::min<uint64_t>(blocks, kTempResidentBlocks),
                                            kPage);
  if (temp_bytes > 0 && (temp_ == nullptr || temp_->size < temp_bytes)) {
    // Grows rarely; earlier launches may still use the old backing.
    GPUVM_RETURN_IF_ERROR(WaitSequence(last_sequence_.load(), ctx_->options().default_timeout));
    if (temp_ != nullptr) (void)ctx_->Free(temp_->va, true);
    temp_.reset();
    GPUVM_ASSIGN_OR_RETURN(temp_, ctx_->AllocVram(temp_bytes, MemoryKind::kDevice, true));
  }

  PushBuffer pb;
  const uint64_t epoch = ctx_->code_epoch();
  if (epoch != code_epoch_seen_) {
    pb.Method(kSubcCompute, cp::kFlush, cp::kFlushCode);
    code_epoch_seen_ = epoch;
  }
  // Parameters: constant bank 0 at the channel's buffer, uploaded through CB_DATA, then bound.
  pb.Inc(kSubcCompute, cp::kCbSize, {kMaxParamBytes, Hi(cb_->va), Lo(cb_->va)});
  if (!p.params.empty()) {
    std::vector<uint32_t> words((p.params.size() + 3) / 4, 0);
    std::memcpy(words.data(), p.params.data(), p.params.size());
    pb.Method(kSubcCompute, cp::kCbPos, 0);
    pb.NonInc(kSubcCompute, cp::kCbData, words);
  }
  pb.Method(kSubcCompute, cp::kCbBind, cp::kCbBindValid);
  for (const ConstBankBinding& b : p.banks) {
    pb.Inc(kSubcCompute, cp::kCbSize, {b.size, Hi(b.va), Lo(b.va)});
    pb.Method(kSubcCompute, cp::kCbBind, cp::kCbBindValid | (b.index << cp::kCbBindIndexShift));
  }
  if (temp_bytes > 0) {
    pb.Inc(kSubcCompute, cp::kTempAddressHigh,
           {Hi(temp_->va), Lo(temp_->va), Hi(temp_->size), Lo(temp_->size)});
  }
  pb.Inc(kSubcCompute, cp::kGridDimYX, {p.grid[0] | (p.grid[1] << 16), p.grid[2]});
  pb.Method(kSubcCompute, cp::kSharedSize, p.shared_bytes);
  // BLOCKDIM_YX, BLOCKDIM_Z and CP_START_ID are consecutive (0x3ac-0x3b4).
  pb.Inc(kSubcCompute, cp::kBlockDimYX,
         {p.block[0] | (p.block[1] << 16), p.block[2], p.entry_offset});
  pb.Inc(kSubcCompute, cp::kCodeAddressHigh, {Hi(p.code_address), Lo(p.code_address)});
  pb.Method(kSubcCompute, cp::kLaunch, kLaunchData);
  // Gdev's launch ends with a compute QUERY: the sequence lands when the grid has finished.
  const uint32_t sequence = next_sequence_ == 0 ? 1 : next_sequence_;
  pb.Inc(kSubcCompute, cp::kQueryAddressHigh, {Hi(query_.va), Lo(query_.va), sequence, 0});
  return Submit(pb);
}

// ---- events
// ---------------------------------------------------------------------------------------------

Result<Fence> Channel::Impl::Record(Event::Impl* event) {
  GPUVM_RETURN_IF_ERROR(CheckUsable());
  if (event == nullptr || event->context() != ctx_) {
    return Status::InvalidArgument("the event belongs to another context");
  }
  std::lock_guard lock(mu_);
  const uint32_t sequence = event->NextSequence();
  const ReportSlot& slot = event->slot();
  PushBuffer pb;
  // A 16-byte report: the payload and the GPU timestamp (cuEventElapsedTime).
  pb.Inc(0, host::kSemaphoreA, {Hi(slot.va), Lo(slot.va), sequence, host::kSemOpRelease});
  GPUVM_ASSIGN_OR_RETURN(Fence f, Submit(pb));
  event->Recorded(sequence);
  return f;
}

Status Channel::Impl::WaitEvent(Event::Impl* event) {
  GPUVM_RETURN_IF_ERROR(CheckUsable());
  if (event == nullptr || event->context() != ctx_) {
    return Status::InvalidArgument("the event belongs to another context");
  }
  const uint32_t target = event->target();
  if (target == 0) return Status::Ok();
  std::lock_guard lock(mu_);
  const ReportSlot& slot = event->slot();
  PushBuffer pb;
  pb.Inc(0, host::kSemaphoreA,
         {Hi(slot.va), Lo(slot.va), target, host::kSemOpAcqGeq | host::kSemAcquireSwitch});
  GPUVM_ASSIGN_OR_RETURN(Fence f, Submit(pb));
  (void)f;
  return Status::Ok();
}

// ---- Channel
// --------------------------------------------------------------------------------------------

Channel::Channel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Channel::~Channel() = default;

uint32_t Channel::id() const { return impl_->id(); }
Context* Channel::context() const { return impl_->context()->owner(); }

Result<Fence> Channel::CopyAsync(uint64_t dst_va, uint64_t src_va, uint64_t bytes) {
  return impl_->CopyAsync(dst_va, src_va, bytes);
}
Result<Fence> Channel::Copy2DAsync(const Copy2D& copy) { return impl_->Copy2DAsync(copy); }
Result<Fence> Channel::Memset2DAsync(uint64_t dst_va, uint64_t pitch, uint32_t pattern,
                                     uint64_t width, uint64_t height) {
  return impl_->Memset2D(dst_va, pitch, pattern, width, height);
}

Result<Fence> Channel::Memset8Async(uint64_t dst_va, uint8_t value, uint64_t count) {
  return impl_->Memset(dst_va, uint32_t(value) * 0x01010101u, count);
}

Result<Fence> Channel::Memset32Async(uint64_t dst_va, uint32_t value, uint64_t count) {
  if (dst_va % 4 != 0) return Status::InvalidArgument("Memset32 needs a 4-byte aligned address");
  if (count > (1ull << 40)) return Status::OutOfRange("Memset32 count too large");
  return impl_->Memset(dst_va, value, count * 4);
}

Result<Fence> Channel::Launch(const LaunchParams& params) { return impl_->Launch(params); }
Result<Fence> Channel::SubmitSegments(std::span<const CommandSegment> segments) {
  return impl_->SubmitSegments(segments);
}

Result<Fence> Channel::Record(Event* event) {
  if (event == nullptr) return Status::InvalidArgument("null event");
  return impl_->Record(event->impl());
}

Status Channel::WaitEvent(const Event* event) {
  if (event == nullptr) return Status::InvalidArgument("null event");
  return impl_->WaitEvent(const_cast<Event*>(event)->impl());
}

Status Channel::CopyHostToDevice(uint64_t dst_va, const void* src, uint64_t bytes) {
  return impl_->CopyHostToDevice(dst_va, src, bytes);
}

Status Channel::CopyDeviceToHost(void* dst, uint64_t src_va, uint64_t bytes) {
  return impl_->CopyDeviceToHost(dst, src_va, bytes);
}

Result<bool> Channel::IsDone(Fence fence) { return impl_->IsDone(fence); }
Status Channel::Wait(Fence fence) {
  return impl_->Wait(fence, impl_->context()->options().default_timeout);
}
Status Channel::Wait(Fence fence, std::chrono::nanoseconds timeout) {
  return impl_->Wait(fence, timeout);
}
Status Channel::Synchronize() {
  return impl_->Synchronize(impl_->context()->options().default_timeout);
}
Status Channel::Synchronize(std::chrono::nanoseconds timeout) {
  return impl_->Synchronize(timeout);
}
Fence Channel::last_fence() const { return impl_->last_fence(); }

}  // namespace gpuvm::guest
