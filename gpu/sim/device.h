// The software GF100: a register-level model of an NVIDIA Quadro 6000 behind the gpu::Device port.
// It is the embedded default "physical GPU" of gpuvm. Units mirror the hardware: PMC (pmc.h), PBUS
// with the PRAMIN window and the BAR1/BAR3 apertures (here), the MMU and TLB (mmu.h), PFIFO with
// channels and the scheduler (fifo.h, channel.h, pushbuf.h), the copy engines (copy_engine.h) and
// the compute class (compute_class.h) in front of an injected compute engine (compute_engine.h).
// docs/SOFTWARE-GPU.md describes what is faithful and what is our choice.
//
// Threading: the gpu::Device methods are thread-safe (see gpu/device.h). In threaded mode (the
// default) PFIFO runs channels on one engine thread owned by the device; a write of IB_PUT returns
// at once. In single-step mode there is no thread: the test calls RunUntilIdle() and channels run
// on its thread, deterministically; RunUntilIdle must not be called concurrently with itself. The
// introspection methods (channel_error, channel_stats, stats) are thread-safe.
#ifndef GPUVM_GPU_SIM_DEVICE_H_
#define GPUVM_GPU_SIM_DEVICE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "gpu/device.h"
#include "gpu/hw/pci.h"
#include "gpu/sim/channel_types.h"
#include "gpu/sim/compute_engine.h"
#include "gpu/sim/fifo.h"
#include "gpu/sim/memory.h"
#include "gpu/sim/mmu.h"
#include "gpu/sim/pmc.h"

namespace gpuvm::sim {

struct SimDeviceOptions {
  uint64_t vram_size = 1ull << 30;  // backed lazily by a memfd
  // Non-empty: VRAM is the start of this file instead (Vram::Open; zeroed at every Create).
  std::string vram_file;
  uint64_t bar1_size = gf100::pci::kDefaultBar1Size;
  uint64_t bar3_size = gf100::pci::kDefaultBar3Size;
  // false: deterministic single-step mode (no device thread; call RunUntilIdle).
  bool threaded = true;
  // The SYSRAM port; may be null (every SYSRAM access then faults). Must outlive the device.
  gpu::HostMemory* host_memory = nullptr;
  // Executes compute grids (class 0x90c0 LAUNCH); may be null (a LAUNCH is then a channel error).
  std::shared_ptr<ComputeEngine> compute_engine;
  // How long one channel runs before the next runnable channel gets its turn.
  std::chrono::nanoseconds time_slice = std::chrono::milliseconds(1);
  // (gpuvm extension, not hardware) Called on the thread running the channels (the engine thread,
  // or RunUntilIdle's caller), with no lock held, when a channel ends a slice with no work left
  // (IB_GET caught up with IB_PUT and nothing fetched is unfinished) or with an error: the
  // aggregator's dispatcher checks for completion then instead of at its next poll. May be empty;
  // must not block for long.
  std::function<void(uint32_t chid)> on_channel_drained;
};

struct DeviceStats {
  uint64_t unknown_register_reads = 0;   // reads of BAR0 offsets no unit implements (returned 0)
  uint64_t unknown_register_writes = 0;  // writes to them (dropped)
  uint64_t unmapped_aperture_accesses =
      0;                         // BAR1/BAR3 accesses with the BAR's VM off or past its end
  uint64_t aperture_faults = 0;  // BAR1/BAR3 accesses that faulted in the MMU
  uint64_t page_walks = 0;
  uint64_t tlb_flushes = 0;
};

class SimDevice final : public gpu::Device, private InterruptSink {
 public:
  static Result<std::unique_ptr<SimDevice>> Create(const SimDeviceOptions& options);
  ~SimDevice() override;

  // gpu::Device.
  const gpu::PciIdentity& pci() const override { return pci_; }
  uint64_t Read(gpu::Bar bar, uint64_t offset, gpu::Width width) override;
  void Write(gpu::Bar bar, uint64_t offset, gpu::Width width, uint64_t value) override;
  Status ReadBlock(gpu::Bar bar, uint64_t offset, void* dst, uint64_t length) override;
  Status WriteBlock(gpu::Bar bar, uint64_t offset, const void* src, uint64_t length) override;
  // BAR1/BAR3: each run of whole elements inside one page is translated once and stored with one
  // copy (and snooped once); a page that does not translate, an element straddling two pages and
  // everything under an access observer go element by element through Write, so faults, counters
  // and the trace are exactly those of single writes.
  void WriteElements(gpu::Bar bar, uint64_t offset, gpu::Width width, const uint8_t* data,
                     uint64_t count, bool repeat = false) override;
  // The handler may call back into the device, but must not call SetInterruptHandler.
  void SetInterruptHandler(gpu::InterruptHandler handler) override;
  bool interrupt_asserted() const override { return line_.load(std::memory_order_acquire); }
  void SetAccessObserver(gpu::AccessObserver observer) override;

