#include "guest-pv-driver/instmem.h"

#include <algorithm>
#include <vector>

#include "base/align.h"
#include "gpu/hw/pbus.h"
#include "gpu/hw/ramin.h"
#include "gpu/hw/vm.h"
#include "guest-pv-driver/vm_geometry.h"

namespace gpuvm::guest {

namespace vm = gf100::vm;
namespace pbus = gf100::pbus;
namespace ramin = gf100::ramin;

namespace {

// The PRAMIN window shows 1 MiB from a 64 KiB aligned base.
constexpr uint64_t kPraminGranule = 1ull << pbus::kPraminBaseShift;

}  // namespace

// ---- VramHeap
// -------------------------------------------------------------------------------------------

Result<uint64_t> VramHeap::Allocate(uint64_t size, uint64_t align) {
  std::lock_guard lock(mu_);
  Result<uint64_t> r = ranges_.Allocate(size, align);
  if (!r.ok()) {
    return Status::ResourceExhausted("out of VRAM: " + std::to_string(size) + " bytes requested, " +
                                     std::to_string(ranges_.free_bytes()) + " free");
  }
  return r;
}

void VramHeap::Free(uint64_t address) {
  std::lock_guard lock(mu_);
  (void)ranges_.Free(address);
}

uint64_t VramHeap::free_bytes() const {
  std::lock_guard lock(mu_);
  return ranges_.free_bytes();
}

// ---- InstMem
// --------------------------------------------------------------------------------------------

Result<std::unique_ptr<InstMem>> InstMem::Create(Bus* bus, VramHeap* vram, PageTableWriter* writer,
                                                 int large_page_shift) {
  std::unique_ptr<InstMem> m(new InstMem(bus, vram, writer, large_page_shift));
  GPUVM_RETURN_IF_ERROR(m->Bootstrap());
  return m;
}

Status InstMem::Bootstrap() {
  const int pde_shift = vm::kPdeShift(large_page_shift_);
  const uint64_t bar3_size = std::min<uint64_t>(bus_->pci().bar3_size, 1ull << pde_shift);
  // (our choice) 4 MiB at least: the bootstrap region plus room for a few contexts' tables.
  if (bar3_size < (4ull << 20)) {
    return Status::FailedPrecondition("BAR3 is smaller than 4 MiB; instance memory does not fit");
  }
  const uint64_t limit = bar3_size - 1;
  const uint32_t pt_size = PtSizeFor(0, limit, pde_shift);
  const uint64_t pt_entries = SmallTableEntries(large_page_shift_, pt_size);
  const uint64_t pt_bytes = AlignUp(pt_entries * vm::kEntrySize, kPage);
  // Region: [page table | page directory page | instance block], mapped at BAR3 offset 0.
  boot_bytes_ = pt_bytes + 2 * kPage;
  GPUVM_ASSIGN_OR_RETURN(boot_vram_, vram_->Allocate(boot_bytes_, kPraminGranule));
  const uint64_t pt_vram = boot_vram_;
  const uint64_t pd_vram = boot_vram_ + pt_bytes;
  instance_vram_ = pd_vram + kPage;
  page_table_ = {pt_vram, 0, pt_entries};
  directory_ = {pd_vram, pt_bytes, kPage / vm::kEntrySize, SpaceKind::kBar3};
  bar3_va_ = RangeAllocator(0, bar3_size);
  GPUVM_RETURN_IF_ERROR(bar3_va_.Reserve(0, boot_bytes_));

  // Everything below goes through PRAMIN, 32-bit stores, low word first (nouveau's boot path).
  bus_->WriteReg(pbus::kPraminBase, uint32_t(boot_vram_ >> pbus::kPraminBaseShift));
  auto pramin_write64 = [&](uint64_t vram, uint64_t value) {
    const uint64_t at = pbus::kPraminWindow + (vram - boot_vram_);
    bus_->Write32(Bar::k0, at, uint32_t(value));
    bus_->Write32(Bar::k0, at + 4, uint32_t(value >> 32));
  };
  pramin_write64(pd_vram,
                 vm::pde::Make(vm::PdeTarget::kNone, 0, vm::PdeTarget::kVram, pt_vram, pt_size));
  // The PTEs are consecutive words of the window: one memcpy_toio of the same stores in the same
  // order (a rep movsd where the bus traps).
  std::vector<uint32_t> ptes;
  for (uint64_t p = 0; p < boot_bytes_ / kPage; ++p) {
    const uint64_t pte = vm::pte::Make(boot_vram_ + p * kPage);
    ptes.push_back(uint32_t(pte));
    ptes.push_back(uint32_t(pte >> 32));
  }
  bus_->WriteRegs(pbus::kPraminWindow + (pt_vram - boot_vram_), ptes);
  pramin_write64(instance_vram_ + ramin::kPageDirLo, pd_vram);  // target VRAM (0) in bits 0-1
  pramin_write64(instance_vram_ + ramin::kVmLimitLo, limit);
  bus_->WriteReg(pbus::kBar3Inst,
                 pbus::kBarInstVmMode | uint32_t(instance_vram_ >> pbus::kBarInstShift));
  GPUVM_RETURN_IF_ERROR(writer_->AttachSpace(directory_, limit));
  GPUVM_RETURN_IF_ERROR(writer_->Flush(directory_));

  // BAR3 is live: clear what PRAMIN did not write (VRAM holds garbage on a real board), through
  // BAR3 with a few fills (memset_io). The page table's and directory's rest go through the writer
  // (natively the same fills; para-virtually one call each instead of trapped stores).
  const uint64_t mapped = boot_bytes_ / kPage;
  GPUVM_RETURN_IF_ERROR(
      writer_->ClearEntries(directory_, page_table_, mapped, page_table_.entries - mapped));
  GPUVM_RETURN_IF_ERROR(writer_->ClearEntries(directory_, directory_, 1, directory_.entries - 1));
  const uint64_t inst_bar3 = directory_.bar3_offset + kPage;
  GPUVM_RETURN_IF_ERROR(bus_->FillBlock(Bar::k3, inst_bar3, 0, ramin::kPageDirLo));
  GPUVM_RETURN_IF_ERROR(bus_->FillBlock(Bar::k3, inst_bar3 + ramin::kVmLimitHi + 4, 0,
                                        kPage - ramin::kVmLimitHi - 4));
  return Status::Ok();
}

InstMem::~InstMem() {
  if (instance_vram_ != 0) {
    bus_->WriteReg(pbus::kBar3Inst, 0);
    (void)writer_->DetachSpace(directory_);
    for (const auto& chunk : chunks_) vram_->Free(chunk->vram);
    vram_->Free(boot_vram_);
  }
}

Status InstMem::MapPages(uint64_t bar3, uint64_t vram, uint64_t pages) {
  std::vector<uint64_t> ptes(pages);
  for (uint64_t p = 0; p < pages; ++p) ptes[p] = vm::pte::Make(vram + p * kPage);
  GPUVM_RETURN_IF_ERROR(writer_->WriteEntries(directory_, page_table_, bar3 / kPage, ptes));
  return writer_->Flush(directory_);
}

Result<InstObject> InstMem::Allocate(uint64_t size, bool zero) {
  if (size == 0) return Status::InvalidArgument("empty instance object");
  size = AlignUp(size, kPage);
  Result<InstObject> object = size <= kChunkBytes ? AllocateInChunk(size) : AllocateDedicated(size);
  if (!object.ok() || !zero) return object;
  Status s = Zero(*object, 0, size);
  if (!s.ok()) {
    Free(*object);
    return s;
  }
  return object;
}

InstObject InstMem::TakeFromChunk(uint64_t size) {
  for (const auto& chunk : chunks_) {
    Result<uint64_t> at = chunk->objects.Allocate(size, kPage);
    if (!at.ok()) continue;
    ++chunk->live;
    return InstObject{chunk->vram + (*at - chunk->bar3), *at, size};
  }
  return {};
}

Result<InstObject> InstMem::AllocateInChunk(uint64_t size) {
  {
    std::lock_guard lock(mu_);
    if (InstObject object = TakeFromChunk(size); object.valid()) return object;
  }
  // A new chunk: mapped (one PTE block, one flush) before anything in it is used.
  GPUVM_ASSIGN_OR_RETURN(InstObject chunk, AllocateDedicated(kChunkBytes));
  std::lock_guard lock(mu_);
  chunks_.push_back(std::make_unique<Chunk>(chunk.bar3, chunk.vram, chunk.size));
  return TakeFromChunk(size);
}

Result<InstObject> InstMem::AllocateDedicated(uint64_t size) {
  uint64_t bar3;
  {
    std::lock_guard lock(mu_);
    Result<uint64_t> r = bar3_va_.Allocate(size, kPage);
    if (!r.ok()) {
      return Status::ResourceExhausted("BAR3 is full: no room for a " + std::to_string(size) +
                                       "-byte instance object");
    }
    bar3 = *r;
  }
  Result<uint64_t> vram = vram_->Allocate(size, kPage);
  if (!vram.ok()) {
    std::lock_guard lock(mu_);
    (void)bar3_va_.Free(bar3);
    return vram.status();
  }
  InstObject object{*vram, bar3, size};
  Status s = MapPages(bar3, object.vram, size / kPage);
  if (!s.ok()) {
    Unmap(object);
    return s;
  }
  return object;
}

void InstMem::Free(const InstObject& object) {
  if (!object.valid()) return;
  InstObject emptied;  // a chunk to give back
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < chunks_.size(); ++i) {
      Chunk& c = *chunks_[i];
      if (object.bar3 < c.bar3 || object.bar3 - c.bar3 >= c.size) continue;
      if (!c.objects.Free(object.bar3).ok()) return;  // not an object of ours: ignore it
      if (--c.live == 0 && i != 0) {
        emptied = {c.vram, c.bar3, c.size};
        chunks_.erase(chunks_.begin() + static_cast<ptrdiff_t>(i));
      }
      break;
    }
    if (!emptied.valid() && object.size <= kChunkBytes) return;  // stays mapped in its chunk
  }
  Unmap(emptied.valid() ? emptied : object);
}

