// Physical VRAM as the aggregator's own code reads and writes it (shadow page tables, shadow
// instance blocks, the physical playlist, guest VRAM reached through a trapped PRAMIN/BAR access).
// Two paths, same results: a direct mapping of VRAM when the backend offers one
// (PhysicalGpu::vram_mapping(): the software GPU's VRAM view), else the GPU's own PRAMIN window
// (BAR0 0x700000, moved with PBUS 0x1700), which works on every board but costs an MMIO per word.
//
// Addresses are physical VRAM addresses; callers check ranges (anything outside VRAM reads zero /
// is dropped here, and is counted).
//
// Zeroing large ranges (Fill with 0, 64 KiB or more: a dynamic VRAM chunk assigned, a static slice
// at admission, without per-VM backing) punches the pages out of whatever file backs them in the
// direct mapping (MADV_REMOVE: the software GPU's own memfd, or a VM's memfd where per-VM backing
// put one) instead of storing zeros through it: every mapping of those pages (the GPU's, ours, a
// remapped guest's) reads zeros afterwards, and pages nobody touched yet cost nothing — not an
// allocation and a clear in our mapping, then a second fault in the GPU's. Where the file cannot
// punch (device memory) it stores zeros as before.
//
// Threading: the aggregator's owner thread only (the PRAMIN window position is state).
#ifndef GPUVM_AGGREGATOR_VRAM_ACCESS_H_
#define GPUVM_AGGREGATOR_VRAM_ACCESS_H_

#include <cstddef>
#include <cstdint>

#include "aggregator/physical_gpu.h"

namespace gpuvm::aggregator {

class VramAccess {
 public:
  explicit VramAccess(PhysicalGpu* gpu) : gpu_(gpu) {}

  void Read(uint64_t address, void* out, size_t length);
  void Write(uint64_t address, const void* data, size_t length);
  uint32_t Read32(uint64_t address);
  void Write32(uint64_t address, uint32_t value);
  uint64_t Read64(uint64_t address);
  void Write64(uint64_t address, uint64_t value);
  void Fill(uint64_t address, uint8_t value, size_t length);

  // Per-VM backing of VRAM pages, for VramMap (PhysicalGpu::BackVram/RestoreVram).
  bool can_back() const { return gpu_->can_back_vram(); }
  Status Back(uint64_t address, uint64_t length, int fd, uint64_t offset, bool populate = true) {
    return gpu_->BackVram(address, length, fd, offset, populate);
  }
  Status Restore(uint64_t address, uint64_t length) { return gpu_->RestoreVram(address, length); }

  // Accesses refused because they ran past the end of VRAM.
  uint64_t refused() const { return refused_; }

 private:
  bool InRange(uint64_t address, size_t length) const;
  // Zeroes [address, address + length) by punching its whole pages out of the files behind the
  // direct mapping and storing zeros in the partial pages at its ends; false (nothing done) where
  // that is not possible.
  bool ZeroByPunching(uint64_t address, size_t length);
  // PRAMIN path: one 32-bit word (address 4-byte aligned).
  uint32_t PraminRead32(uint64_t address);
  void PraminWrite32(uint64_t address, uint32_t value);
  void MoveWindow(uint64_t address);

  PhysicalGpu* const gpu_;
  uint64_t window_base_ = ~0ull;  // unknown until we move it
  uint64_t refused_ = 0;
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_VRAM_ACCESS_H_
