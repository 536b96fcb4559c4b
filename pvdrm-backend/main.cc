// gpuvm-pvdrm-backend: dom0's PVDRM backend for one guest (docs/PVDRM.md, "The backend process").
//
//   gpuvm-pvdrm-backend --backend local|xen [--hv SOCKET] --domid N --token-fd FD|--token-file PATH
//                       --pool FIRST:COUNT [--devid N] [--aggregator SOCKET] [--name NAME]
//                       [--vram-mib N] [--channels N] [--share PERCENT] [--session pv|fv]
//                       [--guest-ram-mib N] [--announce]
//
// It opens the guest's aggregator session as that VM's device model would (HELLO, AUTH with the
// VM's one-time token, VM_CONFIG, GUEST_MEMORY), runs the guest driver on it (SessionBus: no trap,
// page tables by para-virtual calls in a pv session), with --announce writes the vgpu-drm device's
// keys in the store itself (the toolstack's part: gpuvm-vm and xl do it otherwise) and serves its
// ring with GpuRequestHandler until
// the frontend goes, the aggregator ends the session, or SIGTERM/SIGINT. --pool: guest frames the
// guest set aside for its backend's own DMA memory (the driver's rings and fences).
//
// On exit it prints `gpuvm-counters: pvdrm_requests=N pvdrm_pushbufs=N pvdrm_pushes=N
// pvdrm_register_accesses=N` (tests and gpuvm-bench read it; the last counts the driver's
// accesses over the session, single and block).
//
// Xen (--backend xen, in dom0): the guest's frames are foreign mappings (xen_guest_frames.h), the
// aggregator maps the domain's RAM itself (GUEST_MEMORY kXenDomain), and the toolstack writes the
// device's store directories with the guest's permissions (gpuvm-xl, gpuvm_mode = "pvdrm";
// --announce writes them without, which only a dom0-only test can use). --guest-ram-mib: the
// guest's RAM as the aggregator is to see it (default: every frame up to the domain's highest).
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "base/flag_number.h"
#include "base/log.h"
#include "base/os.h"
#include "base/share.h"
#include "base/vm_name.h"
#include "gpu/hw/pci.h"
#include "guest-pv-driver/driver.h"
#include "hypervisor/backend.h"
#include "ipc/protocol.h"
#include "pvdrm-backend/backend.h"
#include "pvdrm-backend/gpu_handler.h"
#include "pvdrm-backend/guest_frames.h"
#include "pvdrm-backend/session_bus.h"
#ifdef GPUVM_HAVE_XEN_FRAMES
#include "pvdrm-backend/xen_guest_frames.h"
#endif
#include "pvdrm-frontend/protocol/xenbus.h"
#include "qemu-device/ipc_aggregator_connection.h"
#include "qemu-device/virtual_gpu.h"
#include "qemu-device/vm_token_source.h"

