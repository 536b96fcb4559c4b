// One thread's vprintf (device_printf.h): build the record, reserve room in the FIFO, write it.
#include "gpu/sim/compute/device_printf.h"

#include <cstring>
#include <string>

#include "gpu/isa/device_printf.h"

namespace gpuvm::sim::compute {
namespace {

using isa::PrintfValue;

uint64_t AlignUp8(uint64_t v) { return (v + 7) & ~uint64_t{7}; }

void Append(std::vector<uint8_t>* out, const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  out->insert(out->end(), p, p + n);
}
void Append32(std::vector<uint8_t>* out, uint32_t v) { Append(out, &v, 4); }
void Append64(std::vector<uint8_t>* out, uint64_t v) { Append(out, &v, 8); }
void Pad8(std::vector<uint8_t>* out) { out->resize(AlignUp8(out->size()), 0); }

enum class Step { kOk, kFault, kTooMany };

// Appends one call's argument slots to *record, reading them out of the packed buffer.
class RecordBuilder {
 public:
  RecordBuilder(PrintfMemory& mem, uint64_t args, std::vector<uint8_t>* record)
      : mem_(mem), args_(args), record_(record) {}

  // Copies the next argument of kind `v` out of the packed buffer into the record.
  Step Take(PrintfValue v) {
    if (++slots_ > isa::kPrintfMaxArgs) return Step::kTooMany;
    const uint32_t n = isa::PrintfValueBytes(v);
    offset_ = (offset_ + n - 1) / n * n;  // natural alignment, as the caller packed it
    uint64_t value = 0;
    if (args_ != 0 && !mem_.Read(args_ + offset_, n, &value)) return Step::kFault;
    offset_ += n;
    if (v != PrintfValue::kString) {
      Append64(record_, value);
      return Step::kOk;
    }
    if (value == 0) {  // printf("%s", NULL)
      Append32(record_, isa::kPrintfNullString);
      Append32(record_, 0);
      return Step::kOk;
    }
    const size_t at = record_->size();
    Append64(record_, 0);  // length, filled in below
    uint32_t len = 0;
    for (; len < isa::kPrintfMaxStringBytes; ++len) {
      uint64_t c;
      if (!mem_.Read(value + len, 1, &c)) return Step::kFault;
      if (c == 0) break;
      record_->push_back(static_cast<uint8_t>(c));
    }
    std::memcpy(record_->data() + at, &len, 4);
    Pad8(record_);
    return Step::kOk;
  }

  uint32_t slots() const { return slots_; }

 private:
  PrintfMemory& mem_;
  const uint64_t args_;
  std::vector<uint8_t>* record_;
  uint64_t offset_ = 0;  // in the packed argument buffer
  uint32_t slots_ = 0;
};

}  // namespace

bool DevicePrintf(PrintfMemory& mem, uint64_t format, uint64_t args, uint64_t fifo,
                  std::vector<uint8_t>* record, int32_t* ret) {
  if (format == 0) {
    *ret = isa::kPrintfNullFormat;
    return true;
  }
  if (fifo == 0 || fifo % 8 != 0) {
    *ret = isa::kPrintfInternalError;
    return true;
  }
  // The format string, bounded: its NUL must come within kPrintfMaxFormatBytes.
  std::string fmt;
  for (;;) {
    if (fmt.size() == isa::kPrintfMaxFormatBytes) {
      *ret = isa::kPrintfInternalError;
      return true;
    }
    uint64_t c;
    if (!mem.Read(format + fmt.size(), 1, &c)) return false;
    if (c == 0) break;
    fmt.push_back(static_cast<char>(c));
  }
  record->assign(isa::kPrintfRecordHeaderBytes, 0);
  Append(record, fmt.data(), fmt.size());
  Pad8(record);

  // The arguments, in the order the conversions take them.
  RecordBuilder args_out(mem, args, record);
  for (size_t i = 0; i < fmt.size();) {
    if (fmt[i] != '%') {
      ++i;
      continue;
    }
    const isa::PrintfSpec s = isa::ParsePrintfSpec(fmt, i);
    i += s.length;
    if (!s.valid) continue;
    PrintfValue takes[3];
    int n = 0;
    if (s.width == isa::kPrintfStar) takes[n++] = PrintfValue::kInt32;
    if (s.precision == isa::kPrintfStar) takes[n++] = PrintfValue::kInt32;
    if (s.value != PrintfValue::kNone) takes[n++] = s.value;
    for (int k = 0; k < n; ++k) {
      switch (args_out.Take(takes[k])) {
        case Step::kOk:
          break;
        case Step::kFault:
          return false;
        case Step::kTooMany:
          *ret = isa::kPrintfInternalError;
          return true;
      }
    }
  }
  const uint32_t bytes = static_cast<uint32_t>(record->size());
  const uint32_t format_bytes = static_cast<uint32_t>(fmt.size());
  const uint32_t slots = args_out.slots();
  std::memcpy(record->data() + 0, &bytes, 4);
  std::memcpy(record->data() + 4, &format_bytes, 4);
  std::memcpy(record->data() + 8, &slots, 4);
  *ret = static_cast<int32_t>(slots);

  // Reserve [old, old + bytes) of the record area. The FIFO header is in the kernel's own memory
  // (it can scribble on it, which only garbles its own output): capacity is read, not trusted.
  uint64_t* capacity_word = mem.GlobalWord(fifo + isa::kPrintfFifoCapacityOffset);
  if (capacity_word == nullptr) return false;
  uint64_t* used = mem.GlobalWord(fifo + isa::kPrintfFifoUsedOffset);
  if (used == nullptr) return false;
  uint64_t* dropped = mem.GlobalWord(fifo + isa::kPrintfFifoDroppedOffset);
  if (dropped == nullptr) return false;
  const uint64_t capacity = __atomic_load_n(capacity_word, __ATOMIC_RELAXED);
  uint64_t old = __atomic_load_n(used, __ATOMIC_RELAXED);
  for (;;) {
    // Once a record did not fit, later ones are dropped too (they would print out of order); the
    // record area past `used` is never claimed, so the host never reads stale bytes.
    if (__atomic_load_n(dropped, __ATOMIC_RELAXED) != 0 || old > capacity ||
        capacity - old < bytes) {
      __atomic_fetch_add(dropped, 1, __ATOMIC_RELAXED);
      return true;
    }
    if (__atomic_compare_exchange_n(used, &old, old + bytes, /*weak=*/false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED)) {
      break;
    }
  }
  // Ours alone now; 8-byte words (the record area and every record are 8-aligned), stored
  // atomically like every kernel store to global memory.
  const uint64_t base = fifo + isa::kPrintfFifoHeaderBytes + old;
  for (uint32_t off = 0; off < bytes; off += 8) {
    uint64_t* word = mem.GlobalWord(base + off);
    if (word == nullptr) return false;
    uint64_t v;
    std::memcpy(&v, record->data() + off, 8);
    __atomic_store_n(word, v, __ATOMIC_RELAXED);
  }
  return true;
}

}  // namespace gpuvm::sim::compute
