#include "hypervisor/guest_memory.h"

#include <cstring>
#include <string>

namespace gpuvm::hv {

Status GuestMemory::CheckRange(uint64_t gpa, uint64_t length) const {
  const uint64_t limit = frame_count() << kPageShift;
  if (length == 0) return Status::InvalidArgument("empty guest memory access");
  if (gpa >= limit || length > limit - gpa) {
    return Status::OutOfRange("guest range " + Hex(gpa) + "+" + Hex(length) +
                              " outside domain memory of " + Hex(limit) + " bytes");
  }
  return Status::Ok();
}

// The generic path maps the frames the range touches, copies, unmaps. Backends with a permanent
// mapping of all guest memory (local) override these.
Status GuestMemory::Read(uint64_t gpa, std::span<uint8_t> out) {
  GPUVM_RETURN_IF_ERROR(CheckRange(gpa, out.size()));
  const Gfn first = gpa >> kPageShift;
  const Gfn last = (gpa + out.size() - 1) >> kPageShift;
  GPUVM_ASSIGN_OR_RETURN(auto mapping, Map(first, last - first + 1, Access::kReadOnly));
  std::memcpy(out.data(), mapping->bytes().data() + (gpa & (kPageSize - 1)), out.size());
  return Status::Ok();
}

Status GuestMemory::Write(uint64_t gpa, std::span<const uint8_t> in) {
  GPUVM_RETURN_IF_ERROR(CheckRange(gpa, in.size()));
  const Gfn first = gpa >> kPageShift;
  const Gfn last = (gpa + in.size() - 1) >> kPageShift;
  GPUVM_ASSIGN_OR_RETURN(auto mapping, Map(first, last - first + 1, Access::kReadWrite));
  std::memcpy(mapping->bytes().data() + (gpa & (kPageSize - 1)), in.data(), in.size());
  return Status::Ok();
}

}  // namespace gpuvm::hv
