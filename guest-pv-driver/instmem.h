// Instance memory, as nouveau's gf100 instmem/bar code keeps it: objects the GPU reads by physical
// address (page directories and tables, channel instance blocks, playlists) live in VRAM, and the
// driver reaches them through BAR3, whose own address space is built at init through the PRAMIN
// window (BAR0 0x700000) because nothing else can reach VRAM yet. Also the VRAM heap every VRAM
// allocation comes from.
//
// BAR3 layout (our choice): a bootstrap region at BAR3 offset 0 holds BAR3's page table (mapped
// into BAR3 itself, so later PTE updates go through BAR3), its page directory and instance block;
// objects are mapped after it on demand, each mapping followed by a TLB flush of BAR3's space (a
// freed object's pages are unmapped without one: the next mapping's flush covers them). Objects of
// up to a chunk (1 MiB, our choice) come from chunks mapped whole — one PTE block and one flush per
// chunk instead of per object (a driver start allocates about a dozen objects, each flush four
// trapped accesses in a VM); an emptied chunk other than the first is unmapped and given back.
// Only the first page-directory entry of BAR3 is used: at most 128 MiB of BAR3 (our choice).
//
// Threading: thread-safe. Objects are independent; callers serialize writes to one object.
#ifndef GPUVM_GUEST_PV_DRIVER_INSTMEM_H_
#define GPUVM_GUEST_PV_DRIVER_INSTMEM_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "guest-pv-driver/bus.h"
#include "guest-pv-driver/page_table_writer.h"
#include "guest-pv-driver/range_allocator.h"

namespace gpuvm::guest {

class VramHeap {
 public:
  VramHeap(uint64_t base, uint64_t size) : ranges_(base, size) {}
  Result<uint64_t> Allocate(uint64_t size, uint64_t align);
  void Free(uint64_t address);
  uint64_t free_bytes() const;

 private:
  mutable std::mutex mu_;
  RangeAllocator ranges_;
};

// One object in instance memory: its VRAM address and where BAR3 shows it. size is 4 KiB aligned.
struct InstObject {
  uint64_t vram = 0;
  uint64_t bar3 = 0;
  uint64_t size = 0;
  bool valid() const { return size != 0; }
};

class InstMem {
 public:
  // Builds BAR3's address space through PRAMIN, binds BAR3 (0x1714) and flushes its TLB. `bus`,
  // `vram` and `writer` must outlive the InstMem.
  // `large_page_shift` is VM_CFG's large page size (it sets the span of a PDE).
  static Result<std::unique_ptr<InstMem>> Create(Bus* bus, VramHeap* vram, PageTableWriter* writer,
                                                 int large_page_shift);
  // Unbinds BAR3.
  ~InstMem();

  // A zeroed object of `size` bytes (rounded up to 4 KiB), 4 KiB aligned in VRAM and BAR3; with
  // `zero` false its bytes are whatever VRAM held (the caller has them zeroed otherwise).
  Result<InstObject> Allocate(uint64_t size, bool zero = true);
  void Free(const InstObject& object);

  // Accesses inside an object (offset + length <= object.size, checked).
  Status Write(const InstObject& object, uint64_t offset, const void* data, uint64_t length);
  Status Read(const InstObject& object, uint64_t offset, void* data, uint64_t length);
  Status Zero(const InstObject& object, uint64_t offset, uint64_t length);

  // BAR3's page directory (for flushes) and its one page table, and its instance block.
  const PageTableRef& directory() const { return directory_; }
  const PageTableRef& page_table() const { return page_table_; }
  uint64_t instance_vram() const { return instance_vram_; }
  uint64_t bootstrap_vram() const { return boot_vram_; }
  uint64_t bootstrap_bytes() const { return boot_bytes_; }
  uint64_t bar3_free() const;

 private:
  InstMem(Bus* bus, VramHeap* vram, PageTableWriter* writer, int large_page_shift)
      : bus_(bus), vram_(vram), writer_(writer), large_page_shift_(large_page_shift) {}
  Status Bootstrap();
  Status MapPages(uint64_t bar3, uint64_t vram, uint64_t pages);
  // A mapped chunk of VRAM at a BAR3 range, objects suballocated from it.
  struct Chunk {
    Chunk(uint64_t b, uint64_t v, uint64_t n) : bar3(b), vram(v), size(n), objects(b, n) {}
    uint64_t bar3, vram, size;
    RangeAllocator objects;  // BAR3 offsets
    uint64_t live = 0;
  };
  static constexpr uint64_t kChunkBytes = 1ull << 20;
  // An object from an existing chunk (mu_ held); invalid when none has room.
  InstObject TakeFromChunk(uint64_t size);
  Result<InstObject> AllocateInChunk(uint64_t size);
  Result<InstObject> AllocateDedicated(uint64_t size);
  // Unmaps a dedicated object or a chunk and gives its VRAM and BAR3 range back.
  void Unmap(const InstObject& object);

  Bus* const bus_;
  VramHeap* const vram_;
  PageTableWriter* const writer_;
  const int large_page_shift_;
  PageTableRef directory_;
  PageTableRef page_table_;
  uint64_t instance_vram_ = 0;
  uint64_t boot_vram_ = 0;
  uint64_t boot_bytes_ = 0;
  mutable std::mutex mu_;
  RangeAllocator bar3_va_;                      // guarded by mu_
  std::vector<std::unique_ptr<Chunk>> chunks_;  // guarded by mu_; the first is never given back
};

}  // namespace gpuvm::guest

#endif  // GPUVM_GUEST_PV_DRIVER_INSTMEM_H_
