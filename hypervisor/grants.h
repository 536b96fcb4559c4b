// Port: grant tables — a domain lends some of its pages to a peer domain, which maps them by
// reference.
//
// The granting side (a guest's frontend) shares pages and hands the grant references to the peer
// (usually through the store); the mapping side (a dom0 backend) maps them. Destroying SharedPages
// revokes the grants; destroying the mapping unmaps them.
//
// Xen: libxengntshr (share) and libxengnttab (map). Local: a grant table in shared memory whose
// entries name frames of the granting VM's RAM memfd (hypervisor/local/grants.h).
//
// Threading: one owner thread per handle; mappings and shared pages belong to their owner.
#ifndef GPUVM_HYPERVISOR_GRANTS_H_
#define GPUVM_HYPERVISOR_GRANTS_H_

#include <cstdint>
#include <memory>
#include <span>

#include "base/status.h"
#include "hypervisor/guest_memory.h"
#include "hypervisor/types.h"

namespace gpuvm::hv {

using GrantRef = uint32_t;

// Pages we granted; the grants are revoked when this is destroyed.
class SharedPages {
 public:
  virtual ~SharedPages() = default;
  virtual std::span<const GrantRef> refs() const = 0;  // one per page, in order
  virtual std::span<uint8_t> bytes() = 0;              // refs().size() pages
};

class GrantSharer {
 public:
  virtual ~GrantSharer() = default;
  // Shares `pages` fresh zeroed pages with `peer`.
  virtual Result<std::unique_ptr<SharedPages>> Share(DomainId peer, uint32_t pages,
                                                     Access peer_access) = 0;
};

class GrantMapper {
 public:
  virtual ~GrantMapper() = default;
  // Maps the pages `granter` granted us, contiguously in `refs` order. PermissionDenied when a ref
  // is not granted to us, or read-only and `access` asks for writing; OutOfRange for a ref past the
  // table.
  virtual Result<std::unique_ptr<GuestMapping>> Map(DomainId granter,
                                                    std::span<const GrantRef> refs,
                                                    Access access) = 0;
};

}  // namespace gpuvm::hv

#endif  // GPUVM_HYPERVISOR_GRANTS_H_
