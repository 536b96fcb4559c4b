#include "tools/gpuvm-vm/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>

#include "aggregator/control/client.h"
#include "base/flag_number.h"
#include "base/os.h"
#include "base/share.h"
#include "base/vm_name.h"
#include "hypervisor/backend.h"
#include "hypervisor/local/domain.h"
#include "hypervisor/local/guest_io.h"
#include "hypervisor/local/hv_client.h"
#include "hypervisor/local/hv_daemon.h"
#include "hypervisor/local/store.h"
#include "pvdrm-frontend/local_frontend.h"
#include "pvdrm-frontend/protocol/xenbus.h"

#ifndef GPUVM_DM_DEFAULT_PATH
#define GPUVM_DM_DEFAULT_PATH "gpuvm-dm"
#endif
#ifndef GPUVM_PVDRM_BACKEND_DEFAULT_PATH
#define GPUVM_PVDRM_BACKEND_DEFAULT_PATH "gpuvm-pvdrm-backend"
#endif

namespace gpuvm::vm {
namespace {

// A program gpuvm-vm starts: the one named `name` installed beside this program (an installed
// gpuvm-vm in /usr/bin finds /usr/bin/gpuvm-dm), else `built` — the one of the build tree this was
// built in (harnesses like gpuvm-bench live elsewhere in it). The device model unless told (--dm,
// GPUVM_DM); a pvdrm VM's backend unless told (--pvdrm-backend, GPUVM_PVDRM_BACKEND).
std::string SiblingProgram(const char* name, const char* built) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    const std::filesystem::path sibling = self.parent_path() / name;
    if (::access(sibling.c_str(), X_OK) == 0) return sibling.string();
  }
  return built;
}

using os::UniqueFd;

constexpr hv::Sbdf kGpuFunction{0, 0, 5, 0};
constexpr uint64_t kPage = 4096;
// (our choice) The PVDRM backend's own DMA pool in a pvdrm VM's RAM: 16 MiB below the guest's
// grant frames (both inside the frontend's reserved top of RAM, pvdrm-frontend/local_frontend.h).
constexpr uint64_t kPvdrmBackendPoolFrames =
    4096;  // gpuvm-dm's default (qemu-device/virtual_gpu.h)

volatile sig_atomic_t g_guest_pid = 0;
volatile sig_atomic_t g_interrupted = 0;

void ForwardSignal(int signal) {
  g_interrupted = signal;
  if (g_guest_pid > 0) ::kill(g_guest_pid, signal);
}

// A socket pair whose second end the child inherits (no close-on-exec) at a fixed number.
struct Handoff {
  UniqueFd ours;
  UniqueFd theirs;
};
Result<Handoff> MakeHandoff() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return Status::FromErrno(errno, "socketpair");
  }
  return Handoff{UniqueFd(sv[0]), UniqueFd(sv[1])};
}

// In the child, between fork and exec: die with the launcher, put `fd` at `at` (inheritable).
void Inherit(int fd, int at) {
  if (fd != at) {
    if (::dup2(fd, at) < 0) ::_exit(126);
  } else {
    ::fcntl(at, F_SETFD, 0);
  }
}
void ChildSetup(int parent, int death_signal, int fd, int at) {
  ::prctl(PR_SET_PDEATHSIG, death_signal);
  if (::getppid() != parent) ::_exit(126);  // the launcher is already gone
  Inherit(fd, at);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
}

