// The guest frames a GART object names (docs/PVDRM.md, GEM_NEW), mapped into the backend so the
// guest driver can register them with the GPU. The backend is the guest's device model: it may map
// any frame of its guest's RAM (on Xen through foreign mappings, locally through the VM's RAM
// memfd), and the GPU reaches them by the frames' guest-physical addresses, which the aggregator
// confines to that VM's RAM — so a frontend naming frames it does not own hurts only itself.
//
// Threading: Map and the lookups may be called from any thread; a mapping belongs to its owner.
#ifndef GPUVM_PVDRM_BACKEND_GUEST_FRAMES_H_
#define GPUVM_PVDRM_BACKEND_GUEST_FRAMES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "base/os.h"
#include "base/status.h"
#include "hypervisor/guest_memory.h"

namespace gpuvm::pvdrm {

class GuestFrames {
 public:
  virtual ~GuestFrames() = default;
  // Frames [0, frame_count()) exist.
  virtual uint64_t frame_count() const = 0;
  // Maps `frames` (guest frame numbers, in order, each below frame_count(); repeats allowed)
  // contiguously. InvalidArgument for none, OutOfRange for a frame past the RAM.
  virtual Result<std::unique_ptr<hv::GuestMapping>> Map(std::span<const uint32_t> frames) = 0;
  // The guest-physical address of the page holding `host` when it lies in a live mapping of ours
  // (what a Bus needs to put the page into a SYSRAM PTE); nullopt otherwise.
  virtual std::optional<uint64_t> GuestPhysical(const void* host) const = 0;
};

// The part every mapping implementation shares: the frames' checks and the index of live mappings
// by base address that GuestPhysical answers from.
class IndexedGuestFrames : public GuestFrames {
 public:
  std::optional<uint64_t> GuestPhysical(const void* host) const final;

 protected:
  // InvalidArgument for none, OutOfRange for a frame not below frame_count().
  Status CheckFrames(std::span<const uint32_t> frames) const;
  void Remember(const uint8_t* base, uint64_t bytes, std::span<const uint32_t> frames);
  void Forget(const uint8_t* base);

 private:
  mutable std::mutex mu_;
  // Live mappings by base address: their frames, for GuestPhysical (guarded by mu_).
  struct Live {
    uint64_t bytes = 0;
    std::vector<uint32_t> frames;
  };
  std::map<uintptr_t, Live> live_;
};

// A local VM's RAM: its memfd, `frames` pages long. Each Map reserves address space and maps runs
// of consecutive frames into it from the memfd (MAP_SHARED: the guest's own pages, not copies).
class MemfdGuestFrames final : public IndexedGuestFrames {
 public:
  // Takes ownership of `memfd`. InvalidArgument for a descriptor shorter than `frames` pages.
  static Result<std::unique_ptr<MemfdGuestFrames>> Create(os::UniqueFd memfd, uint64_t frames);
  ~MemfdGuestFrames() override;

  uint64_t frame_count() const override { return frames_; }
  Result<std::unique_ptr<hv::GuestMapping>> Map(std::span<const uint32_t> frames) override;

 private:
  class Mapping;
  MemfdGuestFrames(os::UniqueFd memfd, uint64_t frames) : fd_(std::move(memfd)), frames_(frames) {}

  os::UniqueFd fd_;
  const uint64_t frames_;
};

}  // namespace gpuvm::pvdrm

#endif  // GPUVM_PVDRM_BACKEND_GUEST_FRAMES_H_
