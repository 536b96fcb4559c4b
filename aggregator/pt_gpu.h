// Pass-through: the VM owns the whole physical GPU and its trapped accesses are forwarded
// untranslated — register offsets, aperture offsets, and the guest-physical addresses the guest
// driver writes into SYSRAM page-table entries (which reach the VM's RAM through the GPU's
// GuestRamWindow). Only one pt VM exists at a time; the Aggregator enforces it.
//
// Xen's own PCI pass-through of a real card maps the BARs into the guest and takes no traps. Ours
// comes close with BAR remap where the GPU can hand out its VRAM (PhysicalGpu::owner_vram_fd(): the
// software GPU's own memfd): every BAR1/BAR3 aperture page whose PTE maps VRAM is mapped into the
// guest (BAR_MAP, as fv's remap: bar_remap.h), so copies through the apertures and the driver's
// page-table stores through BAR3 reach VRAM without a trap. What stays trapped: BAR0 (registers
// have side effects), the USER pages of the poll area (an IB_PUT store wakes PFIFO), SYSRAM pages,
// and everything while the GPU uses 64 KiB large pages (the walk knows 128 KiB ones). The remapped
// set follows the GPU's own registers: recomputed after a store to a BAR instance register, the
// poll area, VM_CFG, PMC_ENABLE or the TLB flush trigger (a PTE change takes effect at its flush,
// as on the hardware), at the next BAR1/BAR3 trap when nothing is mapped yet. Handing the whole
// VRAM to this guest is safe because it owns the whole GPU: nothing of another VM or of ours is in
// it, and Detach's reset gives the GPU new VRAM, so a guest that keeps its mappings (its device
// model died) holds only its own old memory. Without such a file everything traps (a real card:
// Xen maps its BARs itself; --sim-vram-file).
//
// Detach = reset the whole GPU (PhysicalGpu::Reset: every channel gone, every cached translation
// dropped, VRAM unreadable for the next owner), then close the window onto the VM's RAM.
//
// Threading: as VirtualGpu.
#ifndef GPUVM_AGGREGATOR_PT_GPU_H_
#define GPUVM_AGGREGATOR_PT_GPU_H_

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "aggregator/bar_remap.h"
#include "aggregator/physical_gpu.h"
#include "aggregator/virtual_gpu.h"
#include "aggregator/vram_access.h"

namespace gpuvm::aggregator {

class PassThroughGpu final : public VirtualGpu {
 public:
  // InvalidArgument when a VM BAR is larger than the physical one (the guest would address
  // registers or aperture pages that do not exist).
  // `bar_remap` false: every access traps, whatever the GPU could hand out.
  static Result<std::unique_ptr<PassThroughGpu>> Create(PhysicalGpu* gpu, const VmBars& bars,
                                                        bool bar_remap = true);
  ~PassThroughGpu() override;

  ipc::VmMode mode() const override { return ipc::VmMode::kPassThrough; }
  uint64_t vram_bytes() const override { return gpu_->vram_bytes(); }
  Result<uint64_t> Read(gpu::Bar bar, uint64_t offset, uint32_t size, uint32_t vcpu) override;
  Status Write(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t value,
               uint32_t vcpu) override;
  Status WriteElements(gpu::Bar bar, uint64_t offset, uint32_t size, std::span<const uint8_t> data,
                       uint32_t vcpu) override;
  Status ReadElements(gpu::Bar bar, uint64_t offset, uint32_t size, std::span<uint8_t> out,
                      uint32_t vcpu) override;
  Status FillElements(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t value, uint32_t count,
                      uint32_t vcpu) override;
  bool interrupt_asserted() const override;
  Status AttachGuestRam(const GuestRam& ram) override;
  Status Detach() override;
  std::vector<BarRemapRequest> TakeBarRemapRequests() override;
  void BarRemapAnswered(bool map, const Status& status) override;

  // BAR remap (above): whether it is on, pages and runs mapped now, recomputations so far.
  bool remaps() const { return remap_ != nullptr && !remap_off_; }
  uint64_t remapped_pages() const { return remap_ ? remap_->mapped_pages() : 0; }
  size_t remapped_runs() const { return remap_ ? remap_->runs() : 0; }
  uint64_t remap_syncs() const { return remap_syncs_; }

 private:
  PassThroughGpu(PhysicalGpu* gpu, const VmBars& bars) : gpu_(gpu), bars_(bars), vram_(gpu) {}
  // The access [offset, offset + length) of elements of `size` lies inside the VM's BAR.
  Status Check(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t length) const;
  // After a store to BAR0 [offset, offset + length): marks the BARs whose remapped set it may
  // change, and recomputes at once when pages are mapped (they may be stale now).
  void NoteRegisterStore(uint64_t offset, uint64_t length);
  // The BARs in `bars` (bit 0 BAR1, bit 1 BAR3) may map differently now: recompute them at once
  // when pages are mapped, else at the next BAR1/BAR3 trap.
  void RemapChanged(uint8_t bars);
  // A GPU register, as the walk needs it (the VM's own values: nothing is virtualized in pt).
  uint32_t Register(uint32_t offset);
  // The walk's view: all of VRAM untranslated, and the VM's RAM.
  GuestMemoryView View();
  // Before a trapped BAR1/BAR3 access: recompute if something changed since.
  void SyncRemapIfDirty() {
    if (remap_dirty_ != 0) SyncRemap();
  }
  void SyncRemap();

  PhysicalGpu* const gpu_;
  const VmBars bars_;
  bool detached_ = false;
  // BAR remap: null when the GPU has no VRAM file to hand out.
  VramAccess vram_;               // the walk's reads of the BAR page tables
  std::span<const uint8_t> ram_;  // the VM's RAM (tables in SYSRAM), once attached
  std::unique_ptr<BarRemapper> remap_;
  uint8_t remap_dirty_ = 3;  // BARs to recompute (bit 0 BAR1, bit 1 BAR3)
  bool remap_off_ = false;   // the device model refused a map: everything traps
  BarWalk walk_[2];
  // What the last Update of each BAR was computed from (the USER pages' place): an unchanged walk
  // with the same poll area needs no Update.
  std::optional<uint32_t> updated_poll_[2];
  uint64_t remap_syncs_ = 0;
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_PT_GPU_H_
