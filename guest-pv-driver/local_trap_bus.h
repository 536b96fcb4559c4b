// A Bus that traps: how the guest driver reaches its GPU from inside a local VM (the local
// hypervisor backend, where a VM is a process). It is the local equivalent of a guest mapping
// /sys/bus/pci/devices/.../resource0: every BAR access becomes an ioreq in Xen's layout that
// gpuvm-dm decodes and forwards to gpuvm-aggregator (docs/AGGREGATOR.md). It sits on the hypervisor
// port's guest side (hv::GuestIo, hypervisor/guest_io.h), which the port's factory opens
// (hypervisor/backend.h); it names no backend.
//
//   Read/Write          one trapped access (GuestIo) at the BAR's guest-physical address
//   ReadBlock/WriteBlock rep movs through a bounce page of guest RAM: one trap per <= 4 KiB piece
//                       (Xen issues rep MMIO a page at a time), which the device model splits into
//                       elements for the aggregator; 8-byte elements, 4-byte ones where that saves
//                       a trap for a 4-byte head or tail, bytes for other ragged ends
//                       (SplitRepTransfer)
//   WriteRegs           rep movsd of 32-bit elements into BAR0 (the PRAMIN window), a trap per page
//   FillBlock           rep stos (no buffer: the value is in the ioreq), 8-byte elements, at most
//                       4096 per trap as Xen clips a rep string instruction: zeroing a 256 KiB
//                       page table is 8 traps instead of 64
//   (BAR remap)         pages the device model mapped as memory (fv-bar-remap) do not trap:
//                       GuestIo reads/writes their backing directly, a block in one copy
//   MapDma              the pages become guest RAM: their contents move into frames of the VM's
//                       RAM file, which are then mapped over the same virtual addresses, and the
//                       bus addresses are those frames' guest-physical addresses — what SYSRAM PTEs
//                       must hold, and what the aggregator's GPU reaches in the owner's RAM
//   AllocDma            pinned memory (cuMemAllocHost) is guest RAM from the start: free frames
//                       mapped at new addresses, nothing copied in at allocation nor out at free
//   AllocDmaAt          the same at the caller's address (managed memory: host address = GPU va)
//   SetInterruptHandler INTA of the device, from GuestIo's interrupt eventfd and line state
//
// The VM side (LocalVmGuest) is one per process: the guest side of its domain (GuestIo), the
// guest's view of its RAM and a frame allocator for it, the vCPUs (each access takes a free vCPU,
// so threads of the driver trap in parallel up to the VM's vCPU count), the DMA page registry, the
// interrupt thread. Programs started by gpuvm-vm find their VM through $GPUVM_LOCAL_VM_FD
// (FromEnvironment: hv::OpenGuestIoFromEnvironment).
//
// Firmware: LocalTrapBus::Create enumerates the function like a PC's firmware and OS would: checks
// the identity, sizes the BARs, assigns addresses to unassigned ones (BAR0 below 4 GiB, BAR1/BAR3
// above 64 GiB: our choice), and enables memory decoding and bus mastering.
//
// A device model that is slow or stopped is waited for (GuestIo: as long as its process lives;
// FromEnvironment's VM: one line on stderr after 5 s without an answer, one when it comes). A
// device model that is gone (its process ended): the access that found out, and every later one,
// reads all-ones and drops writes (a PCI master abort), with one line on stderr; the bus is dead
// from then on.
//
// Limits: MapDma moves the bytes of memory that may be in use by other threads of the process; a
// write by another thread between the copy and the remap is lost (registering memory another thread
// is writing is a race in CUDA too). Memory must stay mapped until its DmaMapping is destroyed.
//
// Threading: every Bus method is thread-safe (bus.h); the interrupt handler runs on the VM's
// interrupt thread.
#ifndef GPUVM_GUEST_PV_DRIVER_LOCAL_TRAP_BUS_H_
#define GPUVM_GUEST_PV_DRIVER_LOCAL_TRAP_BUS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/os.h"
#include "base/status.h"
#include "guest-pv-driver/bus.h"
#include "guest-pv-driver/dma_page_table.h"
#include "hypervisor/guest_io.h"

