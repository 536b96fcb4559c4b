// Foreign mappings of a domain's guest frames.
#include <sys/mman.h>

#include <cerrno>
#include <string>
#include <vector>

#include "hypervisor/xen/libxen.h"
#include "hypervisor/xen/xen_backend.h"

namespace gpuvm::hv::xen {
namespace {

// Owns one xenforeignmemory mapping; the library handle is shared with the GuestMemory.
class ForeignMapping : public GuestMapping {
 public:
  ForeignMapping(std::shared_ptr<xenforeignmemory_handle> fmem, void* addr, uint64_t pages)
      : fmem_(std::move(fmem)), addr_(addr), pages_(pages) {}
  ~ForeignMapping() override { xenforeignmemory_unmap(fmem_.get(), addr_, pages_); }
  std::span<uint8_t> bytes() override {
    return {static_cast<uint8_t*>(addr_), pages_ << kPageShift};
  }

 private:
  std::shared_ptr<xenforeignmemory_handle> fmem_;
  void* addr_;
  uint64_t pages_;
};

class XenGuestMemory : public GuestMemory {
 public:
  XenGuestMemory(DomainId domid, std::shared_ptr<xenforeignmemory_handle> fmem, uint64_t frames)
      : domid_(domid), fmem_(std::move(fmem)), frames_(frames) {}

  DomainId domain() const override { return domid_; }
  uint64_t frame_count() const override { return frames_; }

  Result<std::unique_ptr<GuestMapping>> Map(Gfn first, uint64_t count, Access access) override {
    if (count == 0) return Status::InvalidArgument("mapping of zero frames");
    if (first >= frames_ || count > frames_ - first) {
      return Status::OutOfRange("frames " + Hex(first) + "+" + Hex(count) + " outside domain " +
                                std::to_string(domid_) + "'s " + Hex(frames_) + " frames");
    }
    if (count > (uint64_t{1} << 20)) return Status::InvalidArgument("mapping too large");
    std::vector<xen_pfn_t> gfns(count);
    for (uint64_t i = 0; i < count; ++i) gfns[i] = first + i;
    std::vector<int> errors(count, 0);
    const int prot = PROT_READ | (access == Access::kReadWrite ? PROT_WRITE : 0);
    void* addr = xenforeignmemory_map(fmem_.get(), domid_, prot, count, gfns.data(), errors.data());
    if (addr == nullptr) return CallFailed("foreign map of guest frames", errno);
    for (uint64_t i = 0; i < count; ++i) {
      if (errors[i] != 0) {
        xenforeignmemory_unmap(fmem_.get(), addr, count);
        // A hole in the guest's physical map (MMIO, ballooned out): not an address we may use.
        return Status::OutOfRange("guest frame " + Hex(first + i) + " of domain " +
                                  std::to_string(domid_) + " cannot be mapped: error " +
                                  std::to_string(-errors[i]));
      }
    }
    return std::unique_ptr<GuestMapping>(new ForeignMapping(fmem_, addr, count));
  }

 private:
  const DomainId domid_;
  std::shared_ptr<xenforeignmemory_handle> fmem_;
  const uint64_t frames_;
};

}  // namespace

Result<std::unique_ptr<GuestMemory>> OpenGuestMemory(DomainId domid) {
  GPUVM_ASSIGN_OR_RETURN(ForeignMemoryHandle fmem, OpenForeignMemory());
  GPUVM_ASSIGN_OR_RETURN(ControlHandle xc, OpenControl());
  xen_pfn_t max_gpfn = 0;
  if (xc_domain_maximum_gpfn(xc.get(), domid, &max_gpfn) != 0) {
    return CallFailed("maximum_gpfn of domain " + std::to_string(domid), errno);
  }
  std::shared_ptr<xenforeignmemory_handle> shared(fmem.release(),
                                                  ForeignMemoryHandle::deleter_type());
  return std::unique_ptr<GuestMemory>(
      new XenGuestMemory(domid, std::move(shared), uint64_t{max_gpfn} + 1));
}

Result<std::unique_ptr<GuestMapping>> MapGuestRam(DomainId domid, uint64_t frames,
                                                  uint64_t* holes) {
  if (frames == 0 || frames > (uint64_t{1} << 20)) {
    return Status::InvalidArgument("guest RAM of " + std::to_string(frames) + " frames");
  }
  GPUVM_ASSIGN_OR_RETURN(ForeignMemoryHandle fmem, OpenForeignMemory());
  GPUVM_ASSIGN_OR_RETURN(ControlHandle xc, OpenControl());
  xen_pfn_t max_gpfn = 0;
  if (xc_domain_maximum_gpfn(xc.get(), domid, &max_gpfn) != 0) {
    return CallFailed("maximum_gpfn of domain " + std::to_string(domid), errno);
  }
  if (frames > uint64_t{max_gpfn} + 1) {
    return Status::OutOfRange("domain " + std::to_string(domid) + " has " +
                              std::to_string(uint64_t{max_gpfn} + 1) + " frames, not " +
                              std::to_string(frames));
  }
  std::shared_ptr<xenforeignmemory_handle> shared(fmem.release(),
                                                  ForeignMemoryHandle::deleter_type());
  std::vector<xen_pfn_t> gfns(frames);
  for (uint64_t i = 0; i < frames; ++i) gfns[i] = i;
  std::vector<int> errors(frames, 0);
  // Pass 1: which frames are holes. (Patching holes of a foreign mapping afterwards does not work:
  // Linux refuses to split a privcmd mapping, ENOMEM.)
  void* probe =
      xenforeignmemory_map(shared.get(), domid, PROT_READ, frames, gfns.data(), errors.data());
  if (probe == nullptr) return CallFailed("foreign map of guest RAM", errno);
  xenforeignmemory_unmap(shared.get(), probe, frames);
  // Pass 2: reserve the whole range as private zero pages, then map each run of real frames over
  // its place. The mapping object unmaps the whole range, foreign runs and holes alike.
  void* addr = ::mmap(nullptr, frames << kPageShift, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (addr == MAP_FAILED) return CallFailed("address space for guest RAM", errno);
  auto mapping = std::make_unique<ForeignMapping>(shared, addr, frames);
  uint64_t hole_frames = 0;
  for (uint64_t i = 0; i < frames;) {
    uint64_t end = i;
    const bool hole = errors[i] != 0;
    while (end < frames && (errors[end] != 0) == hole) ++end;
    if (hole) {
      hole_frames += end - i;
    } else {
      std::vector<int> run_errors(end - i, 0);
      void* at = static_cast<uint8_t*>(addr) + (i << kPageShift);
      void* got = xenforeignmemory_map2(shared.get(), domid, at, PROT_READ | PROT_WRITE, MAP_FIXED,
                                        end - i, gfns.data() + i, run_errors.data());
      if (got != at) return CallFailed("foreign map of guest RAM frames", errno);
      for (int e : run_errors) {
        if (e != 0) {
          return Status::DataLoss("guest frames of domain " + std::to_string(domid) +
                                  " changed while being mapped");
        }
      }
    }
    i = end;
  }
  if (holes != nullptr) *holes = hole_frames;
  return std::unique_ptr<GuestMapping>(std::move(mapping));
}

}  // namespace gpuvm::hv::xen
