// gpuvm-dm: the device model of one VM's virtual GPU (docs/HYPERVISOR.md, docs/IPC.md).
//
//   gpuvm-dm --backend local --domid 1 --token-fd N|--token-file PATH [--hv SOCKET]
//            [--aggregator SOCKET] [options]
//   gpuvm-dm --backend xen   --domid 7 --token-fd N|--token-file PATH [--aggregator SOCKET]
//            [options]
// --token-fd/--token-file: where the VM's one-time token is (an inherited pipe from gpuvm-vm, or a
// file only its owner reads, from the toolstack; docs/SECURITY.md): the aggregator admits no
// device model without it.
// options: --sbdf ssss:bb:dd.f  --name NAME (base/vm_name.h: 1-31 characters of [A-Za-z0-9._-];
//          default "vm")  --mode pt|fv|pv  --bar1-mib N  --bar3-mib N
//          the virtual GPU (VM_CONFIG's typed fields, docs/IPC.md; fv and pv only but --share):
//          --variant naive|lazy|bar-remap|optimized (fv) or naive|multicall (pv)  --vram-mib N
//          (1..1048576)  --channels N (1..128)  --share PERCENT (0-100, at most 3 decimals)
//          --domain-fd FD (local: receive the domain over this inherited socket instead of the
//          daemon)  --guest-ram-mib N (the RAM announced to the aggregator; default: every frame)
//          --reply-timeout-ms N (give up on a reply after N ms; default: wait while the
//          aggregator's socket is open — a stopped aggregator is waited for, a dead one is noticed
//          at once)  --ready-file PATH (created once the virtual GPU is attached — the
//          IOREQ server claims its PCI slot — so a toolstack unpauses the guest only then:
//          gpuvm-xl, docs/OPERATOR.md)  --posted-writes on|off (default on: a single guest write
//          into BAR1, e.g. a channel's IB_PUT doorbell, completes without waiting for the
//          aggregator's acknowledgement, which the VM's next access waits for; docs/IPC.md,
//          "Posted writes")
//
// It serves the VM's IOREQ server until the aggregator ends the session, the connection breaks, or
// it gets SIGTERM/SIGINT; then it prints its trap counters and exits (0 after an orderly end).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "base/flag_number.h"
#include "base/log.h"
#include "base/share.h"
#include "base/vm_name.h"
#include "hypervisor/backend.h"
#include "pv/protocol.h"
#include "qemu-device/device_model.h"
#include "qemu-device/ipc_aggregator_connection.h"
#include "qemu-device/vm_token_source.h"

