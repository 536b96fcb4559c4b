// One fv VM's guest-physical -> machine VRAM map. The guest sees VRAM [0, guest_bytes); the map
// says where each 128 KiB chunk of it lies in physical VRAM. Every path by which guest VRAM is
// reached goes through it: shadow PTEs (RelocatePte), the PRAMIN window, the BAR1/BAR3 apertures,
// and the aggregator's copying reads of guest structures (GuestMemoryView).
//
// Two policies (FvOptions::vram_policy):
//   kStatic   one contiguous slice taken from the pool at creation (GPUvm's partitioning);
//             translation is base + address; creation fails when no run of that size is free.
//   kDynamic  nothing at creation: a chunk is assigned from the pool the first time it is
//             referenced — a shadow PTE names it, or a PRAMIN/BAR store reaches it. So VMs of
//             different sizes and over-committed VRAM (declared sizes summing past the physical
//             VRAM) work as long as what they touch fits. A chunk that cannot be assigned (the pool
//             is empty) fails for this VM only: its PTE is dropped (its channel faults), its store
//             is dropped (counted); another VM's chunks are never taken.
// Isolation: every chunk is zeroed before the guest can see it (static: the whole slice at
// creation), and a static slice is zeroed again when freed, so nothing of one VM shows through to
// the next. Reads of a dynamic chunk never assigned return zeros without assigning it.
//
// Per-VM backing (when the GPU can, VramAccess::can_back(): the software GPU with its own VRAM):
// the VM's VRAM lives in a memfd of its own (backing_fd(), guest_bytes long, sealed), guest
// address = file offset, and each machine chunk (or the static slice) the VM gets is backed by
// that file's pages (VramAccess::Back: the GPU's VRAM view is stitched from the owners' files).
// That file is what BAR remap hands the guest, so a guest can only ever map its own VRAM. A chunk
// is backed only while the VM holds it: assigned, its file pages are punched first (zeros, whatever
// the guest may have written there through an earlier mapping) and then back it; given back, it is
// restored to the GPU's own memory, zeroed, before it returns to the pool (a chunk whose restore
// fails never returns: counted in stranded_bytes()), and the file is punched whole when the map
// dies — a guest that still maps it (its device model died) holds memory no GPU page and no other
// VM reaches. Without per-VM backing chunks are zeroed in the GPU's VRAM as above.
//
// A chunk is the GPU's large page (128 KiB, the only size fv allows), and the pool hands out
// 128 KiB-aligned runs, so a large-page PTE always relocates to one contiguous machine page.
//
// Threading: the aggregator's owner thread only (as the pool and VramAccess).
#ifndef GPUVM_AGGREGATOR_VRAM_MAP_H_
#define GPUVM_AGGREGATOR_VRAM_MAP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/reserved_vram.h"
#include "aggregator/vram_access.h"
#include "base/os.h"
#include "base/status.h"

namespace gpuvm::aggregator {

enum class VramPolicy : uint8_t { kStatic, kDynamic };
const char* VramPolicyName(VramPolicy policy);
// "static" or "dynamic".
Result<VramPolicy> ParseVramPolicy(std::string_view text);

class VramMap {
 public:
  static constexpr int kChunkShift = 17;
  static constexpr uint64_t kChunk = 1ull << kChunkShift;

  // `pool` hands out the VMs' VRAM (FvHost's area past the reserved one); `guest_bytes` a whole
  // number of chunks. Static: ResourceExhausted when no contiguous run is free. Dynamic:
  // ResourceExhausted only when the VM is larger than the whole pool.
  static Result<std::unique_ptr<VramMap>> Create(VramPolicy policy, ReservedVram* pool,
                                                 VramAccess* vram, uint64_t guest_bytes);
  // Gives every chunk back (a static slice zeroed first; per-VM backing: every page restored and
  // zeroed, the VM's file punched).
  ~VramMap();
  VramMap(const VramMap&) = delete;
  VramMap& operator=(const VramMap&) = delete;

  VramPolicy policy() const { return policy_; }
  uint64_t guest_bytes() const { return guest_bytes_; }
  // Static: the slice's machine base; dynamic: 0.
  uint64_t static_base() const { return static_base_; }
  uint64_t assigned_bytes() const { return assigned_chunks_ * kChunk; }
  // Assignments refused because the pool was empty.
  uint64_t exhausted() const { return exhausted_; }
  // Per-VM backing: the VM's own VRAM memfd (guest address = offset), which the map keeps; -1
  // without.
  int backing_fd() const { return file_.get(); }
  // VRAM whose restore failed at release: kept out of the pool for good (never expected).
  uint64_t stranded_bytes() const { return stranded_; }
  // Where a stranded release is reported (may be empty).
  void SetLog(std::function<void(const std::string&)> log) { log_ = std::move(log); }

  // The machine address of guest address `address`, 0 when it is outside the VM or (dynamic) its
  // chunk was never assigned. Machine address 0 is never VM VRAM (the pool starts past the
  // reserved area).
  uint64_t Lookup(uint64_t address) const {
    if (address >= guest_bytes_) return 0;
    if (policy_ == VramPolicy::kStatic) return static_base_ + address;
    const uint64_t chunk = chunks_[address >> kChunkShift];
    return chunk == 0 ? 0 : chunk + (address & (kChunk - 1));
  }
  // As Lookup, but assigns (and zeroes) the chunk first when it has none. OutOfRange outside the
  // VM, ResourceExhausted when the pool is empty.
  Result<uint64_t> Assign(uint64_t address);

  // Copies guest VRAM [address, address + length) out; chunks never assigned read as zeros. False
  // (and `out` zeroed) when the range is not inside the VM.
  bool Read(uint64_t address, void* out, size_t length) const;
  // Stores into guest VRAM, assigning chunks as needed. False when the range is not inside the VM
  // or a chunk could not be assigned (what could be stored is stored).
  bool Write(uint64_t address, const void* data, size_t length);

 private:
  VramMap(VramPolicy policy, ReservedVram* pool, VramAccess* vram, uint64_t guest_bytes)
      : policy_(policy), pool_(pool), vram_(vram), guest_bytes_(guest_bytes) {}
  // Per-VM backing: the machine range goes back to the GPU's own memory (zeroed) and then to the
  // pool; on failure it stays out of the pool (stranded).
  void Release(uint64_t machine, uint64_t bytes);

  const VramPolicy policy_;
  ReservedVram* const pool_;
  VramAccess* const vram_;
  const uint64_t guest_bytes_;
  os::UniqueFd file_;  // per-VM backing; invalid without
  uint64_t static_base_ = 0;
  std::vector<uint64_t> chunks_;  // dynamic: machine base of each guest chunk, 0 = none
  uint64_t assigned_chunks_ = 0;
  uint64_t exhausted_ = 0;
  uint64_t stranded_ = 0;
  std::function<void(const std::string&)> log_;
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_VRAM_MAP_H_
