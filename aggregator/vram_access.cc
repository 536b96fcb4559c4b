#include "aggregator/vram_access.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "gpu/hw/pbus.h"

namespace gpuvm::aggregator {

namespace pbus = gf100::pbus;

bool VramAccess::InRange(uint64_t address, size_t length) const {
  const uint64_t size = gpu_->vram_bytes();
  return length <= size && address <= size - length;
}

void VramAccess::MoveWindow(uint64_t address) {
  const uint64_t base = address & ~uint64_t(pbus::kPraminWindowSize - 1);
  if (base == window_base_) return;
  gpu_->device().WriteReg(pbus::kPraminBase, uint32_t(base >> pbus::kPraminBaseShift));
  window_base_ = base;
}

uint32_t VramAccess::PraminRead32(uint64_t address) {
  MoveWindow(address);
  return gpu_->device().ReadReg(pbus::kPraminWindow + uint32_t(address - window_base_));
}

void VramAccess::PraminWrite32(uint64_t address, uint32_t value) {
  MoveWindow(address);
  gpu_->device().WriteReg(pbus::kPraminWindow + uint32_t(address - window_base_), value);
}

void VramAccess::Read(uint64_t address, void* out, size_t length) {
  if (!InRange(address, length)) {
    ++refused_;
    std::memset(out, 0, length);
    return;
  }
  const std::span<uint8_t> direct = gpu_->vram_mapping();
  if (!direct.empty()) {
    std::memcpy(out, direct.data() + address, length);
    return;
  }
  auto* bytes = static_cast<uint8_t*>(out);
  for (size_t done = 0; done < length;) {
    const uint64_t at = address + done;
    const uint32_t word = PraminRead32(at & ~3ull);
    const size_t skip = at & 3;
    const size_t n = std::min<size_t>(4 - skip, length - done);
    std::memcpy(bytes + done, reinterpret_cast<const uint8_t*>(&word) + skip, n);
    done += n;
  }
}

void VramAccess::Write(uint64_t address, const void* data, size_t length) {
  if (!InRange(address, length)) {
    ++refused_;
    return;
  }
  const std::span<uint8_t> direct = gpu_->vram_mapping();
  if (!direct.empty()) {
    std::memcpy(direct.data() + address, data, length);
    return;
  }
  const auto* bytes = static_cast<const uint8_t*>(data);
  for (size_t done = 0; done < length;) {
    const uint64_t at = address + done;
    const size_t skip = at & 3;
    const size_t n = std::min<size_t>(4 - skip, length - done);
    uint32_t word = 0;
    if (n != 4) word = PraminRead32(at & ~3ull);  // read-modify-write of a partial word
    std::memcpy(reinterpret_cast<uint8_t*>(&word) + skip, bytes + done, n);
    PraminWrite32(at & ~3ull, word);
    done += n;
  }
}

uint32_t VramAccess::Read32(uint64_t address) {
  uint32_t v = 0;
  Read(address, &v, sizeof v);
  return v;
}
void VramAccess::Write32(uint64_t address, uint32_t value) { Write(address, &value, sizeof value); }
uint64_t VramAccess::Read64(uint64_t address) {
  uint64_t v = 0;
  Read(address, &v, sizeof v);
  return v;
}
void VramAccess::Write64(uint64_t address, uint64_t value) { Write(address, &value, sizeof value); }

bool VramAccess::ZeroByPunching(uint64_t address, size_t length) {
  constexpr uint64_t kPage = 4096;
  const std::span<uint8_t> direct = gpu_->vram_mapping();
  if (direct.empty() || !InRange(address, length)) return false;
  const uint64_t begin = (address + kPage - 1) & ~(kPage - 1);
  const uint64_t end = (address + length) & ~(kPage - 1);
  if (end <= begin) return false;
  // Through the mapping, not a descriptor: the pages may be VRAM's own memory or a VM's memfd
  // (per-VM backing), and MADV_REMOVE punches whichever file backs each of them. A file that
  // cannot punch (device memory) refuses, and we store zeros instead.
  if (::madvise(direct.data() + begin, end - begin, MADV_REMOVE) != 0) return false;
  std::memset(direct.data() + address, 0, begin - address);
  std::memset(direct.data() + end, 0, address + length - end);
  return true;
}

void VramAccess::Fill(uint64_t address, uint8_t value, size_t length) {
  constexpr size_t kPunchAtLeast = 64 * 1024;  // below: a few stores are cheaper than a punch
  if (value == 0 && length >= kPunchAtLeast && ZeroByPunching(address, length)) return;
  uint8_t chunk[4096];
  std::memset(chunk, value, sizeof chunk);
  for (size_t done = 0; done < length;) {
    const size_t n = std::min(sizeof chunk, length - done);
    Write(address + done, chunk, n);
    done += n;
  }
}

}  // namespace gpuvm::aggregator
