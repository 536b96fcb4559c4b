#include "aggregator/sim_gpu.h"

#include "gpu/sim/compute/simt_engine.h"

namespace gpuvm::aggregator {

Result<std::unique_ptr<SimGpu>> SimGpu::Create(const SimGpuOptions& options) {
  std::unique_ptr<SimGpu> gpu(new SimGpu(options));
  GPUVM_RETURN_IF_ERROR(gpu->Build());
  return gpu;
}

SimGpu::~SimGpu() {
  if (device_) device_->SetInterruptHandler(nullptr);
  device_.reset();  // the engine thread stops before the window it translates through goes
}

Status SimGpu::Build() {
  sim::SimDeviceOptions o;
  o.vram_size = options_.vram_bytes;
  o.vram_file = options_.vram_file;
  o.bar1_size = options_.bar1_bytes;
  o.bar3_size = options_.bar3_bytes;
  o.threaded = options_.threaded;
  o.host_memory = &host_window();
  o.on_channel_drained = [this](uint32_t channel) {
    std::lock_guard lock(drained_mu_);
    if (drained_handler_) drained_handler_(channel);
  };
  if (options_.compute_engine) {
    sim::compute::EngineOptions engine;
    engine.workers = options_.compute_workers;
    // A fresh engine per device instance: nothing (code cache, half-run job) survives a reset.
    o.compute_engine = sim::compute::SimtEngine::Create(engine);
  }
  GPUVM_ASSIGN_OR_RETURN(device_, sim::SimDevice::Create(o));
  if (handler_) device_->SetInterruptHandler(handler_);
  return Status::Ok();
}

std::string SimGpu::Describe() const {
  return "sim (software GF100, " + std::to_string(options_.vram_bytes >> 20) + " MiB VRAM" +
         (options_.vram_file.empty() ? "" : " in " + options_.vram_file) + ")";
}

Status SimGpu::Reset() {
  if (device_) device_->SetInterruptHandler(nullptr);
  device_.reset();
  ++resets_;
  return Build().WithContext("rebuilding the software GPU");
}

void SimGpu::SetInterruptHandler(gpu::InterruptHandler handler) {
  handler_ = std::move(handler);
  if (device_) device_->SetInterruptHandler(handler_);  // none after a failed reset
}

void SimGpu::SetChannelDrainedHandler(std::function<void(uint32_t channel)> handler) {
  std::lock_guard lock(drained_mu_);
  drained_handler_ = std::move(handler);
}

std::span<uint8_t> SimGpu::vram_mapping() {
  if (device_ == nullptr) return {};
  return {device_->vram().data(), device_->vram_size()};
}

int SimGpu::vram_frames_fd() const {
  // Only a file the operator named (machine frames); never our own memfd.
  return device_ != nullptr && !options_.vram_file.empty() ? device_->vram_fd() : -1;
}

int SimGpu::owner_vram_fd() const {
  // Our own memfd (sealed against shrinking and growing: gpu/sim/memory.h); Reset() builds a new
  // device with a new one, so the previous owner's copy reaches nothing of the next owner's VRAM.
  return device_ != nullptr && options_.vram_file.empty() && device_->vram().rebindable()
             ? device_->vram_fd()
             : -1;
}

bool SimGpu::can_back_vram() const { return device_ != nullptr && device_->vram().rebindable(); }

Status SimGpu::BackVram(uint64_t address, uint64_t length, int fd, uint64_t offset, bool populate) {
  if (device_ == nullptr) return Status::Unavailable("the software GPU is gone (a failed reset)");
  return device_->vram().Back(address, length, fd, offset, populate);
}

Status SimGpu::RestoreVram(uint64_t address, uint64_t length) {
  if (device_ == nullptr) return Status::Unavailable("the software GPU is gone (a failed reset)");
  return device_->vram().Restore(address, length);
}

}  // namespace gpuvm::aggregator
