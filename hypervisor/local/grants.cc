#include "hypervisor/local/grants.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace gpuvm::hv::local {
namespace {

uint64_t MapCount(uint64_t state) { return state >> 32; }
DomainId Peer(uint64_t state) { return static_cast<DomainId>(state & 0xffff); }

}  // namespace

// --- granting side
// -----------------------------------------------------------------------------------

Result<std::unique_ptr<LocalGrantTable>> LocalGrantTable::Create(const LocalDomain& domain) {
  std::unique_ptr<LocalGrantTable> t(new LocalGrantTable());
  t->frame_count_ = domain.frame_count();
  t->entries_ = domain.config().grant_entries;
  GPUVM_ASSIGN_OR_RETURN(
      t->table_, os::SharedMapping::Map(domain.grant_fd(), 0, domain.grant_table_bytes(), true));
  return t;
}

Result<GrantRef> LocalGrantTable::GrantFrame(DomainId peer, Gfn gfn, Access peer_access) {
  if (gfn >= frame_count_) return Status::OutOfRange("cannot grant frame " + Hex(gfn));
  for (uint32_t n = 0; n < entries_; ++n) {
    const GrantRef ref = (next_hint_ + n) % entries_;
    LocalGrantEntry* e = entry(ref);
    if (os::LoadShared(e->state) != 0) continue;
    os::StoreShared(e->gfn, gfn, std::memory_order_relaxed);
    const uint64_t state =
        kGrantValid | (peer_access == Access::kReadOnly ? kGrantReadOnly : 0) | peer;
    os::StoreShared(e->state, state);  // release: the frame number is visible first
    next_hint_ = (ref + 1) % entries_;
    return ref;
  }
  return Status::ResourceExhausted("grant table full");
}

Status LocalGrantTable::EndGrant(GrantRef ref) {
  if (ref >= entries_) return Status::OutOfRange("grant ref " + std::to_string(ref));
  std::atomic_ref<uint64_t> state(entry(ref)->state);
  uint64_t s = state.load(std::memory_order_acquire);
  for (;;) {
    if (!(s & kGrantValid))
      return Status::NotFound("grant ref " + std::to_string(ref) + " not in use");
    if (MapCount(s) != 0) {
      return Status::FailedPrecondition("grant ref " + std::to_string(ref) + " still mapped");
    }
    if (state.compare_exchange_weak(s, 0, std::memory_order_acq_rel)) return Status::Ok();
  }
}

void LocalGrantTable::Revoke(GrantRef ref) {
  if (ref >= entries_) return;
  std::atomic_ref<uint64_t> state(entry(ref)->state);
  uint64_t s = state.load(std::memory_order_acquire);
  for (;;) {
    if (!(s & kGrantValid)) return;
    const uint64_t next = MapCount(s) == 0 ? 0 : (s | kGrantRevoked);
    if (state.compare_exchange_weak(s, next, std::memory_order_acq_rel)) return;
  }
}

class LocalGrantSharer::Pages : public SharedPages {
 public:
  Pages(LocalGrantSharer* owner, Gfn first, std::vector<GrantRef> refs, std::span<uint8_t> bytes)
      : owner_(owner), first_(first), refs_(std::move(refs)), bytes_(bytes) {}
  ~Pages() override { owner_->Release(first_, refs_); }
  std::span<const GrantRef> refs() const override { return refs_; }
  std::span<uint8_t> bytes() override { return bytes_; }

 private:
  LocalGrantSharer* owner_;
  Gfn first_;
  std::vector<GrantRef> refs_;
  std::span<uint8_t> bytes_;
};

Result<std::unique_ptr<LocalGrantSharer>> LocalGrantSharer::Create(const LocalDomain& domain,
                                                                   Gfn pool_first,
                                                                   uint64_t pool_frames) {
  if (pool_frames == 0 || pool_first >= domain.frame_count() ||
      pool_frames > domain.frame_count() - pool_first) {
    return Status::OutOfRange("grant pool outside the domain's RAM");
  }
  std::unique_ptr<LocalGrantSharer> s(new LocalGrantSharer());
  GPUVM_ASSIGN_OR_RETURN(s->table_, LocalGrantTable::Create(domain));
  GPUVM_ASSIGN_OR_RETURN(s->ram_, os::SharedMapping::Map(domain.ram_fd(), pool_first << kPageShift,
                                                         pool_frames << kPageShift, true));
  s->pool_first_ = pool_first;
  s->pool_used_.assign(pool_frames, false);
  return s;
}

