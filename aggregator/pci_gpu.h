// `--gpu pci:BDF`: a real GF100-class card (NVIDIA, display class, PMC_BOOT_0 saying Fermi) through
// libpciaccess, with BAR0, BAR1 and BAR3 mapped from the sysfs resource files. Compiled and tested
// for argument and error handling everywhere; it only runs where such a card exists (none of our
// machines has one).
//
// What it does not do (yet):
//  - DMA into guest memory: the card would need an IOMMU mapping of the owning VM's RAM at its
//    guest-physical addresses (VFIO). Without it, SYSRAM page-table entries written by a pt guest
//    name guest-physical addresses the card would take for host-physical ones, so
//    reaches_guest_memory() is false and the aggregator refuses pt VMs on this backend unless told
//    the risk is understood (docs/AGGREGATOR.md).
//  - Interrupts by MSI/INTx: no kernel driver delivers them to user space here, so the line is
//    polled (PMC_INTR_HOST every millisecond while a handler is installed).
//
// Reset: QuiesceChannels (every channel unbound, the playlist emptied, apertures unbound,
// interrupts off), then VRAM zeroed through PRAMIN (slow: ~minutes for 6 GiB, on by default), and
// optionally a PCI function reset through sysfs (off by default: a Fermi needs its VBIOS init
// scripts run again after one, which nothing here does).
//
// Threading: as PhysicalGpu; MappedBarDevice is thread-safe like every gpu::Device.
#ifndef GPUVM_AGGREGATOR_PCI_GPU_H_
#define GPUVM_AGGREGATOR_PCI_GPU_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "aggregator/physical_gpu.h"
#include "hypervisor/types.h"

namespace gpuvm::aggregator {

// A gpu::Device over three mapped BARs (volatile loads and stores). Public so tests can run it over
// ordinary memory.
class MappedBarDevice final : public gpu::Device {
 public:
  MappedBarDevice(const gpu::PciIdentity& identity, std::span<uint8_t> bar0,
                  std::span<uint8_t> bar1, std::span<uint8_t> bar3,
                  std::chrono::milliseconds irq_poll = std::chrono::milliseconds(1));
  ~MappedBarDevice() override;

  const gpu::PciIdentity& pci() const override { return identity_; }
  uint64_t Read(gpu::Bar bar, uint64_t offset, gpu::Width width) override;
  void Write(gpu::Bar bar, uint64_t offset, gpu::Width width, uint64_t value) override;
  Status ReadBlock(gpu::Bar bar, uint64_t offset, void* dst, uint64_t length) override;
  Status WriteBlock(gpu::Bar bar, uint64_t offset, const void* src, uint64_t length) override;
  void SetInterruptHandler(gpu::InterruptHandler handler) override;
  bool interrupt_asserted() const override { return line_.load(std::memory_order_acquire); }
  void SetAccessObserver(gpu::AccessObserver observer) override;

 private:
  std::span<uint8_t> BarBytes(gpu::Bar bar) const;
  void PollInterrupts();
  void Observe(const gpu::BarAccess& access);

  const gpu::PciIdentity identity_;
  const std::span<uint8_t> bar0_, bar1_, bar3_;
  const std::chrono::milliseconds irq_poll_;

  std::mutex irq_mu_;
  gpu::InterruptHandler handler_;  // guarded by irq_mu_
  std::thread poller_;
  std::atomic<bool> stop_poller_{false};
  std::atomic<bool> line_{false};

  std::atomic<bool> observing_{false};
  std::mutex observer_mu_;
  gpu::AccessObserver observer_;
};

struct PciGpuOptions {
  bool scrub_vram_on_reset = true;
  bool function_reset = false;
  std::string sysfs_devices = "/sys/bus/pci/devices";
};

class PciGpu final : public PhysicalGpu {
 public:
  // NotFound when nothing sits at `address`; FailedPrecondition when it is not a GF100-class
  // NVIDIA display controller or lacks a BAR; Unavailable when libpciaccess cannot start or map.
  static Result<std::unique_ptr<PciGpu>> Open(const hv::Sbdf& address,
                                              const PciGpuOptions& options = {});
  ~PciGpu() override;

  std::string Describe() const override;
  gpu::Device& device() override { return *device_; }
  uint64_t vram_bytes() const override { return vram_bytes_; }
  bool reaches_guest_memory() const override { return false; }
  Status Reset() override;
  uint64_t resets() const override { return resets_; }
  void SetInterruptHandler(gpu::InterruptHandler handler) override;

 private:
  struct Mapping;
  PciGpu() = default;

  hv::Sbdf address_;
  PciGpuOptions options_;
  std::unique_ptr<Mapping> mapping_;
  std::unique_ptr<MappedBarDevice> device_;
  uint64_t vram_bytes_ = 0;
  uint64_t resets_ = 0;
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_PCI_GPU_H_
