// `--gpu sim`: the software GF100 (gpu/sim SimDevice) with the SIMT compute engine
// (gpu/sim/compute) in the aggregator's process, as the physical GPU. Its SYSRAM accesses go
// through the PhysicalGpu's GuestRamWindow, i.e. into the owning VM's RAM.
//
// Reset = a cold restart: the device instance is destroyed (its engine thread and the compute
// engine's workers stop, every cached translation goes with it, VRAM — a memfd — is released) and a
// new one is built with the same options: registers at their power-on values, VRAM reads zero. The
// previous owner's data is not scrubbed; it is gone with the memory that held it (with
// `vram_file`, the new instance zeroes the file's VRAM bytes instead). Pages backed by a VM's own
// memfd (BackVram) go with the old instance's view; full virtualization restores them before the
// last fv VM leaves, and resets only then.
//
// Threading: as PhysicalGpu.
#ifndef GPUVM_AGGREGATOR_SIM_GPU_H_
#define GPUVM_AGGREGATOR_SIM_GPU_H_

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "aggregator/physical_gpu.h"
#include "base/os.h"
#include "gpu/sim/device.h"

namespace gpuvm::aggregator {

struct SimGpuOptions {
  uint64_t vram_bytes = 1ull << 30;
  // Non-empty: VRAM is the start of this file (e.g. a PCI BAR's sysfs resourceN), not a memfd.
  std::string vram_file;
  uint64_t bar1_bytes = 128ull << 20;
  uint64_t bar3_bytes = 64ull << 20;
  int compute_workers = 0;  // 0: one per core
  // false: no engine thread (tests drive sim_device()->RunUntilIdle(); no compute engine either).
  bool threaded = true;
  bool compute_engine = true;
};

class SimGpu final : public PhysicalGpu {
 public:
  static Result<std::unique_ptr<SimGpu>> Create(const SimGpuOptions& options);
  ~SimGpu() override;

  std::string Describe() const override;
  gpu::Device& device() override { return *device_; }
  uint64_t vram_bytes() const override { return options_.vram_bytes; }
  bool reaches_guest_memory() const override { return true; }
  std::span<uint8_t> vram_mapping() override;
  int vram_frames_fd() const override;
  int owner_vram_fd() const override;
  bool can_back_vram() const override;
  Status BackVram(uint64_t address, uint64_t length, int fd, uint64_t offset,
                  bool populate) override;
  Status RestoreVram(uint64_t address, uint64_t length) override;
  Status Reset() override;
  uint64_t resets() const override { return resets_; }
  void SetInterruptHandler(gpu::InterruptHandler handler) override;
  void SetChannelDrainedHandler(std::function<void(uint32_t channel)> handler) override;
  bool ReportsChannelDrained() const override { return true; }

  sim::SimDevice* sim_device() { return device_.get(); }

 private:
  explicit SimGpu(const SimGpuOptions& options) : options_(options) {}
  Status Build();

  const SimGpuOptions options_;
  std::unique_ptr<sim::SimDevice> device_;
  gpu::InterruptHandler handler_;
  // The channel-drained handler: set on the owner thread, called on the device's engine thread.
  std::mutex drained_mu_;
  std::function<void(uint32_t)> drained_handler_;
  uint64_t resets_ = 0;
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_SIM_GPU_H_
