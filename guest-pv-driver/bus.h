// The Bus: everything the guest GPU driver may do to reach the GPU. BAR reads and writes (single
// accesses of 8/16/32/64 bits and block transfers through the BAR1/BAR3 apertures), making host
// memory reachable by DMA (the bus addresses go into SYSRAM page-table entries), and optionally the
// interrupt line. The driver holds nothing else: the same driver code runs on every Bus, which is
// what "unmodified" means in gpuvm (docs/GUEST-DRIVER.md).
//
// Backends:
//   - NativeBus (native_bus.h): straight onto a gpu::Device (the software GF100 in the same
//     process), DMA through a registry of pinned host memory. The "native" baseline.
//   - later, not here: a trapping Bus inside a local VM (hypervisor/local), and a Bus over sysfs
//     resourceN mmaps inside a Xen HVM guest.
//
// Threading: implementations must allow every method to be called from any number of threads at
// once (the driver's channels run on the runtime's threads). Single accesses are atomic with
// respect to each other; nothing orders accesses of different threads beyond that, as on PCI. The
// interrupt handler may run on any thread (for the software GPU: the thread that made the change,
// often the device's engine thread); it must not block and must not call back into the Bus.
#ifndef GPUVM_GUEST_PV_DRIVER_BUS_H_
#define GPUVM_GUEST_PV_DRIVER_BUS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "base/status.h"
#include "gpu/device.h"
#include "gpu/hw/pmc.h"

namespace gpuvm::guest {

using gpu::Bar;
using gpu::Width;

// Host memory the device may reach by DMA, for as long as this object lives. The bytes are the
// caller's; the mapping only makes them reachable. Destroying it withdraws the bus addresses: the
// driver first removes every page-table entry naming them and flushes the TLBs (on the software GPU
// the MMU caches host pointers, see gpu::HostMemory).
class DmaMapping {
 public:
  virtual ~DmaMapping() = default;

  virtual uint8_t* host() const = 0;
  virtual uint64_t length() const = 0;
  // The bus address of the 4 KiB page holding byte `offset` of the mapping (offset < length()).
  // Pages need not be contiguous on the bus (a guest's RAM is not), so callers ask page by page.
  virtual uint64_t PageBusAddress(uint64_t offset) const = 0;
};

class Bus {
 public:
  virtual ~Bus() = default;

  // PCI identity and BAR sizes of the device behind this bus.
  virtual const gpu::PciIdentity& pci() const = 0;

  // One access of `width` bytes. Never fails (a dead register reads 0), as on PCI.
  virtual uint64_t Read(Bar bar, uint64_t offset, Width width) = 0;
  virtual void Write(Bar bar, uint64_t offset, Width width, uint64_t value) = 0;

  // Bulk copies through BAR1 or BAR3. kInvalidArgument for BAR0, kOutOfRange past the BAR's end.
  virtual Status ReadBlock(Bar bar, uint64_t offset, void* dst, uint64_t length) = 0;
  virtual Status WriteBlock(Bar bar, uint64_t offset, const void* src, uint64_t length) = 0;
  // Sets [offset, offset + length) of BAR1 or BAR3 to `byte` (memset_io: what zeroes page tables
  // and instance objects). Errors as WriteBlock. The default writes a buffer of that byte with
  // WriteBlock; a trapping bus stores it with rep stos, one trap per 4096 elements instead of one
  // per page (local_trap_bus.h).
  virtual Status FillBlock(Bar bar, uint64_t offset, uint8_t byte, uint64_t length);
  // 32-bit stores of `values` to consecutive BAR0 offsets from `offset` (4-byte aligned) upwards,
  // in order: exactly that many WriteReg calls (the default). A trapping bus makes them one rep
  // movsd per page instead of one trap each (what a memcpy_toio into the PRAMIN window is).
  virtual void WriteRegs(uint64_t offset, std::span<const uint32_t> values);

  // Makes [host, host + length) reachable by DMA. Both must be 4 KiB aligned and length > 0; the
  // memory must stay allocated while the mapping lives.
  virtual Result<std::unique_ptr<DmaMapping>> MapDma(void* host, uint64_t length) = 0;

