#include "hypervisor/local/guest_memory.h"

#include <cstring>

namespace gpuvm::hv::local {
namespace {

// A window into the whole-RAM mapping; keeps it alive. Read-only requests get the same writable
// bytes: the local backend does not enforce page protection inside dom0 (documented in
// docs/HYPERVISOR.md).
class WindowMapping : public GuestMapping {
 public:
  WindowMapping(std::shared_ptr<os::SharedMapping> ram, std::span<uint8_t> window)
      : ram_(std::move(ram)), window_(window) {}
  std::span<uint8_t> bytes() override { return window_; }

 private:
  std::shared_ptr<os::SharedMapping> ram_;
  std::span<uint8_t> window_;
};

}  // namespace

Result<std::unique_ptr<LocalGuestMemory>> LocalGuestMemory::Create(const LocalDomain& domain) {
  GPUVM_RETURN_IF_ERROR(os::CheckSealedMemfd(domain.ram_fd(), domain.config().ram_bytes));
  GPUVM_ASSIGN_OR_RETURN(
      os::SharedMapping ram,
      os::SharedMapping::Map(domain.ram_fd(), 0, domain.config().ram_bytes, true));
  return std::unique_ptr<LocalGuestMemory>(
      new LocalGuestMemory(domain.domid(), std::make_shared<os::SharedMapping>(std::move(ram))));
}

Result<std::unique_ptr<GuestMapping>> LocalGuestMemory::Map(Gfn first, uint64_t count,
                                                            Access /*access*/) {
  if (count == 0) return Status::InvalidArgument("mapping of zero frames");
  if (first >= frame_count() || count > frame_count() - first) {
    return Status::OutOfRange("frames " + Hex(first) + "+" + Hex(count) + " outside the domain's " +
                              Hex(frame_count()) + " frames");
  }
  return std::unique_ptr<GuestMapping>(
      new WindowMapping(ram_, ram_->bytes().subspan(first << kPageShift, count << kPageShift)));
}

Status LocalGuestMemory::Read(uint64_t gpa, std::span<uint8_t> out) {
  GPUVM_RETURN_IF_ERROR(CheckRange(gpa, out.size()));
  std::memcpy(out.data(), ram_->data() + gpa, out.size());
  return Status::Ok();
}

Status LocalGuestMemory::Write(uint64_t gpa, std::span<const uint8_t> in) {
  GPUVM_RETURN_IF_ERROR(CheckRange(gpa, in.size()));
  std::memcpy(ram_->data() + gpa, in.data(), in.size());
  return Status::Ok();
}

}  // namespace gpuvm::hv::local
