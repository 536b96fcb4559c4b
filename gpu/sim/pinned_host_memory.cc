#include "gpu/sim/pinned_host_memory.h"

#include <mutex>

#include "gpu/hw/vm.h"

namespace gpuvm::sim {

Status PinnedHostMemory::Register(uint64_t bus_address, uint8_t* host, uint64_t length) {
  constexpr uint64_t kPage = gf100::vm::kSmallPageSize;
  if (host == nullptr || length == 0 || bus_address % kPage != 0 || length % kPage != 0 ||
      bus_address >= gf100::vm::kVaLimit || length > gf100::vm::kVaLimit - bus_address) {
    return Status::InvalidArgument(
        "host memory range must be non-empty, 4 KiB aligned, below 2^40");
  }
  std::unique_lock lock(mu_);
  auto next = ranges_.lower_bound(bus_address);
  if (next != ranges_.end() && next->first < bus_address + length) {
    return Status::AlreadyExists("host memory range overlaps a registered one");
  }
  if (next != ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.length > bus_address) {
      return Status::AlreadyExists("host memory range overlaps a registered one");
    }
  }
  ranges_.emplace(bus_address, Range{host, length});
  return Status::Ok();
}

Status PinnedHostMemory::Unregister(uint64_t bus_address) {
  std::unique_lock lock(mu_);
  if (ranges_.erase(bus_address) == 0)
    return Status::NotFound("no host memory range at that address");
  return Status::Ok();
}

uint8_t* PinnedHostMemory::Translate(uint64_t bus_address, uint64_t length) {
  std::shared_lock lock(mu_);
  auto it = ranges_.upper_bound(bus_address);
  if (it == ranges_.begin()) return nullptr;
  --it;
  uint64_t offset = bus_address - it->first;
  if (offset >= it->second.length || length > it->second.length - offset) return nullptr;
  return it->second.host + offset;
}

}  // namespace gpuvm::sim
