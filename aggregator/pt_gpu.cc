#include "aggregator/pt_gpu.h"

#include <cstring>

namespace gpuvm::aggregator {

Result<std::unique_ptr<PassThroughGpu>> PassThroughGpu::Create(PhysicalGpu* gpu,
                                                               const VmBars& bars) {
  const gpu::PciIdentity& physical = gpu->device().pci();
  for (gpu::Bar bar : {gpu::Bar::k0, gpu::Bar::k1, gpu::Bar::k3}) {
    if (bars.size(bar) > physical.BarSize(bar)) {
      return Status::InvalidArgument("pt: BAR" + std::to_string(static_cast<int>(bar)) + " of " +
                                     std::to_string(bars.size(bar) >> 20) +
                                     " MiB is larger than the GPU's (" +
                                     std::to_string(physical.BarSize(bar) >> 20) + " MiB)");
    }
  }
  return std::unique_ptr<PassThroughGpu>(new PassThroughGpu(gpu, bars));
}

PassThroughGpu::~PassThroughGpu() {
  if (!detached_) (void)Detach();
}

Status PassThroughGpu::Check(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t length) const {
  return CheckBarAccess(detached_, bars_, bar, offset, size, length);
}

Result<uint64_t> PassThroughGpu::Read(gpu::Bar bar, uint64_t offset, uint32_t size, uint32_t) {
  GPUVM_RETURN_IF_ERROR(Check(bar, offset, size, size));
  return gpu_->device().Read(bar, offset, static_cast<gpu::Width>(size));
}

Status PassThroughGpu::Write(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t value,
                             uint32_t) {
  GPUVM_RETURN_IF_ERROR(Check(bar, offset, size, size));
  gpu_->device().Write(bar, offset, static_cast<gpu::Width>(size), value);
  return Status::Ok();
}

// Element by element, exactly as the single accesses would reach the GPU (a register block, or
// 8-byte stores a GPU sees as such), only without a round trip each: gpu::Device::WriteElements,
// which the software GPU performs a page at a time with the same result.
Status PassThroughGpu::WriteElements(gpu::Bar bar, uint64_t offset, uint32_t size,
                                     std::span<const uint8_t> data, uint32_t) {
  GPUVM_RETURN_IF_ERROR(Check(bar, offset, size, data.size()));
  gpu_->device().WriteElements(bar, offset, static_cast<gpu::Width>(size), data.data(),
                               data.size() / size);
  return Status::Ok();
}

// A rep stos: `count` single writes of the same value, the same way.
Status PassThroughGpu::FillElements(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t value,
                                    uint32_t count, uint32_t) {
  GPUVM_RETURN_IF_ERROR(Check(bar, offset, size, uint64_t{count} * size));
  uint8_t element[8];
  std::memcpy(element, &value, sizeof(element));  // little endian: the low `size` bytes first
  gpu_->device().WriteElements(bar, offset, static_cast<gpu::Width>(size), element, count,
                               /*repeat=*/true);
  return Status::Ok();
}

Status PassThroughGpu::ReadElements(gpu::Bar bar, uint64_t offset, uint32_t size,
                                    std::span<uint8_t> out, uint32_t) {
  GPUVM_RETURN_IF_ERROR(Check(bar, offset, size, out.size()));
  gpu::Device& device = gpu_->device();
  for (size_t at = 0; at < out.size(); at += size) {
    const uint64_t value = device.Read(bar, offset + at, static_cast<gpu::Width>(size));
    std::memcpy(out.data() + at, &value, size);
  }
  return Status::Ok();
}

bool PassThroughGpu::interrupt_asserted() const {
  return !detached_ && gpu_->device().interrupt_asserted();
}

Status PassThroughGpu::AttachGuestRam(const GuestRam& ram) {
  if (detached_) return Status::FailedPrecondition("the VM's virtual GPU is gone");
  // A GPU that cannot reach guest memory through the window (a real card without an IOMMU mapping)
  // gets nothing: the Aggregator's admission policy has already decided whether such a pt VM may
  // run at all.
  if (gpu_->reaches_guest_memory()) gpu_->host_window().Attach(ram.bytes());
  return Status::Ok();
}

Status PassThroughGpu::Detach() {
  if (detached_) return Status::Ok();
  detached_ = true;
  // The reset first: until it is done the device may still hold pointers into the VM's RAM.
  Status reset = gpu_->Reset();
  gpu_->host_window().Detach();
  return reset;
}

}  // namespace gpuvm::aggregator
