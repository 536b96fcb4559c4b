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
  std::shared_ptr<xenforeignmemory_handle> shared(fmem.release(), ForeignMemoryCloser());
  return std::unique_ptr<GuestMemory>(
      new XenGuestMemory(domid, std::move(shared), uint64_t{max_gpfn} + 1));
}

}  // namespace gpuvm::hv::xen