namespace gpuvm::dm {
namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

struct Options {
  std::string backend;
  int domid = -1;
  hv::BackendOptions hv;  // --hv, --domain-fd
  int token_fd = -1;
  std::string token_file;
  IpcConnectOptions aggregator;
  DeviceModelConfig device;
  // The guest RAM announced to the aggregator (GUEST_MEMORY). 0: every frame the hypervisor
  // reports — for a Xen HVM guest that runs up to its special pages below 4 GiB, across the MMIO
  // hole, so the Xen test bed passes the configured RAM size instead.
  uint64_t guest_ram_bytes = 0;
  std::string variant;     // resolved once --mode is known
  std::string ready_file;  // --ready-file
};

void Usage() {
  std::fprintf(
      stderr,
      "usage: gpuvm-dm --backend local|xen --domid N --token-fd FD|--token-file PATH\n"
      "                [--hv SOCKET] [--domain-fd FD]\n"
      "                [--aggregator SOCKET] [--sbdf ssss:bb:dd.f] [--name NAME]\n"
      "                [--mode pt|fv|pv] [--bar1-mib N] [--bar3-mib N]\n"
      "                [--guest-ram-mib N] [--reply-timeout-ms N] [--ready-file PATH]\n"
      "                [--posted-writes on|off]\n"
      "                [--variant WORD] [--vram-mib N] [--channels N] [--share PERCENT]\n");
}

Result<Options> ParseArgs(int argc, char** argv) {
  Options o;
  o.aggregator.vm.name = "vm";
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return Status::InvalidArgument("missing value for " + flag);
    const std::string value = argv[++i];
    if (flag == "--backend") {
      o.backend = value;
    } else if (flag == "--domid") {
      o.domid = std::atoi(value.c_str());
    } else if (flag == "--hv") {
      o.hv.local_hv_path = value;
    } else if (flag == "--domain-fd") {
      o.hv.local_domain_fd = std::atoi(value.c_str());
    } else if (flag == "--token-fd") {
      o.token_fd = std::atoi(value.c_str());
      if (o.token_fd < 0) return Status::InvalidArgument("--token-fd wants a descriptor");
    } else if (flag == "--token-file") {
      if (value.empty()) return Status::InvalidArgument("--token-file wants a path");
      o.token_file = value;
    } else if (flag == "--aggregator") {
      o.aggregator.path = value;
    } else if (flag == "--sbdf") {
      GPUVM_ASSIGN_OR_RETURN(o.device.sbdf, hv::Sbdf::Parse(value));
    } else if (flag == "--name") {
      // NAME only (base/vm_name.h), refused here rather than by the aggregator.
      GPUVM_RETURN_IF_ERROR(CheckVmName(value).WithContext("--name"));
      o.aggregator.vm.name = value;
    } else if (flag == "--variant") {
      o.variant = value;
    } else if (flag == "--vram-mib") {
      GPUVM_ASSIGN_OR_RETURN(const uint64_t mib, ParseFlagNumber(flag, value, 1, ipc::kMaxVramMib));
      o.aggregator.vm.vram_mib = uint32_t(mib);
    } else if (flag == "--channels") {
      GPUVM_ASSIGN_OR_RETURN(const uint64_t n,
                             ParseFlagNumber(flag, value, 1, ipc::kMaxVmChannels));
      o.aggregator.vm.channels = uint16_t(n);
    } else if (flag == "--share") {
      GPUVM_ASSIGN_OR_RETURN(const double percent, ParseSharePercent(value));
      o.aggregator.vm.share_milli = uint32_t(percent * 1000 + 0.5);
    } else if (flag == "--mode") {
      o.device.pv_window = value == "pv";
      if (value == "pt") {
        o.aggregator.vm.mode = ipc::VmMode::kPassThrough;
      } else if (value == "fv") {
        o.aggregator.vm.mode = ipc::VmMode::kFullVirtualization;
      } else if (value == "pv") {
        o.aggregator.vm.mode = ipc::VmMode::kParaVirtualization;
      } else {
        return Status::InvalidArgument("--mode must be pt, fv or pv");
      }
    } else if (flag == "--ready-file") {
      if (value.empty()) return Status::InvalidArgument("--ready-file wants a path");
      o.ready_file = value;
    } else if (flag == "--bar1-mib") {
      o.device.layout.bar1_size = uint64_t(std::strtoull(value.c_str(), nullptr, 10)) << 20;
    } else if (flag == "--bar3-mib") {
      o.device.layout.bar3_size = uint64_t(std::strtoull(value.c_str(), nullptr, 10)) << 20;
    } else if (flag == "--guest-ram-mib") {
      o.guest_ram_bytes = uint64_t(std::strtoull(value.c_str(), nullptr, 10)) << 20;
      if (o.guest_ram_bytes == 0) return Status::InvalidArgument("--guest-ram-mib must be > 0");
    } else if (flag == "--reply-timeout-ms") {
      const uint64_t ms = std::strtoull(value.c_str(), nullptr, 10);
      if (ms == 0 || ms > 3600000) return Status::InvalidArgument("--reply-timeout-ms: 1..3600000");
      o.aggregator.timeout = std::chrono::milliseconds(ms);
    } else if (flag == "--posted-writes") {
      if (value != "on" && value != "off") {
        return Status::InvalidArgument("--posted-writes must be on or off");
      }
      o.device.posted_writes = value == "on";
    } else {
      return Status::InvalidArgument("unknown flag " + flag);
    }
  }
  ipc::VmConfig& vm = o.aggregator.vm;
  if (!o.variant.empty()) {
    GPUVM_ASSIGN_OR_RETURN(vm.variant, ipc::ParseVgpuVariant(vm.mode, o.variant));
    if (vm.variant == ipc::VgpuVariant::kPvDrm) {
      return Status::InvalidArgument(
          "variant pvdrm is gpuvm-pvdrm-backend's session, not a device model's");
    }
  }
  if (vm.mode == ipc::VmMode::kPassThrough && (vm.vram_mib != 0 || vm.channels != 0)) {
    return Status::InvalidArgument(
        "--vram-mib and --channels are fv and pv options: a pt VM has the whole GPU");
  }
  if (!hv::BackendKindFromName(o.backend).ok()) {
    return Status::InvalidArgument("--backend must be local or xen");
  }
  if (o.domid <= 0 || o.domid > 0x7fef) return Status::InvalidArgument("--domid must name a guest");
  if ((o.token_fd >= 0) == !o.token_file.empty()) {
    return Status::InvalidArgument(
        "give the VM's token with exactly one of --token-fd and --token-file (docs/SECURITY.md)");
  }
  return o;
}