// The VM's one-time token (docs/SECURITY.md), from the aggregator's control socket, in a pipe
// whose read end the device model inherits (no command line: every user can read those).
Result<UniqueFd> FetchVmToken(const std::string& aggregator, uint16_t domid) {
  const std::string socket = control::DefaultControlSocket(aggregator);
  Result<control::Reply> reply = control::Call(socket, control::VmTokenRequest{domid});
  if (reply.ok() && !reply->status.ok()) reply = reply->status;
  if (!reply.ok()) {
    return reply.status().WithContext(
        "cannot get the VM's token from the aggregator's control "
        "socket " +
        socket);
  }
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  UniqueFd read_end(p[0]), write_end(p[1]);
  // 65 bytes fit any pipe's buffer: written whole before the device model starts.
  if (::write(write_end.get(), reply->body.data(), reply->body.size()) !=
      static_cast<ssize_t>(reply->body.size())) {
    return Status::FromErrno(errno, "writing the VM token into its pipe");
  }
  return read_end;
}

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// Waits up to `timeout` for `pid`; then kills it.
int Reap(pid_t pid, std::chrono::milliseconds timeout) {
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace

std::string Usage() {
  return "usage: gpuvm-vm [--mode pt|fv-naive|fv-lazy|fv-bar-remap|fv-optimized|pv-naive|\n"
         "                pv-multicall|pvdrm|pvdrm-pool] [--vram-mib N] [--channels N]\n"
         "                [--share PERCENT] [--aggregator SOCKET] [--ram-mib N] [--vcpus N]\n"
         "                [--domid N] [--name NAME] [--dm PATH] [--pvdrm-backend PATH]\n"
         "                [--pid-file PATH] [--verbose] -- PROGRAM [ARGS...]\n"
         "Runs PROGRAM inside a local VM whose GPU is the aggregator's (GPUVM_BUS=local;\n"
         "pvdrm: GPUVM_BUS=pvdrm, the program's driver speaks PVDRM to a backend).\n"
         "--dm (or GPUVM_DM): the device model; default the gpuvm-dm beside gpuvm-vm.\n"
         "--pvdrm-backend (or GPUVM_PVDRM_BACKEND): a pvdrm VM's backend; default the\n"
         "gpuvm-pvdrm-backend beside gpuvm-vm.\n";
}

Result<VmOptions> ParseArgs(const std::vector<std::string>& args) {
  VmOptions o;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--") {
      ++i;
      break;
    }
    if (flag == "--verbose") {
      o.verbose = true;
      continue;
    }
    if (flag.rfind("--", 0) != 0) break;  // the program, without "--"
    if (i + 1 >= args.size()) return Status::InvalidArgument("missing value for " + flag);
    const std::string& value = args[++i];
    if (flag == "--mode") {
      if (value != "pt" && value != "fv" && value != "pv" && value != "fv-naive" &&
          value != "fv-lazy" && value != "fv-bar-remap" && value != "fv-optimized" &&
          value != "pv-naive" && value != "pv-multicall" && value != "pvdrm" &&
          value != "pvdrm-pool") {
        return Status::InvalidArgument(
            "--mode must be pt, fv, fv-naive, fv-lazy, fv-bar-remap, fv-optimized, pv, pv-naive, "
            "pv-multicall, pvdrm or pvdrm-pool");
      }
      o.mode = value;
    } else if (flag == "--vram-mib") {
      GPUVM_ASSIGN_OR_RETURN(uint64_t mib, ParseFlagNumber(flag, value, 1, 64 << 10));
      o.vram_mib = mib;
    } else if (flag == "--channels") {
      GPUVM_ASSIGN_OR_RETURN(uint64_t n, ParseFlagNumber(flag, value, 1, 128));
      o.channels = static_cast<uint32_t>(n);
    } else if (flag == "--share") {
      Result<double> share = ParseSharePercent(value);  // the syntax of every share (base/share.h)
      if (!share.ok()) return share.status().WithContext("--share");
      o.share = *share;
    } else if (flag == "--aggregator") {
      o.aggregator = value;
    } else if (flag == "--ram-mib") {
      GPUVM_ASSIGN_OR_RETURN(uint64_t mib, ParseFlagNumber(flag, value, 16, kMaxRamBytes >> 20));
      o.ram_bytes = mib << 20;
    } else if (flag == "--vcpus") {
      GPUVM_ASSIGN_OR_RETURN(uint64_t n,
                             ParseFlagNumber(flag, value, 1, hv::local::kMaxLocalVcpus));
      o.vcpus = static_cast<uint32_t>(n);
    } else if (flag == "--domid") {
      GPUVM_ASSIGN_OR_RETURN(uint64_t n, ParseFlagNumber(flag, value, 1, 0x7fef));
      o.domid = static_cast<uint16_t>(n);
    } else if (flag == "--name") {
      GPUVM_RETURN_IF_ERROR(CheckVmName(value).WithContext("--name"));
      o.name = value;
    } else if (flag == "--dm") {
      o.dm_path = value;
    } else if (flag == "--pvdrm-backend") {
      o.pvdrm_backend_path = value;
    } else if (flag == "--pid-file") {
      o.pid_file = value;
    } else {
      return Status::InvalidArgument("unknown flag " + flag);
    }
  }
  o.argv.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (o.argv.empty()) return Status::InvalidArgument("no program to run");
  if ((o.vram_mib != 0 || o.channels != 0) && DeviceModelMode(o) != "fv" &&
      DeviceModelMode(o) != "pv" && DeviceModelMode(o) != "pvdrm") {
    return Status::InvalidArgument(std::string(o.vram_mib != 0 ? "--vram-mib" : "--channels") +
                                   " is for fv and pv VMs (a " + o.mode +
                                   " VM sees the whole GPU)");
  }
  return o;
}

