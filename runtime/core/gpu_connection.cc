#include "runtime/core/gpu_connection.h"

#include <cstdlib>
#include <string>

#include "gpu/sim/compute/simt_engine.h"
#include "guest-pv-driver/native_bus.h"
#ifdef GPUVM_HAVE_LOCAL_TRAP_BUS
#include "guest-pv-driver/local_trap_bus.h"
#endif
#ifdef GPUVM_HAVE_SYSFS_BUS
#include "guest-pv-driver/sysfs_bus.h"
#endif

namespace gpuvm::runtime {
namespace {

class NativeConnection final : public GpuConnection {
 public:
  explicit NativeConnection(std::unique_ptr<guest::NativeGpu> gpu) : gpu_(std::move(gpu)) {}
  BusMode mode() const override { return BusMode::kNative; }
  guest::Bus* bus() override { return gpu_->bus(); }

 private:
  std::unique_ptr<guest::NativeGpu> gpu_;
};

#ifdef GPUVM_HAVE_LOCAL_TRAP_BUS
// Inside a local VM (started by gpuvm-vm): the trapping Bus of guest-pv-driver/local_trap_bus.h.
class LocalConnection final : public GpuConnection {
 public:
  explicit LocalConnection(std::unique_ptr<guest::LocalTrapBus> bus) : bus_(std::move(bus)) {}
  BusMode mode() const override { return BusMode::kLocal; }
  guest::Bus* bus() override { return bus_.get(); }

 private:
  std::unique_ptr<guest::LocalTrapBus> bus_;
};
#endif

#ifdef GPUVM_HAVE_SYSFS_BUS
// Inside a Xen HVM guest: the Bus over the virtual GPU's sysfs BAR mmaps
// (guest-pv-driver/sysfs_bus.h).
class SysfsConnection final : public GpuConnection {
 public:
  explicit SysfsConnection(std::unique_ptr<guest::SysfsBus> bus) : bus_(std::move(bus)) {}
  BusMode mode() const override { return BusMode::kSysfs; }
  guest::Bus* bus() override { return bus_.get(); }

 private:
  std::unique_ptr<guest::SysfsBus> bus_;
};
#endif

}  // namespace

Result<BusMode> ParseBusMode(const std::string& value) {
  if (value.empty() || value == "native") return BusMode::kNative;
  if (value == "local") return BusMode::kLocal;
  if (value == "sysfs") return BusMode::kSysfs;
  return Status::InvalidArgument("GPUVM_BUS='" + value + "' is not one of native, local, sysfs");
}

const char* BusModeName(BusMode mode) {
  switch (mode) {
    case BusMode::kNative:
      return "native";
    case BusMode::kLocal:
      return "local";
    case BusMode::kSysfs:
      return "sysfs";
  }
  return "?";
}

Result<ConnectionOptions> ConnectionOptionsFromEnvironment() {
  ConnectionOptions options;
  const char* bus = std::getenv("GPUVM_BUS");
  GPUVM_ASSIGN_OR_RETURN(options.mode, ParseBusMode(bus ? bus : ""));
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
      return std::unique_ptr<GpuConnection>(new NativeConnection(std::move(*gpu)));
    }
    case BusMode::kLocal: {
#ifdef GPUVM_HAVE_LOCAL_TRAP_BUS
      auto bus = guest::LocalTrapBus::FromEnvironment();
      if (!bus.ok()) return Status::Unavailable("GPUVM_BUS=local: " + bus.status().ToString());
      return std::unique_ptr<GpuConnection>(new LocalConnection(std::move(*bus)));
#else
      return Status::Unimplemented("GPUVM_BUS=local: this build has no local trapping bus");
#endif
    }
    case BusMode::kSysfs: {
#ifdef GPUVM_HAVE_SYSFS_BUS
      auto bus = guest::SysfsBus::FromEnvironment();
      if (!bus.ok()) return Status::Unavailable("GPUVM_BUS=sysfs: " + bus.status().ToString());
      return std::unique_ptr<GpuConnection>(new SysfsConnection(std::move(*bus)));
#else
      return Status::Unimplemented("GPUVM_BUS=sysfs: this build has no sysfs bus");
#endif
    }
  }
  return Status::Internal("unknown bus mode");
}

}  // namespace gpuvm::runtime
