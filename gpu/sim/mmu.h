// The GF100 MMU of the software GPU: page-table walk (4 KiB and 64/128 KiB pages, VRAM and SYSRAM
// targets, read-only and supervisor-only pages) and a TLB that really caches, so a driver that
// rewrites a PTE and forgets the flush (0x100cb8/0x100cbc) keeps seeing the old translation, as on
// hardware.
//
// Address spaces are named by their page directory (target + address): channels and the BAR1/BAR3
// apertures whose instance blocks point at the same directory share one space and one set of TLB
// entries.
//
// TLB: every translation is cached per 4 KiB page in a device-wide direct-mapped, sharded L1 and in
// a small per-thread L0 in front of it. Entries carry the generation of their address space and the
// device-wide generation; a flush bumps a generation, which invalidates every older entry at once.
// A fill records the generation read before its walk, so a walk that raced with a flush can never
// install a pre-flush translation. Faults are never cached.
//
// Threading: all methods are thread-safe. Translate's hit path takes no lock (two atomic loads).
// AddressSpace objects live as long as the Mmu; pointers to them stay valid.
#ifndef GPUVM_GPU_SIM_MMU_H_
#define GPUVM_GPU_SIM_MMU_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "gpu/hw/mmu_fault.h"
#include "gpu/hw/vm.h"
#include "gpu/sim/compute_engine.h"
#include "gpu/sim/memory.h"

namespace gpuvm::sim {

struct PageDirectory {
  gf100::vm::Target target = gf100::vm::Target::kVram;
  uint64_t address = 0;
  friend bool operator==(const PageDirectory&, const PageDirectory&) = default;
};

namespace mmu_detail {
// The per-thread L0 TLB (see the file comment). Constant-initialized, so the inline hit path
// reaches it without a TLS wrapper call.
struct L0Entry {
  uint64_t space_id = 0;
  uint64_t vpn = 0;
  uint64_t generation = 0;
  uint64_t global_generation = 0;
  uint8_t* page = nullptr;
  bool read_only = false;
  bool supervisor_only = false;
};
inline constexpr size_t kL0Entries = 512;
extern thread_local constinit L0Entry t_l0[kL0Entries];
inline size_t L0Index(uint64_t space_id, uint64_t vpn) {
  return (vpn ^ (space_id << 3)) & (kL0Entries - 1);
}
}  // namespace mmu_detail

class AddressSpace {
 public:
  const PageDirectory& page_directory() const { return pd_; }
  // Unique in the process and never reused (also across devices).
  uint64_t id() const { return id_; }

 private:
  friend class Mmu;
  AddressSpace(PageDirectory pd, uint64_t id) : pd_(pd), id_(id) {}
  const PageDirectory pd_;
  const uint64_t id_;
  std::atomic<uint64_t> generation_{0};
};

// The result of a page walk for one 4 KiB page.
struct PageTranslation {
  uint8_t* page = nullptr;  // host address of the page's first byte
  bool read_only = false;
  bool supervisor_only = false;
  bool large = false;
};

class Mmu {
 public:
  // Limits how many distinct page directories the device tracks, so a hostile driver cannot make it
  // allocate without bound. (our choice) 2^16, far more than 128 channels and two BARs need.
  static constexpr size_t kMaxAddressSpaces = 1 << 16;

  explicit Mmu(const PhysicalMemory* memory);
  ~Mmu();
  Mmu(const Mmu&) = delete;
  Mmu& operator=(const Mmu&) = delete;

  // The space whose page directory is `pd`, created on first use. nullptr when the directory's
  // first entry is not in reachable memory or the space limit is reached.
  AddressSpace* GetSpace(PageDirectory pd);
  // The existing space for `pd`, or nullptr.
  AddressSpace* FindSpace(PageDirectory pd);

  // Host address of [va, va + length), which must not cross a 4 KiB page, in `space` whose highest
  // valid address is `limit`. `privileged` accesses (host-side clients: BARs, PFIFO) may touch
  // supervisor-only pages. On failure returns nullptr and fills *fault (the VM_FAULT reason).
  inline uint8_t* Translate(AddressSpace* space, uint64_t limit, uint64_t va, uint32_t length,
                            bool write, bool privileged, MemoryFault* fault);
  // Like Translate but for up to `length` bytes that may span pages: returns the host address of va
  // and sets *run to how many bytes from there are contiguous in host memory (at least 1). nullptr
  // + fault when va itself does not translate; a fault further on just ends the run.
  uint8_t* TranslateRun(AddressSpace* space, uint64_t limit, uint64_t va, uint64_t length,
                        bool write, bool privileged, uint64_t* run, MemoryFault* fault);

