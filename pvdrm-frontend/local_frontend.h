// The PVDRM frontend of a program inside a local VM (gpuvm-vm --mode pvdrm; docs/PVDRM.md): what a
// guest kernel's frontend would hold, in user space — the VM's RAM as DMA memory, the grant pool,
// the ring connection to the backend — and the DRM port the guest driver runs on.
//
// From the environment gpuvm-vm sets:
//   GPUVM_LOCAL_VM_FD         the launcher's socket: the domain (RAM, grant table) is asked for
//   GPUVM_PVDRM_HV            the local hypervisor daemon's socket (store, event channels)
//   GPUVM_PVDRM_DEVID         the vgpu-drm device (default 0)
//   GPUVM_PVDRM_GRANT_FRAMES  frames at the top of RAM shared with the backend (default 256)
//   GPUVM_PVDRM_RESERVED_MIB  RAM at the top kept out of DMA allocations: the grant frames and the
//                             backend's own pool below them (default 17)
//   GPUVM_PVDRM_POOL_MIB      GEM pooling per DRM file (PvdrmDeviceOptions::pool_bytes; default 0,
//                             off; gpuvm-vm --mode pvdrm-pool sets 64)
// At exit it prints `gpuvm-counters: pvdrm_frontend_requests=N pvdrm_pool_hits=N` on stderr.
//
// Threading: device() may be used from any thread; FromEnvironment and the destructor from one.
#ifndef GPUVM_PVDRM_FRONTEND_LOCAL_FRONTEND_H_
#define GPUVM_PVDRM_FRONTEND_LOCAL_FRONTEND_H_

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "guest-pv-driver/drm_device.h"
#include "hypervisor/local/domain.h"
#include "hypervisor/local/grants.h"
#include "pvdrm-frontend/drm_device.h"
#include "pvdrm-frontend/frontend.h"

namespace gpuvm::pvdrm {

inline constexpr uint32_t kDefaultGrantFrames = 256;
inline constexpr uint64_t kDefaultReservedMib = 17;

class LocalPvdrmFrontend {
 public:
  static Result<std::unique_ptr<LocalPvdrmFrontend>> FromEnvironment();
  ~LocalPvdrmFrontend();

  PvdrmDevice* device() { return device_.get(); }

 private:
  LocalPvdrmFrontend() = default;

  std::unique_ptr<hv::local::LocalDomain> domain_;
  std::unique_ptr<GuestDma> dma_;
  std::unique_ptr<hv::local::LocalGrantSharer> sharer_;
  std::unique_ptr<FrontendConnection> connection_;
  std::unique_ptr<PvdrmDevice> device_;
};

}  // namespace gpuvm::pvdrm

#endif  // GPUVM_PVDRM_FRONTEND_LOCAL_FRONTEND_H_
