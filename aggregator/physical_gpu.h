// The physical GPU the aggregator owns: the port between the aggregator and the hardware edge.
// Backends: the software GF100 in this process (sim_gpu.h, `--gpu sim`, the default) and a real
// GF100-class card through libpciaccess (pci_gpu.h, `--gpu pci:BDF`).
//
// Besides the gpu::Device, a PhysicalGpu owns the window through which the GPU reaches guest memory
// (GuestRamWindow) and knows how to reset itself for the next owner. Reset is the security boundary
// between consecutive owners: afterwards no channel of the previous owner runs, no translation of
// its memory is cached, no interrupt of its is pending, and its VRAM contents cannot be read
// (see each backend for how; docs/AGGREGATOR.md, "Reset policy").
//
// Threading: one owner thread (the aggregator's) calls device(), Reset() and
// SetInterruptHandler(). device() stays valid until the next Reset(); the gpu::Device itself is
// thread-safe. The interrupt handler runs on device threads (see gpu/device.h) and survives resets.
#ifndef GPUVM_AGGREGATOR_PHYSICAL_GPU_H_
#define GPUVM_AGGREGATOR_PHYSICAL_GPU_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "aggregator/guest_ram_window.h"
#include "base/status.h"
#include "gpu/device.h"

namespace gpuvm::aggregator {

class PhysicalGpu {
 public:
  virtual ~PhysicalGpu() = default;

  // "sim (software GF100, 1024 MiB VRAM)", "pci 0000:01:00.0 (10de:06d8)".
  virtual std::string Describe() const = 0;
  virtual gpu::Device& device() = 0;
  virtual uint64_t vram_bytes() const = 0;
  // Whether the GPU's SYSRAM accesses reach guest RAM through host_window(). The software GPU: yes.
  // A real card would need an IOMMU mapping of the guest's RAM at its guest-physical addresses
  // (VFIO); not built, so no.
  virtual bool reaches_guest_memory() const = 0;
  // All of VRAM mapped into our address space, when the backend can (the software GPU: its VRAM
  // view); empty otherwise (callers then go through the PRAMIN window: vram_access.h). Valid until
  // the next Reset().
  virtual std::span<uint8_t> vram_mapping() { return {}; }
  // A descriptor of all of VRAM whose pages are machine frames a hypervisor maps into a guest one
  // by one (BAR remap on Xen: the guest's p2m gets exactly the frames of its own ranges): the file
  // of device memory the software GPU keeps VRAM in with --sim-vram-file (a PCI BAR's sysfs
  // resource file). -1 otherwise — in particular the software GPU's own VRAM memfd is never handed
  // out: whoever mapped it would reach every VM's VRAM and the reserved area (per-VM backing
  // below instead). Valid until the next Reset().
  virtual int vram_frames_fd() const { return -1; }
  // All of VRAM as a sealed memfd whose pages are the GPU's VRAM until the next Reset(), which
  // gives the GPU fresh memory of its own: what pass-through's BAR remap hands the one VM that owns
  // the whole GPU (pt_gpu.h). Nothing else may be handed it while another VM or the aggregator's
  // own structures live in VRAM. -1 where there is no such file (a real card, --sim-vram-file).
  virtual int owner_vram_fd() const { return -1; }

  // Per-VM VRAM backing (docs/FULL-VIRTUALIZATION.md, "BAR remap"): whether the backend can make
  // pages of VRAM be the pages of a VM's own memfd, so that memfd — all a guest is handed for BAR
  // remap — holds that VM's VRAM and nothing else. The software GPU with its own VRAM: yes.
  virtual bool can_back_vram() const { return false; }
  // Whole pages [address, address + length) of VRAM become the pages of `fd` at `offset` (the
  // caller keeps `fd`; the GPU keeps its own reference). Meant for pages showing the GPU's own
  // memory (an mmap error leaves them so). `populate`: bring the pages in now (a range about to be
  // used whole); false: as the GPU and the CPU first reach them (a large range used in part).
  virtual Status BackVram(uint64_t address, uint64_t length, int fd, uint64_t offset,
                          bool populate) {
    (void)address, (void)length, (void)fd, (void)offset, (void)populate;
    return Status::Unimplemented("this GPU's VRAM cannot be backed by other memory");
  }
  // Those pages are the GPU's own memory again, zeroed; the memfd no longer reaches VRAM. On error
  // they may still be the memfd's: hand them to nobody else.
  virtual Status RestoreVram(uint64_t address, uint64_t length) {
    (void)address, (void)length;
    return Status::Unimplemented("this GPU's VRAM cannot be backed by other memory");
  }

  // Back to a known state with nothing of the previous owner left (see above). The window is left
  // as it is: the caller detaches the owner's RAM after the reset (then nothing can use it).
  virtual Status Reset() = 0;
  virtual uint64_t resets() const = 0;

  // The GPU's interrupt line, kept across resets (installed on every new device instance).
  virtual void SetInterruptHandler(gpu::InterruptHandler handler) = 0;
  // Called with a physical channel id, on a device thread and without blocking for long, when that
  // channel has run out of work (or failed): the moment a submission's completion is worth
  // checking. Kept across resets; empty removes it, and once this returns the previous handler is
  // not running and will not be called again. Backends without such a signal (a real board: no
  // interrupt for it without the guest's pushbuffer asking) never call it; completion is polled.
  virtual void SetChannelDrainedHandler(std::function<void(uint32_t channel)> handler) {
    (void)handler;
  }
  // Whether this GPU calls the channel-drained handler (every time a channel runs dry).
  virtual bool ReportsChannelDrained() const { return false; }

  GuestRamWindow& host_window() { return window_; }

 private:
  GuestRamWindow window_;
};

// Helpers every backend can use, written against the port alone (so the software GPU tests them).

// Stops every channel: CHAN_TABLE entries not runnable and invalid, an empty playlist, no poll
// area, BAR1/BAR3 apertures unbound, interrupts disabled and acknowledged. What a driver's teardown
// does, done for a driver that never got to.
void QuiesceChannels(gpu::Device& device);

// VRAM size as the FB partition registers report it (nouveau's gf100_ram_probe_fbp); 0 if the
// registers make no sense.
uint64_t ProbeVramBytes(gpu::Device& device);

// Zeroes [0, bytes) of VRAM through the PRAMIN window, 1 MiB at a time, with 32-bit stores (what
// works on every board). Slow on real hardware (minutes for gigabytes) but needs no channel.
void ScrubVramThroughPramin(gpu::Device& device, uint64_t bytes);

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_PHYSICAL_GPU_H_
