// Single accesses of a real device's mapped BARs (an mmap of sysfs' resourceN, or of VFIO): one
// volatile load or store of exactly the width asked for, so that the compiler neither splits,
// merges, reorders nor drops it. For the users of gpu::Device over real hardware: the aggregator's
// mapped-BAR device and the guest driver's sysfs bus. The caller checks alignment and range.
//
// Header-only. Threading: as the device's registers allow (each access is one bus transaction).
#ifndef GPUVM_GPU_MMIO_H_
#define GPUVM_GPU_MMIO_H_

#include <cstdint>

#include "gpu/device.h"

namespace gpuvm::gpu {

template <typename T>
T LoadMmio(const uint8_t* p) {
  return *reinterpret_cast<const volatile T*>(p);
}
template <typename T>
void StoreMmio(uint8_t* p, T value) {
  *reinterpret_cast<volatile T*>(p) = value;
}

// A load of `width` bytes at `p` (naturally aligned), zero-extended.
inline uint64_t LoadMmio(const uint8_t* p, Width width) {
  switch (width) {
    case Width::k8:
      return LoadMmio<uint8_t>(p);
    case Width::k16:
      return LoadMmio<uint16_t>(p);
    case Width::k32:
      return LoadMmio<uint32_t>(p);
    case Width::k64:
      return LoadMmio<uint64_t>(p);
  }
  return 0;
}

// A store of the low `width` bytes of `value` at `p` (naturally aligned).
inline void StoreMmio(uint8_t* p, Width width, uint64_t value) {
  switch (width) {
    case Width::k8:
      return StoreMmio(p, static_cast<uint8_t>(value));
    case Width::k16:
      return StoreMmio(p, static_cast<uint16_t>(value));
    case Width::k32:
      return StoreMmio(p, static_cast<uint32_t>(value));
    case Width::k64:
      return StoreMmio(p, value);
  }
}

}  // namespace gpuvm::gpu

#endif  // GPUVM_GPU_MMIO_H_