  // A page walk that bypasses the TLB (no fill). For the benchmark and tests, and for Lookup's
  // misses; `write` is the direction of the access that needs it (a hint to host memory that comes
  // in at first use, PhysicalMemory::Resolve).
  bool Walk(const AddressSpace& space, uint64_t va, PageTranslation* out,
            gf100::FaultReason* reason, bool write = false) const;

  // TLB invalidation: one address space (every page of it), or every space.
  void FlushSpace(PageDirectory pd);
  void FlushAll();

  // VM_CFG (0x100c80) and the flush registers 0x100cb4/0x100cb8/0x100cbc.
  uint32_t ReadRegister(uint32_t offset) const;
  void WriteRegister(uint32_t offset, uint32_t value);
  int large_page_shift() const {
    return (cfg_.load(std::memory_order_relaxed) & gf100::vm::kCfgLargePage64K)
               ? gf100::vm::kLargePageShift64K
               : gf100::vm::kLargePageShift128K;
  }

  uint64_t walks() const { return walks_.load(std::memory_order_relaxed); }
  uint64_t flushes() const { return flushes_.load(std::memory_order_relaxed); }

 private:
  struct L1Entry {
    uint64_t space_id = 0;  // 0 = empty
    uint64_t vpn = 0;
    uint64_t generation = 0;
    uint64_t global_generation = 0;
    PageTranslation translation;
  };
  static constexpr size_t kShards = 64;
  static constexpr size_t kEntriesPerShard = 256;
  struct Shard {
    std::mutex mu;
    L1Entry entries[kEntriesPerShard];
  };

  uint8_t* TranslateSlow(AddressSpace* space, uint64_t limit, uint64_t va, uint32_t length,
                         bool write, bool privileged, MemoryFault* fault);
  bool Lookup(AddressSpace* space, uint64_t vpn, bool write, PageTranslation* out,
              gf100::FaultReason* reason);
  uint8_t* ResolveTable(gf100::vm::PdeTarget target, uint64_t address) const;

  const PhysicalMemory* memory_;
  std::atomic<uint32_t> cfg_{0};
  std::atomic<uint32_t> flush_page_{0};
  std::atomic<uint32_t> flush_vspace_{0};
  std::atomic<uint64_t> global_generation_{0};
  std::atomic<uint64_t> walks_{0};
  std::atomic<uint64_t> flushes_{0};
  std::unique_ptr<Shard[]> shards_;

  struct PdHash {
    size_t operator()(const PageDirectory& pd) const {
      return std::hash<uint64_t>()(pd.address ^ (uint64_t(pd.target) << 62));
    }
  };
  std::mutex spaces_mu_;
  std::unordered_map<PageDirectory, std::unique_ptr<AddressSpace>, PdHash> spaces_;
};

// The TLB hit path, inline: an L0 hit costs a few loads and compares.
inline uint8_t* Mmu::Translate(AddressSpace* space, uint64_t limit, uint64_t va, uint32_t length,
                               bool write, bool privileged, MemoryFault* fault) {
  const uint64_t offset = va & (gf100::vm::kSmallPageSize - 1);
  if (space != nullptr && uint64_t(length - 1) < gf100::vm::kSmallPageSize - offset &&
      va <= limit && length - 1 <= limit - va && va + length <= gf100::vm::kVaLimit) {
    const uint64_t vpn = va >> gf100::vm::kSmallPageShift;
    const mmu_detail::L0Entry& e = mmu_detail::t_l0[mmu_detail::L0Index(space->id_, vpn)];
    if (e.space_id == space->id_ && e.vpn == vpn &&
        e.generation == space->generation_.load(std::memory_order_acquire) &&
        e.global_generation == global_generation_.load(std::memory_order_acquire) &&
        (privileged || !e.supervisor_only) && !(write && e.read_only)) {
      return e.page + offset;
    }
  }
  return TranslateSlow(space, limit, va, length, write, privileged, fault);
}

}  // namespace gpuvm::sim

#endif  // GPUVM_GPU_SIM_MMU_H_
