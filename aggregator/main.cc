// gpuvm-aggregator: the one process that owns the physical GPU (docs/AGGREGATOR.md).
//
//   gpuvm-aggregator [--gpu sim|pci:BDF] [--socket PATH] [--socket-group GROUP] [--vram-mib N]
//                    [--compute-workers N]
//                    [--sim-vram-file PATH]
//                    [--handshake-timeout-ms N] [--allow-pt-without-dma] [--pt-trap-all] [--quiet]
//                    [--fv-mode naive|lazy|bar-remap|optimized] [--fv-vram-mib N]
//                    [--fv-channels N] [--fv-reserved-mib N] [--fv-vram-policy dynamic|static]
//
// fv VMs get --fv-mode, --fv-vram-mib and --fv-channels unless their name says otherwise
// ("NAME@MODE[,MiB][,chN]", docs/FULL-VIRTUALIZATION.md).
//
// --sim-vram-file: the software GPU's VRAM is the start of that file instead of a memfd, e.g. a
// PCI BAR's /sys/bus/pci/devices/BDF/resource2: VRAM at machine addresses, so BAR remap works on
// Xen (the Xen test bed's ivshmem device, docs/XEN-TESTBED.md). Zeroed at start and every reset.
//
// A VM on Xen hands over its RAM as a domain id: the aggregator maps it through the hypervisor
// port's Xen backend, chosen here (the only place; elsewhere it is an hv::Backend).
//
// Device models (gpuvm-dm, one per VM) connect to PATH ($GPUVM_AGGREGATOR, else
// @gpuvm-aggregator-<uid>). --socket-group GROUP (a name or gid): members of GROUP may use both
// sockets like the aggregator's user, and filesystem sockets are made GROUP's, mode 0660
// (docs/SECURITY.md, docs/OPERATOR.md). It serves until SIGINT/SIGTERM, then ends every session
// (TEARDOWN) and resets the GPU.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "aggregator/aggregator.h"
#include "aggregator/control/control_plane.h"
#include "aggregator/gpu_spec.h"
#include "aggregator/server.h"
#include "base/flag_number.h"
#include "base/log.h"
#include "hypervisor/backend.h"
#include "ipc/channel.h"

