#include "guest-pv-driver/pv_calls.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

namespace gpuvm::guest {

namespace {

using pv::CallResult;

const char* OpName(pv::Op op) {
  switch (op) {
    case pv::Op::kAttach:
      return "ATTACH";
    case pv::Op::kDetach:
      return "DETACH";
    case pv::Op::kWrite:
      return "WRITE";
    case pv::Op::kWriteLinear:
      return "WRITE_LINEAR";
    case pv::Op::kClear:
      return "CLEAR";
    case pv::Op::kFlush:
      return "FLUSH";
    case pv::Op::kBarWrite:
      return "BAR_WRITE";
    case pv::Op::kBarFill:
      return "BAR_FILL";
  }
  return "?";
}

// docs/PARAVIRT.md, "Result codes".
Status ToStatus(CallResult result, pv::Op op) {
  const std::string what = std::string("para-virtual ") + OpName(op) +
                           " refused by the host: " + std::string(pv::CallResultName(result));
  switch (result) {
    case CallResult::kOk:
      return Status::Ok();
    case CallResult::kOutOfTable:
      return Status::OutOfRange(what);
    case CallResult::kNotRegistered:
      return Status::NotFound(what);
    case CallResult::kConflict:
    case CallResult::kBusy:
    case CallResult::kNoArea:
      return Status::FailedPrecondition(what);
    case CallResult::kNotInVram:
    case CallResult::kNotMapped:
    case CallResult::kForeignVram:
    case CallResult::kForeignSysram:
    case CallResult::kBadEntry:
      return Status::InvalidArgument(what);
    case CallResult::kExhausted:
      return Status::ResourceExhausted(what);
    default:
      return Status::Internal(what);
  }
}

pv::SpaceKind KindOf(SpaceKind kind) {
  switch (kind) {
    case SpaceKind::kBar1:
      return pv::SpaceKind::kBar1;
    case SpaceKind::kBar3:
      return pv::SpaceKind::kBar3;
    case SpaceKind::kChannel:
      break;
  }
  return pv::SpaceKind::kChannel;
}

// Consecutive entries from `at` that differ by one constant step.
size_t LinearRun(std::span<const uint64_t> e, size_t at) {
  if (at + 1 >= e.size()) return e.size() - at;
  const uint64_t step = e[at + 1] - e[at];
  size_t n = 2;
  while (at + n < e.size() && e[at + n] - e[at + n - 1] == step) ++n;
  return n;
}

// (our choice) runs shorter than this go as literal entries: a WRITE_LINEAR is 64 bytes, a WRITE
// 48 + 8 per entry.
constexpr size_t kMinLinearRun = 4;

}  // namespace

Result<std::unique_ptr<PvCalls>> PvCalls::Open(Bus* bus) {
  if (bus->ReadReg(pv::kRegId) != pv::kIdValue) {
    return Status::NotFound("the device has no para-virtual window");
  }
  const uint32_t version = bus->ReadReg(pv::kRegVersion);
  if (version != pv::kVersion) {
    return Status::FailedPrecondition("the device speaks para-virtual call version " +
                                      std::to_string(version) + ", not " +
                                      std::to_string(pv::kVersion));
  }
  const uint32_t mode = bus->ReadReg(pv::kRegMode);
  if (mode != uint32_t(pv::Mode::kNaive) && mode != uint32_t(pv::Mode::kMulticall)) {
    return Status::FailedPrecondition("unknown para-virtual mode " + std::to_string(mode));
  }
  const uint32_t pages = std::min(bus->ReadReg(pv::kRegAreaMaxPages), pv::kMaxAreaPages);
  if (pages == 0) return Status::FailedPrecondition("the device offers no call area");
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<DmaMapping> area, bus->AllocDma(pages * pv::kPageBytes));
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<DmaMapping> list, bus->AllocDma(pv::kPageBytes));
  for (uint32_t i = 0; i < pages; ++i) {
    const uint64_t page = area->PageBusAddress(i * pv::kPageBytes);
    std::memcpy(list->host() + 8 * i, &page, 8);
  }
  std::atomic_thread_fence(std::memory_order_release);
  const uint64_t at = list->PageBusAddress(0);
  bus->WriteReg(pv::kRegAreaListLo, uint32_t(at));
  bus->WriteReg(pv::kRegAreaListHi, uint32_t(at >> 32));
  bus->WriteReg(pv::kRegAreaPages, pages);
  const uint32_t status = bus->ReadReg(pv::kRegAreaStatus);
  if (status != 0) {
    return Status::FailedPrecondition(
        "the host refused the para-virtual call area: " +
        std::string(pv::CallResultName(static_cast<CallResult>(status))));
  }
  return std::unique_ptr<PvCalls>(
      new PvCalls(bus, static_cast<pv::Mode>(mode), std::move(area), std::move(list), pages));
}

