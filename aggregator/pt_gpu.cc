#include "aggregator/pt_gpu.h"

#include <cstring>

#include "aggregator/shadow_page_table.h"
#include "gpu/hw/pbus.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pmc.h"
#include "gpu/hw/vm.h"

namespace gpuvm::aggregator {

namespace pbus = gf100::pbus;
namespace pf = gf100::pfifo;
namespace pmc = gf100::pmc;
namespace vm = gf100::vm;

namespace {
constexpr uint64_t kPage = 0x1000;
}  // namespace

Result<std::unique_ptr<PassThroughGpu>> PassThroughGpu::Create(PhysicalGpu* gpu, const VmBars& bars,
                                                               bool bar_remap) {
  const gpu::PciIdentity& physical = gpu->device().pci();
  for (gpu::Bar bar : {gpu::Bar::k0, gpu::Bar::k1, gpu::Bar::k3}) {
    if (bars.size(bar) > physical.BarSize(bar)) {
      return Status::InvalidArgument("pt: BAR" + std::to_string(static_cast<int>(bar)) + " of " +
                                     std::to_string(bars.size(bar) >> 20) +
                                     " MiB is larger than the GPU's (" +
                                     std::to_string(physical.BarSize(bar) >> 20) + " MiB)");
    }
  }
  std::unique_ptr<PassThroughGpu> pt(new PassThroughGpu(gpu, bars));
  // BAR remap where the GPU can hand out its VRAM (pt_gpu.h); else every access traps (correct).
  if (const int vram = gpu->owner_vram_fd(); bar_remap && vram >= 0) {
    Result<os::UniqueFd> copy = os::DuplicateFd(vram);
    if (copy.ok()) pt->remap_ = std::make_unique<BarRemapper>(std::move(*copy), 0);
  }
  return pt;
}

PassThroughGpu::~PassThroughGpu() {
  if (!detached_) (void)Detach();
}

Status PassThroughGpu::Check(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t length) const {
  return CheckBarAccess(detached_, bars_, bar, offset, size, length);
}

Result<uint64_t> PassThroughGpu::Read(gpu::Bar bar, uint64_t offset, uint32_t size, uint32_t) {
  GPUVM_RETURN_IF_ERROR(Check(bar, offset, size, size));
  if (bar != gpu::Bar::k0) SyncRemapIfDirty();
  return gpu_->device().Read(bar, offset, static_cast<gpu::Width>(size));
}

Status PassThroughGpu::Write(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t value,
                             uint32_t) {
  GPUVM_RETURN_IF_ERROR(Check(bar, offset, size, size));
  if (bar != gpu::Bar::k0) SyncRemapIfDirty();
  gpu_->device().Write(bar, offset, static_cast<gpu::Width>(size), value);
  if (bar != gpu::Bar::k0 || remap_ == nullptr) return Status::Ok();
  if (offset == vm::kTlbFlushTrigger && size == 4) {
    // Which BARs it concerns, from the GPU's own registers (VSPACE was written before the trigger).
    const uint32_t inst[2] = {Register(pbus::kBar1Inst), Register(pbus::kBar3Inst)};
    RemapChanged(BarsFlushed(View(), uint32_t(value), Register(vm::kTlbFlushVspace), inst));
    return Status::Ok();
  }
  NoteRegisterStore(offset, size);
  return Status::Ok();
}

// Element by element, exactly as the single accesses would reach the GPU (a register block, or
// 8-byte stores a GPU sees as such), only without a round trip each: gpu::Device::WriteElements,
// which the software GPU performs a page at a time with the same result.
Status PassThroughGpu::WriteElements(gpu::Bar bar, uint64_t offset, uint32_t size,
                                     std::span<const uint8_t> data, uint32_t) {
  GPUVM_RETURN_IF_ERROR(Check(bar, offset, size, data.size()));
  if (bar != gpu::Bar::k0) SyncRemapIfDirty();
  gpu_->device().WriteElements(bar, offset, static_cast<gpu::Width>(size), data.data(),
                               data.size() / size);
  if (bar == gpu::Bar::k0) NoteRegisterStore(offset, data.size());
  return Status::Ok();
}

// A rep stos: `count` single writes of the same value, the same way.
Status PassThroughGpu::FillElements(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t value,
                                    uint32_t count, uint32_t) {
  GPUVM_RETURN_IF_ERROR(Check(bar, offset, size, uint64_t{count} * size));
  uint8_t element[8];
  std::memcpy(element, &value, sizeof(element));  // little endian: the low `size` bytes first
  if (bar != gpu::Bar::k0) SyncRemapIfDirty();
  gpu_->device().WriteElements(bar, offset, static_cast<gpu::Width>(size), element, count,
                               /*repeat=*/true);
  if (bar == gpu::Bar::k0) NoteRegisterStore(offset, uint64_t{count} * size);
  return Status::Ok();
}

Status PassThroughGpu::ReadElements(gpu::Bar bar, uint64_t offset, uint32_t size,
                                    std::span<uint8_t> out, uint32_t) {
  GPUVM_RETURN_IF_ERROR(Check(bar, offset, size, out.size()));
  if (bar != gpu::Bar::k0) SyncRemapIfDirty();
  gpu::Device& device = gpu_->device();
  for (size_t at = 0; at < out.size(); at += size) {
    const uint64_t value = device.Read(bar, offset + at, static_cast<gpu::Width>(size));
    std::memcpy(out.data() + at, &value, size);
  }
  return Status::Ok();
}

bool PassThroughGpu::interrupt_asserted() const {
  return !detached_ && gpu_->device().interrupt_asserted();
}

Status PassThroughGpu::AttachGuestRam(const GuestRam& ram) {
  if (detached_) return Status::FailedPrecondition("the VM's virtual GPU is gone");
  // A GPU that cannot reach guest memory through the window (a real card without an IOMMU mapping)
  // gets nothing: the Aggregator's admission policy has already decided whether such a pt VM may
  // run at all.
  if (gpu_->reaches_guest_memory()) gpu_->host_window().Attach(ram.bytes());
  ram_ = ram.bytes();  // BAR tables in SYSRAM become readable to the walk
  remap_dirty_ = 3;
  return Status::Ok();
}

Status PassThroughGpu::Detach() {
  if (detached_) return Status::Ok();
  detached_ = true;
  // The reset first: until it is done the device may still hold pointers into the VM's RAM. It also
  // gives the GPU new VRAM, so remapped pages a guest keeps reach only its own old memory.
  Status reset = gpu_->Reset();
  gpu_->host_window().Detach();
  ram_ = {};
  remap_.reset();  // our copy of the old VRAM file
  return reset;
}

// ---- BAR remap (pt_gpu.h) ----

void PassThroughGpu::NoteRegisterStore(uint64_t offset, uint64_t length) {
  if (remap_ == nullptr || remap_off_) return;
  auto hit = [&](uint32_t reg) { return reg + 4 > offset && reg < offset + length; };
  uint8_t bars = 0;
  if (hit(pbus::kBar1Inst) || hit(pf::kPollArea)) bars |= 1;
  if (hit(pbus::kBar3Inst)) bars |= 2;
  // A block store over the flush trigger (no driver does one) recomputes both.
  if (hit(vm::kCfg) || hit(pmc::kEnable) || hit(vm::kTlbFlushTrigger)) bars |= 3;
  RemapChanged(bars);
}

void PassThroughGpu::RemapChanged(uint8_t bars) {
  if (bars == 0 || remap_ == nullptr || remap_off_) return;
  remap_dirty_ |= bars;
  if (remap_->runs() > 0) SyncRemap();  // mapped pages may be stale from now on
}

uint32_t PassThroughGpu::Register(uint32_t offset) {
  return uint32_t(gpu_->device().Read(gpu::Bar::k0, offset, gpu::Width::k32));
}

GuestMemoryView PassThroughGpu::View() {
  // Untranslated: guest VRAM addresses are the GPU's (vram_base 0), the walk's machine addresses
  // are offsets into the GPU's VRAM file.
  return GuestMemoryView(&vram_, {0, gpu_->vram_bytes(), 0, ram_.size()}, ram_);
}

void PassThroughGpu::SyncRemap() {
  const uint8_t dirty = remap_dirty_;
  remap_dirty_ = 0;
  if (remap_ == nullptr || remap_off_ || detached_) return;
  ++remap_syncs_;
  if (Register(vm::kCfg) & vm::kCfgLargePage64K) {
    // The walk knows 128 KiB large pages only: trap everything until the GPU is back to them.
    remap_->UnmapAll();
    walk_[0] = walk_[1] = {};
    updated_poll_[0] = updated_poll_[1] = std::nullopt;
    return;
  }
  const GuestMemoryView view = View();
  const uint32_t poll = Register(pf::kPollArea);
  for (uint32_t b = 0; b < 2; ++b) {
    if ((dirty & (1u << b)) == 0) continue;
    const gpu::Bar bar = b == 0 ? gpu::Bar::k1 : gpu::Bar::k3;
    const bool changed = WalkBarTables(view, Register(b == 0 ? pbus::kBar1Inst : pbus::kBar3Inst),
                                       bars_.size(bar), walk_[b]);
    if (!changed && updated_poll_[b] == poll) continue;  // the same pages as last time
    updated_poll_[b] = poll;
    std::vector<uint64_t> targets(walk_[b].machine);
    if (bar == gpu::Bar::k1 && (poll & pf::kPollAreaEnable) != 0) {
      // The USER pages trap: PFIFO learns of an IB_PUT store from the store itself.
      const uint64_t base = (uint64_t(poll & pf::kPollAreaAddrMask) << 12) / kPage;
      const uint64_t pages = uint64_t(pf::kChannels) * pf::kUserPageSize / kPage;
      for (uint64_t i = base; i < base + pages && i < targets.size(); ++i) targets[i] = 0;
    }
    // A failure leaves some pages trapping, which is always correct.
    (void)remap_->Update(bar, targets);
  }
}

std::vector<BarRemapRequest> PassThroughGpu::TakeBarRemapRequests() {
  if (remap_ == nullptr) return {};
  return remap_->Take();
}

void PassThroughGpu::BarRemapAnswered(bool map, const Status& status) {
  if (status.ok() || remap_ == nullptr || !map || remap_off_) return;
  // Trapping is always correct: withdraw what is mapped and trap from now on.
  remap_off_ = true;
  remap_->UnmapAll();
}

}  // namespace gpuvm::aggregator