Status Serve(const Options& o, VmLog& log) {
  // The token first: read once, and its descriptor closed at once.
  Result<ipc::VmToken> token = ReadVmToken(o.token_fd, o.token_file);
  if (!token.ok()) return token.status();
  // The hypervisor side first: without it there is nothing to tell the aggregator about. The
  // backend is chosen here, once; everything below works on the port's objects.
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<hv::Backend> backend,
                         hv::BackendFromName(o.backend, o.hv));
  const auto domid = static_cast<hv::DomainId>(o.domid);
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<hv::IoreqServer> server,
                         backend->CreateIoreqServer(domid));
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<hv::GuestMemory> memory, backend->OpenGuestMemory(domid));
  // Local: the RAM memfd the aggregator maps; Xen: -1, the aggregator maps the domain itself.
  GPUVM_ASSIGN_OR_RETURN(const int ram_fd, backend->GuestRamFd(domid));

  IpcConnectOptions connect = o.aggregator;
  connect.note = [&log](const std::string& line) { log(LogLevel::kWarn, line); };
  connect.token = *token;
  connect.vm.domid = domid;
  connect.vm.backend =
      backend->kind() == hv::BackendKind::kLocal ? ipc::Backend::kLocal : ipc::Backend::kXen;
  connect.vm.vcpus = server->vcpu_count();
  connect.vm.guest_ram_bytes = memory->frame_count() << hv::kPageShift;
  if (o.guest_ram_bytes != 0) {
    if (o.guest_ram_bytes > connect.vm.guest_ram_bytes) {
      return Status::OutOfRange("--guest-ram-mib is more than the domain's memory");
    }
    connect.vm.guest_ram_bytes = o.guest_ram_bytes;
  }
  connect.vm.bar0_size = o.device.layout.bar0_size;
  connect.vm.bar1_size = o.device.layout.bar1_size;
  connect.vm.bar3_size = o.device.layout.bar3_size;
  GPUVM_ASSIGN_OR_RETURN(auto aggregator, IpcAggregatorConnection::Connect(connect));
  if (aggregator->accepted().flags & ipc::kAcceptWantsGuestMemory) {
    if (ram_fd >= 0) {
      GPUVM_RETURN_IF_ERROR(aggregator->SendGuestMemory(ipc::GuestMemoryKind::kLocalMemfd,
                                                        connect.vm.guest_ram_bytes, ram_fd));
    } else {
      GPUVM_RETURN_IF_ERROR(aggregator->SendGuestMemory(ipc::GuestMemoryKind::kXenDomain,
                                                        connect.vm.guest_ram_bytes, -1));
    }
  }
  GPUVM_ASSIGN_OR_RETURN(
      auto dm, DeviceModel::Create(o.device, server.get(), aggregator.get(), memory.get()));
  log.Admitted(aggregator->accepted().vm_id);
  log(LogLevel::kInfo,
      "serving the virtual GPU at " + o.device.sbdf.ToString() + " (" + o.backend + " backend)");
  if (!o.ready_file.empty()) {
    // Empty: only its existence says something. A stale one is replaced; O_EXCL|O_NOFOLLOW: never
    // written through a symlink someone put there.
    ::unlink(o.ready_file.c_str());
    const int fd =
        ::open(o.ready_file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return Status::FromErrno(errno, "--ready-file " + o.ready_file);
    ::close(fd);
  }

  Status result;
  while (!g_stop) {
    result = dm->RunOnce(std::chrono::milliseconds(200));
    if (!result.ok()) break;
  }
  dm->SettlePostedWrite();  // a refusal of the last posted write is counted below
  const TrapCounterValues counters = dm->counters().Snapshot();
  log(LogLevel::kInfo, counters.ToString());
  // The guest's exits (one per ioreq, however many elements a rep moved) and the writes it posted:
  // gpuvm-bench's hook ("gpuvm-counters:" and key=value pairs, anywhere in a line).
  log(LogLevel::kInfo, "gpuvm-counters: mmio_exits=" + std::to_string(dm->mmio_exits()) +
                           " posted_writes=" + std::to_string(dm->posted_writes()));
  if (o.device.pv_window) {
    // The para-virtual calls the aggregator applied (its counter registers; our own read, not a
    // guest's) beside the doorbells the guest rang: gpuvm-bench's "gpuvm-counters" hook.
    Result<uint64_t> lo = aggregator->Read(BarIndex::kBar0, pv::kRegCallsLo, 4, 0);
    Result<uint64_t> hi = aggregator->Read(BarIndex::kBar0, pv::kRegCallsHi, 4, 0);
    const unsigned long long calls = lo.ok() && hi.ok() ? (*hi << 32) | *lo : 0;
    log(LogLevel::kInfo,
        "gpuvm-counters: pv_calls=" + std::to_string(lo.ok() && hi.ok() ? calls : 0) +
            " pv_doorbells=" + std::to_string(dm->pv_doorbells()));
  }
  if (counters.bar_maps + counters.bar_maps_refused != 0) {
    log(LogLevel::kInfo, "BAR remap: " + std::to_string(counters.bar_maps) + " ranges mapped, " +
                             std::to_string(counters.bar_unmaps) + " unmapped, " +
                             std::to_string(counters.bar_maps_refused) + " refused");
  }
  // Remapped ranges go before the aggregator hears we are done: it frees the VM's VRAM then.
  dm.reset();
  if (result.code() == StatusCode::kAborted) return Status::Ok();  // the aggregator ended it
  if (result.ok()) (void)aggregator->Teardown(ipc::TeardownReason::kNormal);
  return result;
}

}  // namespace
}  // namespace gpuvm::dm

int main(int argc, char** argv) {
  auto options = gpuvm::dm::ParseArgs(argc, argv);
  if (!options.ok()) {
    gpuvm::WriteLogLine(stderr, "gpuvm-dm",
                        gpuvm::LogEvent(gpuvm::LogLevel::kError, {}, options.status().ToString()));
    gpuvm::dm::Usage();
    return 2;
  }
  std::signal(SIGINT, gpuvm::dm::OnSignal);
  std::signal(SIGTERM, gpuvm::dm::OnSignal);
  std::signal(SIGPIPE, SIG_IGN);
  gpuvm::VmLog log("gpuvm-dm", options->aggregator.vm.name, static_cast<uint32_t>(options->domid));
  const gpuvm::Status served = gpuvm::dm::Serve(*options, log);
  if (!served.ok()) {
    log(gpuvm::LogLevel::kError, served.ToString());
    return 1;
  }
  return 0;
}