PvCalls::PvCalls(Bus* bus, pv::Mode mode, std::unique_ptr<DmaMapping> area,
                 std::unique_ptr<DmaMapping> list, uint32_t pages)
    : bus_(bus),
      mode_(mode),
      area_(std::move(area)),
      list_(std::move(list)),
      pages_(pages),
      batch_(pages * pv::kPageBytes) {}

PvCalls::~PvCalls() {
  {
    std::lock_guard lock(mu_);
    if (!batch_.empty()) (void)Ring();
  }
  bus_->WriteReg(pv::kRegAreaPages, 0);  // before the area's memory goes back to the guest
}

PvCounters PvCalls::counters() const {
  return {calls_.load(std::memory_order_relaxed), doorbells_.load(std::memory_order_relaxed)};
}

void PvCalls::Sync() {
  std::lock_guard lock(mu_);
  if (batch_.empty()) return;
  Status s = Ring();
  if (!s.ok() && deferred_.ok()) deferred_ = s;
}

Status PvCalls::Commit() {
  std::lock_guard lock(mu_);
  Status s = batch_.empty() ? Status::Ok() : Ring();
  if (!deferred_.ok()) {
    s = deferred_;
    deferred_ = Status::Ok();
  }
  return s;
}

Status PvCalls::Room(uint32_t bytes, uint64_t entries) {
  if (batch_.Fits(bytes, entries)) return Status::Ok();
  if (batch_.empty()) return Status::Internal("a para-virtual call larger than the call area");
  // The area is full: what is queued goes now; a refusal among it belongs to the next Commit.
  if (Status s = Ring(); !s.ok() && deferred_.ok()) deferred_ = s;
  return batch_.Fits(bytes, entries)
             ? Status::Ok()
             : Status::Internal("a para-virtual call larger than the call area");
}

Status PvCalls::Appended(uint32_t offset, uint64_t entries) {
  ops_.push_back({offset, entries});
  pending_.store(true, std::memory_order_release);
  if (mode_ == pv::Mode::kNaive) return Ring();
  return Status::Ok();
}

Status PvCalls::Ring() {
  Status first = Status::Ok();
  while (!batch_.empty()) {
    Status s = RingOnce();
    if (first.ok()) first = s;
  }
  pending_.store(false, std::memory_order_release);
  return first;
}

Status PvCalls::RingOnce() {
  std::span<const uint8_t> bytes = batch_.Finish();
  std::memcpy(area_->host(), bytes.data(), bytes.size());
  std::atomic_thread_fence(std::memory_order_release);
  bus_->WriteReg(pv::kRegDoorbell, uint32_t(bytes.size()));  // the host answers before it returns
  std::atomic_thread_fence(std::memory_order_acquire);
  doorbells_.fetch_add(1, std::memory_order_relaxed);
  // The answers, from our own memory (no trap): the header's status and done, each op's result.
  const std::span<const uint8_t> answered(area_->host(), bytes.size());
  const CallResult status = pv::BatchStatus(answered);
  const uint32_t done = pv::BatchDone(answered);
  Status result = Status::Ok();
  // The calls after a refused one were not run: they go again in the next batch (each call stands
  // alone, as in pv-naive), unless the batch itself was refused (a driver bug: nothing to retry).
  size_t resend = ops_.size();
  if (status != CallResult::kOk || done != ops_.size()) {
    result = Status::Unavailable("the host did not answer the para-virtual batch (done " +
                                 std::to_string(done) + " of " + std::to_string(ops_.size()) + ")");
    if (status != CallResult::kOk) {
      result = ToStatus(status, pv::Op::kFlush);
      for (size_t i = 0; i < ops_.size(); ++i) {
        const CallResult r = pv::ResultAt(answered, ops_[i].offset);
        if (r == CallResult::kOk || r == CallResult::kNotRun) continue;
        uint16_t code = 0;
        std::memcpy(&code, bytes.data() + ops_[i].offset + pv::kOpCode, 2);
        result = ToStatus(r, static_cast<pv::Op>(code));
        if (status != CallResult::kBadBatch && status != CallResult::kBadOp && i == done) {
          resend = i + 1;
        }
        break;
      }
    }
  }
  calls_.fetch_add(std::min<uint64_t>(done, ops_.size()), std::memory_order_relaxed);
  std::vector<uint8_t> rest;
  std::vector<Queued> rest_ops;
  if (resend < ops_.size()) {
    rest.assign(bytes.begin() + ops_[resend].offset, bytes.end());
    for (size_t i = resend; i < ops_.size(); ++i) {
      rest_ops.push_back({ops_[i].offset - ops_[resend].offset, ops_[i].entries});
    }
  }
  batch_.Reset();
  ops_.clear();
  for (size_t i = 0; i < rest_ops.size(); ++i) {
    const uint32_t end = i + 1 < rest_ops.size() ? rest_ops[i + 1].offset : uint32_t(rest.size());
    const std::span<const uint8_t> op(rest.data() + rest_ops[i].offset, end - rest_ops[i].offset);
    ops_.push_back({batch_.Append(op, rest_ops[i].entries), rest_ops[i].entries});
  }
  return result;
}

