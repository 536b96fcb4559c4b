// A VM's RAM as the aggregator sees it: guest physical [0, bytes) as one contiguous mapping in our
// address space. What the GPU's SYSRAM accesses reach in pt mode (guest_ram_window.h), and what
// full virtualization will validate SYSRAM page-table entries against.
//
// The device model hands the RAM over with GUEST_MEMORY (docs/IPC.md): a local VM's RAM memfd, or a
// Xen domain id we map ourselves through the hypervisor port. Both are untrusted: a memfd must be
// sealed against shrinking and growing and exactly as large as announced (a memfd that could shrink
// would let a VM make our mapping fault with SIGBUS, on the GPU's engine thread).
//
// Threading: immutable after creation; bytes() may be used from any thread (the guest writes its
// RAM concurrently: copy before validating).
#ifndef GPUVM_AGGREGATOR_GUEST_RAM_H_
#define GPUVM_AGGREGATOR_GUEST_RAM_H_

#include <cstdint>
#include <memory>
#include <span>

#include "base/os.h"
#include "base/status.h"
#include "hypervisor/backend.h"
#include "hypervisor/guest_memory.h"
#include "hypervisor/types.h"

namespace gpuvm::aggregator {

class GuestRam {
 public:
  // A local VM's RAM memfd (sealed, exactly `bytes`, a whole number of pages).
  static Result<std::unique_ptr<GuestRam>> FromLocalMemfd(os::UniqueFd memfd, uint64_t bytes);
  // A domain's first `bytes` of guest frames, mapped through `hypervisor` (Xen:
  // libxenforeignmemory); holes in the guest's physical map read as zeros
  // (hv::Backend::MapGuestRam). Fails with Unavailable where there is no such hypervisor.
  static Result<std::unique_ptr<GuestRam>> FromDomain(hv::Backend& hypervisor, hv::DomainId domid,
                                                      uint64_t bytes);

  std::span<uint8_t> bytes() const { return bytes_; }
  uint64_t size() const { return bytes_.size(); }

 private:
  GuestRam() = default;

  std::span<uint8_t> bytes_;
  os::SharedMapping local_;                        // local: the memfd mapping
  std::unique_ptr<hv::GuestMapping> domain_mapping_;  // a domain's: the foreign mapping
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_GUEST_RAM_H_
