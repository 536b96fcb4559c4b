#include "aggregator/guest_ram_window.h"

#include <mutex>

namespace gpuvm::aggregator {

void GuestRamWindow::Attach(std::span<uint8_t> ram) {
  std::unique_lock lock(mu_);
  ram_ = ram;
}

void GuestRamWindow::Detach() {
  std::unique_lock lock(mu_);
  ram_ = {};
}

bool GuestRamWindow::attached() const {
  std::shared_lock lock(mu_);
  return !ram_.empty() || !regions_.empty();
}

bool GuestRamWindow::AttachRegion(uint64_t bus_base, std::span<uint8_t> ram) {
  std::unique_lock lock(mu_);
  const uint64_t end = bus_base + ram.size();
  if (ram.empty() || end < bus_base || bus_base < ram_.size()) return false;
  for (const Region& r : regions_) {
    if (bus_base < r.base + r.ram.size() && r.base < end) return false;
  }
  regions_.push_back({bus_base, ram});
  return true;
}

void GuestRamWindow::DetachRegion(uint64_t bus_base) {
  std::unique_lock lock(mu_);
  std::erase_if(regions_, [&](const Region& r) { return r.base == bus_base; });
}

uint8_t* GuestRamWindow::Translate(uint64_t bus_address, uint64_t length) {
  {
    std::shared_lock lock(mu_);
    const uint64_t size = ram_.size();
    // Written so nothing overflows: the range must lie inside [0, size).
    if (length <= size && bus_address <= size - length) return ram_.data() + bus_address;
    for (const Region& r : regions_) {
      if (bus_address >= r.base && length <= r.ram.size() &&
          bus_address - r.base <= r.ram.size() - length) {
        return r.ram.data() + (bus_address - r.base);
      }
    }
  }
  refused_.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

}  // namespace gpuvm::aggregator
