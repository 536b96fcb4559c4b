// A Xen guest's frames as GuestFrames (guest_frames.h): each Map is one foreign mapping of the
// listed frames (xenforeignmemory_map with the frame list as given, so the pages sit contiguously
// in our address space whatever their order in the guest), which dom0's backend — the guest's
// device model — may make of any frame of its guest. A frame Xen cannot map (a hole in the guest's
// physical map) fails that Map with OutOfRange.
//
// Threading: as GuestFrames (Map and GuestPhysical from any thread).
#ifndef GPUVM_PVDRM_BACKEND_XEN_GUEST_FRAMES_H_
#define GPUVM_PVDRM_BACKEND_XEN_GUEST_FRAMES_H_

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "hypervisor/types.h"
#include "pvdrm-backend/guest_frames.h"

namespace gpuvm::pvdrm {

class ForeignGuestFrames final : public IndexedGuestFrames {
 public:
  // Frames [0, frames) of domain `domid`.
  static Result<std::unique_ptr<ForeignGuestFrames>> Open(hv::DomainId domid, uint64_t frames);
  ~ForeignGuestFrames() override;

  uint64_t frame_count() const override { return frames_; }
  Result<std::unique_ptr<hv::GuestMapping>> Map(std::span<const uint32_t> frames) override;

 private:
  class Mapping;
  struct Handle;
  ForeignGuestFrames(std::shared_ptr<Handle> handle, hv::DomainId domid, uint64_t frames)
      : handle_(std::move(handle)), domid_(domid), frames_(frames) {}

  std::shared_ptr<Handle> handle_;
  const hv::DomainId domid_;
  const uint64_t frames_;
};

}  // namespace gpuvm::pvdrm

#endif  // GPUVM_PVDRM_BACKEND_XEN_GUEST_FRAMES_H_
