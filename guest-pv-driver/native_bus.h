// The native Bus: the driver talks straight to a gpu::Device in the same process (the software
// GF100, or any other Device), and DMA mappings are registered in a sim::PinnedHostMemory — the
// gpu::HostMemory the device was created with — at bus addresses this bus hands out. This is the
// "native" baseline every virtualized mode is measured against.
//
// NativeGpu bundles what a process needs to run natively: the pinned-memory registry, a SimDevice
// using it, and a NativeBus over both (the runtime's native mode creates one).
//
// Threading: NativeBus is thread-safe (the Device and PinnedHostMemory are). The interrupt handler
// runs on the thread that changed the line (see gpu/device.h).
#ifndef GPUVM_GUEST_PV_DRIVER_NATIVE_BUS_H_
#define GPUVM_GUEST_PV_DRIVER_NATIVE_BUS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "base/status.h"
#include "gpu/device.h"
#include "gpu/sim/device.h"
#include "gpu/sim/pinned_host_memory.h"
#include "guest-pv-driver/bus.h"

namespace gpuvm::guest {

class NativeBus final : public Bus {
 public:
  // Bus addresses handed out for DMA mappings: [kBusBase, kBusLimit). (our choice) from 1 GiB, far
  // from 0 so a zero bus address in a PTE is always a bug, up to the 40-bit limit of a PTE.
  static constexpr uint64_t kBusBase = 1ull << 30;
  static constexpr uint64_t kBusLimit = 1ull << 40;

  // `device` and `host_memory` must outlive the bus; `host_memory` must be the gpu::HostMemory the
  // device translates SYSRAM through.
  NativeBus(gpu::Device* device, sim::PinnedHostMemory* host_memory);
  ~NativeBus() override;

  const gpu::PciIdentity& pci() const override { return device_->pci(); }
  uint64_t Read(Bar bar, uint64_t offset, Width width) override;
  void Write(Bar bar, uint64_t offset, Width width, uint64_t value) override;
  Status ReadBlock(Bar bar, uint64_t offset, void* dst, uint64_t length) override;
  Status WriteBlock(Bar bar, uint64_t offset, const void* src, uint64_t length) override;
  Result<std::unique_ptr<DmaMapping>> MapDma(void* host, uint64_t length) override;
  Status SetInterruptHandler(std::function<void(bool asserted)> handler) override;

  gpu::Device* device() const { return device_; }
  // Bytes of bus address space currently mapped.
  uint64_t mapped_bytes() const;

 private:
  class Mapping;
  void Unmap(uint64_t bus_address, uint64_t length);

  gpu::Device* const device_;
  sim::PinnedHostMemory* const host_memory_;
  mutable std::mutex mu_;
  std::map<uint64_t, uint64_t> free_;  // bus address -> length of free ranges
  uint64_t mapped_ = 0;
};

struct NativeGpuOptions {
  sim::SimDeviceOptions device;  // host_memory is filled in by NativeGpu
};

// The software GF100 plus a NativeBus to it, owned together.
class NativeGpu {
 public:
  static Result<std::unique_ptr<NativeGpu>> Create(const NativeGpuOptions& options = {});
  ~NativeGpu();

  Bus* bus() { return bus_.get(); }
  sim::SimDevice* device() { return device_.get(); }

 private:
  NativeGpu() = default;
  // Destroyed in reverse: the bus, then the device (its engine thread stops), then the registry.
  std::unique_ptr<sim::PinnedHostMemory> host_memory_;
  std::unique_ptr<sim::SimDevice> device_;
  std::unique_ptr<NativeBus> bus_;
};

}  // namespace gpuvm::guest

#endif  // GPUVM_GUEST_PV_DRIVER_NATIVE_BUS_H_
