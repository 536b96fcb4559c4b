#include "gpu/sim/mmu.h"

#include <algorithm>

namespace gpuvm::sim {

namespace vm = gf100::vm;
using gf100::FaultReason;
using mmu_detail::L0Entry;
using mmu_detail::L0Index;
using mmu_detail::t_l0;

thread_local constinit L0Entry mmu_detail::t_l0[mmu_detail::kL0Entries];

namespace {

std::atomic<uint64_t> g_next_space_id{1};

inline uint64_t L1Hash(uint64_t space_id, uint64_t vpn) {
  return (vpn * 0x9e3779b97f4a7c15ull) ^ (space_id * 0xc2b2ae3d27d4eb4full);
}

vm::Target ToTarget(vm::PdeTarget t) {
  switch (t) {
    case vm::PdeTarget::kVram:
      return vm::Target::kVram;
    case vm::PdeTarget::kSysramSnooped:
      return vm::Target::kSysramSnooped;
    case vm::PdeTarget::kSysramNoSnoop:
      return vm::Target::kSysramNoSnoop;
    case vm::PdeTarget::kNone:
      break;
  }
  return vm::Target::kInvalid;
}

inline bool Permitted(const PageTranslation& t, bool write, bool privileged, FaultReason* reason) {
  if (t.supervisor_only && !privileged) {
    *reason = FaultReason::kPageSupervisorOnly;
    return false;
  }
  if (write && t.read_only) {
    *reason = FaultReason::kPageReadOnly;
    return false;
  }
  return true;
}

}  // namespace

Mmu::Mmu(const PhysicalMemory* memory) : memory_(memory), shards_(new Shard[kShards]) {}
Mmu::~Mmu() = default;

AddressSpace* Mmu::GetSpace(PageDirectory pd) {
  if (memory_->Resolve(pd.target, pd.address, vm::kEntrySize) == nullptr) return nullptr;
  std::lock_guard lock(spaces_mu_);
  auto it = spaces_.find(pd);
  if (it != spaces_.end()) return it->second.get();
  if (spaces_.size() >= kMaxAddressSpaces) return nullptr;
  auto space = std::unique_ptr<AddressSpace>(
      new AddressSpace(pd, g_next_space_id.fetch_add(1, std::memory_order_relaxed)));
  AddressSpace* raw = space.get();
  spaces_.emplace(pd, std::move(space));
  return raw;
}

AddressSpace* Mmu::FindSpace(PageDirectory pd) {
  std::lock_guard lock(spaces_mu_);
  auto it = spaces_.find(pd);
  return it == spaces_.end() ? nullptr : it->second.get();
}

uint8_t* Mmu::ResolveTable(vm::PdeTarget target, uint64_t address) const {
  return memory_->Resolve(ToTarget(target), address, vm::kEntrySize);
}

bool Mmu::Walk(const AddressSpace& space, uint64_t va, PageTranslation* out, FaultReason* reason,
               bool write) const {
  const int large_shift = large_page_shift();
  const int pde_shift = vm::kPdeShift(large_shift);
  const uint64_t pde_index = va >> pde_shift;
  if (pde_index >= vm::kPdeCount(large_shift)) {
    *reason = FaultReason::kVspaceLimit;
    return false;
  }
  const uint8_t* pde_ptr = memory_->Resolve(
      space.pd_.target, space.pd_.address + pde_index * vm::kEntrySize, vm::kEntrySize);
  if (pde_ptr == nullptr) {  // (our choice) an unreachable directory reads as "no table"
    *reason = FaultReason::kPtNotPresent;
    return false;
  }
  const uint64_t pde = Load64(pde_ptr);
  const vm::PdeTarget small_target = vm::pde::SmallTarget(pde);
  const vm::PdeTarget large_target = vm::pde::LargeTarget(pde);
  if (small_target == vm::PdeTarget::kNone && large_target == vm::PdeTarget::kNone) {
    *reason = FaultReason::kPtNotPresent;
    return false;
  }
  // PT_SIZE: the tables cover only the first 1/1, 1/2, 1/4 or 1/8 of the PDE's range. (our reading
  // of gf100_vm.xml: applied to both tables.)
  const uint64_t in_pde = va & ((1ull << pde_shift) - 1);
  if (in_pde >= ((1ull << pde_shift) >> vm::pde::PtSize(pde))) {
    *reason = FaultReason::kPtTooShort;
    return false;
  }
  uint64_t pte = 0;
  uint64_t physical = 0;
  bool found = false;
  bool large = false;
  // (our choice) when both tables are present, a present small-page PTE wins over the large page.
  if (small_target != vm::PdeTarget::kNone) {
    const uint8_t* p =
        ResolveTable(small_target, vm::pde::SmallTableAddress(pde) +
                                       (in_pde >> vm::kSmallPageShift) * vm::kEntrySize);
    if (p != nullptr) {
      pte = Load64(p);
      if (pte & vm::pte::kPresent) {
        found = true;
        physical = vm::pte::Address(pte);
      }
    }
  }
  if (!found && large_target != vm::PdeTarget::kNone) {
    const uint8_t* p = ResolveTable(
        large_target, vm::pde::LargeTableAddress(pde) + (in_pde >> large_shift) * vm::kEntrySize);
    if (p != nullptr) {
      pte = Load64(p);
      if (pte & vm::pte::kPresent) {
        found = true;
        large = true;
        // (our choice) the low bits of a large page's address are ignored.
        const uint64_t mask = (1ull << large_shift) - 1;
        physical = (vm::pte::Address(pte) & ~mask) + (va & mask & ~(vm::kSmallPageSize - 1));
      }
    }
  }
  if (!found) {
    *reason = FaultReason::kPageNotPresent;
    return false;
  }
  // Storage type (tiling, compression) changes how the memory controller lays out bytes, not what a
  // virtual address names; we keep every kind linear. A page outside VRAM or outside reachable host
  // memory, or with the unused target 1, is (our choice) "not present": we never touch bytes we do
  // not own.
  const vm::Target target = vm::pte::TargetOf(pte);
  uint8_t* page = memory_->Resolve(target, physical, vm::kSmallPageSize, write);
  if (page == nullptr) {
    *reason = FaultReason::kPageNotPresent;
    return false;
  }
  // VRAM is simply there on a real board; ours comes in a large page at a time (Vram::Prefault).
  if (target == vm::Target::kVram) memory_->vram()->Prefault(physical);
  out->page = page;
  out->read_only = (pte & vm::pte::kReadOnly) != 0;
  out->supervisor_only = (pte & vm::pte::kSupervisorOnly) != 0;
  out->large = large;
  return true;
}

bool Mmu::Lookup(AddressSpace* space, uint64_t vpn, bool write, PageTranslation* out,
                 FaultReason* reason) {
  const uint64_t id = space->id_;
  L0Entry& l0 = t_l0[L0Index(id, vpn)];
  auto fill_l0 = [&](const PageTranslation& t, uint64_t generation, uint64_t global_generation) {
    l0 = {id, vpn, generation, global_generation, t.page, t.read_only, t.supervisor_only};
  };
  const uint64_t generation = space->generation_.load(std::memory_order_acquire);
  const uint64_t global_generation = global_generation_.load(std::memory_order_acquire);
  if (l0.space_id == id && l0.vpn == vpn && l0.generation == generation &&
      l0.global_generation == global_generation) {
    out->page = l0.page;
    out->read_only = l0.read_only;
    out->supervisor_only = l0.supervisor_only;
    out->large = false;
    return true;
  }
  const uint64_t hash = L1Hash(id, vpn);
  Shard& shard = shards_[hash % kShards];
  L1Entry& entry = shard.entries[(hash / kShards) % kEntriesPerShard];
  {
    std::lock_guard lock(shard.mu);
    if (entry.space_id == id && entry.vpn == vpn && entry.generation == generation &&
        entry.global_generation == global_generation) {
      *out = entry.translation;
      fill_l0(entry.translation, generation, global_generation);
      return true;
    }
  }
  // Miss: walk with the generations read above. A flush that lands during the walk makes the entry
  // we install stale at once, so a pre-flush PTE can never be served after the flush.
  walks_.fetch_add(1, std::memory_order_relaxed);
  if (!Walk(*space, vpn << vm::kSmallPageShift, out, reason, write)) return false;
  {
    std::lock_guard lock(shard.mu);
    entry = {id, vpn, generation, global_generation, *out};
  }
  fill_l0(*out, generation, global_generation);
  return true;
}

uint8_t* Mmu::TranslateSlow(AddressSpace* space, uint64_t limit, uint64_t va, uint32_t length,
                            bool write, bool privileged, MemoryFault* fault) {
  FaultReason reason;
  if (space == nullptr) {
    reason = FaultReason::kNoChannel;
  } else if (length == 0 || length > vm::kSmallPageSize ||
             (va & (vm::kSmallPageSize - 1)) + length > vm::kSmallPageSize) {
    reason = FaultReason::kVspaceLimit;  // a malformed request; only our own bugs get here
  } else if (va > limit || length - 1 > limit - va || va + length > vm::kVaLimit) {
    reason = FaultReason::kVspaceLimit;
  } else {
    PageTranslation t;
    if (Lookup(space, va >> vm::kSmallPageShift, write, &t, &reason) &&
        Permitted(t, write, privileged, &reason)) {
      return t.page + (va & (vm::kSmallPageSize - 1));
    }
  }
  if (fault != nullptr) {
    fault->va = va;
    fault->write = write;
    fault->reason = reason;
  }
  return nullptr;
}

uint8_t* Mmu::TranslateRun(AddressSpace* space, uint64_t limit, uint64_t va, uint64_t length,
                           bool write, bool privileged, uint64_t* run, MemoryFault* fault) {
  const uint64_t in_page = vm::kSmallPageSize - (va & (vm::kSmallPageSize - 1));
  uint64_t n = std::min(length, in_page);
  uint8_t* first = Translate(space, limit, va, uint32_t(n), write, privileged, fault);
  if (first == nullptr) return nullptr;
  uint64_t total = n;
  while (total < length) {
    n = std::min<uint64_t>(length - total, vm::kSmallPageSize);
    uint8_t* next = Translate(space, limit, va + total, uint32_t(n), write, privileged, nullptr);
    if (next != first + total) break;
    total += n;
  }
  *run = total;
  return first;
}

void Mmu::FlushSpace(PageDirectory pd) {
  flushes_.fetch_add(1, std::memory_order_relaxed);
  if (AddressSpace* space = FindSpace(pd)) {
    space->generation_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void Mmu::FlushAll() {
  flushes_.fetch_add(1, std::memory_order_relaxed);
  global_generation_.fetch_add(1, std::memory_order_acq_rel);
}

uint32_t Mmu::ReadRegister(uint32_t offset) const {
  switch (offset) {
    case vm::kCfg:
      // (our choice) flushes complete synchronously: there are always free slots (16) and the
      // "queued" bit nouveau polls after a trigger is always set.
      return (cfg_.load(std::memory_order_relaxed) & vm::kCfgLargePage64K) |
             (16u << vm::kCfgFlushSlotsShift) | vm::kCfgFlushQueued;
    case vm::kTlbFlushPage:
      return flush_page_.load(std::memory_order_relaxed);
    case vm::kTlbFlushVspace:
      return flush_vspace_.load(std::memory_order_relaxed);
    case vm::kTlbFlushTrigger:
      return 0;  // the trigger self-clears
  }
  return 0;
}

void Mmu::WriteRegister(uint32_t offset, uint32_t value) {
  switch (offset) {
    case vm::kCfg:
      cfg_.store(value & vm::kCfgLargePage64K, std::memory_order_relaxed);
      return;
    case vm::kTlbFlushPage:
      flush_page_.store(value, std::memory_order_relaxed);
      return;
    case vm::kTlbFlushVspace:
      flush_vspace_.store(value, std::memory_order_relaxed);
      return;
    case vm::kTlbFlushTrigger: {
      if (!(value & vm::kFlushTrigger)) return;
      if (value & vm::kFlushAllPdb) {
        FlushAll();
        return;
      }
      // (our choice) without PAGE_ALL the one page named by 0x100cb4 is to be flushed; we flush the
      // whole space, which hardware is always allowed to do.
      const uint32_t vspace = flush_vspace_.load(std::memory_order_relaxed);
      PageDirectory pd{vm::Target(vspace & 3), uint64_t(vspace >> vm::kTlbFlushVspaceAddrShift)
                                                   << vm::kSmallPageShift};
      FlushSpace(pd);
      return;
    }
  }
}

}  // namespace gpuvm::sim
