// A VM's virtual GPU: what the aggregator does with that VM's trapped BAR accesses, its interrupt
// line and its memory. One object per VM, behind this interface, so each mode is one
// implementation:
//   pt (pt_gpu.h)   the VM owns the whole physical GPU; accesses go through untranslated.
//   fv (next)       shadow page tables and channels, a VRAM slice and a channel range per VM, BAR
//                   remap; many VMs share the GPU. Built on the same calls: Read/Write get the
//                   trapped accesses to intercept (TLB flushes, channel table, playlist, IB_PUT
//                   submissions that go to the scheduler), AttachGuestRam gives the guest RAM that
//                   SYSRAM PTEs are validated against, Detach scrubs the VM's slice and kills its
//                   channels instead of resetting the whole GPU.
//   pv              fv plus the para-virtual call page (in guest RAM) behind a doorbell register.
//
// Every argument comes from a device model and is untrusted: the codec has checked the wire rules
// (docs/IPC.md), each implementation checks what depends on the VM (the BAR sizes it was given,
// what it owns).
//
// Threading: one owner thread (the aggregator's) calls everything except interrupt_asserted(),
// which any thread may call.
#ifndef GPUVM_AGGREGATOR_VIRTUAL_GPU_H_
#define GPUVM_AGGREGATOR_VIRTUAL_GPU_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "aggregator/guest_ram.h"
#include "aggregator/refusals.h"
#include "base/status.h"
#include "gpu/device.h"
#include "ipc/protocol.h"

namespace gpuvm::aggregator {

// The BAR sizes a VM's virtual GPU shows (from VM_CONFIG).
struct VmBars {
  uint64_t bar0 = 0;
  uint64_t bar1 = 0;
  uint64_t bar3 = 0;
  uint64_t size(gpu::Bar bar) const {
    return bar == gpu::Bar::k0 ? bar0 : bar == gpu::Bar::k1 ? bar1 : bar3;
  }
};

// What every implementation checks of a trapped access first: the virtual GPU is still there (not
// `detached`), the element size is 1, 2, 4 or 8, the block is whole elements, and
// [offset, offset + length) lies inside the BAR as the VM was given it.
Status CheckBarAccess(bool detached, const VmBars& bars, gpu::Bar bar, uint64_t offset,
                      uint32_t size, uint64_t length);

// BAR remap (fv-bar-remap, fv-optimized): a page range of BAR1/BAR3 that the device model should
// map straight to memory (BAR_MAP: `fd` from `backing_offset`, e.g. the software GPU's VRAM memfd)
// or trap again (BAR_UNMAP). `fd` is borrowed: valid until the request is sent.
struct BarRemapRequest {
  bool map = true;
  gpu::Bar bar = gpu::Bar::k1;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t backing_offset = 0;
  int fd = -1;
};

class VirtualGpu {
 public:
  virtual ~VirtualGpu() = default;

  virtual ipc::VmMode mode() const = 0;
  // The VRAM the VM sees (VM_ACCEPT).
  virtual uint64_t vram_bytes() const = 0;

  // One trapped access of `size` bytes (1, 2, 4, 8) at `offset` in `bar`. OutOfRange when it does
  // not lie inside the VM's BAR; such accesses never reach the GPU.
  virtual Result<uint64_t> Read(gpu::Bar bar, uint64_t offset, uint32_t size, uint32_t vcpu) = 0;
  virtual Status Write(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t value,
                       uint32_t vcpu) = 0;
  // `data.size() / size` consecutive elements from `offset` upwards, in order (a block of a rep
  // transfer): the same as that many Write/Read calls, except that the whole range is checked first
  // and either every element is performed or none.
  virtual Status WriteElements(gpu::Bar bar, uint64_t offset, uint32_t size,
                               std::span<const uint8_t> data, uint32_t vcpu) = 0;
  virtual Status ReadElements(gpu::Bar bar, uint64_t offset, uint32_t size, std::span<uint8_t> out,
                              uint32_t vcpu) = 0;
  // `count` elements of `size` bytes, each `value`, from `offset` upwards (a guest's rep stos):
  // the same as WriteElements with that data — which is what it defaults to, a page at a time (so
  // a range that fails part way may have been performed up to a page boundary).
  virtual Status FillElements(gpu::Bar bar, uint64_t offset, uint32_t size, uint64_t value,
                              uint32_t count, uint32_t vcpu) {
    if (size != 1 && size != 2 && size != 4 && size != 8) {
      return Status::InvalidArgument("MMIO size must be 1, 2, 4 or 8");
    }
    std::vector<uint8_t> page(std::min<uint64_t>(uint64_t{count} * size, 4096) / size * size);
    for (size_t at = 0; at < page.size(); at += size) std::memcpy(page.data() + at, &value, size);
    for (uint64_t done = 0; done < uint64_t{count} * size;) {
      const uint64_t n = std::min<uint64_t>(page.size(), uint64_t{count} * size - done);
      GPUVM_RETURN_IF_ERROR(
          WriteElements(bar, offset + done, size, std::span(page.data(), n), vcpu));
      done += n;
    }
    return Status::Ok();
  }

  // The level of the VM's interrupt line.
  virtual bool interrupt_asserted() const = 0;

  // The VM's RAM arrived (GUEST_MEMORY); it outlives this object's use of it until Detach().
  virtual Status AttachGuestRam(const GuestRam& ram) = 0;

  // The VM is going away (its device model said TEARDOWN, disconnected or died): stop its work,
  // withdraw every way the GPU could still reach its RAM, and leave nothing the next VM could read.
  // After Detach the object only answers errors; the guest RAM may then be unmapped.
  virtual Status Detach() = 0;

  // BAR remap: the requests to send to the device model now (the session sends them after each
  // message it served, in order), and the device model's answer to each, in the same order. A mode
  // without remap has none.
  virtual std::vector<BarRemapRequest> TakeBarRemapRequests() { return {}; }
  virtual void BarRemapAnswered(bool map, const Status& status) { (void)map, (void)status; }

  // One line of mode-specific counters for the aggregator's log (fv: traps, scans, shadow entries);
  // empty when the mode has none beyond the session's.
  virtual std::string DescribeCounters() const { return {}; }
  // What it refused of the guest, per kind (refusals.h); the session adds the refused MMIO
  // accesses (Refusal::kMmio). pt refuses nothing past the session.
  virtual RefusalCounts refusals() const { return {}; }
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_VIRTUAL_GPU_H_
