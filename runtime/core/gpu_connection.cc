#include "runtime/core/gpu_connection.h"

#include <cstdlib>
#include <string>

#include "base/enum_names.h"
#include "gpu/sim/compute/simt_engine.h"
#include "guest-pv-driver/native_bus.h"
#ifdef GPUVM_HAVE_LOCAL_TRAP_BUS
#include "guest-pv-driver/local_trap_bus.h"
#endif
#ifdef GPUVM_HAVE_SYSFS_BUS
#include "guest-pv-driver/sysfs_bus.h"
#endif
#ifdef GPUVM_HAVE_PVDRM
#include "pvdrm-frontend/local_frontend.h"
#endif
#ifdef GPUVM_HAVE_RENDER_NODE
#include "pvdrm-frontend/render_node.h"
#endif

namespace gpuvm::runtime {
namespace {

guest::Bus* BusOf(guest::NativeGpu& gpu) { return gpu.bus(); }
guest::Bus* BusOf(guest::Bus& bus) { return &bus; }

// A connection owning what gives the runtime its Bus: the in-process software GPU (native), the
// trapping Bus inside a local VM started by gpuvm-vm (guest-pv-driver/local_trap_bus.h), or the Bus
// over the virtual GPU's sysfs BAR mmaps inside a Xen HVM guest (guest-pv-driver/sysfs_bus.h).
template <typename Owned, BusMode kMode>
class OwningConnection final : public GpuConnection {
 public:
  explicit OwningConnection(std::unique_ptr<Owned> owned) : owned_(std::move(owned)) {}
  BusMode mode() const override { return kMode; }
  guest::Bus* bus() override { return BusOf(*owned_); }

 private:
  std::unique_ptr<Owned> owned_;
};

template <BusMode kMode, typename Owned>
std::unique_ptr<GpuConnection> Connection(std::unique_ptr<Owned> owned) {
  return std::make_unique<OwningConnection<Owned, kMode>>(std::move(owned));
}

// The connection over the Bus a guest program finds in its environment (`bus`: the bus class's
// FromEnvironment), or why there is none.
template <BusMode kMode, typename BusT>
Result<std::unique_ptr<GpuConnection>> FromEnvironment(Result<std::unique_ptr<BusT>> bus) {
  if (!bus.ok()) {
    return Status::Unavailable(std::string("GPUVM_BUS=") + BusModeName(kMode) + ": " +
                               bus.status().ToString());
  }
  return Connection<kMode>(std::move(*bus));
}

#ifdef GPUVM_HAVE_PVDRM
class PvdrmConnection final : public GpuConnection {
 public:
  explicit PvdrmConnection(std::unique_ptr<pvdrm::LocalPvdrmFrontend> frontend)
      : frontend_(std::move(frontend)) {}
  BusMode mode() const override { return BusMode::kPvdrm; }
  guest::Bus* bus() override { return nullptr; }
  guest::DrmDevice* drm() override { return frontend_->device(); }

 private:
  std::unique_ptr<pvdrm::LocalPvdrmFrontend> frontend_;
};
#endif

#ifdef GPUVM_HAVE_RENDER_NODE
class DrmConnection final : public GpuConnection {
 public:
  explicit DrmConnection(std::unique_ptr<pvdrm::RenderNodeDevice> device)
      : device_(std::move(device)) {}
  BusMode mode() const override { return BusMode::kDrm; }
  guest::Bus* bus() override { return nullptr; }
  guest::DrmDevice* drm() override { return device_.get(); }