namespace gpuvm::guest {

struct LocalVmGuestOptions {
  // (our choice) Guest RAM below this is never handed out for DMA, like a PC's first MiB, so a
  // zero bus address in a page-table entry is always a bug.
  uint64_t reserved_low_bytes = 1ull << 20;
  // Guest RAM at the top kept out of DMA allocations: what the VM sets aside for other uses (PVDRM:
  // the pages it shares with its backend, and its backend's own pool). 0: none.
  uint64_t reserved_high_bytes = 0;
};

class LocalVmGuest : public std::enable_shared_from_this<LocalVmGuest> {
 public:
  // The VM whose guest side is `io` (its accesses wait as long as `io` was opened to wait).
  static Result<std::shared_ptr<LocalVmGuest>> Create(std::unique_ptr<hv::GuestIo> io,
                                                      const LocalVmGuestOptions& options = {});
  // The process's VM from $GPUVM_LOCAL_VM_FD (hv::OpenGuestIoFromEnvironment, default options):
  // received on first use, the same object afterwards. FailedPrecondition when the variable is not
  // set (not inside gpuvm-vm).
  static Result<std::shared_ptr<LocalVmGuest>> FromEnvironment();
  ~LocalVmGuest();

  hv::DomainId domid() const { return io_->domid(); }
  uint32_t vcpu_count() const { return io_->vcpu_count(); }
  // Guest RAM as the guest sees it (guest-physical 0 at data()).
  std::span<uint8_t> ram() const { return ram_.bytes(); }
  // Frames not handed out (for tests and diagnostics).
  uint64_t free_frames() const;

  // Guest RAM as DMA memory without a GPU of ours (PVDRM's frontend names these frames to its
  // backend): MapDma moves [host, host + length) into frames of guest RAM (see LocalTrapBus);
  // AllocDma is zeroed memory that is guest RAM from the start, at `at` when not null (4 KiB
  // aligned; kAlreadyExists when any page there is taken), else anywhere. Bus addresses are
  // guest-physical.
  Result<std::unique_ptr<DmaMapping>> MapDma(void* host, uint64_t length);
  Result<std::unique_ptr<DmaMapping>> AllocDma(uint64_t length, void* at = nullptr);

 private:
  friend class LocalTrapBus;
  friend class LocalVmGuestTest;  // local_trap_bus_test.cc: the DMA paths without a device model
  class DmaPages;
  LocalVmGuest() = default;

  // Runs `f(vcpu)` on a vCPU no other thread is using.
  template <typename F>
  auto OnVcpu(F f);
  // Frames of guest RAM (may be non-contiguous).
  Result<std::vector<uint64_t>> AllocateFrames(uint64_t count);
  void FreeFrames(const std::vector<uint64_t>& frames);
  // Writes `length` bytes at guest-physical `gpa` through the RAM file (pwrite); false if that
  // failed part-way (the caller then copies the whole range through ram_) or the range is not RAM.
  bool WriteFrames(uint64_t gpa, const uint8_t* src, uint64_t length);
  // AllocDma: free frames (punched to zero as they are taken; freed ones keep their bytes until
  // then) mapped at new addresses, a run of consecutive frames per mmap. Nothing is copied.
  // `discard`: the bytes die with the mapping (AllocDma memory): the pages are released whatever
  // their count and get no private copy back; the caller unmaps them.
  void UnmapDma(uintptr_t first_page, uint64_t pages, bool discard = false);
  void UnmapDmaLocked(uintptr_t first_page, uint64_t pages,
                      bool discard = false);  // dma_mu_ held
  Status SetInterruptHandler(std::function<void(bool)> handler);
  void InterruptLoop();

  LocalVmGuestOptions options_;
  std::unique_ptr<hv::GuestIo> io_;
  os::SharedMapping ram_;

  struct Vcpu {
    std::mutex mu;
    uint64_t bounce_gpa = 0;  // one page of guest RAM for rep transfers
  };
  std::vector<std::unique_ptr<Vcpu>> vcpus_;

  mutable std::mutex frames_mu_;
  std::map<uint64_t, uint64_t> free_frames_;  // first frame -> count

  std::mutex dma_mu_;
  DmaPageTable dma_pages_;  // by host page address; guarded by dma_mu_

