// The software GPU's physical memory: VRAM (by default a memfd sealed against resizing, so other
// processes can map slices of it: BAR remap; or a shared mapping of a file the operator names, e.g.
// a PCI BAR's sysfs resourceN file, so the VRAM is at machine addresses a hypervisor can map into
// guests: BAR remap on Xen, docs/XEN-TESTBED.md)
// and the resolution of a (target, physical address) pair to host bytes in VRAM or, through the
// SYSRAM port, in host memory. Also the word-access helpers every unit uses on memory the driver
// can write concurrently.
//
// Threading: Vram and PhysicalMemory are immutable after creation; all methods are thread-safe. The
// bytes themselves are shared with drivers and engines without locks, as on hardware: aligned
// 32/64-bit words are read and written atomically (no tearing), anything larger is a plain copy.
#ifndef GPUVM_GPU_SIM_MEMORY_H_
#define GPUVM_GPU_SIM_MEMORY_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "base/status.h"
#include "gpu/device.h"
#include "gpu/hw/vm.h"

namespace gpuvm::sim {

class Vram {
 public:
  // `size` must be a non-zero multiple of 4 KiB and at most 2^40. The memfd is sized but not
  // touched, so an unused VRAM costs no resident memory.
  static Result<std::unique_ptr<Vram>> Create(uint64_t size);
  // VRAM in the first `size` bytes of the file at `path` (same size rules), mapped shared and
  // zeroed: a regular file, or a device's memory such as /sys/bus/pci/devices/BDF/resource2. The
  // file must be at least `size` long; it is never resized. fd() is then that file (not a memfd).
  static Result<std::unique_ptr<Vram>> Open(const std::string& path, uint64_t size);
  ~Vram();
  Vram(const Vram&) = delete;
  Vram& operator=(const Vram&) = delete;

  uint64_t size() const { return size_; }
  // The memfd, or the file of Open().
  int fd() const { return fd_; }
  // Host bytes of [address, address + length), or nullptr if any of it lies outside VRAM.
  uint8_t* At(uint64_t address, uint64_t length) const {
    return (address <= size_ && length <= size_ - address) ? base_ + address : nullptr;
  }

 private:
  Vram(int fd, uint8_t* base, uint64_t size) : fd_(fd), base_(base), size_(size) {}
  int fd_;
  uint8_t* base_;
  uint64_t size_;
};

// Where physical addresses lead: VRAM, or host memory through the SYSRAM port (may be null: then
// every SYSRAM access fails).
class PhysicalMemory {
 public:
  PhysicalMemory(Vram* vram, gpu::HostMemory* host) : vram_(vram), host_(host) {}
  uint8_t* Resolve(gf100::vm::Target target, uint64_t address, uint64_t length) const {
    switch (target) {
      case gf100::vm::Target::kVram:
        return vram_->At(address, length);
      case gf100::vm::Target::kSysramSnooped:
      case gf100::vm::Target::kSysramNoSnoop:
        return host_ != nullptr ? host_->Translate(address, length) : nullptr;
      case gf100::vm::Target::kInvalid:
        break;
    }
    return nullptr;
  }
  Vram* vram() const { return vram_; }

 private:
  Vram* vram_;
  gpu::HostMemory* host_;
};

// Word access to shared memory. Aligned words use relaxed atomics so a concurrent writer never
// produces a torn value and the compiler never invents or elides accesses; unaligned ones fall back
// to memcpy.
inline uint32_t Load32(const uint8_t* p) {
  if ((reinterpret_cast<uintptr_t>(p) & 3) == 0) {
    return __atomic_load_n(reinterpret_cast<const uint32_t*>(p), __ATOMIC_RELAXED);
  }
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t Load64(const uint8_t* p) {
  if ((reinterpret_cast<uintptr_t>(p) & 7) == 0) {
    return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_RELAXED);
  }
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline void Store32(uint8_t* p, uint32_t v) {
  if ((reinterpret_cast<uintptr_t>(p) & 3) == 0) {
    __atomic_store_n(reinterpret_cast<uint32_t*>(p), v, __ATOMIC_RELAXED);
  } else {
    std::memcpy(p, &v, 4);
  }
}
inline void Store64(uint8_t* p, uint64_t v) {
  if ((reinterpret_cast<uintptr_t>(p) & 7) == 0) {
    __atomic_store_n(reinterpret_cast<uint64_t*>(p), v, __ATOMIC_RELAXED);
  } else {
    std::memcpy(p, &v, 8);
  }
}
// A load/store of 1, 2, 4 or 8 bytes (little-endian, like the GPU and x86).
inline uint64_t LoadN(const uint8_t* p, unsigned n) {
  switch (n) {
    case 1:
      return __atomic_load_n(p, __ATOMIC_RELAXED);
    case 2:
      if ((reinterpret_cast<uintptr_t>(p) & 1) == 0) {
        return __atomic_load_n(reinterpret_cast<const uint16_t*>(p), __ATOMIC_RELAXED);
      }
      break;
    case 4:
      return Load32(p);
    case 8:
      return Load64(p);
  }
  uint64_t v = 0;
  std::memcpy(&v, p, n);
  return v;
}
inline void StoreN(uint8_t* p, unsigned n, uint64_t v) {
  switch (n) {
    case 1:
      __atomic_store_n(p, uint8_t(v), __ATOMIC_RELAXED);
      return;
    case 2:
      if ((reinterpret_cast<uintptr_t>(p) & 1) == 0) {
        __atomic_store_n(reinterpret_cast<uint16_t*>(p), uint16_t(v), __ATOMIC_RELAXED);
        return;
      }
      break;
    case 4:
      Store32(p, uint32_t(v));
      return;
    case 8:
      Store64(p, v);
      return;
  }
  std::memcpy(p, &v, n);
}

}  // namespace gpuvm::sim

#endif  // GPUVM_GPU_SIM_MEMORY_H_