Status PvCalls::Attach(uint64_t directory, uint64_t limit, pv::SpaceKind kind) {
  std::lock_guard lock(mu_);
  GPUVM_RETURN_IF_ERROR(Room(pv::kAttachBytes, 0));
  return Appended(batch_.Attach(directory, limit, kind), 0);
}

Status PvCalls::Detach(uint64_t directory) {
  std::lock_guard lock(mu_);
  GPUVM_RETURN_IF_ERROR(Room(pv::kDetachBytes, 0));
  return Appended(batch_.Detach(directory), 0);
}

Status PvCalls::Write(uint64_t space, uint64_t table, uint64_t first,
                      std::span<const uint64_t> entries) {
  std::lock_guard lock(mu_);
  const uint64_t max_literal = batch_.MaxWriteEntries();
  for (size_t i = 0; i < entries.size();) {
    const size_t run = LinearRun(entries, i);
    if (run >= kMinLinearRun) {
      // Consecutive pages (or one value repeated): one call however many entries.
      const uint32_t n = uint32_t(std::min<uint64_t>(run, pv::kMaxBatchEntries));
      GPUVM_RETURN_IF_ERROR(Room(pv::kWriteLinearBytes, n));
      GPUVM_RETURN_IF_ERROR(Appended(batch_.WriteLinear(space, table, first + i, n, entries[i],
                                                        n > 1 ? entries[i + 1] - entries[i] : 0),
                                     n));
      i += n;
      continue;
    }
    // Literal entries up to where a linear run starts.
    size_t end = i + run;
    while (end < entries.size() && LinearRun(entries, end) < kMinLinearRun) ++end;
    while (i < end) {
      const uint32_t n = uint32_t(std::min<uint64_t>(end - i, max_literal));
      GPUVM_RETURN_IF_ERROR(Room(pv::OpBytes(pv::Op::kWrite, n), n));
      GPUVM_RETURN_IF_ERROR(
          Appended(batch_.Write(space, table, first + i, entries.subspan(i, n)), n));
      i += n;
    }
  }
  return Status::Ok();
}

Status PvCalls::Clear(uint64_t space, uint64_t table, uint64_t first, uint64_t count) {
  std::lock_guard lock(mu_);
  for (uint64_t done = 0; done < count;) {
    const uint32_t n = uint32_t(std::min<uint64_t>(count - done, pv::kMaxBatchEntries));
    GPUVM_RETURN_IF_ERROR(Room(pv::kClearBytes, n));
    GPUVM_RETURN_IF_ERROR(Appended(batch_.Clear(space, table, first + done, n), n));
    done += n;
  }
  return Status::Ok();
}

Status PvCalls::Flush(uint64_t space) {
  std::lock_guard lock(mu_);
  GPUVM_RETURN_IF_ERROR(Room(pv::kFlushBytes, 0));
  return Appended(batch_.Flush(space), 0);
}

Status PvCalls::BarWrite(uint32_t bar, uint64_t offset, std::span<const uint8_t> data) {
  std::lock_guard lock(mu_);
  const uint32_t bytes = uint32_t(data.size());
  GPUVM_RETURN_IF_ERROR(Room(pv::OpBytes(pv::Op::kBarWrite, bytes), pv::BarStoreEntries(bytes)));
  return Appended(batch_.BarWrite(bar, offset, data), pv::BarStoreEntries(bytes));
}