LocalGrantSharer::~LocalGrantSharer() = default;

Result<std::unique_ptr<SharedPages>> LocalGrantSharer::Share(DomainId peer, uint32_t pages,
                                                             Access peer_access) {
  if (pages == 0) return Status::InvalidArgument("sharing zero pages");
  // First fit: a contiguous run, so bytes() is one span.
  const uint64_t pool = pool_used_.size();
  uint64_t start = 0;
  for (; start + pages <= pool; ++start) {
    uint64_t n = 0;
    while (n < pages && !pool_used_[start + n]) ++n;
    if (n == pages) break;
    start += n;
  }
  if (start + pages > pool) return Status::ResourceExhausted("grant pool exhausted");
  std::vector<GrantRef> refs;
  for (uint32_t i = 0; i < pages; ++i) {
    auto ref = table_->GrantFrame(peer, pool_first_ + start + i, peer_access);
    if (!ref.ok()) {
      for (GrantRef r : refs) (void)table_->EndGrant(r);
      return ref.status();
    }
    refs.push_back(*ref);
  }
  for (uint32_t i = 0; i < pages; ++i) pool_used_[start + i] = true;
  std::span<uint8_t> bytes =
      ram_.bytes().subspan(start << kPageShift, uint64_t{pages} << kPageShift);
  std::memset(bytes.data(), 0, bytes.size());
  return std::unique_ptr<SharedPages>(new Pages(this, pool_first_ + start, std::move(refs), bytes));
}

void LocalGrantSharer::Release(Gfn first, std::span<const GrantRef> refs) {
  for (size_t i = 0; i < refs.size(); ++i) {
    const Status ended = table_->EndGrant(refs[i]);
    if (ended.ok() || ended.code() == StatusCode::kNotFound) {
      pool_used_[first - pool_first_ + i] = false;
    } else {
      // Still mapped by the peer: revoke and never hand the frame out again.
      table_->Revoke(refs[i]);
      ++quarantined_;
    }
  }
}

// --- mapping side
// ------------------------------------------------------------------------------------

namespace {

// A reserved range of our address space with granted frames mapped into it; on destruction unmaps
// and drops the mapping counts.
class GrantMapping : public GuestMapping {
 public:
  GrantMapping(std::shared_ptr<os::SharedMapping> table, uint8_t* base, size_t pages,
               std::vector<GrantRef> refs)
      : table_(std::move(table)), base_(base), pages_(pages), refs_(std::move(refs)) {}
  ~GrantMapping() override {
    ::munmap(base_, pages_ << kPageShift);
    auto* entries = reinterpret_cast<LocalGrantEntry*>(table_->data());
    for (GrantRef ref : refs_) {
      std::atomic_ref<uint64_t> state(entries[ref].state);
      uint64_t s = state.load(std::memory_order_acquire);
      for (;;) {
        if (MapCount(s) == 0) break;  // the granter scribbled on the entry; nothing of ours to drop
        uint64_t next = s - kGrantMapUnit;
        if ((s & kGrantRevoked) && MapCount(next) == 0) next = 0;
        if (state.compare_exchange_weak(s, next, std::memory_order_acq_rel)) break;
      }
    }
  }
  std::span<uint8_t> bytes() override { return {base_, pages_ << kPageShift}; }

 private:
  std::shared_ptr<os::SharedMapping> table_;
  uint8_t* base_;
  size_t pages_;
  std::vector<GrantRef> refs_;
};

}  // namespace

LocalGrantMapper::LocalGrantMapper(DomainId self, DomainLookup lookup)
    : self_(self), lookup_(std::move(lookup)) {}
