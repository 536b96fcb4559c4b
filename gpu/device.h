// The port every user of a GPU goes through: BAR reads and writes, the PCI identity, the interrupt
// line, and (on the other side) the host memory the GPU reaches by DMA. A guest driver running
// natively calls a Device directly; the aggregator owns one and forwards trapped guest accesses to
// it. Backends: the software GF100 (gpu/sim/device.h) and, later, a real card through libpciaccess.
//
// Threading: every Device method may be called from any number of threads at once (drivers touch
// registers from several threads). Accesses to one register are atomic with respect to each other;
// there is no ordering between threads beyond that, as on a PCI bus. The interrupt handler and the
// access observer run on whichever thread caused the change / made the access; they must not block
// for long and the interrupt handler must not assume it runs on a particular thread. Both may call
// back into the Device.
#ifndef GPUVM_GPU_DEVICE_H_
#define GPUVM_GPU_DEVICE_H_

#include <cstdint>
#include <cstring>
#include <functional>

#include "base/status.h"

namespace gpuvm::gpu {

// The three memory BARs of a GF100 (see gpu/hw/pci.h for why they are numbered 0, 1 and 3).
enum class Bar : uint8_t { k0 = 0, k1 = 1, k3 = 3 };

// Access widths in bytes.
enum class Width : uint8_t { k8 = 1, k16 = 2, k32 = 4, k64 = 8 };

struct PciIdentity {
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  uint32_t class_code = 0;  // base class << 16 | subclass << 8 | programming interface
  uint8_t revision = 0;
  uint64_t bar0_size = 0;
  uint64_t bar1_size = 0;
  uint64_t bar3_size = 0;

  uint64_t BarSize(Bar bar) const {
    switch (bar) {
      case Bar::k0:
        return bar0_size;
      case Bar::k1:
        return bar1_size;
      case Bar::k3:
        return bar3_size;
    }
    return 0;
  }
};

// One BAR access as the register-trace observer sees it. For ReadBlock/WriteBlock `block` is set,
// `size` is the block length and `value` is 0.
struct BarAccess {
  Bar bar = Bar::k0;
  bool write = false;
  bool block = false;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t value = 0;

  friend bool operator==(const BarAccess&, const BarAccess&) = default;
};

// Called with the new level of the interrupt line each time it changes (asserted = true), and once
// with the current level when the handler is installed.
using InterruptHandler = std::function<void(bool asserted)>;
// Called after every BAR access completes, with the value read or written.
using AccessObserver = std::function<void(const BarAccess&)>;

// The device's window onto host memory: what SYSRAM page-table entries (and SYSRAM page
// directories, playlists and instance blocks) point at. In tests a registered buffer
// (sim/pinned_host_memory.h); later a guest's RAM through the hypervisor port.
//
// Threading: Translate is called concurrently from device threads and must be thread-safe. A
// pointer it returns must stay valid, and keep naming the same bytes, for as long as the device may
// use it: the device caches translations in its TLB. Withdrawing memory therefore needs the
// device's cooperation (for the software GPU: SimDevice::ForgetHostTranslations while no channel
// runs).
class HostMemory {
 public:
  virtual ~HostMemory() = default;
  // Host pointer to the bytes [bus_address, bus_address + length), or nullptr when any byte of the
  // range is not memory the device may reach.
  virtual uint8_t* Translate(uint64_t bus_address, uint64_t length) = 0;
  // The same for a page walk the device makes for an access in one direction (`write`): memory
  // that is brought in at first use can be brought in for that access (see PopulatePages in
  // base/os.h). A hint only: the pointer serves reads and writes alike.
  virtual uint8_t* TranslateFor(uint64_t bus_address, uint64_t length, bool write) {
    (void)write;
    return Translate(bus_address, length);
  }
};

class Device {
 public:
  virtual ~Device() = default;

  virtual const PciIdentity& pci() const = 0;

  // A single access of `width` bytes at `offset` within `bar`. Reads of nothing (an unknown
  // register, an unmapped aperture page, an offset past the BAR) return 0; such writes are dropped.
  // Never fails.
  virtual uint64_t Read(Bar bar, uint64_t offset, Width width) = 0;
  virtual void Write(Bar bar, uint64_t offset, Width width, uint64_t value) = 0;

  // Bulk copies through the BAR1/BAR3 apertures (drivers do small transfers this way, as Gdev
  // does). Fails with kInvalidArgument for BAR0 and kOutOfRange past the end of the BAR; bytes in
  // pages the aperture does not map read as 0 / are dropped, exactly as single accesses would.
  virtual Status ReadBlock(Bar bar, uint64_t offset, void* dst, uint64_t length) = 0;
  virtual Status WriteBlock(Bar bar, uint64_t offset, const void* src, uint64_t length) = 0;

  // `count` single writes of `width` bytes to consecutive offsets from `offset` upwards, in order:
  // element i is the i-th `width` bytes of `data` (little endian), or with `repeat` always the
  // first. Exactly what that many Write calls do — which is the default; a device may do it faster
  // (the software GPU translates an aperture page once for all the elements in it). This is how
  // a trapped guest's rep movs / rep stos reaches the GPU (aggregator/pt_gpu.h).
  virtual void WriteElements(Bar bar, uint64_t offset, Width width, const uint8_t* data,
                             uint64_t count, bool repeat = false) {
    const uint64_t w = static_cast<uint64_t>(width);
    for (uint64_t i = 0; i < count; ++i) {
      uint64_t value = 0;
      std::memcpy(&value, data + (repeat ? 0 : i * w), w);
      Write(bar, offset + i * w, width, value);
    }
  }

  // The interrupt line (level-triggered, like PCI INTx). An empty handler disconnects it.
  virtual void SetInterruptHandler(InterruptHandler handler) = 0;
  virtual bool interrupt_asserted() const = 0;

  // Register tracing: the observer sees every BAR access made through this Device. Empty removes
  // it.
  virtual void SetAccessObserver(AccessObserver observer) = 0;

  // Conveniences.
  uint8_t Read8(Bar bar, uint64_t offset) { return uint8_t(Read(bar, offset, Width::k8)); }
  uint16_t Read16(Bar bar, uint64_t offset) { return uint16_t(Read(bar, offset, Width::k16)); }
  uint32_t Read32(Bar bar, uint64_t offset) { return uint32_t(Read(bar, offset, Width::k32)); }
  uint64_t Read64(Bar bar, uint64_t offset) { return Read(bar, offset, Width::k64); }
  void Write8(Bar bar, uint64_t offset, uint8_t v) { Write(bar, offset, Width::k8, v); }
  void Write16(Bar bar, uint64_t offset, uint16_t v) { Write(bar, offset, Width::k16, v); }
  void Write32(Bar bar, uint64_t offset, uint32_t v) { Write(bar, offset, Width::k32, v); }
  void Write64(Bar bar, uint64_t offset, uint64_t v) { Write(bar, offset, Width::k64, v); }
  // BAR0 registers are what drivers touch most.
  uint32_t ReadReg(uint32_t offset) { return Read32(Bar::k0, offset); }
  void WriteReg(uint32_t offset, uint32_t v) { Write32(Bar::k0, offset, v); }
};

}  // namespace gpuvm::gpu

#endif  // GPUVM_GPU_DEVICE_H_
