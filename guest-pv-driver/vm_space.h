// GPU virtual address spaces as the driver builds them: a page directory and page tables in
// instance memory (instmem.h), allocated on demand per page-directory entry (small-page tables for
// 4 KiB pages, large-page tables for 128 KiB pages), updated through a PageTableWriter (the native
// one stores through BAR3 and flushes the TLB by MMIO; a para-virtual one will use the call page).
// Contexts, BAR1 and (for flushes) BAR3 are such spaces.
//
// Also NativePageTableWriter, the native implementation of the page_table_writer.h seam.
//
// Threading: VmSpace is thread-safe (one lock per space). NativePageTableWriter is thread-safe; its
// TLB flush handshake is serialized device-wide (it is a three-register sequence).
#ifndef GPUVM_GUEST_PV_DRIVER_VM_SPACE_H_
#define GPUVM_GUEST_PV_DRIVER_VM_SPACE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>

#include "base/status.h"
#include "guest-pv-driver/bus.h"
#include "guest-pv-driver/instmem.h"
#include "guest-pv-driver/page_table_writer.h"

namespace gpuvm::guest {

class NativePageTableWriter final : public PageTableWriter {
 public:
  explicit NativePageTableWriter(Bus* bus) : bus_(bus) {}

  Status AttachSpace(const PageTableRef&, uint64_t) override { return Status::Ok(); }
  Status DetachSpace(const PageTableRef&) override { return Status::Ok(); }
  // One BAR3 block store of the entries.
  Status WriteEntries(const PageTableRef& space, const PageTableRef& table, uint64_t first,
                      std::span<const uint64_t> entries) override;
  // One BAR3 fill of zeros (memset_io).
  Status ClearEntries(const PageTableRef& space, const PageTableRef& table, uint64_t first,
                      uint64_t count) override;
  // nouveau's gf100 flush: wait for a free slot (0x100c80 bits 16-23), write the directory
  // (0x100cb8), trigger PAGE_ALL (0x100cbc), wait for "queued" (0x100c80 bit 15).
  Status Flush(const PageTableRef& space) override;

 private:
  Bus* const bus_;
  std::mutex flush_mu_;
};

class VmSpace {
 public:
  // A space covering [0, limit] (limit < 2^40). The directory is sized to the limit.
  static Result<std::unique_ptr<VmSpace>> Create(InstMem* instmem, PageTableWriter* writer,
                                                 uint64_t limit, int large_page_shift,
                                                 SpaceKind kind = SpaceKind::kChannel);
  // Detaches the space and frees its tables. The caller has made sure the GPU no longer uses it.
  ~VmSpace();

  // Stores `ptes` for consecutive pages from `va` (4 KiB pages, or large pages when `large`); va
  // aligned to the page size and the range inside the limit. No flush: call Flush() after.
  Status Map(uint64_t va, std::span<const uint64_t> ptes, bool large);
  // Clears `pages` entries from `va`. No flush.
  Status Unmap(uint64_t va, uint64_t pages, bool large);
  Status Flush();

  // Writes this space's directory and limit into an instance block (RAMIN 0x200-0x20c) — bytes to
  // store at ramin::kPageDirLo, 16 of them.
  void InstanceWords(uint32_t words[4]) const;

  const PageTableRef& directory() const { return directory_; }
  uint64_t limit() const { return limit_; }
  uint64_t large_page_size() const { return 1ull << large_page_shift_; }
  // For tests: the entry currently stored for `va` (0 when there is no table), read through BAR3.
  Result<uint64_t> ReadPte(uint64_t va, bool large);
  size_t table_count() const;

 private:
  struct Tables {
    InstObject small;
    InstObject large;
    uint32_t pt_size = 0;
  };
  VmSpace(InstMem* instmem, PageTableWriter* writer, uint64_t limit, int large_page_shift)
      : instmem_(instmem), writer_(writer), limit_(limit), large_page_shift_(large_page_shift) {}
  // The table holding `va`'s entry (mu_ held); created when `create`. Sets *ref/*index, or
  // ref->entries == 0 when absent.
  Status TableFor(uint64_t va, bool large, bool create, PageTableRef* ref, uint64_t* index);
  Status Store(uint64_t va, std::span<const uint64_t> ptes, uint64_t count, bool large);
  // Whether new tables (and the directory) get the instance memory's zero fill. Not with a writer
  // whose host zeroes channel tables (para-virtual): there a channel space's tables come zeroed and
  // a BAR space's are cleared through the writer (one call instead of trapped stores).
  bool InstMemZeroes() const { return !writer_->ZeroesChannelTables(); }
  // The rest of that: a new BAR-space table (or directory) cleared through the writer.
  Status ClearNewTable(const PageTableRef& table) {
    if (InstMemZeroes() || directory_.kind == SpaceKind::kChannel) return Status::Ok();
    return writer_->ClearEntries(directory_, table, 0, table.entries);
  }

  InstMem* const instmem_;
  PageTableWriter* const writer_;
  const uint64_t limit_;
  const int large_page_shift_;
  InstObject pd_;
  PageTableRef directory_;
  mutable std::mutex mu_;
  std::map<uint64_t, Tables> tables_;  // by PDE index
};

}  // namespace gpuvm::guest

#endif  // GPUVM_GUEST_PV_DRIVER_VM_SPACE_H_
