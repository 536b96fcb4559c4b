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
  return !ram_.empty();
}

uint8_t* GuestRamWindow::Translate(uint64_t bus_address, uint64_t length) {
  {
    std::shared_lock lock(mu_);
    const uint64_t size = ram_.size();
    // Written so nothing overflows: the range must lie inside [0, size).
    if (length <= size && bus_address <= size - length) return ram_.data() + bus_address;
  }
  refused_.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

}  // namespace gpuvm::aggregator
