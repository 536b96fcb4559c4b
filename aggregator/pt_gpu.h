// Pass-through: the VM owns the whole physical GPU and its trapped accesses are forwarded
// untranslated — register offsets, aperture offsets, and the guest-physical addresses the guest
// driver writes into SYSRAM page-table entries (which reach the VM's RAM through the GPU's
// GuestRamWindow). Only one pt VM exists at a time; the Aggregator enforces it.
//
// Xen's own PCI pass-through of a real card maps the BARs into the guest and takes no traps; ours
// keeps every trap, so pt minus native is the price of trapping (and fv minus pt, later, the price
// of shadowing).
//
// Detach = reset the whole GPU (PhysicalGpu::Reset: every channel gone, every cached translation
// dropped, VRAM unreadable for the next owner), then close the window onto the VM's RAM.
//
// Threading: as VirtualGpu.
#ifndef GPUVM_AGGREGATOR_PT_GPU_H_
#define GPUVM_AGGREGATOR_PT_GPU_H_

#include <memory>

#include "aggregator/physical_gpu.h"
#include "aggregator/virtual_gpu.h"

namespace gpuvm::aggregator {

class PassThroughGpu final : public VirtualGpu {
 public:
  // InvalidArgument when a VM BAR is larger than the physical one (the guest would address
  // registers or aperture pages that do not exist).
  static Result<std::unique_ptr<PassThroughGpu>> Create(PhysicalGpu* gpu, const VmBars& bars);
  ~PassThroughGpu() override;

  ipc::VmMode mode() const override { return ipc::VmMode::kPassThrough; }
  uint64_t vram_bytes() const override { return gpu_->vram_bytes(); }
  Result<uint64_t> Read(gpu::Bar bar, uint64_t offset, uint32_t size, uint32_t vcpu) override;
  Status Write(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t value,
               uint32_t vcpu) override;
  Status WriteElements(gpu::Bar bar, uint64_t offset, uint32_t size, std::span<const uint8_t> data,
                       uint32_t vcpu) override;
  Status ReadElements(gpu::Bar bar, uint64_t offset, uint32_t size, std::span<uint8_t> out,
                      uint32_t vcpu) override;
  Status FillElements(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t value, uint32_t count,
                      uint32_t vcpu) override;
  bool interrupt_asserted() const override;
  Status AttachGuestRam(const GuestRam& ram) override;
  Status Detach() override;

 private:
  PassThroughGpu(PhysicalGpu* gpu, const VmBars& bars) : gpu_(gpu), bars_(bars) {}
  // The access [offset, offset + length) of elements of `size` lies inside the VM's BAR.
  Status Check(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t length) const;

  PhysicalGpu* const gpu_;
  const VmBars bars_;
  bool detached_ = false;
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_PT_GPU_H_