Status PvCalls::BarFill(uint32_t bar, uint64_t offset, uint64_t bytes, uint32_t pattern) {
  std::lock_guard lock(mu_);
  for (uint64_t done = 0; done < bytes;) {
    const uint32_t n = uint32_t(std::min<uint64_t>(bytes - done, pv::kMaxBarStoreBytes));
    GPUVM_RETURN_IF_ERROR(Room(pv::kBarFillBytes, pv::BarStoreEntries(n)));
    GPUVM_RETURN_IF_ERROR(
        Appended(batch_.BarFill(bar, offset + done, n, pattern), pv::BarStoreEntries(n)));
    done += n;
  }
  return Status::Ok();
}

// ---- PvPageTableWriter ----

Status PvPageTableWriter::AttachSpace(const PageTableRef& directory, uint64_t limit) {
  return calls_->Attach(directory.vram, limit, KindOf(directory.kind));
}

Status PvPageTableWriter::DetachSpace(const PageTableRef& directory) {
  return calls_->Detach(directory.vram);
}

Status PvPageTableWriter::WriteEntries(const PageTableRef& space, const PageTableRef& table,
                                       uint64_t first, std::span<const uint64_t> entries) {
  if (first > table.entries || entries.size() > table.entries - first) {
    return Status::Internal("page-table write past the end of its table");
  }
  return calls_->Write(space.vram, table.vram, first, entries);
}

Status PvPageTableWriter::ClearEntries(const PageTableRef& space, const PageTableRef& table,
                                       uint64_t first, uint64_t count) {
  if (first > table.entries || count > table.entries - first) {
    return Status::Internal("page-table write past the end of its table");
  }
  return calls_->Clear(space.vram, table.vram, first, count);
}

Status PvPageTableWriter::Flush(const PageTableRef& space) { return calls_->Flush(space.vram); }

Status PvPageTableWriter::Commit() { return calls_->Commit(); }

// ---- PvSyncBus ----

uint64_t PvSyncBus::Read(Bar bar, uint64_t offset, Width width) {
  Sync();
  return inner_->Read(bar, offset, width);
}

void PvSyncBus::Write(Bar bar, uint64_t offset, Width width, uint64_t value) {
  const uint32_t word = uint32_t(value);
  if (bar == Bar::k0 && width == Width::k32 && RegisterCallable(offset, 4)) {
    (void)calls_->BarWrite(0, offset, std::span(reinterpret_cast<const uint8_t*>(&word), 4));
    return;
  }
  Sync();
  inner_->Write(bar, offset, width, value);
}

Status PvSyncBus::ReadBlock(Bar bar, uint64_t offset, void* dst, uint64_t length) {
  Sync();
  return inner_->ReadBlock(bar, offset, dst, length);
}

// An aperture store the call area can carry: BAR1/BAR3, whole 4-byte words.
bool PvSyncBus::Callable(Bar bar, uint64_t offset, uint64_t length, uint64_t max) {
  return (bar == Bar::k1 || bar == Bar::k3) && offset % 4 == 0 && length % 4 == 0 && length != 0 &&
         length <= max;
}

Status PvSyncBus::WriteBlock(Bar bar, uint64_t offset, const void* src, uint64_t length) {
  if (Callable(bar, offset, length, kMaxCallWrite)) {
    return calls_->BarWrite(bar == Bar::k1 ? 1 : 3, offset,
                            std::span(static_cast<const uint8_t*>(src), length));
  }
  Sync();
  return inner_->WriteBlock(bar, offset, src, length);
}

Status PvSyncBus::FillBlock(Bar bar, uint64_t offset, uint8_t byte, uint64_t length) {
  if (Callable(bar, offset, length, kMaxCallFill)) {
    return calls_->BarFill(bar == Bar::k1 ? 1 : 3, offset, length, byte * 0x01010101u);
  }
  Sync();
  return inner_->FillBlock(bar, offset, byte, length);
}

void PvSyncBus::WriteRegs(uint64_t offset, std::span<const uint32_t> values) {
  if (RegisterCallable(offset, values.size_bytes())) {
    (void)calls_->BarWrite(
        0, offset, std::span(reinterpret_cast<const uint8_t*>(values.data()), values.size_bytes()));
    return;
  }
  Sync();
  inner_->WriteRegs(offset, values);
}

// A register (or PRAMIN) store joins the queue only behind something queued — in order, instead
// of ringing; with nothing queued it goes to the device as it is.
bool PvSyncBus::RegisterCallable(uint64_t offset, uint64_t length) {
  return calls_->pending() && offset % 4 == 0 && length != 0 && length % 4 == 0 &&
         length <= kMaxCallWrite &&
         (offset >= pv::kWindow + pv::kWindowSize || offset + length <= pv::kWindow);
}

}  // namespace gpuvm::guest
