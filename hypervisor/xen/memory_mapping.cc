#include "hypervisor/xen/memory_mapping.h"

namespace gpuvm::hv::xen {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kMaxFrame = uint64_t{1} << 40;
constexpr uint64_t kMaxFramesPerCall = uint64_t{1} << 20;

}  // namespace

Result<MemoryMappingPlan> PlanMemoryMapping(uint64_t first, uint64_t last,
                                            const MemoryBacking& backing) {
  if (first > last || first % kPage != 0 || (last + 1) % kPage != 0) {
    return Status::InvalidArgument("a memory range is whole pages");
  }
  if (backing.fd >= 0) {
    return Status::Unimplemented(
        "Xen backs guest frames with machine frames (a real GPU's BAR aperture); a dom0 memfd "
        "(the software GPU's VRAM) cannot be mapped into a guest's p2m, so the range keeps "
        "trapping");
  }
  if (backing.machine_address % kPage != 0) {
    return Status::InvalidArgument("machine address not page aligned");
  }
  MemoryMappingPlan plan;
  plan.first_gfn = first / kPage;
  plan.first_mfn = backing.machine_address / kPage;
  plan.frames = (last - first + 1) / kPage;
  if (plan.frames > kMaxFramesPerCall || plan.first_gfn + plan.frames > kMaxFrame ||
      plan.first_mfn + plan.frames > kMaxFrame) {
    return Status::OutOfRange("memory range beyond what one Xen mapping call takes");
  }
  return plan;
}

}  // namespace gpuvm::hv::xen