namespace gpuvm::pvdrm {
namespace {

int g_stop_fd = -1;
void OnSignal(int) {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(g_stop_fd, &one, sizeof(one));
}

struct Options {
  std::string backend = "local";
  hv::BackendOptions hv;
  int domid = 0;
  uint32_t devid = 0;
  int token_fd = -1;
  std::string token_file;
  uint32_t pool_first = 0;
  uint32_t pool_count = 0;
  bool announce = false;
  uint64_t guest_ram_bytes = 0;  // 0: the domain's frame count
  dm::IpcConnectOptions aggregator;
};

void Usage() {
  std::fprintf(stderr,
               "usage: gpuvm-pvdrm-backend --backend local|xen [--hv SOCKET] --domid N\n"
               "                           --token-fd FD|--token-file PATH --pool FIRST:COUNT\n"
               "                           [--devid N] [--aggregator SOCKET] [--name NAME]\n"
               "                           [--vram-mib N] [--channels N] [--share PERCENT]\n"
               "                           [--session pv|fv] [--guest-ram-mib N] [--announce]\n");
}

Result<Options> ParseArgs(int argc, char** argv) {
  Options o;
  o.aggregator.vm.name = "vm";
  o.aggregator.vm.mode = ipc::VmMode::kParaVirtualization;
  o.aggregator.vm.variant = ipc::VgpuVariant::kPvDrm;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") return Status::InvalidArgument("usage");
    if (flag == "--announce") {
      o.announce = true;
      continue;
    }
    if (i + 1 >= argc) return Status::InvalidArgument("missing value for " + flag);
    const std::string value = argv[++i];
    if (flag == "--backend") {
      o.backend = value;
    } else if (flag == "--hv") {
      o.hv.local_hv_path = value;
    } else if (flag == "--domid") {
      GPUVM_ASSIGN_OR_RETURN(const uint64_t n, ParseFlagNumber(flag, value, 1, 0x7fef));
      o.domid = int(n);
    } else if (flag == "--devid") {
      GPUVM_ASSIGN_OR_RETURN(const uint64_t n, ParseFlagNumber(flag, value, 0, 255));
      o.devid = uint32_t(n);
    } else if (flag == "--token-fd") {
      GPUVM_ASSIGN_OR_RETURN(const uint64_t n, ParseFlagNumber(flag, value, 0, 1 << 20));
      o.token_fd = int(n);
    } else if (flag == "--token-file") {
      if (value.empty()) return Status::InvalidArgument("--token-file wants a path");
      o.token_file = value;
    } else if (flag == "--pool") {
      const size_t colon = value.find(':');
      if (colon == std::string::npos) return Status::InvalidArgument("--pool wants FIRST:COUNT");
      GPUVM_ASSIGN_OR_RETURN(const uint64_t first,
                             ParseFlagNumber(flag, value.substr(0, colon), 0, UINT32_MAX));
      GPUVM_ASSIGN_OR_RETURN(const uint64_t count,
                             ParseFlagNumber(flag, value.substr(colon + 1), 1, 1 << 20));
      o.pool_first = uint32_t(first);
      o.pool_count = uint32_t(count);
    } else if (flag == "--guest-ram-mib") {
      GPUVM_ASSIGN_OR_RETURN(const uint64_t mib, ParseFlagNumber(flag, value, 1, 1 << 20));
      o.guest_ram_bytes = mib << 20;
    } else if (flag == "--aggregator") {
      o.aggregator.path = value;
    } else if (flag == "--name") {
      GPUVM_RETURN_IF_ERROR(CheckVmName(value).WithContext("--name"));
      o.aggregator.vm.name = value;
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
    } else if (flag == "--session") {
      if (value == "pv") {
        o.aggregator.vm.mode = ipc::VmMode::kParaVirtualization;
        o.aggregator.vm.variant = ipc::VgpuVariant::kPvDrm;
      } else if (value == "fv") {
        // No BAR remap: nothing of ours traps, so there is nothing to map straight.
        o.aggregator.vm.mode = ipc::VmMode::kFullVirtualization;
        o.aggregator.vm.variant = ipc::VgpuVariant::kFvLazy;
      } else {
        return Status::InvalidArgument("--session must be pv or fv");
      }
    } else {
      return Status::InvalidArgument("unknown flag " + flag);
    }
  }
#ifdef GPUVM_HAVE_XEN_FRAMES
  if (o.backend != "local" && o.backend != "xen") {
    return Status::InvalidArgument("--backend must be local or xen");
  }
#else
  if (o.backend != "local") {
    return Status::Unimplemented("--backend " + o.backend + ": this build has only local");
  }
#endif
  if (o.domid == 0) return Status::InvalidArgument("--domid must name a guest");
  if (o.pool_count == 0) return Status::InvalidArgument("--pool FIRST:COUNT is required");
  if ((o.token_fd >= 0) == !o.token_file.empty()) {
    return Status::InvalidArgument(
        "give the VM's token with exactly one of --token-fd and --token-file (docs/SECURITY.md)");
  }
  return o;
}

// The GPU handler, with one log line per DRM file opened or closed and what is left afterwards:
// the operator's (and the test bed's) view of each guest process's objects being freed — also
// when the process was killed (the guest kernel closes its files).
class LoggingHandler final : public RequestHandler {
 public:
  LoggingHandler(GpuRequestHandler& inner, VmLog& log) : inner_(inner), log_(log) {}
  Response Handle(const Request& request, GuestPages& pages) override {
    Response response = inner_.Handle(request, pages);
    const Op op = request.op();
    if (op == Op::kFileOpen || op == Op::kFileClose) {
      const GpuHandlerStats stats = inner_.stats();
      log_(LogLevel::kInfo,
           "file " + std::to_string(request.file) + (op == Op::kFileOpen ? " opened" : " closed") +
               " (status " + std::to_string(response.status) + "): " + std::to_string(stats.files) +
               " files and " + std::to_string(stats.objects) + " objects left");
    }
    return response;
  }
  void OnDisconnect() override { inner_.OnDisconnect(); }
  bool WantsIdle() const override { return inner_.WantsIdle(); }
  void OnIdle() override { inner_.OnIdle(); }

