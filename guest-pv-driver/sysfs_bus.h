// A Bus over Linux's sysfs PCI files: how the guest driver reaches its virtual GPU from user space
// inside a Xen HVM guest (docs/XEN-TESTBED.md), the way a user-space driver does on Linux.
//
//   Create              finds the device under /sys/bus/pci/devices by vendor:device (10de:06d8)
//                       or by its address, reads identity and BAR sizes from its sysfs files,
//                       enables it (`enable`), and maps resource0, resource1 and resource3. The
//                       addresses are whatever the firmware (hvmloader) and the kernel assigned:
//                       the mmap of resourceN follows the BAR wherever it was placed.
//   Read/Write          one volatile load/store of the access's width on the mapping (uncached).
//                       In an HVM guest each one traps to Xen, which sends an ioreq to gpuvm-dm.
//   ReadBlock/WriteBlock `rep movs` between the caller's buffer and the mapping (8-byte elements,
//                       then bytes for a tail): Xen emulates the instruction as ioreqs of up to a
//                       page each with data_is_ptr, so a 4 KiB block costs about one trap to dom0
//                       instead of 512. kWords instead does one trapped access per 8 bytes.
//   FillBlock           `rep stos` on the mapping: Xen emulates it as ioreqs without a buffer of up
//                       to 4096 repetitions (8-byte elements), which gpuvm-dm forwards as fills.
//   MapDma              mlock()s the pages and reads their physical frame numbers from
//                       /proc/self/pagemap (needs CAP_SYS_ADMIN: without it the kernel reports
//                       frame 0, which MapDma refuses). In an HVM guest the frame is the
//                       guest-physical address the GPU's SYSRAM page-table entries must hold.
//                       Pages are reference-counted: mapping a page twice locks it once.
//   SetInterruptHandler kUnimplemented: sysfs gives user space no interrupt line; the driver polls.
//
// Limits (documented in docs/XEN-TESTBED.md): mlock keeps a page resident but Linux may still
// migrate it (compaction, NUMA balancing) unless /proc/sys/vm/compact_unevictable_allowed is 0 and
// transparent huge pages are off — the test bed's guest sets both. An access outside a BAR reads 0
// and drops writes (counted in `bad_accesses()`), as a master abort would.
//
// Threading: every Bus method is thread-safe (bus.h): the mappings never change after Create and
// the DMA page registry has its own lock.
#ifndef GPUVM_GUEST_PV_DRIVER_SYSFS_BUS_H_
#define GPUVM_GUEST_PV_DRIVER_SYSFS_BUS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "gpu/hw/pci.h"
#include "guest-pv-driver/bus.h"

namespace gpuvm::guest {

// Environment variables read by SysfsBus::FromEnvironment.
inline constexpr const char* kSysfsDeviceVariable = "GPUVM_SYSFS_DEVICE";  // e.g. 0000:00:05.0
inline constexpr const char* kSysfsBlockVariable = "GPUVM_SYSFS_BLOCK";    // rep | words

struct SysfsBusOptions {
  // Where the PCI functions are listed (tests point this at a directory they made).
  std::string devices_dir = "/sys/bus/pci/devices";
  // Pick the function by address ("0000:00:05.0"); empty: the first one with vendor:device.
  std::string address;
  uint16_t vendor_id = gf100::pci::kVendorId;  // what gpuvm-dm presents: 10de:06d8
  uint16_t device_id = gf100::pci::kDeviceId;
  // Write "1" to the function's `enable` file (memory decoding on), as a user-space driver must
  // when no kernel driver is bound. Failure to enable is not fatal (it may be enabled already).
  bool enable = true;
  // The kernel's page map of this process (tests substitute a file they wrote).
  std::string pagemap_path = "/proc/self/pagemap";
  enum class BlockTransfer { kRepMovs, kWords };
  BlockTransfer block_transfer = BlockTransfer::kRepMovs;
};

class SysfsBus final : public Bus {
 public:
  // NotFound when no such function exists; FailedPrecondition when a BAR is missing or too small
  // for the GF100's layout; the errno of a failed open/mmap otherwise.
  static Result<std::unique_ptr<SysfsBus>> Create(const SysfsBusOptions& options = {});
  // Create with $GPUVM_SYSFS_DEVICE and $GPUVM_SYSFS_BLOCK applied to the defaults.
  static Result<std::unique_ptr<SysfsBus>> FromEnvironment();
  ~SysfsBus() override;

  SysfsBus(const SysfsBus&) = delete;
  SysfsBus& operator=(const SysfsBus&) = delete;

  const gpu::PciIdentity& pci() const override { return pci_; }
  bool remote() const override { return true; }  // a Xen guest's trapped BARs
  uint64_t Read(Bar bar, uint64_t offset, Width width) override;
  void Write(Bar bar, uint64_t offset, Width width, uint64_t value) override;
  Status ReadBlock(Bar bar, uint64_t offset, void* dst, uint64_t length) override;
  Status WriteBlock(Bar bar, uint64_t offset, const void* src, uint64_t length) override;
  Status FillBlock(Bar bar, uint64_t offset, uint8_t byte, uint64_t length) override;
  Result<std::unique_ptr<DmaMapping>> MapDma(void* host, uint64_t length) override;
  Status SetInterruptHandler(std::function<void(bool asserted)> handler) override;

  // The function's sysfs directory name ("0000:00:05.0").
  const std::string& address() const { return address_; }
  // The BAR's physical (for a guest: guest-physical) address as sysfs reports it.
  uint64_t bar_address(Bar bar) const;
  // Single accesses refused because they fell outside their BAR.
  uint64_t bad_accesses() const { return bad_accesses_.load(std::memory_order_relaxed); }
  // Pages currently locked for DMA.
  uint64_t locked_pages() const;

 private:
  class Pages;
  struct Window {
    uint8_t* base = nullptr;  // the mmap of resourceN
    uint64_t size = 0;
    uint64_t address = 0;  // from `resource`
  };
  explicit SysfsBus(const SysfsBusOptions& options) : options_(options) {}
  Status Open();
  const Window& window(Bar bar) const;
  // The block's target inside its BAR, or an error (BAR0, past the end).
  Result<uint8_t*> BlockTarget(Bar bar, uint64_t offset, uint64_t length) const;
  void Unlock(uintptr_t first_page, uint64_t pages);

  SysfsBusOptions options_;
  std::string address_;
  gpu::PciIdentity pci_;
  Window bar0_, bar1_, bar3_;
  std::atomic<uint64_t> bad_accesses_{0};

  mutable std::mutex dma_mu_;
  std::map<uintptr_t, uint64_t> locked_;  // page address -> references
};

}  // namespace gpuvm::guest

#endif  // GPUVM_GUEST_PV_DRIVER_SYSFS_BUS_H_
