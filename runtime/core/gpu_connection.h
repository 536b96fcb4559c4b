// Which GPU the runtime reaches, and how: the seam between libcuda and the world below the guest
// driver. The runtime always drives the GPU through the guest driver (guest-pv-driver/driver.h)
// over a guest::Bus; this unit only decides which Bus, from the environment variable GPUVM_BUS:
//
//   native (default)  an in-process software GF100 (gpu/sim SimDevice + the SIMT compute engine)
//                     through the driver's NativeBus: the "Native" baseline of every measurement.
//   local             a trapping Bus inside a VM of the local hypervisor backend (a program started
//                     by gpuvm-vm; guest-pv-driver/local_trap_bus.h).
//   sysfs             a Bus over /sys/bus/pci/.../resourceN mmaps in a Xen HVM guest
//                     (guest-pv-driver/sysfs_bus.h; $GPUVM_SYSFS_DEVICE, $GPUVM_SYSFS_BLOCK).
//   pvdrm             no Bus: the driver is DRM user space (Driver::CreateOnDrm) on PVDRM's
//                     user-space frontend inside a local VM (pvdrm-frontend/local_frontend.h).
//   drm               no Bus: the driver is DRM user space on a real DRM render node of the pvdrm
//                     kernel frontend (pvdrm-frontend/render_node.h, pvdrm-frontend/linux) through
//                     libdrm; $GPUVM_DRM_NODE names the node, else the first one of driver pvdrm.
//                     Chosen by itself when GPUVM_BUS is unset and such a node exists.
//
// A later mode plugs in by adding one case to OpenGpuConnection that builds its Bus; nothing above
// this unit changes. GPUVM_SIM_VRAM_MB (native only) sizes the software GPU's VRAM (default 1024).
//
// Threading: OpenGpuConnection may be called from any thread; a GpuConnection is used through its
// Bus, which is thread-safe (guest-pv-driver/bus.h).
#ifndef GPUVM_RUNTIME_CORE_GPU_CONNECTION_H_
#define GPUVM_RUNTIME_CORE_GPU_CONNECTION_H_

#include <memory>
#include <string>

#include "base/status.h"
#include "guest-pv-driver/bus.h"
#include "guest-pv-driver/drm_device.h"

namespace gpuvm::runtime {

enum class BusMode { kNative, kLocal, kSysfs, kPvdrm, kDrm };

// Parses a GPUVM_BUS value ("" means native). kInvalidArgument for an unknown name.
Result<BusMode> ParseBusMode(const std::string& value);
const char* BusModeName(BusMode mode);

// Owns whatever stands behind the Bus (for native: the software GPU and its compute engine).
class GpuConnection {
 public:
  virtual ~GpuConnection() = default;
  virtual BusMode mode() const = 0;
  virtual guest::Bus* bus() = 0;
  // The DRM port instead of a Bus (pvdrm, drm), else null.
  virtual guest::DrmDevice* drm() { return nullptr; }
};

struct ConnectionOptions {
  BusMode mode = BusMode::kNative;
  uint64_t sim_vram_bytes = 1ull << 30;  // native: VRAM of the software GPU
  int sim_workers = 0;                   // native: compute engine threads (0 = one per core)
  std::string drm_node;                  // drm: the render node ("" = the first pvdrm one)
};

// Reads GPUVM_BUS, GPUVM_DRM_NODE and GPUVM_SIM_VRAM_MB into options.
Result<ConnectionOptions> ConnectionOptionsFromEnvironment();

// kUnimplemented for the modes not built yet; kUnavailable when the device cannot be created.
Result<std::unique_ptr<GpuConnection>> OpenGpuConnection(const ConnectionOptions& options);

}  // namespace gpuvm::runtime

#endif  // GPUVM_RUNTIME_CORE_GPU_CONNECTION_H_