  // New zeroed memory of `length` bytes (4 KiB multiple, > 0) that the device reaches by DMA, owned
  // by the returned mapping: destroying it frees the memory (pinned host memory, cuMemAllocHost).
  // The default maps anonymous memory and calls MapDma; a bus whose DMA memory must be somewhere
  // particular (a VM's RAM) allocates it there directly, without moving bytes twice.
  virtual Result<std::unique_ptr<DmaMapping>> AllocDma(uint64_t length);
  // As AllocDma, but the memory is placed at exactly `at` in this process (4 KiB aligned): managed
  // memory, whose host address is also its GPU virtual address (docs/RUNTIME.md, "Managed
  // memory"). Never replaces a mapping: kAlreadyExists when any page of the range is taken.
  // The default maps anonymous memory there (MAP_FIXED_NOREPLACE) and calls MapDma; a bus that
  // cannot place its DMA memory in the caller's address space answers kUnimplemented.
  virtual Result<std::unique_ptr<DmaMapping>> AllocDmaAt(uint64_t length, void* at);

  // Connects the interrupt line (level-triggered; called with the new level on every change and
  // once with the current level). An empty handler disconnects. kUnimplemented when this bus has no
  // interrupt line; the driver then polls.
  virtual Status SetInterruptHandler(std::function<void(bool asserted)> handler) = 0;

  // Whether accesses travel to a GPU elsewhere — a trap to a device model and an aggregator, or a
  // real device behind a hypervisor — a path that can stall or go away, which the driver's long
  // waits then probe (WaitClock, driver_impl.h). An in-process GPU: false (the default).
  virtual bool remote() const { return false; }

  // Conveniences.
  uint32_t ReadReg(uint32_t offset) { return uint32_t(Read(Bar::k0, offset, Width::k32)); }
  void WriteReg(uint32_t offset, uint32_t value) { Write(Bar::k0, offset, Width::k32, value); }
  uint32_t Read32(Bar bar, uint64_t offset) { return uint32_t(Read(bar, offset, Width::k32)); }
  void Write32(Bar bar, uint64_t offset, uint32_t v) { Write(bar, offset, Width::k32, v); }
  uint64_t Read64(Bar bar, uint64_t offset) { return Read(bar, offset, Width::k64); }
  void Write64(Bar bar, uint64_t offset, uint64_t v) { Write(bar, offset, Width::k64, v); }

 private:
  // AllocDma and AllocDmaAt's default: anonymous memory (at `at` when not null) and MapDma.
  Result<std::unique_ptr<DmaMapping>> AnonymousDma(uint64_t length, void* at);
};

// Private anonymous memory of `length` bytes with protection `prot` and the extra mmap `flags`:
// anywhere when `at` is null, else at exactly `at` and never over an existing mapping
// (kAlreadyExists when any of its pages is taken).
Result<void*> MapAnonymous(uint64_t length, void* at, int prot, int flags);

// nouveau's register polls (the runlist, kicks, VM flushes) give up after two seconds
// (nvkm_msec(device, 2000, ...)); so do the driver's.
inline constexpr std::chrono::seconds kRegisterPollTimeout{2};

// Whether the GPU behind `bus` is gone: PMC_BOOT_0 reads all-ones (a master abort — a device
// model or an aggregator session that ended, a card that fell off the bus); a live GF100 never
// reads so.
inline bool GpuGone(Bus* bus) { return bus->ReadReg(gf100::pmc::kBoot0) == 0xffffffffu; }

// Reads register `reg` until `done(value)`; false once kRegisterPollTimeout has passed, or at once
// when the register reads all-ones and the GPU is gone (GpuGone): a poll of a dead device would
// otherwise spin for the whole timeout, and a teardown that disables channels and commits
// playlists polls several times (the pvdrm backend's exit once spun 4 s of CPU so).
template <typename Pred>
bool PollReg(Bus* bus, uint32_t reg, Pred done) {
  const auto deadline = std::chrono::steady_clock::now() + kRegisterPollTimeout;
  for (;;) {
    const uint32_t value = bus->ReadReg(reg);
    if (done(value)) return true;
    if (value == 0xffffffffu && GpuGone(bus)) return false;
    if (std::chrono::steady_clock::now() > deadline) return false;
  }
}

}  // namespace gpuvm::guest

#endif  // GPUVM_GUEST_PV_DRIVER_BUS_H_