  std::mutex irq_mu_;  // held while the handler runs and while it changes
  std::function<void(bool)> irq_handler_;
  std::thread irq_thread_;
  os::UniqueFd irq_stop_;
};

// One trapped rep transfer (an ioreq with data_is_ptr): `count` elements of `element` bytes from
// byte `offset` of the transfer.
struct RepPiece {
  uint64_t offset = 0;
  uint32_t element = 0;
  uint32_t count = 0;
};
// How a rep transfer of `length` bytes at guest-physical `gpa` (at most a page) is issued, in
// elements of `whole` bytes (8 or 4) where the address allows: the traps it costs, in order.
// Exposed for tests.
std::vector<RepPiece> SplitRepTransfer(uint64_t gpa, uint64_t length, uint32_t whole);

struct LocalTrapBusOptions {
  hv::Sbdf sbdf{0, 0, 5, 0};  // where gpuvm-dm puts the GPU (qemu-device/virtual_gpu.h)
  // Addresses for BARs the firmware has not assigned yet (our choice: clear of RAM and of each
  // other).
  uint64_t bar0_address = 0xf0000000ull;
  uint64_t bar1_address = 0x1000000000ull;
  uint64_t bar3_address = 0x1800000000ull;
};

class LocalTrapBus final : public Bus {
 public:
  // Enumerates the device (see the file comment). NotFound when no device model claims the
  // function; FailedPrecondition when it is not an NVIDIA GPU.
  static Result<std::unique_ptr<LocalTrapBus>> Create(std::shared_ptr<LocalVmGuest> vm,
                                                      const LocalTrapBusOptions& options = {});
  // The process's VM (FromEnvironment) and its GPU.
  static Result<std::unique_ptr<LocalTrapBus>> FromEnvironment();
  ~LocalTrapBus() override;

  const gpu::PciIdentity& pci() const override { return pci_; }
  bool remote() const override { return true; }
  uint64_t Read(Bar bar, uint64_t offset, Width width) override;
  void Write(Bar bar, uint64_t offset, Width width, uint64_t value) override;
  Status ReadBlock(Bar bar, uint64_t offset, void* dst, uint64_t length) override;
  Status WriteBlock(Bar bar, uint64_t offset, const void* src, uint64_t length) override;
  Status FillBlock(Bar bar, uint64_t offset, uint8_t byte, uint64_t length) override;
  void WriteRegs(uint64_t offset, std::span<const uint32_t> values) override;
  Result<std::unique_ptr<DmaMapping>> MapDma(void* host, uint64_t length) override;
  Result<std::unique_ptr<DmaMapping>> AllocDma(uint64_t length) override;
  Result<std::unique_ptr<DmaMapping>> AllocDmaAt(uint64_t length, void* at) override;
  Status SetInterruptHandler(std::function<void(bool asserted)> handler) override;

  // Guest-physical address of each BAR.
  uint64_t bar_address(Bar bar) const;
  // Accesses that failed (the device model gone); non-zero means the bus is dead.
  uint64_t failed_accesses() const { return failed_.load(std::memory_order_relaxed); }

 private:
  LocalTrapBus(std::shared_ptr<LocalVmGuest> vm, const LocalTrapBusOptions& options)
      : vm_(std::move(vm)), options_(options) {}
  Status Enumerate();
  bool Fits(Bar bar, uint64_t offset, uint64_t length) const;
  void Failed(const Status& why);
  // One rep transfer of `length` <= 4096 bytes through the vCPU's bounce page, in elements of
  // `element` bytes (8 or 4) where the address allows.
  Status RepTransfer(uint32_t vcpu, bool read, uint64_t gpa, uint64_t length, uint32_t element = 8);

  std::shared_ptr<LocalVmGuest> vm_;
  LocalTrapBusOptions options_;
  gpu::PciIdentity pci_;
  uint64_t bar0_ = 0, bar1_ = 0, bar3_ = 0;
  std::atomic<uint64_t> failed_{0};
  bool interrupts_installed_ = false;
};

}  // namespace gpuvm::guest

#endif  // GPUVM_GUEST_PV_DRIVER_LOCAL_TRAP_BUS_H_