 private:
  std::unique_ptr<pvdrm::RenderNodeDevice> device_;
};
#endif

}  // namespace

constexpr EnumName<BusMode> kBusModeNames[] = {{BusMode::kNative, "native"},
                                               {BusMode::kLocal, "local"},
                                               {BusMode::kSysfs, "sysfs"},
                                               {BusMode::kPvdrm, "pvdrm"},
                                               {BusMode::kDrm, "drm"}};

Result<BusMode> ParseBusMode(const std::string& value) {
  if (value.empty()) return BusMode::kNative;
  if (std::optional<BusMode> mode = ValueNamed(kBusModeNames, value)) return *mode;
  return Status::InvalidArgument("GPUVM_BUS='" + value +
                                 "' is not one of native, local, sysfs, pvdrm, drm");
}

const char* BusModeName(BusMode mode) { return NameOf(kBusModeNames, mode, "?"); }

Result<ConnectionOptions> ConnectionOptionsFromEnvironment() {
  ConnectionOptions options;
  const char* bus = std::getenv("GPUVM_BUS");
  GPUVM_ASSIGN_OR_RETURN(options.mode, ParseBusMode(bus ? bus : ""));
  if (const char* node = std::getenv("GPUVM_DRM_NODE"); node && *node) options.drm_node = node;
#ifdef GPUVM_HAVE_RENDER_NODE
  // Unset: a guest with the pvdrm kernel frontend loaded runs on it, as a nouveau guest would.
  if (bus == nullptr) {
    if (!options.drm_node.empty()) {
      options.mode = BusMode::kDrm;
    } else if (Result<std::string> found = pvdrm::FindRenderNode(); found.ok()) {
      options.mode = BusMode::kDrm;
      options.drm_node = *found;
    }
  }
#endif
  if (const char* mb = std::getenv("GPUVM_SIM_VRAM_MB"); mb && *mb) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(mb, &end, 10);
    // (our choice) 64 MiB .. 16 GiB: below that the driver's own structures barely fit.
    if (*end != '\0' || v < 64 || v > (16u << 10)) {
      return Status::InvalidArgument(std::string("GPUVM_SIM_VRAM_MB='") + mb +
                                     "' is not a size in MiB between 64 and 16384");
    }
    options.sim_vram_bytes = uint64_t(v) << 20;
  }
  return options;
}

Result<std::unique_ptr<GpuConnection>> OpenGpuConnection(const ConnectionOptions& options) {
  switch (options.mode) {
    case BusMode::kNative: {
      guest::NativeGpuOptions gpu_options;
      gpu_options.device.vram_size = options.sim_vram_bytes;
      sim::compute::EngineOptions engine_options;
      engine_options.workers = options.sim_workers;
      gpu_options.device.compute_engine = sim::compute::SimtEngine::Create(engine_options);
      auto gpu = guest::NativeGpu::Create(gpu_options);
      if (!gpu.ok()) {
        return Status::Unavailable("cannot create the software GPU: " + gpu.status().ToString());
      }
      return Connection<BusMode::kNative>(std::move(*gpu));
    }
    case BusMode::kLocal: {
#ifdef GPUVM_HAVE_LOCAL_TRAP_BUS
      return FromEnvironment<BusMode::kLocal>(guest::LocalTrapBus::FromEnvironment());
#else
      return Status::Unimplemented("GPUVM_BUS=local: this build has no local trapping bus");
#endif
    }
    case BusMode::kSysfs: {
#ifdef GPUVM_HAVE_SYSFS_BUS
      return FromEnvironment<BusMode::kSysfs>(guest::SysfsBus::FromEnvironment());
#else
      return Status::Unimplemented("GPUVM_BUS=sysfs: this build has no sysfs bus");
#endif
    }
    case BusMode::kPvdrm: {
#ifdef GPUVM_HAVE_PVDRM
      auto frontend = pvdrm::LocalPvdrmFrontend::FromEnvironment();
      if (!frontend.ok()) {
        return Status::Unavailable("GPUVM_BUS=pvdrm: " + frontend.status().ToString());
      }
      return std::unique_ptr<GpuConnection>(new PvdrmConnection(std::move(*frontend)));
#else
      return Status::Unimplemented("GPUVM_BUS=pvdrm: this build has no PVDRM frontend");
#endif
    }
    case BusMode::kDrm: {
#ifdef GPUVM_HAVE_RENDER_NODE
      std::string node = options.drm_node;
      if (node.empty()) {
        Result<std::string> found = pvdrm::FindRenderNode();
        if (!found.ok()) return Status::Unavailable("GPUVM_BUS=drm: " + found.status().ToString());
        node = *found;
      }
      auto device = pvdrm::RenderNodeDevice::Open(node);
      if (!device.ok()) return Status::Unavailable("GPUVM_BUS=drm: " + device.status().ToString());
      return std::unique_ptr<GpuConnection>(new DrmConnection(std::move(*device)));
#else
      return Status::Unimplemented("GPUVM_BUS=drm: this build has no DRM render-node port");
#endif
    }
  }
  return Status::Internal("unknown bus mode");
}

}  // namespace gpuvm::runtime
