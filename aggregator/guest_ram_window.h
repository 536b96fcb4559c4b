// The physical GPU's window onto guest memory: the gpu::HostMemory the software GPU translates its
// SYSRAM accesses through (page-table entries with a SYSRAM target, SYSRAM page directories,
// semaphores, pushbuffers in guest RAM). In pt mode the guest driver writes guest-physical
// addresses into SYSRAM PTEs, untranslated, so a bus address here IS a guest-physical address of
// the VM that owns the GPU; anything outside that VM's RAM is refused (the device sees nullptr and
// faults), like an IOMMU that maps exactly the owner's memory. With no owner attached, every SYSRAM
// access faults.
//
// Lifetime rule (gpu::HostMemory): the device caches the pointers we return. Detach() may only be
// called once the device can no longer use them — after the device was reset (PhysicalGpu::Reset),
// which drops every cached translation — and the RAM must stay mapped until then.
//
// Faulting in: the GPU's first touch of each page of our mapping of guest RAM would be a page fault
// on a device thread (the guest touched the page in its own mapping, not ours): a 64 MiB copy is
// 16 384 of them. So the first Translate into each 2 MiB block of a region populates the pages of
// that block the guest has (mincore says which; holes stay holes: populating one would allocate
// and clear a page nobody asked for) with one madvise per run instead of a fault per page, for the
// direction of the access that reached the block first (TranslateFor; Translate: read): a read
// populate is cheaper, but a page it maps pays a dirty-bit update at its first store, which the
// destination of a device-to-host copy would pay for every page (PopulatePages in base/os.h).
// That reaches nothing new — the block is the same VM's RAM. A page the guest adds to a block
// already visited faults in by itself, as before.
//
// Threading: Translate is called concurrently from device threads; Attach/Detach from the
// aggregator's thread. All thread-safe.
#ifndef GPUVM_AGGREGATOR_GUEST_RAM_WINDOW_H_
#define GPUVM_AGGREGATOR_GUEST_RAM_WINDOW_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <span>
#include <vector>

#include "gpu/device.h"

namespace gpuvm::aggregator {

class GuestRamWindow final : public gpu::HostMemory {
 public:
  // From now on bus addresses [0, ram.size()) reach `ram`.
  void Attach(std::span<uint8_t> ram);
  // Nothing is reachable any more (see the lifetime rule above).
  void Detach();
  bool attached() const;

  // Full virtualization: several VMs' RAM at once, each at its own bus base (the aggregator
  // relocates each VM's SYSRAM PTEs there). Regions must not overlap each other or [0, Attach's
  // size); AttachRegion refuses an overlap. DetachRegion follows the lifetime rule above.
  bool AttachRegion(uint64_t bus_base, std::span<uint8_t> ram);
  void DetachRegion(uint64_t bus_base);

  uint8_t* Translate(uint64_t bus_address, uint64_t length) override;
  uint8_t* TranslateFor(uint64_t bus_address, uint64_t length, bool write) override;

  // SYSRAM accesses refused since creation (outside the owner's RAM, or no owner).
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  // Blocks populated at once since creation (see "Faulting in").
  uint64_t populated_blocks() const { return populated_.load(std::memory_order_relaxed); }
  static constexpr uint64_t kPopulateBlock = 2ull << 20;

 private:
  // Which kPopulateBlock blocks of a mapping were populated (bits set once, lock-free).
  struct Populated {
    explicit Populated(uint64_t bytes)
        : bits((bytes + kPopulateBlock * 64 - 1) / (kPopulateBlock * 64)) {}
    std::vector<std::atomic<uint64_t>> bits;
  };
  // Populates the block of `ram` holding [offset, offset + length) unless done before.
  void Populate(std::span<uint8_t> ram, Populated& done, uint64_t offset, uint64_t length,
                bool write);

  mutable std::shared_mutex mu_;
  std::span<uint8_t> ram_;                 // guarded by mu_
  std::unique_ptr<Populated> ram_blocks_;  // guarded by mu_
  struct Region {
    uint64_t base;
    std::span<uint8_t> ram;
    std::unique_ptr<Populated> blocks;
  };
  std::vector<Region> regions_;  // guarded by mu_
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> populated_{0};
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_GUEST_RAM_WINDOW_H_
