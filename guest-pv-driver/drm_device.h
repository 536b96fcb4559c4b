// The DRM port: what the guest driver needs when a kernel driver owns the GPU and user space
// reaches it only through nouveau's DRM interface — PVDRM's frontend (docs/PVDRM.md), or a
// /dev/dri render node. In that mode (Driver::CreateOnDrm) the driver keeps everything user space
// keeps — pushbuffer building, fences and events as semaphore releases into its own host-visible
// objects, staging of copies — and asks the port for everything a kernel does: address spaces (one
// DRM file per Context), channels, memory objects at GPU addresses the kernel picks, and
// submissions (GEM_PUSHBUF: the commands stay in one of the file's objects). No register, no page
// table, no BAR is touched.
//
// Errors are Status values; a file whose context the GPU faulted answers kAborted from then on
// (nouveau's -EIO / -ENODEV), a connection that is gone kUnavailable.
//
// Threading: every method from any thread at once.
#ifndef GPUVM_GUEST_PV_DRIVER_DRM_DEVICE_H_
#define GPUVM_GUEST_PV_DRIVER_DRM_DEVICE_H_

#include <cstdint>
#include <memory>
#include <span>

#include "base/status.h"

namespace gpuvm::guest {

class DrmDevice {
 public:
  virtual ~DrmDevice() = default;

  struct Identity {
    uint16_t pci_vendor = 0;
    uint16_t pci_device = 0;
    uint32_t chipset = 0;     // NOUVEAU_GETPARAM_CHIPSET_ID
    uint64_t vram_bytes = 0;  // NOUVEAU_GETPARAM_FB_SIZE
  };
  // Asked once, with a file of its own.
  virtual Result<Identity> Identify() = 0;

  // A DRM file: its own GPU address space.
  virtual Result<uint32_t> OpenFile() = 0;
  virtual void CloseFile(uint32_t file) = 0;

  virtual Result<int32_t> ChannelAlloc(uint32_t file) = 0;
  virtual Status ChannelFree(uint32_t file, int32_t channel) = 0;

  // A memory object of a file: its handle, its GPU address in the file's space, and (host-visible
  // objects) where the CPU reaches it. `backing` keeps that memory alive; it may outlive the
  // handle (the object's bytes are the caller's until `backing` goes).
  struct Object {
    uint32_t handle = 0;
    uint64_t va = 0;
    uint64_t size = 0;
    uint8_t* host = nullptr;
    std::shared_ptr<void> backing;
  };
  // VRAM (not host-visible), `align` 0 or a power of two.
  virtual Result<Object> NewVram(uint32_t file, uint64_t size, uint64_t align) = 0;
  // Zeroed host-visible memory (GART).
  virtual Result<Object> NewGart(uint32_t file, uint64_t size) = 0;
  // The caller's own memory [host, host + size) (page-aligned, whole pages) as a GART object.
  virtual Result<Object> WrapHost(uint32_t file, void* host, uint64_t size) = 0;
  virtual Status Close(uint32_t file, uint32_t handle) = 0;

  // GEM_PUSHBUF on `channel`: runs `pushes` (commands in the file's objects) in order. A device
  // may post it (return once it is queued, as the kernel's own ring would): then a refusal shows
  // at the file's next Pushbuf or Health.
  struct Push {
    uint32_t handle = 0;
    uint64_t offset = 0;  // bytes, 4-aligned
    uint64_t bytes = 0;   // multiple of 4
  };
  virtual Status Pushbuf(uint32_t file, int32_t channel, std::span<const Push> pushes) = 0;

  // Whether the file is still usable (a cheap call: GEM_CPU_PREP NOWAIT on `handle`): OK, kAborted
  // once the GPU faulted the file's context, kUnavailable when the device is gone.
  virtual Status Health(uint32_t file, uint32_t handle) = 0;
};

}  // namespace gpuvm::guest

#endif  // GPUVM_GUEST_PV_DRIVER_DRM_DEVICE_H_