namespace gpuvm::aggregator {
namespace {

AggregatorServer* g_server = nullptr;
void OnSignal(int) {
  if (g_server != nullptr) g_server->Stop();  // an eventfd write: async-signal-safe
}

struct Options {
  GpuSpec gpu;
  SimGpuOptions sim;
  AggregatorOptions aggregator;
  ServerOptions server;
  control::ControlOptions control;  // the control socket and the GPU scheduler
};

// Why the aggregator does not start (or stopped): an error line of its log (base/log.h).
void LogError(const std::string& msg) {
  WriteLogLine(stderr, "gpuvm-aggregator", LogEvent(LogLevel::kError, {}, msg));
}

void Usage() {
  std::fprintf(
      stderr,
      "usage: gpuvm-aggregator [--gpu sim|pci:BDF] [--socket PATH] [--socket-group GROUP]\n"
      "                        [--vram-mib N]\n"
      "                        [--compute-workers N] [--sim-vram-file PATH]\n"
      "                        [--handshake-timeout-ms N]\n"
      "                        [--allow-pt-without-dma] [--pt-trap-all] [--quiet]\n"
      "                        %s\n"
      "                        [--fv-mode naive|lazy|bar-remap|optimized] [--fv-vram-mib N]\n"
      "                        [--fv-channels N] [--fv-reserved-mib N]\n"
      "                        [--fv-vram-policy dynamic|static]\n",
      control::kControlFlagsUsage);
}

Result<Options> ParseArgs(int argc, char** argv) {
  Options o;
  o.server.path = ipc::DefaultAggregatorSocketPath();
  // Opening it needs no Xen: each call answers Unavailable where there is none.
  o.aggregator.hypervisor = hv::OpenBackend(hv::BackendKind::kXen);
  o.aggregator.log = [](const std::string& line) {
    WriteLogLine(stderr, "gpuvm-aggregator", line);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--allow-pt-without-dma") {
      o.aggregator.allow_pt_without_dma = true;
      continue;
    }
    if (flag == "--pt-trap-all") {
      o.aggregator.pt_bar_remap = false;
      continue;
    }
    if (flag == "--quiet") {
      o.server.log = nullptr;
      o.aggregator.log = nullptr;
      continue;
    }
    if (flag == "--help" || flag == "-h") return Status::InvalidArgument("help");
    if (i + 1 >= argc) return Status::InvalidArgument("missing value for " + flag);
    const std::string value = argv[++i];
    GPUVM_ASSIGN_OR_RETURN(bool control_flag, control::ConsumeControlFlag(flag, value, &o.control));
    if (control_flag) continue;
    if (flag == "--gpu") {
      GPUVM_ASSIGN_OR_RETURN(o.gpu, ParseGpuSpec(value));
    } else if (flag == "--socket") {
      if (value.empty()) return Status::InvalidArgument("--socket wants a path");
      o.server.path = value;
    } else if (flag == "--socket-group") {
      // Its members operate gpuvm like the aggregator's user (docs/SECURITY.md).
      Result<gid_t> group = os::LookupGroup(value);
      if (!group.ok()) return group.status().WithContext("--socket-group");
      o.server.socket_group = *group;
    } else if (flag == "--vram-mib") {
      GPUVM_ASSIGN_OR_RETURN(uint64_t mib, ParseFlagNumber(flag, value, 64, 64 << 10));
      o.sim.vram_bytes = mib << 20;
    } else if (flag == "--sim-vram-file") {
      if (value.empty()) return Status::InvalidArgument("--sim-vram-file wants a path");
      o.sim.vram_file = value;
    } else if (flag == "--compute-workers") {
      GPUVM_ASSIGN_OR_RETURN(uint64_t n, ParseFlagNumber(flag, value, 0, 256));
      o.sim.compute_workers = static_cast<int>(n);
    } else if (flag == "--handshake-timeout-ms") {
      GPUVM_ASSIGN_OR_RETURN(uint64_t ms, ParseFlagNumber(flag, value, 1, 3600 * 1000));
      o.server.handshake_timeout = std::chrono::milliseconds(ms);
    } else if (flag == "--fv-mode") {
      GPUVM_ASSIGN_OR_RETURN(o.aggregator.fv_mode, ParseFvMode(value));
    } else if (flag == "--fv-vram-mib") {
      GPUVM_ASSIGN_OR_RETURN(uint64_t mib, ParseFlagNumber(flag, value, 1, 64 << 10));
      o.aggregator.fv.default_vram_bytes = mib << 20;
    } else if (flag == "--fv-channels") {
      GPUVM_ASSIGN_OR_RETURN(uint64_t n, ParseFlagNumber(flag, value, 1, 128));
      o.aggregator.fv.default_channels = uint32_t(n);
    } else if (flag == "--fv-reserved-mib") {
      GPUVM_ASSIGN_OR_RETURN(uint64_t mib, ParseFlagNumber(flag, value, 4, 4 << 10));
      o.aggregator.fv.reserved_bytes = mib << 20;
    } else if (flag == "--fv-vram-policy") {
      GPUVM_ASSIGN_OR_RETURN(o.aggregator.fv.vram_policy, ParseVramPolicy(value));
    } else {
      return Status::InvalidArgument("unknown flag " + flag);
    }
  }
  return o;
}

int Main(int argc, char** argv) {
  Result<Options> options = ParseArgs(argc, argv);
  if (!options.ok()) {
    if (options.status().message() != "help") {
      LogError(options.status().ToString());
    }
    Usage();
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  Result<std::unique_ptr<PhysicalGpu>> gpu = OpenPhysicalGpu(options->gpu, options->sim);
  if (!gpu.ok()) {
    LogError("cannot open the GPU: " + gpu.status().ToString());
    return 1;
  }
  Result<std::unique_ptr<Aggregator>> aggregator =
      Aggregator::Create(std::move(*gpu), options->aggregator);
  if (!aggregator.ok()) {
    LogError(aggregator.status().ToString());
    return 1;
  }
  Result<std::unique_ptr<AggregatorServer>> server =
      AggregatorServer::Create(std::move(*aggregator), options->server);
  if (!server.ok()) {
    LogError("cannot listen on " + options->server.path + ": " + server.status().ToString());
    return 1;
  }
  Result<std::unique_ptr<control::ControlPlane>> control_plane =
      control::ControlPlane::Create(**server, options->control, options->server.log);
  if (!control_plane.ok()) {
    LogError("control socket: " + control_plane.status().ToString());
    return 1;
  }
  if (options->control.metrics_listen) {
    // Like a bad option: the operator asked for an endpoint this host cannot give (port in use, an
    // address not of this host), so the aggregator does not start without it.
    const Status listening = (*control_plane)->ServeMetrics(*options->control.metrics_listen);
    if (!listening.ok()) {
      LogError("--metrics-listen: " + listening.ToString());
      return 2;
    }
  }
  g_server = server->get();
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  const Status served = (*server)->Run();
  g_server = nullptr;
  if (!served.ok()) {
    LogError(served.ToString());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace gpuvm::aggregator

int main(int argc, char** argv) { return gpuvm::aggregator::Main(argc, argv); }
