#include "pv/call_area.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "pv/protocol.h"

namespace gpuvm::pv {

namespace {

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

bool Inside(uint64_t address, uint64_t length, uint64_t size) {
  return length <= size && address <= size - length;
}

}  // namespace

Result<CallArea> CallArea::Register(std::span<const uint8_t> ram, uint64_t list, uint32_t pages) {
  if (pages == 0 || pages > kMaxAreaPages) {
    return Status::InvalidArgument("a call area of " + std::to_string(pages) + " pages (1.." +
                                   std::to_string(kMaxAreaPages) + ")");
  }
  if (!Inside(list, uint64_t{pages} * 8, ram.size())) {
    return Status::InvalidArgument("the page list at " + Hex(list) + " is not inside the VM's RAM");
  }
  CallArea area;
  area.pages_.resize(pages);
  std::memcpy(area.pages_.data(), ram.data() + list, size_t{pages} * 8);  // the one read
  for (uint32_t i = 0; i < pages; ++i) {
    const uint64_t page = area.pages_[i];
    if (page % kPageBytes != 0 || !Inside(page, kPageBytes, ram.size())) {
      return Status::InvalidArgument("page " + std::to_string(i) + " of the call area at " +
                                     Hex(page) + " is not a whole page of the VM's RAM");
    }
  }
  return area;
}

uint64_t CallArea::bytes() const { return pages_.size() * kPageBytes; }

uint64_t CallArea::Address(uint64_t offset) const {
  return pages_[offset / kPageBytes] + offset % kPageBytes;
}

std::vector<uint8_t> CallArea::Copy(std::span<const uint8_t> ram, uint64_t length) const {
  length = std::min(length, bytes());
  std::vector<uint8_t> out(length);
  for (uint64_t at = 0; at < length;) {
    const uint64_t n = std::min(kPageBytes - at % kPageBytes, length - at);
    std::memcpy(out.data() + at, ram.data() + Address(at), n);
    at += n;
  }
  return out;
}

void CallArea::Store32(std::span<uint8_t> ram, uint64_t offset, uint32_t value) const {
  if (offset % 4 != 0 || offset + 4 > bytes()) return;
  std::memcpy(ram.data() + Address(offset), &value, 4);  // 4-aligned: never across a page
}

}  // namespace gpuvm::pv
