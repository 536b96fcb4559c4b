#include "pv/call_page.h"

#include <cstring>

#include "gpu/hw/vm.h"

namespace gpuvm::pv {

namespace vm = gf100::vm;

namespace {

constexpr uint64_t kTagMask = 0x1ffffull << 44;  // PTE bits 44-60: compression tag
constexpr int kLargePageShift = vm::kLargePageShift128K;

uint16_t Load16(std::span<const uint8_t> b, size_t at) {
  uint16_t v;
  std::memcpy(&v, b.data() + at, 2);
  return v;
}
uint32_t Load32(std::span<const uint8_t> b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}
uint64_t Load64(std::span<const uint8_t> b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}

bool Inside(uint64_t address, uint64_t length, uint64_t size) {
  return length <= size && address <= size - length;
}

}  // namespace

std::string_view CallResultName(CallResult result) {
  static constexpr std::string_view kNames[kResultCount] = {
      "OK",           "NOT_RUN",        "BAD_BATCH",      "BAD_OP",
      "OUT_OF_TABLE", "NOT_IN_VRAM",    "NOT_REGISTERED", "CONFLICT",
      "FOREIGN_VRAM", "FOREIGN_SYSRAM", "BAD_ENTRY",      "BUSY",
      "EXHAUSTED",    "NO_AREA",        "BAD_AREA",       "NOT_MAPPED"};
  const uint32_t i = static_cast<uint32_t>(result);
  return i < kResultCount ? kNames[i] : "UNKNOWN";
}

uint32_t OpBytes(Op op, uint32_t count) {
  switch (op) {
    case Op::kAttach:
      return kAttachBytes;
    case Op::kDetach:
      return kDetachBytes;
    case Op::kWrite:
      return kWriteFixedBytes + 8 * count;
    case Op::kWriteLinear:
      return kWriteLinearBytes;
    case Op::kClear:
      return kClearBytes;
    case Op::kFlush:
      return kFlushBytes;
    case Op::kBarWrite:
      return kBarWriteFixedBytes + (count + 7) / 8 * 8;
    case Op::kBarFill:
      return kBarFillBytes;
  }
  return 0;
}

uint64_t BarStoreEntries(uint32_t bytes) { return (uint64_t{bytes} + 7) / 8; }

// ---- BatchBuilder ----

BatchBuilder::BatchBuilder(size_t capacity) : capacity_(capacity) { Reset(); }

void BatchBuilder::Reset() {
  bytes_.assign(kHeaderBytes, 0);
  ops_ = 0;
  entries_ = 0;
}

bool BatchBuilder::Fits(uint32_t op_bytes, uint64_t entries) const {
  return ops_ < kMaxOps && bytes_.size() + op_bytes <= capacity_ &&
         entries_ + entries <= kMaxBatchEntries;
}

uint32_t BatchBuilder::MaxWriteEntries() const {
  if (capacity_ < kHeaderBytes + kWriteFixedBytes + 8) return 0;
  const uint64_t n = (capacity_ - kHeaderBytes - kWriteFixedBytes) / 8;
  return uint32_t(n < kMaxBatchEntries ? n : kMaxBatchEntries);
}

void BatchBuilder::Put64(uint64_t v) {
  const size_t at = bytes_.size();
  bytes_.resize(at + 8);
  std::memcpy(bytes_.data() + at, &v, 8);
}

void BatchBuilder::Put32(uint32_t v) {
  const size_t at = bytes_.size();
  bytes_.resize(at + 4);
  std::memcpy(bytes_.data() + at, &v, 4);
}

uint32_t BatchBuilder::Begin(Op op, uint32_t length) {
  const uint32_t at = uint32_t(bytes_.size());
  const uint16_t code = static_cast<uint16_t>(op);
  bytes_.resize(at + kOpHeaderBytes, 0);
  std::memcpy(bytes_.data() + at + kOpCode, &code, 2);
  std::memcpy(bytes_.data() + at + kOpLength, &length, 4);
  ++ops_;
  return at;
}

uint32_t BatchBuilder::Attach(uint64_t directory, uint64_t limit, SpaceKind kind) {
  const uint32_t at = Begin(Op::kAttach, kAttachBytes);
  Put64(directory);
  Put64(limit);
  Put32(static_cast<uint32_t>(kind));
  Put32(0);
  return at;
}

uint32_t BatchBuilder::Detach(uint64_t directory) {
  const uint32_t at = Begin(Op::kDetach, kDetachBytes);
  Put64(directory);
  return at;
}

uint32_t BatchBuilder::Write(uint64_t space, uint64_t table, uint64_t first,
                             std::span<const uint64_t> entries) {
  const uint32_t count = uint32_t(entries.size());
  const uint32_t at = Begin(Op::kWrite, OpBytes(Op::kWrite, count));
  Put64(space);
  Put64(table);
  Put64(first);
  Put32(count);
  Put32(0);
  const size_t data = bytes_.size();
  bytes_.resize(data + 8 * size_t{count});
  if (count != 0) std::memcpy(bytes_.data() + data, entries.data(), 8 * size_t{count});
  entries_ += count;
  return at;
}

uint32_t BatchBuilder::WriteLinear(uint64_t space, uint64_t table, uint64_t first, uint32_t count,
                                   uint64_t value, uint64_t step) {
  const uint32_t at = Begin(Op::kWriteLinear, kWriteLinearBytes);
  Put64(space);
  Put64(table);
  Put64(first);
  Put32(count);
  Put32(0);
  Put64(value);
  Put64(step);
  entries_ += count;
  return at;
}

uint32_t BatchBuilder::Clear(uint64_t space, uint64_t table, uint64_t first, uint32_t count) {
  const uint32_t at = Begin(Op::kClear, kClearBytes);
  Put64(space);
  Put64(table);
  Put64(first);
  Put32(count);
  Put32(0);
  entries_ += count;
  return at;
}

uint32_t BatchBuilder::Flush(uint64_t space) {
  const uint32_t at = Begin(Op::kFlush, kFlushBytes);
  Put64(space);
  return at;
}

uint32_t BatchBuilder::BeginBarStore(Op op, uint32_t length, uint32_t bar, uint64_t offset,
                                     uint32_t bytes) {
  const uint32_t at = Begin(op, length);
  Put64(offset);
  Put32(bar);
  Put32(bytes);
  entries_ += BarStoreEntries(bytes);
  return at;
}

uint32_t BatchBuilder::BarWrite(uint32_t bar, uint64_t offset, std::span<const uint8_t> data) {
  const uint32_t bytes = uint32_t(data.size());
  const uint32_t at =
      BeginBarStore(Op::kBarWrite, OpBytes(Op::kBarWrite, bytes), bar, offset, bytes);
  const size_t start = bytes_.size();
  bytes_.resize(start + (bytes + 7) / 8 * 8, 0);
  if (bytes != 0) std::memcpy(bytes_.data() + start, data.data(), bytes);
  return at;
}

uint32_t BatchBuilder::BarFill(uint32_t bar, uint64_t offset, uint32_t bytes, uint32_t pattern) {
  const uint32_t at = BeginBarStore(Op::kBarFill, kBarFillBytes, bar, offset, bytes);
  Put32(pattern);
  Put32(0);
  return at;
}

uint32_t BatchBuilder::Append(std::span<const uint8_t> op, uint64_t entries) {
  const uint32_t at = uint32_t(bytes_.size());
  bytes_.insert(bytes_.end(), op.begin(), op.end());
  std::memset(bytes_.data() + at + kOpResult, 0, 4);
  ++ops_;
  entries_ += entries;
  return at;
}

std::span<const uint8_t> BatchBuilder::Finish() {
  const uint32_t magic = kBatchMagic;
  const uint16_t version = kVersion;
  const uint32_t length = uint32_t(bytes_.size());
  std::memcpy(bytes_.data() + kHeaderMagic, &magic, 4);
  std::memcpy(bytes_.data() + kHeaderVersion, &version, 2);
  std::memcpy(bytes_.data() + kHeaderOpCount, &ops_, 4);
  std::memcpy(bytes_.data() + kHeaderLength, &length, 4);
  return bytes_;
}

CallResult ResultAt(std::span<const uint8_t> batch, uint32_t op_offset) {
  if (uint64_t{op_offset} + kOpHeaderBytes > batch.size()) return CallResult::kNotRun;
  return static_cast<CallResult>(Load32(batch, op_offset + kOpResult));
}

CallResult BatchStatus(std::span<const uint8_t> batch) {
  if (batch.size() < kHeaderBytes) return CallResult::kBadBatch;
  return static_cast<CallResult>(Load32(batch, kHeaderStatus));
}

uint32_t BatchDone(std::span<const uint8_t> batch) {
  return batch.size() < kHeaderBytes ? 0 : Load32(batch, kHeaderDone);
}

// ---- decoding ----

uint64_t EntryOf(const Call& call, std::span<const uint8_t> batch, uint32_t i) {
  switch (call.op) {
    case Op::kWrite:
      return Load64(batch, call.entries_offset + size_t{i} * 8);
    case Op::kWriteLinear:
      return call.value + uint64_t{i} * call.step;
    default:
      return 0;
  }
}

CallResult CheckBatchLength(uint64_t length, uint64_t area_bytes) {
  if (length < kHeaderBytes || length % 8 != 0 || length > area_bytes) {
    return CallResult::kBadBatch;
  }
  return CallResult::kOk;
}

DecodedBatch DecodeBatch(std::span<const uint8_t> batch) {
  DecodedBatch d;
  auto bad_batch = [&](std::string why) {
    d.status = CallResult::kBadBatch;
    d.bad_offset = -1;
    d.error = "bad batch: " + why;
    return d;
  };
  if (batch.size() < kHeaderBytes || batch.size() % 8 != 0) {
    return bad_batch("length " + std::to_string(batch.size()) +
                     " is not a whole number of 8-byte words of at least a header");
  }
  if (Load32(batch, kHeaderMagic) != kBatchMagic) return bad_batch("wrong magic");
  if (Load16(batch, kHeaderVersion) != kVersion) {
    return bad_batch("version " + std::to_string(Load16(batch, kHeaderVersion)) + ", not " +
                     std::to_string(kVersion));
  }
  if (Load16(batch, kHeaderFlags) != 0 || Load64(batch, kHeaderReserved) != 0 ||
      Load32(batch, kHeaderStatus) != 0 || Load32(batch, kHeaderDone) != 0) {
    return bad_batch("flags, status, done or reserved bits set");
  }
  const uint32_t op_count = Load32(batch, kHeaderOpCount);
  if (op_count == 0 || op_count > kMaxOps) {
    return bad_batch("op count " + std::to_string(op_count) + " (1.." + std::to_string(kMaxOps) +
                     ")");
  }
  if (Load32(batch, kHeaderLength) != batch.size()) {
    return bad_batch("the header's length " + std::to_string(Load32(batch, kHeaderLength)) +
                     " is not the doorbell's " + std::to_string(batch.size()));
  }
  d.calls.reserve(op_count);
  uint64_t at = kHeaderBytes;
  uint64_t entries = 0;
  for (uint32_t n = 0; n < op_count; ++n) {
    auto bad_op = [&](std::string why) {
      d.status = CallResult::kBadOp;
      d.bad_offset = int64_t(at);
      d.error = "op " + std::to_string(n) + " at " + std::to_string(at) + ": " + why;
      return d;
    };
    if (at + kOpHeaderBytes > batch.size()) {
      return bad_batch("op " + std::to_string(n) + " of " + std::to_string(op_count) +
                       " starts past the batch");
    }
    const uint16_t code = Load16(batch, at + kOpCode);
    const uint32_t length = Load32(batch, at + kOpLength);
    if (Load16(batch, at + kOpFlags) != 0 || Load32(batch, at + kOpReserved) != 0 ||
        Load32(batch, at + kOpResult) != 0) {
      return bad_op("flags, result or reserved bits set");
    }
    if (code < static_cast<uint16_t>(Op::kAttach) || code > static_cast<uint16_t>(Op::kBarFill)) {
      return bad_op("unknown opcode " + std::to_string(code));
    }
    Call c;
    c.op = static_cast<Op>(code);
    c.offset = uint32_t(at);
    // The fixed part must be there before any field of it is read.
    const bool variable = c.op == Op::kWrite || c.op == Op::kBarWrite;
    const uint32_t fixed = c.op == Op::kWrite ? kWriteFixedBytes : OpBytes(c.op);
    if (length < fixed || length % 8 != 0 || at + length > batch.size()) {
      return bad_op("length " + std::to_string(length) + " (the op needs " + std::to_string(fixed) +
                    (variable ? " + its data" : "") + " within the batch)");
    }
    const uint64_t p = at + kOpHeaderBytes;
    c.space = Load64(batch, p);
    switch (c.op) {
      case Op::kAttach: {
        c.limit = Load64(batch, p + 8);
        const uint32_t kind = Load32(batch, p + 16);
        if (Load32(batch, p + 20) != 0) return bad_op("reserved bits set");
        if (kind != static_cast<uint32_t>(SpaceKind::kChannel) &&
            kind != static_cast<uint32_t>(SpaceKind::kBar1) &&
            kind != static_cast<uint32_t>(SpaceKind::kBar3)) {
          return bad_op("space kind " + std::to_string(kind) + " (0, 1 or 3)");
        }
        c.kind = static_cast<SpaceKind>(kind);
        if (c.limit >= vm::kVaLimit) return bad_op("limit past 40 bits");
        break;
      }
      case Op::kDetach:
      case Op::kFlush:
        break;
      case Op::kWrite:
      case Op::kWriteLinear:
      case Op::kClear: {
        c.table = Load64(batch, p + 8);
        c.first = Load64(batch, p + 16);
        c.count = Load32(batch, p + 24);
        if (Load32(batch, p + 28) != 0) return bad_op("reserved bits set");
        if (c.count == 0) return bad_op("count 0");
        if (c.op == Op::kWrite) {
          if (uint64_t{length} != kWriteFixedBytes + 8 * uint64_t{c.count}) {
            return bad_op("count " + std::to_string(c.count) + " entries do not fill its length " +
                          std::to_string(length));
          }
          c.entries_offset = uint32_t(p + kWriteFixedBytes - kOpHeaderBytes);
        } else if (c.op == Op::kWriteLinear) {
          c.value = Load64(batch, p + 32);
          c.step = Load64(batch, p + 40);
        }
        if (c.table % vm::kEntrySize != 0) return bad_op("table address not 8-byte aligned");
        entries += c.count;
        if (entries > kMaxBatchEntries) {
          return bad_batch("more than " + std::to_string(kMaxBatchEntries) + " entries");
        }
        break;
      }
      case Op::kBarWrite:
      case Op::kBarFill: {
        c.space = 0;
        c.first = Load64(batch, p);
        c.bar = Load32(batch, p + 8);
        c.count = Load32(batch, p + 12);
        if (c.bar != 1 && c.bar != 3 && (c.bar != 0 || c.op != Op::kBarWrite)) {
          return bad_op("BAR " + std::to_string(c.bar) + " (1 or 3; BAR_WRITE also 0)");
        }
        if (c.first % 4 != 0 || c.count % 4 != 0 || c.count == 0 || c.count > kMaxBarStoreBytes) {
          return bad_op("an aperture store of " + std::to_string(c.count) + " bytes at " +
                        std::to_string(c.first) + " (4-byte words, at most " +
                        std::to_string(kMaxBarStoreBytes) + " bytes)");
        }
        if (c.bar == 0 && c.first < kWindow + kWindowSize && c.first + c.count > kWindow) {
          return bad_op("a BAR0 store into the PV window");
        }
        if (c.op == Op::kBarWrite) {
          if (length != OpBytes(Op::kBarWrite, c.count)) {
            return bad_op(std::to_string(c.count) + " bytes do not fill its length " +
                          std::to_string(length));
          }
          c.entries_offset = uint32_t(p + kBarWriteFixedBytes - kOpHeaderBytes);
          for (uint32_t pad = c.entries_offset + c.count; pad < at + length; ++pad) {
            if (batch[pad] != 0) return bad_op("padding bytes set");
          }
        } else {
          c.value = Load32(batch, p + 16);
          if (Load32(batch, p + 20) != 0) return bad_op("reserved bits set");
        }
        entries += BarStoreEntries(c.count);
        if (entries > kMaxBatchEntries) {
          return bad_batch("more than " + std::to_string(kMaxBatchEntries) + " entries");
        }
        break;
      }
    }
    if (length != (variable ? length : OpBytes(c.op))) {
      return bad_op("length " + std::to_string(length) + ", not " + std::to_string(OpBytes(c.op)));
    }
    if (c.space % vm::kSmallPageSize != 0) return bad_op("directory not 4 KiB aligned");
    d.calls.push_back(c);
    at += length;
  }
  if (at != batch.size()) {
    return bad_batch(std::to_string(batch.size() - at) + " bytes after the last op");
  }
  return d;
}

// ---- entries ----

CallResult CheckPte(uint64_t pte, uint64_t page_bytes, const VmExtent& vmx) {
  if ((pte & vm::pte::kPresent) == 0) return CallResult::kOk;
  if (vm::pte::StorageType(pte) != 0 || (pte & kTagMask) != 0) return CallResult::kBadEntry;
  const uint64_t address = vm::pte::Address(pte) & ~(page_bytes - 1);
  switch (vm::pte::TargetOf(pte)) {
    case vm::Target::kVram:
      return Inside(address, page_bytes, vmx.vram_bytes) ? CallResult::kOk
                                                         : CallResult::kForeignVram;
    case vm::Target::kSysramSnooped:
    case vm::Target::kSysramNoSnoop:
      return Inside(address, page_bytes, vmx.ram_bytes) ? CallResult::kOk
                                                        : CallResult::kForeignSysram;
    case vm::Target::kInvalid:
      break;
  }
  return CallResult::kBadEntry;
}

CallResult CheckPde(uint64_t pde, const VmExtent& vmx, PdeTables* tables) {
  *tables = {};
  const uint32_t pt_size = vm::pde::PtSize(pde);
  const vm::PdeTarget small = vm::pde::SmallTarget(pde);
  const vm::PdeTarget large = vm::pde::LargeTarget(pde);
  if ((small != vm::PdeTarget::kNone && small != vm::PdeTarget::kVram) ||
      (large != vm::PdeTarget::kNone && large != vm::PdeTarget::kVram)) {
    return CallResult::kNotInVram;  // tables in system memory: the host keeps tables in VRAM only
  }
  if (small == vm::PdeTarget::kVram) {
    tables->small = vm::pde::SmallTableAddress(pde);
    tables->small_bytes = (vm::kSmallTableEntries(kLargePageShift) >> pt_size) * vm::kEntrySize;
    if (!Inside(tables->small, tables->small_bytes, vmx.vram_bytes)) return CallResult::kNotInVram;
  }
  if (large == vm::PdeTarget::kVram) {
    tables->large = vm::pde::LargeTableAddress(pde);
    tables->large_bytes = (vm::kLargeTableEntries >> pt_size) * vm::kEntrySize;
    if (!Inside(tables->large, tables->large_bytes, vmx.vram_bytes)) return CallResult::kNotInVram;
  }
  return CallResult::kOk;
}

}  // namespace gpuvm::pv
