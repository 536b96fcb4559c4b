// The checks VirtualGpu implementations share (virtual_gpu.h).
//
// Threading: a pure function.
#include "aggregator/virtual_gpu.h"

#include <string>

namespace gpuvm::aggregator {

Status CheckBarAccess(bool detached, const VmBars& bars, gpu::Bar bar, uint64_t offset,
                      uint32_t size, uint64_t length) {
  if (detached) return Status::FailedPrecondition("the VM's virtual GPU is gone");
  if (size != 1 && size != 2 && size != 4 && size != 8) {
    return Status::InvalidArgument("MMIO size must be 1, 2, 4 or 8");
  }
  if (length == 0 || length % size != 0) {
    return Status::InvalidArgument("a block must be whole elements");
  }
  const uint64_t bar_size = bars.size(bar);
  if (offset >= bar_size || length > bar_size - offset) {
    return Status::OutOfRange("access past the end of BAR" + std::to_string(static_cast<int>(bar)));
  }
  return Status::Ok();
}

}  // namespace gpuvm::aggregator
