#include "aggregator/guest_ram_window.h"

#include <sys/mman.h>

#include <algorithm>
#include <mutex>

#include "base/os.h"

namespace {
constexpr uint64_t kPage = 4096;
}  // namespace

namespace gpuvm::aggregator {

void GuestRamWindow::Attach(std::span<uint8_t> ram) {
  std::unique_lock lock(mu_);
  ram_ = ram;
  ram_blocks_ = std::make_unique<Populated>(ram.size());
}

void GuestRamWindow::Detach() {
  std::unique_lock lock(mu_);
  ram_ = {};
  ram_blocks_.reset();
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
  regions_.push_back({bus_base, ram, std::make_unique<Populated>(ram.size())});
  return true;
}

void GuestRamWindow::DetachRegion(uint64_t bus_base) {
  std::unique_lock lock(mu_);
  std::erase_if(regions_, [&](const Region& r) { return r.base == bus_base; });
}

uint8_t* GuestRamWindow::Translate(uint64_t bus_address, uint64_t length) {
  return TranslateFor(bus_address, length, /*write=*/false);
}

uint8_t* GuestRamWindow::TranslateFor(uint64_t bus_address, uint64_t length, bool write) {
  {
    std::shared_lock lock(mu_);
    const uint64_t size = ram_.size();
    // Written so nothing overflows: the range must lie inside [0, size).
    if (length <= size && bus_address <= size - length) {
      Populate(ram_, *ram_blocks_, bus_address, length, write);
      return ram_.data() + bus_address;
    }
    for (const Region& r : regions_) {
      if (bus_address >= r.base && length <= r.ram.size() &&
          bus_address - r.base <= r.ram.size() - length) {
        Populate(r.ram, *r.blocks, bus_address - r.base, length, write);
        return r.ram.data() + (bus_address - r.base);
      }
    }
  }
  refused_.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

void GuestRamWindow::Populate(std::span<uint8_t> ram, Populated& done, uint64_t offset,
                              uint64_t length, bool write) {
  const uint64_t first = offset / kPopulateBlock;
  const uint64_t last = (offset + (length == 0 ? 0 : length - 1)) / kPopulateBlock;
  for (uint64_t b = first; b <= last; ++b) {
    std::atomic<uint64_t>& word = done.bits[b / 64];
    const uint64_t bit = 1ull << (b % 64);
    if (word.load(std::memory_order_relaxed) & bit) continue;
    if (word.fetch_or(bit, std::memory_order_relaxed) & bit) continue;  // another thread's
    const uint64_t begin = b * kPopulateBlock;
    const uint64_t pages = std::min<uint64_t>(kPopulateBlock, ram.size() - begin) / kPage;
    uint8_t* const base = ram.data() + begin;
    // Only pages the guest has (resident in its RAM file): populating a hole would allocate and
    // clear a page nobody asked for (~3.5 us each; most of a small VM's RAM is holes).
    unsigned char resident[kPopulateBlock / kPage];
    if (::mincore(base, pages * kPage, resident) != 0) continue;
    bool any = false;
    for (uint64_t p = 0; p < pages;) {
      if ((resident[p] & 1) == 0) {
        ++p;
        continue;
      }
      uint64_t q = p + 1;
      while (q < pages && (resident[q] & 1) != 0) ++q;
      // A failure (an old kernel, a foreign Xen mapping that cannot be populated) only means the
      // pages fault in one by one as before.
      any |= os::PopulatePages(base + p * kPage, (q - p) * kPage,
                               write ? os::PopulateFor::kWrite : os::PopulateFor::kRead);
      p = q;
    }
    if (any) populated_.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace gpuvm::aggregator