std::string DeviceModelMode(const VmOptions& options) {
  if (options.mode == "pvdrm" || options.mode == "pvdrm-pool") return "pvdrm";
  if (options.mode.rfind("fv", 0) == 0) return "fv";
  if (options.mode.rfind("pv", 0) == 0) return "pv";
  return options.mode;
}

std::vector<std::string> DeviceModelVmArgs(const VmOptions& options, uint16_t domid) {
  std::vector<std::string> args = {
      "--mode", DeviceModelMode(options), "--name",
      options.name.empty() ? "vm" + std::to_string(domid) : options.name};
  // fv-lazy -> --mode fv --variant lazy; pv-multicall -> --mode pv --variant multicall.
  if (const size_t dash = options.mode.find('-'); dash != std::string::npos) {
    args.insert(args.end(), {"--variant", options.mode.substr(dash + 1)});
  }
  if (options.vram_mib != 0)
    args.insert(args.end(), {"--vram-mib", std::to_string(options.vram_mib)});
  if (options.channels != 0)
    args.insert(args.end(), {"--channels", std::to_string(options.channels)});
  if (options.share) args.insert(args.end(), {"--share", FormatSharePercent(*options.share)});
  return args;
}

Result<int> RunVm(const VmOptions& options) {
  if (options.argv.empty()) return Status::InvalidArgument("no program to run");
  const uint16_t domid =
      options.domid != 0 ? options.domid : static_cast<uint16_t>(1 + ::getpid() % 0x7000);
  const bool pvdrm = DeviceModelMode(options) == "pvdrm";
  // --dm names the device model; a pvdrm VM has its PVDRM backend instead (--pvdrm-backend).
  std::string dm_path = pvdrm ? options.pvdrm_backend_path : options.dm_path;
  if (dm_path.empty()) {
    const char* env = std::getenv(pvdrm ? "GPUVM_PVDRM_BACKEND" : "GPUVM_DM");
    dm_path = env != nullptr && *env != '\0'
                  ? env
                  : (pvdrm ? SiblingProgram("gpuvm-pvdrm-backend", GPUVM_PVDRM_BACKEND_DEFAULT_PATH)
                           : SiblingProgram("gpuvm-dm", GPUVM_DM_DEFAULT_PATH));
  }
  const auto log = [&](const std::string& line) {
    if (options.verbose) std::fprintf(stderr, "gpuvm-vm: %s\n", line.c_str());
  };

  // 1. The domain.
  hv::local::LocalDomainConfig config;
  config.domid = domid;
  config.ram_bytes = options.ram_bytes;
  config.vcpus = options.vcpus;
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<hv::local::LocalDomain> domain,
                         hv::local::LocalDomain::Create(config));
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<hv::local::LocalGuestIo> io,
                         hv::local::LocalGuestIo::Create(*domain));

  // pvdrm: the VM's own local hypervisor daemon (store, event channels, grants between the guest
  // and its backend), the domain registered with it, and the vgpu-drm device announced (what xl
  // does on Xen). The top of guest RAM is the guest's grant pool and, below it, the backend's own.
  std::unique_ptr<hv::local::LocalHvDaemon> hvd;
  std::unique_ptr<hv::local::LocalHvClient> hv_control;
  std::unique_ptr<hv::local::LocalStore> toolstack;
  const std::string hv_path =
      "@gpuvm-vm-" + std::to_string(::getpid()) + "-" + std::to_string(domid) + "-hv";
  const uint64_t frames = domain->frame_count();
  const uint64_t backend_pool_first = frames - pvdrm::kDefaultGrantFrames - kPvdrmBackendPoolFrames;
  const pvdrm::DeviceAddress device{domid, hv::kControlDomain, 0};
  if (pvdrm) {
    if (frames * kPage < (pvdrm::kDefaultReservedMib << 20) * 2) {
      return Status::InvalidArgument("a pvdrm VM needs more RAM than twice its reserved " +
                                     std::to_string(pvdrm::kDefaultReservedMib) + " MiB");
    }
    GPUVM_ASSIGN_OR_RETURN(hvd, hv::local::LocalHvDaemon::Create(hv_path));
    GPUVM_RETURN_IF_ERROR(hvd->Start());
    GPUVM_ASSIGN_OR_RETURN(hv_control,
                           hv::local::LocalHvClient::Connect(hv_path, hv::kControlDomain));
    GPUVM_RETURN_IF_ERROR(hv::local::RegisterDomain(*hv_control, *domain));
    GPUVM_ASSIGN_OR_RETURN(toolstack, hv::local::LocalStore::Connect(hv_path, hv::kControlDomain));
    GPUVM_RETURN_IF_ERROR(pvdrm::AnnounceDevice(*toolstack, device));
  }

  // 2. Its device model (pvdrm: its PVDRM backend).
  GPUVM_ASSIGN_OR_RETURN(UniqueFd token, FetchVmToken(options.aggregator, domid));
  GPUVM_ASSIGN_OR_RETURN(Handoff dm_handoff, MakeHandoff());
  std::vector<std::string> dm_args = {dm_path,   "--backend",           "local",
                                      "--domid", std::to_string(domid), "--domain-fd",
                                      "3",       "--token-fd",          "4"};
  if (pvdrm) {
    dm_args = {dm_path,
               "--backend",
               "local",
               "--hv",
               hv_path,
               "--domid",
               std::to_string(domid),
               "--token-fd",
               "4",
               "--pool",
               std::to_string(backend_pool_first) + ":" + std::to_string(kPvdrmBackendPoolFrames),
               "--name",
               options.name.empty() ? "vm" + std::to_string(domid) : options.name};
    if (options.vram_mib != 0)
      dm_args.insert(dm_args.end(), {"--vram-mib", std::to_string(options.vram_mib)});
    if (options.channels != 0)
      dm_args.insert(dm_args.end(), {"--channels", std::to_string(options.channels)});
    if (options.share)
      dm_args.insert(dm_args.end(), {"--share", FormatSharePercent(*options.share)});
  } else {
    for (std::string& arg : DeviceModelVmArgs(options, domid)) dm_args.push_back(std::move(arg));
  }
  if (!options.aggregator.empty()) {
    dm_args.push_back("--aggregator");
    dm_args.push_back(options.aggregator);
  }
  std::vector<char*> dm_argv;
  for (std::string& a : dm_args) dm_argv.push_back(a.data());
  dm_argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t dm = ::fork();
  if (dm < 0) return Status::FromErrno(errno, "fork");
  if (dm == 0) {
    // The token's pipe goes to 4 first: dup2 onto 3 must not clobber it should it be 3.
    const int token_fd = token.get() == 3 ? ::fcntl(token.get(), F_DUPFD_CLOEXEC, 5) : token.get();
    if (token_fd < 0) ::_exit(126);
    ChildSetup(parent, SIGTERM, dm_handoff.theirs.get(), 3);
    Inherit(token_fd, 4);
    ::execv(dm_path.c_str(), dm_argv.data());
    std::fprintf(stderr, "gpuvm-vm: cannot run %s: %s\n", dm_path.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  dm_handoff.theirs.Reset();
  token.Reset();
  Status sent = pvdrm ? Status::Ok() : domain->SendTo(dm_handoff.ours.get());
  if (!sent.ok()) {
    // Most likely it is gone already (it could not start): say so, with how it ended.
    const int status = Reap(dm, std::chrono::seconds(2));
    return Status::Unavailable("the device model exited before the VM started (" +
                               Describe(status) + "; handing it the domain: " + sent.message() +
                               ")");
  }
  log("domain " + std::to_string(domid) + ": gpuvm-dm pid " + std::to_string(dm));

  // Wait until it claims the GPU's function (it has talked to the aggregator by then); a pvdrm
  // backend, until it waits for its frontend (InitWait: its session is up).
  const auto deadline = std::chrono::steady_clock::now() + options.dm_start_timeout;
  auto started = [&] {
    if (!pvdrm) return io->IsPciClaimed(kGpuFunction);
    Result<XenbusState> state = pvdrm::ReadState(*toolstack, pvdrm::BackendDir(device));
    return state.ok() && *state == XenbusStateInitWait;
  };
  while (!started()) {
    int status = 0;
    if (::waitpid(dm, &status, WNOHANG) == dm) {
      return Status::Unavailable("the device model exited before the VM started (" +
                                 Describe(status) + "); its message is above");
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(dm, SIGKILL);
      ::waitpid(dm, nullptr, 0);
      return Status::DeadlineExceeded("the device model did not bring the GPU up within " +
                                      std::to_string(options.dm_start_timeout.count()) + " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  // 3. The guest program.
  GPUVM_ASSIGN_OR_RETURN(Handoff guest_handoff, MakeHandoff());
  std::vector<std::string> guest_args = options.argv;
  std::vector<char*> guest_argv;
  for (std::string& a : guest_args) guest_argv.push_back(a.data());
  guest_argv.push_back(nullptr);
  const int guest_fd = guest_handoff.theirs.get();
  const std::string fd_text = std::to_string(guest_fd);
  struct sigaction forward {};
  forward.sa_handler = ForwardSignal;
  ::sigemptyset(&forward.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  ::sigaction(SIGINT, &forward, &old_int);
  ::sigaction(SIGTERM, &forward, &old_term);
  const pid_t guest = ::fork();
  if (guest < 0) {
    ::kill(dm, SIGTERM);
    Reap(dm, std::chrono::seconds(10));
    return Status::FromErrno(errno, "fork");
  }
  if (guest == 0) {
    ChildSetup(parent, SIGKILL, guest_fd, guest_fd);
    ::setenv(hv::kLocalVmFdVariable, fd_text.c_str(), 1);
    ::setenv("GPUVM_BUS", pvdrm ? "pvdrm" : "local", 1);
    if (pvdrm) ::setenv("GPUVM_PVDRM_HV", hv_path.c_str(), 1);
    // (our choice) 64 MiB of pooled GEM objects per DRM file in pvdrm-pool.
    if (options.mode == "pvdrm-pool") ::setenv("GPUVM_PVDRM_POOL_MIB", "64", 1);
    ::execvp(guest_argv[0], guest_argv.data());
    std::fprintf(stderr, "gpuvm-vm: cannot run %s: %s\n", guest_argv[0], std::strerror(errno));
    ::_exit(127);
  }
  g_guest_pid = guest;
  guest_handoff.theirs.Reset();
  if (!options.pid_file.empty()) {
    std::ofstream pids(options.pid_file + ".tmp");
    pids << "dm " << dm << "\nguest " << guest << "\n";
    pids.close();
    std::rename((options.pid_file + ".tmp").c_str(), options.pid_file.c_str());
  }
  log("guest pid " + std::to_string(guest) + ": " + options.argv[0]);

  // 4. Supervise, and hand the domain to every program in the VM that asks for it (a shell script
  // may run several one after another: each asks once, LocalVmGuest::FromEnvironment).
  Result<int> result = Status::Internal("unreachable");
  Result<UniqueFd> dm_pidfd = os::OpenPidFd(dm);
  Result<UniqueFd> guest_pidfd = os::OpenPidFd(guest);
  int handoff = guest_handoff.ours.get();
  for (;;) {
    // Without pidfds (kernels before 5.3) the children are looked at every 10 ms.
    const bool watched = dm_pidfd.ok() && guest_pidfd.ok();
    pollfd fds[3] = {{handoff, POLLIN, 0},
                     {dm_pidfd.ok() ? dm_pidfd->get() : -1, POLLIN, 0},
                     {guest_pidfd.ok() ? guest_pidfd->get() : -1, POLLIN, 0}};
    const int n = ::poll(fds, 3, watched ? -1 : 10);
    if (n < 0 && errno != EINTR) {
      result = Status::FromErrno(errno, "poll");
      break;
    }
    if (n > 0 && (fds[0].revents & POLLIN)) {
      // One request, one copy of the domain. Anything readable counts as a request; what a
      // program does with its copy is its business (all copies describe the same VM).
      uint8_t request[16];
      if (::recv(handoff, request, sizeof request, MSG_DONTWAIT) > 0) {
        const Status handed = domain->SendTo(handoff);
        if (!handed.ok()) {
          std::fprintf(stderr, "gpuvm-vm: handing out the domain: %s\n", handed.ToString().c_str());
        }
      }
    } else if (n > 0 && (fds[0].revents & (POLLHUP | POLLERR))) {
      handoff = -1;  // no program holds the other end any more
    }
    int status = 0;
    if (::waitpid(guest, &status, WNOHANG) == guest) {
      g_guest_pid = 0;
      log("guest " + Describe(status) + "; stopping the device model");
      ::kill(dm, SIGTERM);  // gpuvm-dm tears the session down: the aggregator resets the GPU
      const int dm_status = Reap(dm, std::chrono::seconds(30));
      log("gpuvm-dm " + Describe(dm_status));
      result = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (::waitpid(dm, &status, WNOHANG) == dm) {
      std::fprintf(stderr, "gpuvm-vm: the device model died (%s); stopping the guest\n",
                   Describe(status).c_str());
      ::kill(guest, SIGKILL);
      ::waitpid(guest, nullptr, 0);
      g_guest_pid = 0;
      result = Status::Aborted("the VM's device model died (" + Describe(status) + ")");
      break;
    }
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  if (!options.pid_file.empty()) std::remove(options.pid_file.c_str());
  return result;
}

}  // namespace gpuvm::vm
