// Local backend of grant tables.
//
// Each local domain has a grant table in a sealed memfd (LocalDomain::grant_fd): an array of
// LocalGrantEntry, each naming one frame of that domain's RAM memfd, the peer domain allowed to map
// it, and how many mappings the peer holds. The granting VM process writes entries; a mapping
// process (a dom0 backend) checks an entry (on a copy), counts its mapping with a compare-and-swap,
// and maps the frame straight from the granter's RAM memfd. Ending a grant that is still mapped
// fails (as gnttab_end_foreign_access does); SharedPages then leaves it revoked and the last unmap
// frees it.
//
// Trust: the entries live in memory the granting guest can scribble on. The mapper never trusts
// them beyond "this frame of that guest's own RAM": it bounds-checks the frame against the RAM
// memfd, which is sealed, so the worst a lying guest achieves is showing its peer a different page
// of its own.
//
// Threading: LocalGrantTable/LocalGrantSharer belong to the granting process's owner thread;
// LocalGrantMapper to one thread of the mapping process.
#ifndef GPUVM_HYPERVISOR_LOCAL_GRANTS_H_
#define GPUVM_HYPERVISOR_LOCAL_GRANTS_H_

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "base/os.h"
#include "hypervisor/grants.h"
#include "hypervisor/local/domain.h"

namespace gpuvm::hv::local {

struct LocalGrantEntry {
  // bits 0-15 peer domain, bit 16 valid, bit 17 read-only, bit 18 revoked (no new mappings; the
  // last unmap frees the entry), bits 32-63 number of live mappings.
  uint64_t state;
  uint64_t gfn;  // written before `state` becomes valid (release)
};
static_assert(sizeof(LocalGrantEntry) == 16);

inline constexpr uint64_t kGrantValid = uint64_t{1} << 16;
inline constexpr uint64_t kGrantReadOnly = uint64_t{1} << 17;
inline constexpr uint64_t kGrantRevoked = uint64_t{1} << 18;
inline constexpr uint64_t kGrantMapUnit = uint64_t{1} << 32;

// The granting side, entry by entry (what a guest kernel's gnttab_grant_foreign_access does).
class LocalGrantTable {
 public:
  static Result<std::unique_ptr<LocalGrantTable>> Create(const LocalDomain& domain);

  Result<GrantRef> GrantFrame(DomainId peer, Gfn gfn, Access peer_access);
  // FailedPrecondition while the peer maps the frame; NotFound for a ref not in use.
  Status EndGrant(GrantRef ref);
  // Marks the grant revoked: no new mappings, and the peer's last unmap frees the entry.
  void Revoke(GrantRef ref);
  uint32_t entries() const { return entries_; }

 private:
  LocalGrantTable() = default;
  LocalGrantEntry* entry(GrantRef ref) const {
    return reinterpret_cast<LocalGrantEntry*>(table_.data()) + ref;
  }

  uint64_t frame_count_ = 0;
  uint32_t entries_ = 0;
  uint32_t next_hint_ = 0;
  os::SharedMapping table_;
};

// GrantSharer over a pool of the VM's own frames [pool_first, pool_first + pool_frames), which the
// VM process sets aside for sharing (docs/HYPERVISOR.md).
class LocalGrantSharer : public GrantSharer {
 public:
  static Result<std::unique_ptr<LocalGrantSharer>> Create(const LocalDomain& domain, Gfn pool_first,
                                                          uint64_t pool_frames);
  ~LocalGrantSharer() override;
  Result<std::unique_ptr<SharedPages>> Share(DomainId peer, uint32_t pages,
                                             Access peer_access) override;
  // Frames still granted to a peer that never unmapped them (never reused).
  uint64_t quarantined_frames() const { return quarantined_; }

 private:
  class Pages;
  friend class Pages;
  LocalGrantSharer() = default;
  void Release(Gfn first, std::span<const GrantRef> refs);

  std::unique_ptr<LocalGrantTable> table_;
  os::SharedMapping ram_;
  Gfn pool_first_ = 0;
  std::vector<bool> pool_used_;
  uint64_t quarantined_ = 0;
};

// GrantMapper: finds a granter's RAM and grant table through `lookup` (the local hypervisor
// daemon's domain registry, or a LocalDomain the caller already holds).
class LocalGrantMapper : public GrantMapper {
 public:
  using DomainLookup = std::function<Result<std::shared_ptr<const LocalDomain>>(DomainId)>;
  LocalGrantMapper(DomainId self, DomainLookup lookup);
  ~LocalGrantMapper() override;

  Result<std::unique_ptr<GuestMapping>> Map(DomainId granter, std::span<const GrantRef> refs,
                                            Access access) override;

 private:
  struct Granter {
    std::shared_ptr<const LocalDomain> domain;
    std::shared_ptr<os::SharedMapping> table;
  };
  Result<Granter*> FindGranter(DomainId granter);

  DomainId self_;
  DomainLookup lookup_;
  std::map<DomainId, Granter> granters_;
};

}  // namespace gpuvm::hv::local

#endif  // GPUVM_HYPERVISOR_LOCAL_GRANTS_H_
