#include "guest-pv-driver/vm_space.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "base/align.h"
#include "gpu/hw/ramin.h"
#include "gpu/hw/vm.h"
#include "guest-pv-driver/vm_geometry.h"

namespace gpuvm::guest {

namespace vm = gf100::vm;

// ---- NativePageTableWriter
// ------------------------------------------------------------------------------

Status NativePageTableWriter::WriteEntries(const PageTableRef& /*space*/, const PageTableRef& table,
                                           uint64_t first, std::span<const uint64_t> entries) {
  if (first > table.entries || entries.size() > table.entries - first) {
    return Status::Internal("page-table write past the end of its table");
  }
  if (entries.empty()) return Status::Ok();
  return bus_->WriteBlock(Bar::k3, table.bar3_offset + first * vm::kEntrySize, entries.data(),
                          entries.size() * vm::kEntrySize);
}

Status NativePageTableWriter::ClearEntries(const PageTableRef& /*space*/, const PageTableRef& table,
                                           uint64_t first, uint64_t count) {
  if (first > table.entries || count > table.entries - first) {
    return Status::Internal("page-table write past the end of its table");
  }
  if (count == 0) return Status::Ok();
  return bus_->FillBlock(Bar::k3, table.bar3_offset + first * vm::kEntrySize, 0,
                         count * vm::kEntrySize);
}

Status NativePageTableWriter::Flush(const PageTableRef& space) {
  std::lock_guard lock(flush_mu_);
  if (!PollReg(bus_, vm::kCfg, [](uint32_t v) { return (v & vm::kCfgFlushSlotsMask) != 0; })) {
    return Status::Unavailable("TLB flush: no free flush slot in 0x100c80 after 2 s");
  }
  // Directory target VRAM (bits 0-1 = 0) and address >> 12 in bits 4-31, i.e. address >> 8.
  bus_->WriteReg(vm::kTlbFlushVspace,
                 uint32_t((space.vram >> vm::kSmallPageShift) << vm::kTlbFlushVspaceAddrShift));
  bus_->WriteReg(vm::kTlbFlushTrigger, vm::kFlushTrigger | vm::kFlushPageAll);
  if (!PollReg(bus_, vm::kCfg, [](uint32_t v) { return (v & vm::kCfgFlushQueued) != 0; })) {
    return Status::Unavailable("TLB flush: not queued after 2 s");
  }
  return Status::Ok();
}

// ---- VmSpace
// --------------------------------------------------------------------------------------------

Result<std::unique_ptr<VmSpace>> VmSpace::Create(InstMem* instmem, PageTableWriter* writer,
                                                 uint64_t limit, int large_page_shift,
                                                 SpaceKind kind) {
  if (limit >= vm::kVaLimit || limit < kPage - 1) {
    return Status::InvalidArgument("address-space limit must be below 2^40");
  }
  std::unique_ptr<VmSpace> space(new VmSpace(instmem, writer, limit, large_page_shift));
  const uint64_t pdes = (limit >> vm::kPdeShift(large_page_shift)) + 1;
  space->directory_.kind = kind;
  GPUVM_ASSIGN_OR_RETURN(
      space->pd_, instmem->Allocate(AlignUp(pdes * vm::kEntrySize, kPage), space->InstMemZeroes()));
  space->directory_ = {space->pd_.vram, space->pd_.bar3, pdes, kind};
  Status s = writer->AttachSpace(space->directory_, limit);
  if (s.ok()) s = space->ClearNewTable(space->directory_);
  if (!s.ok()) {
    instmem->Free(space->pd_);
    space->pd_ = {};
    return s;
  }
  return space;
}

VmSpace::~VmSpace() {
  if (!pd_.valid()) return;
  (void)writer_->DetachSpace(directory_);
  for (auto& [index, t] : tables_) {
    instmem_->Free(t.small);
    instmem_->Free(t.large);
  }
  instmem_->Free(pd_);
}

Status VmSpace::TableFor(uint64_t va, bool large, bool create, PageTableRef* ref, uint64_t* index) {
  const int pde_shift = vm::kPdeShift(large_page_shift_);
  const uint64_t pde = va >> pde_shift;
  *ref = {};
  auto it = tables_.find(pde);
  if (it == tables_.end()) {
    if (!create) return Status::Ok();
    it = tables_.emplace(pde, Tables{{}, {}, PtSizeFor(pde, limit_, pde_shift)}).first;
  }
  Tables& t = it->second;
  InstObject& table = large ? t.large : t.small;
  const uint64_t entries =
      large ? LargeTableEntries(t.pt_size) : SmallTableEntries(large_page_shift_, t.pt_size);
  if (!table.valid()) {
    if (!create) return Status::Ok();
    GPUVM_ASSIGN_OR_RETURN(table, instmem_->Allocate(entries * vm::kEntrySize, InstMemZeroes()));
    if (Status s = ClearNewTable({table.vram, table.bar3, entries}); !s.ok()) {
      instmem_->Free(table);
      table = {};
      return s;
    }
    const uint64_t value = vm::pde::Make(
        t.large.valid() ? vm::PdeTarget::kVram : vm::PdeTarget::kNone, t.large.vram,
        t.small.valid() ? vm::PdeTarget::kVram : vm::PdeTarget::kNone, t.small.vram, t.pt_size);
    Status s = writer_->WriteEntries(directory_, directory_, pde, std::span(&value, 1));
    if (!s.ok()) {
      instmem_->Free(table);
      table = {};
      return s;
    }
  }
  const uint64_t in_pde = va & ((1ull << pde_shift) - 1);
  *index = in_pde >> (large ? large_page_shift_ : vm::kSmallPageShift);
  *ref = {table.vram, table.bar3, entries};
  return Status::Ok();
}

Status VmSpace::Store(uint64_t va, std::span<const uint64_t> ptes, uint64_t count, bool large) {
  const uint64_t page = large ? (1ull << large_page_shift_) : kPage;
  if (count == 0) return Status::Ok();
  if ((va & (page - 1)) != 0) return Status::InvalidArgument("va is not page aligned");
  if (va > limit_ || count > (limit_ - va + 1) / page) {
    return Status::OutOfRange("mapping past the end of the address space");
  }
  const bool clear = ptes.empty();
  std::lock_guard lock(mu_);
  uint64_t done = 0;
  while (done < count) {
    PageTableRef table;
    uint64_t index = 0;
    GPUVM_RETURN_IF_ERROR(TableFor(va + done * page, large, /*create=*/!clear, &table, &index));
    const uint64_t n = std::min(count - done, table.entries != 0 ? table.entries - index : 0);
    if (table.entries == 0) {  // clearing where no table exists: nothing to do for this PDE
      const uint64_t pde_span = 1ull << vm::kPdeShift(large_page_shift_);
      const uint64_t next = ((va + done * page) | (pde_span - 1)) + 1;
      done += std::min(count - done, (next - (va + done * page)) / page);
      continue;
    }
    if (n == 0) return Status::Internal("page table too short for its range");
    if (clear) {
      GPUVM_RETURN_IF_ERROR(writer_->ClearEntries(directory_, table, index, n));
    } else {
      GPUVM_RETURN_IF_ERROR(writer_->WriteEntries(directory_, table, index, ptes.subspan(done, n)));
    }
    done += n;
  }
  return Status::Ok();
}

Status VmSpace::Map(uint64_t va, std::span<const uint64_t> ptes, bool large) {
  if (ptes.empty()) return Status::Ok();
  return Store(va, ptes, ptes.size(), large);
}

Status VmSpace::Unmap(uint64_t va, uint64_t pages, bool large) {
  return Store(va, {}, pages, large);
}

Status VmSpace::Flush() { return writer_->Flush(directory_); }

void VmSpace::InstanceWords(uint32_t words[4]) const {
  namespace ri = gf100::ramin;
  words[0] = uint32_t(directory_.vram) & ri::kPageDirAddrLoMask;  // target VRAM = 0
  words[1] = uint32_t(directory_.vram >> 32) & ri::kPageDirAddrHiMask;
  words[2] = uint32_t(limit_);
  words[3] = uint32_t(limit_ >> 32);
}

Result<uint64_t> VmSpace::ReadPte(uint64_t va, bool large) {
  std::lock_guard lock(mu_);
  PageTableRef table;
  uint64_t index = 0;
  GPUVM_RETURN_IF_ERROR(TableFor(va, large, false, &table, &index));
  if (table.entries == 0) return uint64_t{0};
  const auto& t = tables_.at(va >> vm::kPdeShift(large_page_shift_));
  uint64_t value = 0;
  GPUVM_RETURN_IF_ERROR(
      instmem_->Read(large ? t.large : t.small, index * vm::kEntrySize, &value, sizeof(value)));
  return value;
}

size_t VmSpace::table_count() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [i, t] : tables_) n += t.small.valid() + t.large.valid();
  return n;
}

}  // namespace gpuvm::guest