LocalGrantMapper::~LocalGrantMapper() = default;

Result<LocalGrantMapper::Granter*> LocalGrantMapper::FindGranter(DomainId granter) {
  auto it = granters_.find(granter);
  if (it != granters_.end()) return &it->second;
  GPUVM_ASSIGN_OR_RETURN(std::shared_ptr<const LocalDomain> domain, lookup_(granter));
  GPUVM_RETURN_IF_ERROR(os::CheckSealedMemfd(domain->grant_fd(), domain->grant_table_bytes()));
  GPUVM_RETURN_IF_ERROR(os::CheckSealedMemfd(domain->ram_fd(), domain->config().ram_bytes));
  GPUVM_ASSIGN_OR_RETURN(
      os::SharedMapping table,
      os::SharedMapping::Map(domain->grant_fd(), 0, domain->grant_table_bytes(), true));
  Granter g{std::move(domain), std::make_shared<os::SharedMapping>(std::move(table))};
  return &granters_.emplace(granter, std::move(g)).first->second;
}

Result<std::unique_ptr<GuestMapping>> LocalGrantMapper::Map(DomainId granter,
                                                            std::span<const GrantRef> refs,
                                                            Access access) {
  if (refs.empty()) return Status::InvalidArgument("mapping zero grants");
  if (refs.size() > 4096) return Status::InvalidArgument("too many grants in one mapping");
  GPUVM_ASSIGN_OR_RETURN(Granter * g, FindGranter(granter));
  const uint32_t entries = g->domain->config().grant_entries;
  const uint64_t frames = g->domain->frame_count();
  auto* table = reinterpret_cast<LocalGrantEntry*>(g->table->data());

  void* reserved = ::mmap(nullptr, refs.size() << kPageShift, PROT_NONE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED) return Status::FromErrno(errno, "reserve grant mapping");
  auto* base = static_cast<uint8_t*>(reserved);
  std::vector<GrantRef> counted;  // refs whose map count we hold
  auto fail = [&](Status status) -> Result<std::unique_ptr<GuestMapping>> {
    // The mapping object's destructor unmaps and drops the counts we took.
    GrantMapping undo(g->table, base, refs.size(), std::move(counted));
    return status;
  };
  for (size_t i = 0; i < refs.size(); ++i) {
    const GrantRef ref = refs[i];
    const std::string what =
        "grant ref " + std::to_string(ref) + " of domain " + std::to_string(granter);
    if (ref >= entries) return fail(Status::OutOfRange(what + " past the grant table"));
    std::atomic_ref<uint64_t> state(table[ref].state);
    uint64_t s = state.load(std::memory_order_acquire);
    for (;;) {
      if (!(s & kGrantValid) || (s & kGrantRevoked) || Peer(s) != self_) {
        return fail(
            Status::PermissionDenied(what + " is not granted to domain " + std::to_string(self_)));
      }
      if (access == Access::kReadWrite && (s & kGrantReadOnly)) {
        return fail(Status::PermissionDenied(what + " is read-only"));
      }
      if (MapCount(s) >= 0x7fffffff)
        return fail(Status::ResourceExhausted(what + " mapped too often"));
      if (state.compare_exchange_weak(s, s + kGrantMapUnit, std::memory_order_acq_rel)) break;
    }
    counted.push_back(ref);
    const uint64_t gfn = os::LoadShared(table[ref].gfn);
    if (gfn >= frames) return fail(Status::OutOfRange(what + " names frame " + Hex(gfn)));
    const int prot = PROT_READ | (access == Access::kReadWrite ? PROT_WRITE : 0);
    void* page = ::mmap(base + (i << kPageShift), kPageSize, prot, MAP_SHARED | MAP_FIXED,
                        g->domain->ram_fd(), static_cast<off_t>(gfn << kPageShift));
    if (page == MAP_FAILED) return fail(Status::FromErrno(errno, "map granted frame"));
  }
  return std::unique_ptr<GuestMapping>(
      new GrantMapping(g->table, base, refs.size(), std::move(counted)));
}

}  // namespace gpuvm::hv::local
