// Test support for full virtualization: fv VMs inside the test process. FvTestWorld is the
// software GPU, the FvHost on it and the VMs a test adds (their shared aggregator lock, the host's
// log); FvTestVm is one VM. FvTestVm gives a
// FullVirtGpu the RAM a local VM has (a sealed memfd) and is a guest::Bus straight onto it, so the
// unmodified guest driver runs against the virtual GPU without device model or trap round trips.
// DMA maps the caller's pages over guest frames (as the local VM's trapping bus does), so the bus
// addresses the driver writes into SYSRAM PTEs are guest-physical. Every call takes the aggregator
// lock the test shares between its VMs: virtual GPUs and FvHost are single-threaded, as in the
// aggregator. Raw accessors (vgpu()) let a test play a hostile guest.
//
// Threading: every guest::Bus method from any thread (serialized by the aggregator lock).
#ifndef GPUVM_TESTS_FV_TEST_VM_H_
#define GPUVM_TESTS_FV_TEST_VM_H_

#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "aggregator/fv_gpu.h"
#include "aggregator/fv_host.h"
#include "aggregator/guest_ram.h"
#include "aggregator/sim_gpu.h"
#include "base/os.h"
#include "guest-pv-driver/bus.h"

namespace gpuvm::aggregator::fv_testing {

// One local VM's RAM (a sealed memfd) and a guest::Bus straight onto its FullVirtGpu. DMA maps the
// caller's pages over guest frames, as the local VM's trapping bus does, so bus addresses are
// guest-physical. Every call takes the aggregator lock: the virtual GPUs and the host are
// single-threaded, as in the aggregator.
class FvTestVm final : public guest::Bus {
 public:
  FvTestVm(std::mutex* aggregator_lock, PhysicalGpu* gpu) : lock_(aggregator_lock), gpu_(gpu) {}

  Status Start(FvHost* host, const FvVmOptions& options, uint64_t ram_bytes) {
    GPUVM_ASSIGN_OR_RETURN(os::UniqueFd fd, os::CreateSealedMemfd("fv-vm", ram_bytes));
    GPUVM_ASSIGN_OR_RETURN(os::UniqueFd dup, os::DuplicateFd(fd.get()));
    GPUVM_ASSIGN_OR_RETURN(ram_, GuestRam::FromLocalMemfd(std::move(dup), ram_bytes));
    memfd_ = std::move(fd);
    pci_ = gpu_->device().pci();
    std::lock_guard lock(*lock_);
    GPUVM_ASSIGN_OR_RETURN(
        vgpu_,
        FullVirtGpu::Create(host, VmBars{pci_.bar0_size, pci_.bar1_size, pci_.bar3_size}, options));
    return vgpu_->AttachGuestRam(*ram_);
  }
  void Stop() {
    std::lock_guard lock(*lock_);
    if (vgpu_) (void)vgpu_->Detach();
  }
  FullVirtGpu& vgpu() { return *vgpu_; }
  std::span<uint8_t> ram() { return ram_->bytes(); }

  const gpu::PciIdentity& pci() const override { return pci_; }
  uint64_t Read(gpu::Bar bar, uint64_t offset, gpu::Width width) override {
    std::lock_guard lock(*lock_);
    Result<uint64_t> v = vgpu_->Read(bar, offset, uint32_t(width), 0);
    return v.ok() ? *v : 0;
  }
  void Write(gpu::Bar bar, uint64_t offset, gpu::Width width, uint64_t value) override {
    std::lock_guard lock(*lock_);
    (void)vgpu_->Write(bar, offset, uint32_t(width), value, 0);
  }
  Status ReadBlock(gpu::Bar bar, uint64_t offset, void* dst, uint64_t length) override {
    if (bar == gpu::Bar::k0) return Status::InvalidArgument("no blocks in BAR0");
    std::lock_guard lock(*lock_);
    const uint32_t size = length % 4 == 0 ? 4 : 1;
    return vgpu_->ReadElements(bar, offset, size, {static_cast<uint8_t*>(dst), length}, 0);
  }
  Status WriteBlock(gpu::Bar bar, uint64_t offset, const void* src, uint64_t length) override {
    if (bar == gpu::Bar::k0) return Status::InvalidArgument("no blocks in BAR0");
    std::lock_guard lock(*lock_);
    const uint32_t size = length % 4 == 0 ? 4 : 1;
    return vgpu_->WriteElements(bar, offset, size, {static_cast<const uint8_t*>(src), length}, 0);
  }
  Result<std::unique_ptr<guest::DmaMapping>> MapDma(void* host, uint64_t length) override;
  // The lock this VM takes (for a test's raw accesses through vgpu()).
  std::mutex& lock() { return *lock_; }
  Status SetInterruptHandler(std::function<void(bool)>) override {
    return Status::Unimplemented("the driver polls");
  }

 private:
  class Pages;
  std::mutex* lock_;
  PhysicalGpu* gpu_;
  gpu::PciIdentity pci_;
  os::UniqueFd memfd_;
  std::unique_ptr<GuestRam> ram_;
  std::unique_ptr<FullVirtGpu> vgpu_;
  std::mutex frames_mu_;
  uint64_t next_frame_ = 16;  // (our choice) the first 64 KiB stay unused
};

struct FvWorldOptions {
  uint64_t gpu_vram_bytes = 512ull << 20;
  uint64_t reserved_bytes = 32ull << 20;
  VramPolicy vram_policy = VramPolicy::kDynamic;
  bool compute_engine = false;  // the compute engine (kernels) on the software GPU
  int compute_workers = 1;
  // Non-empty: the software GPU keeps VRAM in this file (machine frames, --sim-vram-file) instead
  // of its own memfd, so there is no per-VM backing.
  std::string vram_file = "";
  RateLimitedLog::Options guest_log = {};  // FvOptions::guest_log
};

// A software GPU, the FvHost on it, and the fv VMs of one test. The host's log is collected
// (log()). Destruction stops every VM, then the host.
//
// Threading: AddVm/Stop from the test's main thread; the VMs' Bus methods from any thread.
class FvTestWorld {
 public:
  static Result<std::unique_ptr<FvTestWorld>> Create(const FvWorldOptions& options);
  ~FvTestWorld();

  // A VM with `options` (vm_id and name filled in when 0/empty) and `ram_bytes` of RAM.
  Result<FvTestVm*> AddVm(FvVmOptions options, uint64_t ram_bytes = 64ull << 20);
  SimGpu& gpu() { return *gpu_; }
  FvHost& host() { return *host_; }
  std::mutex& lock() { return lock_; }
  const std::vector<std::unique_ptr<FvTestVm>>& vms() const { return vms_; }
  std::string log();

 private:
  FvTestWorld() = default;

  std::mutex lock_;
  std::unique_ptr<SimGpu> gpu_;
  std::unique_ptr<FvHost> host_;
  std::vector<std::unique_ptr<FvTestVm>> vms_;
  std::mutex log_mu_;
  std::string log_;
};

}  // namespace gpuvm::aggregator::fv_testing

#endif  // GPUVM_TESTS_FV_TEST_VM_H_
