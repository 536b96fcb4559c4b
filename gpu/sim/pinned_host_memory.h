// A gpu::HostMemory made of registered host buffers: each buffer gets a bus address range, and
// SYSRAM accesses inside a registered range reach it. Tests and the benchmark use it for SYSRAM
// DMA; a native-mode driver can use it for its pinned host allocations.
//
// Threading: all methods are thread-safe. Unregister only while no device may use the range (see
// gpu::HostMemory).
#ifndef GPUVM_GPU_SIM_PINNED_HOST_MEMORY_H_
#define GPUVM_GPU_SIM_PINNED_HOST_MEMORY_H_

#include <cstdint>
#include <map>
#include <shared_mutex>

#include "base/status.h"
#include "gpu/device.h"

namespace gpuvm::sim {

class PinnedHostMemory final : public gpu::HostMemory {
 public:
  // Makes [bus_address, bus_address + length) reach host [host, host + length). Ranges may not
  // overlap; bus_address and length must be 4 KiB aligned and the range must stay below 2^40.
  Status Register(uint64_t bus_address, uint8_t* host, uint64_t length);
  Status Unregister(uint64_t bus_address);

  uint8_t* Translate(uint64_t bus_address, uint64_t length) override;

 private:
  struct Range {
    uint8_t* host;
    uint64_t length;
  };
  std::shared_mutex mu_;
  std::map<uint64_t, Range> ranges_;  // by bus address
};

}  // namespace gpuvm::sim

#endif  // GPUVM_GPU_SIM_PINNED_HOST_MEMORY_H_