  // VRAM's own memory: a private memfd, or the file of options.vram_file (memory.h).
  int vram_fd() const { return vram_->fd(); }
  uint64_t vram_size() const { return vram_->size(); }
  // The VRAM view every unit reads through, and its re-backing (memory.h: Back/Restore).
  Vram& vram() { return *vram_; }

  // Runs channels until none can make progress (idle, blocked on a semaphore, or dead), at most
  // `max_slices` time slices; returns the number of slices run. In threaded mode it waits for the
  // engine thread to become idle instead (up to one minute) and returns 0.
  size_t RunUntilIdle(size_t max_slices = SIZE_MAX);
  // Threaded mode: waits until the engine thread is idle. Returns false on timeout.
  bool WaitIdle(std::chrono::nanoseconds timeout);

  ChannelError channel_error(uint32_t chid) const { return pfifo_->channel_error(chid); }
  ChannelStats channel_stats(uint32_t chid) const { return pfifo_->channel_stats(chid); }
  DeviceStats stats() const;

  // Drops every cached translation (all TLBs). The host-memory owner calls it, with no channel
  // running, before withdrawing memory the device may have cached pointers into.
  void ForgetHostTranslations() { mmu_->FlushAll(); }

  // The MMU, for the benchmark's page-walk figures and white-box tests.
  Mmu* mmu_for_testing() { return mmu_.get(); }

 private:
  // A BAR aperture's binding to its VM (written under the register lock, read lock-free).
  struct Aperture {
    std::atomic<bool> vm_mode{false};
    std::atomic<AddressSpace*> space{nullptr};
    std::atomic<uint64_t> limit{0};
    std::atomic<uint64_t> inst{0};
    uint32_t reg = 0;  // the instance register as written
  };

  explicit SimDevice(const SimDeviceOptions& options);
  Status Init();

  uint64_t ReadBar0(uint64_t offset, unsigned width);
  void WriteBar0(uint64_t offset, unsigned width, uint64_t value);
  bool ReadRegister(uint32_t offset, uint32_t* value);    // register lock held
  bool WriteRegister(uint32_t offset, uint32_t value);    // register lock held
  void BindAperture(Aperture* aperture, uint32_t value);  // register lock held
  Aperture* ApertureFor(gpu::Bar bar) { return bar == gpu::Bar::k1 ? &bar1_ : &bar3_; }
  uint64_t ReadAperture(gpu::Bar bar, uint64_t offset, unsigned width);
  void WriteAperture(gpu::Bar bar, uint64_t offset, unsigned width, uint64_t value);
  // Translates one aperture access that stays within a page; records the fault if it fails.
  uint8_t* TranslateAperture(gpu::Bar bar, uint64_t offset, uint64_t length, bool write);
  void Observe(gpu::Bar bar, bool write, bool block, uint64_t offset, uint64_t size,
               uint64_t value);

  // InterruptSink.
  void UpdateInterrupts() override;
  void DeliverInterrupt() override;

  const SimDeviceOptions options_;
  gpu::PciIdentity pci_;
  std::unique_ptr<Vram> vram_;
  std::unique_ptr<PhysicalMemory> memory_;
  std::unique_ptr<Mmu> mmu_;

  // Register state of PMC, PBUS and PFIFO.
  mutable std::mutex register_lock_;
  Pmc pmc_;
  std::atomic<uint64_t> pramin_base_{0};
  Aperture bar1_;
  Aperture bar3_;
  std::unique_ptr<Pfifo> pfifo_;

  std::atomic<uint64_t> unknown_reads_{0};
  std::atomic<uint64_t> unknown_writes_{0};
  std::atomic<uint64_t> unmapped_aperture_{0};
  std::atomic<uint64_t> aperture_faults_{0};

  // Interrupt line: the level PMC computes (register lock) and the level last delivered (irq lock).
  std::atomic<bool> line_{false};
  std::mutex irq_mu_;
  std::atomic<bool> delivered_{false};
  gpu::InterruptHandler handler_;

  std::atomic<bool> observing_{false};
  std::mutex observer_mu_;
  gpu::AccessObserver observer_;
};

}  // namespace gpuvm::sim

#endif  // GPUVM_GPU_SIM_DEVICE_H_
