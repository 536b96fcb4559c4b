// Local backend of GuestMemory: the VM process's RAM memfd, mapped whole and shared.
//
// Threading: as GuestMemory (any thread; the guest writes concurrently, so copy before validating).
#ifndef GPUVM_HYPERVISOR_LOCAL_GUEST_MEMORY_H_
#define GPUVM_HYPERVISOR_LOCAL_GUEST_MEMORY_H_

#include <memory>

#include "base/os.h"
#include "hypervisor/guest_memory.h"
#include "hypervisor/local/domain.h"

namespace gpuvm::hv::local {

class LocalGuestMemory : public GuestMemory {
 public:
  static Result<std::unique_ptr<LocalGuestMemory>> Create(const LocalDomain& domain);

  DomainId domain() const override { return domid_; }
  uint64_t frame_count() const override { return ram_->length() >> kPageShift; }
  Result<std::unique_ptr<GuestMapping>> Map(Gfn first, uint64_t count, Access access) override;
  Status Read(uint64_t gpa, std::span<uint8_t> out) override;
  Status Write(uint64_t gpa, std::span<const uint8_t> in) override;

  // All of guest RAM (for the VM process itself, which owns it).
  std::span<uint8_t> ram() const { return ram_->bytes(); }

 private:
  LocalGuestMemory(DomainId domid, std::shared_ptr<os::SharedMapping> ram)
      : domid_(domid), ram_(std::move(ram)) {}

  DomainId domid_;
  std::shared_ptr<os::SharedMapping> ram_;  // shared with live GuestMappings
};

}  // namespace gpuvm::hv::local

#endif  // GPUVM_HYPERVISOR_LOCAL_GUEST_MEMORY_H_
