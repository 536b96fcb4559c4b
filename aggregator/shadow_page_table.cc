#include "aggregator/shadow_page_table.h"

#include <cstring>

namespace gpuvm::aggregator {

namespace vm = gf100::vm;

namespace {

constexpr uint64_t kTagMask = 0x1ffffull << 44;  // PTE bits 44-60: compression tag

bool Inside(uint64_t address, uint64_t length, uint64_t size) {
  return length <= size && address <= size - length;
}

}  // namespace

RelocatedPte RelocatePte(uint64_t guest_pte, uint64_t page_bytes, const VmMemoryLayout& layout) {
  RelocatedPte r;
  if ((guest_pte & vm::pte::kPresent) == 0) return r;  // absent: nothing else in it matters
  r.verdict = PteVerdict::kRejected;
  if (vm::pte::StorageType(guest_pte) != 0) {
    r.reason = "a storage kind other than linear (not virtualized)";
    return r;
  }
  if ((guest_pte & kTagMask) != 0) {
    r.reason = "a compression tag (tags are a shared resource, not virtualized)";
    return r;
  }
  // (as the GPU does) the low bits of a large page's address are ignored.
  const uint64_t address = vm::pte::Address(guest_pte) & ~(page_bytes - 1);
  uint64_t relocated = 0;
  switch (vm::pte::TargetOf(guest_pte)) {
    case vm::Target::kVram:
      if (!Inside(address, page_bytes, layout.vram_bytes)) {
        r.reason = "VRAM outside the VM's slice";
        return r;
      }
      if (layout.vram_map != nullptr) {
        Result<uint64_t> machine = layout.vram_map->Assign(address);
        if (!machine.ok()) {
          r.reason = "VRAM the over-committed GPU had no chunk left for";
          return r;
        }
        relocated = *machine;
      } else {
        relocated = layout.vram_base + address;
      }
      break;
    case vm::Target::kSysramSnooped:
    case vm::Target::kSysramNoSnoop:
      if (!Inside(address, page_bytes, layout.ram_bytes)) {
        r.reason = "SYSRAM outside the VM's RAM";
        return r;
      }
      relocated = layout.sysram_base + address;
      break;
    case vm::Target::kInvalid:
      r.reason = "the invalid target";
      return r;
  }
  if ((relocated >> 12) > vm::pte::kAddrFieldMask) {
    r.reason = "a relocated address past the PTE's 40 bits";
    return r;
  }
  const uint64_t field = vm::pte::kAddrFieldMask << vm::pte::kAddrShift;
  r.verdict = PteVerdict::kMapped;
  r.value = (guest_pte & ~field) | ((relocated >> 12) << vm::pte::kAddrShift);
  return r;
}

GuestPte LookupGuestPte(const GuestMemoryView& guest, uint64_t pd, uint64_t va) {
  GuestPte g;
  const int pde_shift = vm::kPdeShift(ShadowSpace::kLargePageShift);
  const uint64_t in_pde = va & ((1ull << pde_shift) - 1);
  uint64_t pde = 0;
  if (!guest.ReadVram(pd + (va >> pde_shift) * vm::kEntrySize, &pde, 8) ||
      in_pde >= ((1ull << pde_shift) >> vm::pde::PtSize(pde))) {
    return g;
  }
  uint64_t pte = 0;
  if (vm::pde::SmallTarget(pde) != vm::PdeTarget::kNone) {
    g.table_target = vm::pde::SmallTarget(pde);
    g.table_address = vm::pde::SmallTableAddress(pde) + (in_pde >> 12) * vm::kEntrySize;
    if (guest.Read(g.table_target, g.table_address, &pte, 8) && (pte & vm::pte::kPresent)) {
      g.pte = pte;
      g.page_bytes = 1ull << 12;
      g.inner = va & (g.page_bytes - 1);
      return g;
    }
  }
  if (vm::pde::LargeTarget(pde) != vm::PdeTarget::kNone) {
    g.table_target = vm::pde::LargeTarget(pde);
    g.table_address =
        vm::pde::LargeTableAddress(pde) + (in_pde >> ShadowSpace::kLargePageShift) * vm::kEntrySize;
    if (guest.Read(g.table_target, g.table_address, &pte, 8)) {
      g.pte = pte;
      g.page_bytes = 1ull << ShadowSpace::kLargePageShift;
      g.inner = va & (g.page_bytes - 1);
    }
  }
  return g;
}

bool GuestMemoryView::ReadVram(uint64_t address, void* out, size_t length) const {
  if (!Inside(address, length, layout_.vram_bytes)) {
    std::memset(out, 0, length);
    return false;
  }
  if (layout_.vram_map != nullptr) return layout_.vram_map->Read(address, out, length);
  vram_->Read(layout_.vram_base + address, out, length);
  return true;
}

bool GuestMemoryView::ReadSysram(uint64_t address, void* out, size_t length) const {
  if (!Inside(address, length, ram_.size())) {
    std::memset(out, 0, length);
    return false;
  }
  std::memcpy(out, ram_.data() + address, length);
  return true;
}

bool GuestMemoryView::Read(vm::PdeTarget target, uint64_t address, void* out, size_t length) const {
  switch (target) {
    case vm::PdeTarget::kVram:
      return ReadVram(address, out, length);
    case vm::PdeTarget::kSysramSnooped:
    case vm::PdeTarget::kSysramNoSnoop:
      return ReadSysram(address, out, length);
    case vm::PdeTarget::kNone:
      break;
  }
  std::memset(out, 0, length);
  return false;
}

Result<std::unique_ptr<ShadowSpace>> ShadowSpace::Create(VramAccess* vram, ReservedVram* reserved,
                                                         uint64_t guest_pd) {
  const uint64_t bytes = kPdeCount * vm::kEntrySize;
  GPUVM_ASSIGN_OR_RETURN(uint64_t physical, reserved->Allocate(bytes));
  vram->Fill(physical, 0, bytes);
  return std::unique_ptr<ShadowSpace>(new ShadowSpace(vram, reserved, guest_pd, physical));
}

ShadowSpace::~ShadowSpace() {
  for (auto& t : small_) FreeTable(t);
  for (auto& t : large_) FreeTable(t);
  reserved_->Free(physical_pd_, kPdeCount * vm::kEntrySize);
}

uint64_t ShadowSpace::reserved_bytes() const {
  uint64_t bytes = kPdeCount * vm::kEntrySize;
  for (const auto* tables : {&small_, &large_}) {
    for (const auto& t : *tables) {
      if (t) bytes += t->shadow.size() * vm::kEntrySize;
    }
  }
  return bytes;
}

void ShadowSpace::FreeTable(std::unique_ptr<Table>& table) {
  if (!table) return;
  reserved_->Free(table->physical, table->shadow.size() * vm::kEntrySize);
  table.reset();
}

Result<bool> ShadowSpace::SyncTable(std::unique_ptr<Table>& table, vm::PdeTarget target,
                                    uint64_t address, uint64_t entries, uint64_t page_bytes,
                                    const GuestMemoryView& guest, ShadowCounters& counters) {
  if (target == vm::PdeTarget::kNone) {
    FreeTable(table);
    return false;
  }
  std::vector<uint64_t> copy(entries);
  if (!guest.Read(target, address, copy.data(), entries * vm::kEntrySize)) {
    ++counters.entries_rejected;
    last_rejection_ = "a page table outside the VM's memory";
    FreeTable(table);
    return false;
  }
  ++counters.tables_scanned;
  if (table && table->shadow.size() != entries) FreeTable(table);
  bool fresh = false;
  if (!table) {
    GPUVM_ASSIGN_OR_RETURN(uint64_t physical, reserved_->Allocate(entries * vm::kEntrySize));
    vram_->Fill(physical, 0, entries * vm::kEntrySize);
    table = std::make_unique<Table>();
    table->physical = physical;
    table->shadow.assign(entries, 0);
    table->guest_copy.assign(entries, 0);
    fresh = true;
  }
  if (!fresh && table->guest_target == target && table->guest_address == address &&
      table->guest_copy == copy) {
    ++counters.tables_unchanged;
    return true;
  }
  table->guest_target = target;
  table->guest_address = address;
  for (uint64_t i = 0; i < entries; ++i) {
    if (!fresh && copy[i] == table->guest_copy[i]) continue;
    const RelocatedPte r = RelocatePte(copy[i], page_bytes, guest.layout());
    if (r.verdict == PteVerdict::kRejected) {
      ++counters.entries_rejected;
      last_rejection_ = r.reason;
    }
    if (r.value != table->shadow[i]) {
      table->shadow[i] = r.value;
      vram_->Write64(table->physical + i * vm::kEntrySize, r.value);
      ++counters.entries_written;
    }
  }
  table->guest_copy = std::move(copy);
  return true;
}

Status ShadowSpace::Rescan(const GuestMemoryView& guest, ShadowCounters& counters) {
  ++counters.scans;
  std::vector<uint64_t> pd(kPdeCount, 0);
  // A directory running past the slice's end: the entries outside read as absent.
  const uint64_t slice = guest.layout().vram_bytes;
  const uint64_t readable =
      guest_pd_ >= slice ? 0 : std::min<uint64_t>(kPdeCount, (slice - guest_pd_) / vm::kEntrySize);
  if (readable > 0) guest.ReadVram(guest_pd_, pd.data(), readable * vm::kEntrySize);
  const int pde_shift = vm::kPdeShift(kLargePageShift);
  for (uint64_t i = 0; i < kPdeCount; ++i) {
    const uint64_t pde = pd[i];
    const uint32_t pt_size = vm::pde::PtSize(pde);
    const uint64_t small_entries = vm::kSmallTableEntries(kLargePageShift) >> pt_size;
    const uint64_t large_entries = vm::kLargeTableEntries >> pt_size;
    (void)pde_shift;
    GPUVM_ASSIGN_OR_RETURN(bool has_small, SyncTable(small_[i], vm::pde::SmallTarget(pde),
                                                     vm::pde::SmallTableAddress(pde), small_entries,
                                                     vm::kSmallPageSize, guest, counters));
    GPUVM_ASSIGN_OR_RETURN(bool has_large, SyncTable(large_[i], vm::pde::LargeTarget(pde),
                                                     vm::pde::LargeTableAddress(pde), large_entries,
                                                     1ull << kLargePageShift, guest, counters));
    const uint64_t shadow =
        (has_small || has_large)
            ? vm::pde::Make(has_large ? vm::PdeTarget::kVram : vm::PdeTarget::kNone,
                            has_large ? large_[i]->physical : 0,
                            has_small ? vm::PdeTarget::kVram : vm::PdeTarget::kNone,
                            has_small ? small_[i]->physical : 0, pt_size)
            : 0;
    if (shadow != shadow_pd_[i]) {
      shadow_pd_[i] = shadow;
      vram_->Write64(physical_pd_ + i * vm::kEntrySize, shadow);
      ++counters.entries_written;
    }
  }
  return Status::Ok();
}

}  // namespace gpuvm::aggregator
