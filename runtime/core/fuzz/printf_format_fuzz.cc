// libFuzzer target for device printf's two untrusted steps: the host formatter on any bytes a
// kernel could leave in its FIFO, and the engine's vprintf (gpu/sim/compute/device_printf.h) on any
// format and argument bytes a kernel could pass — whose record the formatter must then take
// without complaint, since both sides walk formats with the same parser. Any crash, sanitizer
// report or trap is a finding.
//
// Input: byte 0 picks the mode. Even: the rest is a FIFO record area. Odd: byte 1 is the length of
// the format (up to 255 bytes, NUL-terminated by us), then the format, then the argument buffer
// (its first 8 bytes, when present, point %s arguments at the string region below).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <span>
#include <vector>

#include "gpu/isa/device_printf.h"
#include "gpu/sim/compute/device_printf.h"
#include "runtime/core/printf_format.h"

namespace {

using gpuvm::sim::compute::PrintfMemory;

constexpr uint64_t kFormat = 0x10000, kArgs = 0x20000, kStrings = 0x30000, kFifo = 0x40000;
constexpr uint64_t kRegion = 0x10000;

// Four mapped regions; everything else faults.
class Memory final : public PrintfMemory {
 public:
  Memory() {
    for (uint64_t base : {kFormat, kArgs, kStrings, kFifo}) regions_[base].assign(kRegion, 0);
  }
  uint8_t* At(uint64_t addr, uint64_t n) {
    auto it = regions_.upper_bound(addr);
    if (it == regions_.begin()) return nullptr;
    --it;
    if (addr - it->first > kRegion || kRegion - (addr - it->first) < n) return nullptr;
    return it->second.data() + (addr - it->first);
  }
  bool Read(uint64_t addr, uint32_t n, uint64_t* value) override {
    const uint8_t* p = addr % n == 0 ? At(addr, n) : nullptr;
    if (p == nullptr) return false;
    *value = 0;
    std::memcpy(value, p, n);
    return true;
  }
  uint64_t* GlobalWord(uint64_t addr) override {
    return addr % 8 == 0 ? reinterpret_cast<uint64_t*>(At(addr, 8)) : nullptr;
  }

 private:
  std::map<uint64_t, std::vector<uint8_t>> regions_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    (void)gpuvm::runtime::FormatPrintfRecords(std::span<const uint8_t>(data + 1, size - 1));
    return 0;
  }
  if (size < 2) return 0;
  const size_t format_len = std::min<size_t>(data[1], size - 2);
  Memory mem;
  std::memcpy(mem.At(kFormat, format_len + 1), data + 2, format_len);
  const size_t args_len = std::min<size_t>(size - 2 - format_len, kRegion);
  if (args_len > 0) std::memcpy(mem.At(kArgs, args_len), data + 2 + format_len, args_len);
  std::memset(mem.At(kStrings, 64), 'x', 64);  // an unterminated-looking run, then zeros
  const uint64_t string = kStrings + 8;
  std::memcpy(mem.At(kArgs, 8), &string, 8);  // the first 8-byte slot may be a %s
  const uint64_t capacity = kRegion - gpuvm::isa::kPrintfFifoHeaderBytes;
  std::memcpy(mem.At(kFifo + gpuvm::isa::kPrintfFifoCapacityOffset, 8), &capacity, 8);
  std::vector<uint8_t> scratch;
  int32_t ret = 0;
  if (!gpuvm::sim::compute::DevicePrintf(mem, kFormat, kArgs, kFifo, &scratch, &ret)) return 0;
  uint64_t used = 0;
  std::memcpy(&used, mem.At(kFifo + gpuvm::isa::kPrintfFifoUsedOffset, 8), 8);
  if (used > capacity) std::abort();
  const gpuvm::runtime::PrintfText text = gpuvm::runtime::FormatPrintfRecords(
      std::span<const uint8_t>(mem.At(kFifo + gpuvm::isa::kPrintfFifoHeaderBytes, used), used));
  if (!text.error.empty()) std::abort();  // the engine wrote a record the host refuses
  return 0;
}
