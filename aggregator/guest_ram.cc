#include "aggregator/guest_ram.h"

namespace gpuvm::aggregator {

Result<std::unique_ptr<GuestRam>> GuestRam::FromLocalMemfd(os::UniqueFd memfd, uint64_t bytes) {
  if (bytes == 0 || bytes % hv::kPageSize != 0) {
    return Status::InvalidArgument("guest RAM must be a whole number of pages");
  }
  GPUVM_RETURN_IF_ERROR(os::CheckSealedMemfd(memfd.get(), bytes).WithContext("guest RAM"));
  std::unique_ptr<GuestRam> ram(new GuestRam());
  GPUVM_ASSIGN_OR_RETURN(ram->local_, os::SharedMapping::Map(memfd.get(), 0, bytes, true));
  ram->bytes_ = ram->local_.bytes();
  return ram;  // the mapping keeps the memory; the descriptor can go
}

Result<std::unique_ptr<GuestRam>> GuestRam::FromDomain(hv::Backend& hypervisor, hv::DomainId domid,
                                                       uint64_t bytes) {
  if (bytes == 0 || bytes % hv::kPageSize != 0) {
    return Status::InvalidArgument("guest RAM must be a whole number of pages");
  }
  std::unique_ptr<GuestRam> ram(new GuestRam());
  // An HVM guest's RAM has holes (the VGA window, ballooned pages): they are backed by scratch
  // pages of ours (hv::Backend::MapGuestRam), so the GPU reaching one sees zeros, never a fault.
  GPUVM_ASSIGN_OR_RETURN(ram->domain_mapping_,
                         hypervisor.MapGuestRam(domid, bytes >> hv::kPageShift, nullptr));
  ram->bytes_ = ram->domain_mapping_->bytes();
  return ram;
}

}  // namespace gpuvm::aggregator