 private:
  GpuRequestHandler& inner_;
  VmLog& log_;
};

Status Serve(const Options& o, int stop_fd) {
  VmLog log("gpuvm-pvdrm-backend", o.aggregator.vm.name, uint32_t(o.domid));
  Result<ipc::VmToken> token = dm::ReadVmToken(o.token_fd, o.token_file);
  if (!token.ok()) return token.status();

  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<hv::Backend> backend,
                         hv::BackendFromName(o.backend, o.hv));
  const auto domid = static_cast<hv::DomainId>(o.domid);
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<hv::GuestMemory> memory, backend->OpenGuestMemory(domid));
  GPUVM_ASSIGN_OR_RETURN(const int ram_fd, backend->GuestRamFd(domid));
  const uint64_t frames = memory->frame_count();
  if (uint64_t{o.pool_first} + o.pool_count > frames) {
    return Status::OutOfRange("--pool is past the guest's " + std::to_string(frames) +
                              " frames of RAM");
  }
  if (o.guest_ram_bytes > (frames << hv::kPageShift)) {
    return Status::OutOfRange("--guest-ram-mib is more than the domain's memory");
  }
  std::unique_ptr<GuestFrames> guest_frames;
  if (ram_fd >= 0) {
    GPUVM_ASSIGN_OR_RETURN(os::UniqueFd ram, os::DuplicateFd(ram_fd));
    GPUVM_ASSIGN_OR_RETURN(guest_frames, MemfdGuestFrames::Create(std::move(ram), frames));
  } else {
#ifdef GPUVM_HAVE_XEN_FRAMES
    GPUVM_ASSIGN_OR_RETURN(guest_frames, ForeignGuestFrames::Open(domid, frames));
#else
    return Status::Unimplemented("this backend offers no guest RAM descriptor");
#endif
  }

  dm::IpcConnectOptions connect = o.aggregator;
  connect.note = [&log](const std::string& line) { log(LogLevel::kWarn, line); };
  connect.token = *token;
  connect.vm.domid = domid;
  connect.vm.backend =
      backend->kind() == hv::BackendKind::kLocal ? ipc::Backend::kLocal : ipc::Backend::kXen;
  connect.vm.vcpus = 1;
  connect.vm.guest_ram_bytes =
      o.guest_ram_bytes != 0 ? o.guest_ram_bytes : frames << hv::kPageShift;
  const dm::VirtualGpuLayout layout;
  connect.vm.bar0_size = layout.bar0_size;
  connect.vm.bar1_size = layout.bar1_size;
  connect.vm.bar3_size = layout.bar3_size;
  GPUVM_ASSIGN_OR_RETURN(auto aggregator, dm::IpcAggregatorConnection::Connect(connect));
  log.Admitted(aggregator->accepted().vm_id);
  if (aggregator->accepted().flags & ipc::kAcceptWantsGuestMemory) {
    // Xen: the aggregator maps the domain's RAM itself, as for gpuvm-dm.
    GPUVM_RETURN_IF_ERROR(aggregator->SendGuestMemory(
        ram_fd >= 0 ? ipc::GuestMemoryKind::kLocalMemfd : ipc::GuestMemoryKind::kXenDomain,
        connect.vm.guest_ram_bytes, ram_fd));
  }

  gpu::PciIdentity pci;
  pci.vendor_id = gf100::pci::kVendorId;
  pci.device_id = gf100::pci::kDeviceId;
  pci.class_code = gf100::pci::kClassCode;
  pci.revision = gf100::pci::kRevision;
  pci.bar0_size = layout.bar0_size;
  pci.bar1_size = layout.bar1_size;
  pci.bar3_size = layout.bar3_size;
  std::vector<uint32_t> pool;
  for (uint32_t i = 0; i < o.pool_count; ++i) pool.push_back(o.pool_first + i);
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<SessionBus> bus,
                         SessionBus::Create(*aggregator, pci, *guest_frames, std::move(pool)));
  guest::DriverOptions driver_options;
  driver_options.use_interrupts = false;
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<guest::Driver> driver,
                         guest::Driver::Create(bus.get(), driver_options));
  GpuRequestHandler handler(*driver, *guest_frames, {});
  LoggingHandler logging(handler, log);
  // The first open() of the guest's first program finds its context made (gpu_handler.h).
  if (Status spare = handler.PrepareSpare(); !spare.ok()) {
    log(LogLevel::kWarn, "no spare context: " + spare.ToString());
  }

  // The aggregator's own requests (TEARDOWN when it ends the session) arrive on the connection;
  // a watcher hands them on as a stop.
  std::atomic<bool> done{false};
  std::atomic<bool> torn_down{false};
  // Wakes the watcher when the backend stops (before: its 200 ms poll timeout ran out first, most
  // of a pvdrm VM's exit).
  GPUVM_ASSIGN_OR_RETURN(os::UniqueFd watcher_stop, os::CreateEventFd());
  std::thread watcher([&] {
    while (!done.load()) {
      pollfd p[2] = {{aggregator->event_fd(), POLLIN, 0}, {watcher_stop.get(), POLLIN, 0}};
      if (::poll(p, 2, 200) <= 0 || (p[0].revents & POLLIN) == 0) continue;
      std::lock_guard lock(bus->connection_mutex());
      Result<std::optional<dm::AggregatorEvent>> event = aggregator->PollEvent();
      if (!event.ok() ||
          (event->has_value() && std::holds_alternative<dm::TeardownRequest>(**event))) {
        torn_down = true;
        OnSignal(0);
        return;
      }
      if (event->has_value()) {
        if (auto* map = std::get_if<dm::BarMapRequest>(&**event)) {
          (void)aggregator->AnswerBarRequest(map->seq, Status::Unimplemented("nothing traps here"));
        } else if (auto* unmap = std::get_if<dm::BarUnmapRequest>(&**event)) {
          (void)aggregator->AnswerBarRequest(unmap->seq, Status::Ok());
        }
      }
    }
  });

  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<hv::GrantMapper> mapper, backend->OpenGrantMapper());
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<hv::EventChannels> channels, backend->OpenEventChannels());
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<hv::Store> store, backend->OpenStore());
  BackendOptions backend_options;
  backend_options.device = {domid, hv::kControlDomain, o.devid};
  // --announce: we play the toolstack's part for our device (gpuvm-vm and xl do it themselves).
  if (o.announce) GPUVM_RETURN_IF_ERROR(AnnounceDevice(*store, backend_options.device));
  Status result;
  std::unique_ptr<BackendConnection> connection;
  {
    Result<std::unique_ptr<BackendConnection>> created = BackendConnection::Create(
        *mapper, std::move(channels), std::move(store), logging, backend_options);
    if (created.ok()) {
      connection = std::move(*created);
      log(LogLevel::kInfo, "device " + std::to_string(o.devid) + " serving");
      result = connection->Run(stop_fd);
    } else {
      result = created.status();
    }
  }
  const GpuHandlerStats stats = handler.stats();
  const guest::BusCounters bus_counters = driver->bus_counters();
  std::fprintf(stderr,
               "gpuvm-counters: pvdrm_requests=%llu pvdrm_pushbufs=%llu pvdrm_pushes=%llu "
               "pvdrm_register_accesses=%llu pvdrm_spare_opens=%llu\n",
               (unsigned long long)(connection ? connection->stats().requests : 0),
               (unsigned long long)stats.pushbufs, (unsigned long long)stats.pushes,
               (unsigned long long)bus_counters.total(), (unsigned long long)stats.spare_opens);
  if (connection != nullptr && !connection->disconnect_reason().empty()) {
    log(LogLevel::kInfo, "frontend gone: " + connection->disconnect_reason());
  }
  connection.reset();
  handler.OnDisconnect();
  // Every context of this VM goes while the session still carries its teardown (disabling a
  // channel polls PFIFO through it): the spare included, which the handler would otherwise
  // destroy after the session ended.
  handler.ReleaseSpare();
  done = true;
  (void)os::SignalEventFd(watcher_stop.get());
  watcher.join();
  if (!torn_down.load()) {
    std::lock_guard lock(bus->connection_mutex());
    (void)aggregator->Teardown(ipc::TeardownReason::kNormal);
  }
  return result;
}

}  // namespace
}  // namespace gpuvm::pvdrm

int main(int argc, char** argv) {
  auto options = gpuvm::pvdrm::ParseArgs(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr, "gpuvm-pvdrm-backend: %s\n", options.status().ToString().c_str());
    gpuvm::pvdrm::Usage();
    return 2;
  }
  const int stop = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop < 0) return 1;
  gpuvm::pvdrm::g_stop_fd = stop;
  std::signal(SIGINT, gpuvm::pvdrm::OnSignal);
  std::signal(SIGTERM, gpuvm::pvdrm::OnSignal);
  std::signal(SIGPIPE, SIG_IGN);
  const gpuvm::Status served = gpuvm::pvdrm::Serve(*options, stop);
  if (!served.ok()) {
    std::fprintf(stderr, "gpuvm-pvdrm-backend: %s\n", served.ToString().c_str());
    return 1;
  }
  return 0;
}