void InstMem::Unmap(const InstObject& object) {
  // Unmapped without a TLB flush: nothing touches a freed object's (or emptied chunk's) BAR3 range,
  // and the range is mapped again only by Allocate, whose flush (before anything in it is used)
  // drops whatever the TLB still holds of it.
  (void)writer_->ClearEntries(directory_, page_table_, object.bar3 / kPage, object.size / kPage);
  vram_->Free(object.vram);
  std::lock_guard lock(mu_);
  (void)bar3_va_.Free(object.bar3);
}

Status InstMem::Write(const InstObject& object, uint64_t offset, const void* data,
                      uint64_t length) {
  if (offset > object.size || length > object.size - offset) {
    return Status::OutOfRange("write past the end of an instance object");
  }
  return bus_->WriteBlock(Bar::k3, object.bar3 + offset, data, length);
}

Status InstMem::Read(const InstObject& object, uint64_t offset, void* data, uint64_t length) {
  if (offset > object.size || length > object.size - offset) {
    return Status::OutOfRange("read past the end of an instance object");
  }
  return bus_->ReadBlock(Bar::k3, object.bar3 + offset, data, length);
}

Status InstMem::Zero(const InstObject& object, uint64_t offset, uint64_t length) {
  if (offset > object.size || length > object.size - offset) {
    return Status::OutOfRange("write past the end of an instance object");
  }
  if (length == 0) return Status::Ok();
  return bus_->FillBlock(Bar::k3, object.bar3 + offset, 0, length);
}

uint64_t InstMem::bar3_free() const {
  std::lock_guard lock(mu_);
  return bar3_va_.free_bytes();
}

}  // namespace gpuvm::guest
