// gpuvm-trap-bench: what one trapped MMIO access costs on the local backend, next to the floor of
// this machine (a bare eventfd ping-pong between two processes), all measured in one run.
//
//   gpuvm-trap-bench --out DIR [--iterations N] [--profile]
//
// Cases (each its own set of processes; this process plays the guest, or the device model for the
// IPC case). All stay up and take turns in short interleaved rounds, so load from the rest of the
// machine falls on every case alike.
//   eventfd ping-pong        two processes, one eventfd each way, blocking reads: the floor
//   unix seqpacket ping-pong the same over a socket pair: the floor of the dm <-> aggregator leg
//   aggregator call alone    IpcAggregatorConnection::Read to an aggregator process (real protocol)
//   trap, dm only            guest -> ioreq slot + eventfd -> device model process (in-process fake
//                            aggregator) -> back: the hypervisor half alone
//   trap via aggregator      guest -> device model process -> IPC -> aggregator process (fake
//                            register file) -> back: the path with a minimal aggregator
//   trap via gpuvm-aggregator the same through the real aggregator (aggregator/: session, pt
//                            virtual GPU, the software GPU's registers): the whole pass-through
//                            path
//   same, no busy poll       the same with busy polling off in the guest (LocalGuestIo) and the
//                            device model (every hop sleeps and wakes): what polling buys, in the
//                            same run
//   gpuvm-aggregator call    IpcAggregatorConnection::Read to the real aggregator alone
//   pvdrm ring round trip    PVDRM's FrontendConnection::Call(GETPARAM) here to a BackendConnection
//                            in another process over the local hypervisor's ring, grants and event
//                            channels (docs/PVDRM.md): request seen, answered, response seen
// For the trap cases, writes and reads of a BAR0 register are timed separately. Output: a table on
// stdout (median and p99 in microseconds, and the median's ratio to the eventfd ping-pong's) and
// DIR/trap.json.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "aggregator/aggregator.h"
#include "aggregator/server.h"
#include "aggregator/sim_gpu.h"
#include "hypervisor/backend.h"
#include "hypervisor/local/domain.h"
#include "hypervisor/local/event_channels.h"
#include "hypervisor/local/grants.h"
#include "hypervisor/local/hv_client.h"
#include "hypervisor/local/hv_daemon.h"
#include "hypervisor/local/store.h"
#include "pvdrm-backend/backend.h"
#include "pvdrm-frontend/frontend.h"
#include "qemu-device/device_model.h"
#include "qemu-device/ipc_aggregator_connection.h"
#include "qemu-device/testing/fake_aggregator.h"
#include "qemu-device/testing/fake_aggregator_server.h"

namespace gpuvm::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kBar0At = 0xf2000000;

constexpr int kRounds = 50;

struct Figures {
  std::string name;
  double median_us = 0;
  double p99_us = 0;
  size_t samples = 0;
};

Figures Summarize(std::string name, std::vector<double> us) {
  std::sort(us.begin(), us.end());
  Figures f;
  f.name = std::move(name);
  f.samples = us.size();
  if (!us.empty()) {
    f.median_us = us[us.size() / 2];
    f.p99_us = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  }
  return f;
}

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "gpuvm-trap-bench: %s\n", what.c_str());
  std::exit(1);
}

// --- the floor
// ---------------------------------------------------------------------------------------

// Two processes, one eventfd each way, blocking reads.
class PingPong {
 public:
  PingPong() {
    ping_ = ::eventfd(0, EFD_CLOEXEC);
    pong_ = ::eventfd(0, EFD_CLOEXEC);
    if (ping_ < 0 || pong_ < 0) Die("eventfd");
    child_ = ::fork();
    if (child_ < 0) Die("fork");
    if (child_ == 0) {
      uint64_t v = 0;
      for (;;) {
        if (::read(ping_, &v, 8) != 8 || v != 1) ::_exit(0);  // anything but 1 means stop
        if (::write(pong_, &v, 8) != 8) ::_exit(1);
      }
    }
  }
  ~PingPong() {
    const uint64_t stop = 2;
    if (::write(ping_, &stop, 8) != 8) ::kill(child_, SIGKILL);
    ::waitpid(child_, nullptr, 0);
    ::close(ping_);
    ::close(pong_);
  }
  double RoundTripMicros() {
    uint64_t v = 1;
    const auto start = Clock::now();
    if (::write(ping_, &v, 8) != 8 || ::read(pong_, &v, 8) != 8) Die("ping-pong");
    return Micros(Clock::now() - start);
  }

 private:
  int ping_ = -1;
  int pong_ = -1;
  pid_t child_ = -1;
};

// PVDRM's ring: a backend process (with the local hypervisor daemon) answering GETPARAM from the
// request, and the frontend in this process. Created before anything of this process starts a
// thread (the child is a copy of a single-threaded process); Connect() once the other rigs have
// forked theirs (the frontend's receiver thread must not be copied into them either).
class PvdrmRing {
 public:
  PvdrmRing() {
    static constexpr hv::DomainId kGuest = 9;
    static int rings = 0;
    path_ = "@gpuvm-trap-bench-hv-" + std::to_string(::getpid()) + "-" + std::to_string(rings++);
    auto domain = hv::local::LocalDomain::Create({kGuest, 16ull << 20, 1});
    if (!domain.ok()) Die("pvdrm domain: " + domain.status().ToString());
    domain_ = std::move(*domain);
    int ready[2];
    if (::pipe2(ready, O_CLOEXEC) != 0) Die("pipe");
    child_ = ::fork();
    if (child_ < 0) Die("fork");
    if (child_ == 0) {
      ::close(ready[0]);
      ServeBackend(ready[1]);
      ::_exit(0);
    }
    ::close(ready[1]);
    char byte = 0;
    if (::read(ready[0], &byte, 1) != 1 || byte != 'r') Die("the pvdrm backend did not start");
    ::close(ready[0]);
  }
  // The frontend (a receiver thread): after every other rig has forked its processes.
  void Connect() {
    static constexpr hv::DomainId kGuest = 9;
    auto sharer = hv::local::LocalGrantSharer::Create(*domain_, domain_->frame_count() - 16, 16);
    auto channels = hv::local::LocalEventChannels::Connect(path_, kGuest);
    auto store = hv::local::LocalStore::Connect(path_, kGuest);
    if (!sharer.ok() || !channels.ok() || !store.ok()) Die("pvdrm frontend's hypervisor port");
    sharer_ = std::move(*sharer);
    pvdrm::FrontendOptions options;
    options.device = {kGuest, hv::kControlDomain, 0};
    auto frontend = pvdrm::FrontendConnection::Connect(*sharer_, std::move(*channels),
                                                       std::move(*store), options);
    if (!frontend.ok()) Die("pvdrm frontend: " + frontend.status().ToString());
    frontend_ = std::move(*frontend);
    if (!frontend_->Call(1, pvdrm::FileOpen{}).ok()) Die("pvdrm FILE_OPEN");
  }
  ~PvdrmRing() {
    if (frontend_ != nullptr) (void)frontend_->Close();  // the backend's Run returns
    frontend_.reset();
    ::waitpid(child_, nullptr, 0);
  }
  double RoundTripMicros() {
    pvdrm::GetParam g;
    g.arg.param = ++n_;
    const auto start = Clock::now();
    Result<pvdrm::Response> r = frontend_->Call(1, g);
    const double us = Micros(Clock::now() - start);
    if (!r.ok() || std::get<drm_nouveau_getparam>(r->body).value != n_ * 3) Die("pvdrm call");
    return us;
  }

 private:
  // Answers from the request itself, so a mixed-up response would show.
  class Echo final : public pvdrm::RequestHandler {
   public:
    pvdrm::Response Handle(const pvdrm::Request& request, pvdrm::GuestPages&) override {
      pvdrm::Response r;
      if (const auto* g = std::get_if<pvdrm::GetParam>(&request.body)) {
        r.body = drm_nouveau_getparam{g->arg.param, g->arg.param * 3};
      }
      return r;
    }
    void OnDisconnect() override {}
  };

  void ServeBackend(int ready) {
    auto daemon = hv::local::LocalHvDaemon::Create(path_);
    if (!daemon.ok() || !(*daemon)->Start().ok()) ::_exit(1);
    auto control = hv::local::LocalHvClient::Connect(path_, hv::kControlDomain);
    if (!control.ok() || !hv::local::RegisterDomain(**control, *domain_).ok()) ::_exit(1);
    auto store = hv::local::LocalStore::Connect(path_, hv::kControlDomain);
    auto channels = hv::local::LocalEventChannels::Connect(path_, hv::kControlDomain);
    if (!store.ok() || !channels.ok()) ::_exit(1);
    const pvdrm::DeviceAddress device{domain_->domid(), hv::kControlDomain, 0};
    if (!pvdrm::AnnounceDevice(**store, device).ok()) ::_exit(1);
    std::shared_ptr<hv::local::LocalHvClient> lookup = std::move(*control);
    hv::local::LocalGrantMapper mapper(hv::kControlDomain, [lookup](hv::DomainId id) {
      return hv::local::AttachDomain(*lookup, id);
    });
    Echo echo;
    pvdrm::BackendOptions options;
    options.device = device;
    auto connection = pvdrm::BackendConnection::Create(mapper, std::move(*channels),
                                                       std::move(*store), echo, options);
    if (!connection.ok()) ::_exit(1);
    if (::write(ready, "r", 1) != 1) ::_exit(1);
    ::close(ready);
    (void)(*connection)->Run(-1);
  }

  std::string path_;
  std::unique_ptr<hv::local::LocalDomain> domain_;
  std::unique_ptr<hv::local::LocalGrantSharer> sharer_;
  std::unique_ptr<pvdrm::FrontendConnection> frontend_;
  pid_t child_ = -1;
  uint64_t n_ = 0;
};

// The same over a unix SOCK_SEQPACKET socket pair: the floor of the device model <-> aggregator
// leg.
class SocketPingPong {
 public:
  SocketPingPong() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) Die("socketpair");
    ours_ = sv[0];
    child_ = ::fork();
    if (child_ < 0) Die("fork");
    if (child_ == 0) {
      ::close(sv[0]);
      char buf[64];
      for (;;) {
        if (::read(sv[1], buf, sizeof(buf)) != 32 || ::write(sv[1], buf, 24) != 24) ::_exit(0);
      }
    }
    ::close(sv[1]);
  }
  ~SocketPingPong() {
    ::close(ours_);  // the child's read returns 0 and it exits
    ::waitpid(child_, nullptr, 0);
  }
  double RoundTripMicros() {
    char buf[64] = {};
    const auto start = Clock::now();
    if (::write(ours_, buf, 32) != 32 || ::read(ours_, buf, sizeof(buf)) != 24) Die("socket ping");
    return Micros(Clock::now() - start);
  }

 private:
  int ours_ = -1;
  pid_t child_ = -1;
};

// Forks a process serving a fake aggregator (it takes any token) that listens on `path` before the
// fork, so a device model can connect at once; returns its pid. `*server` is the parent's copy of
// the listener: keep it alive until the child is gone (destroying it signals the stop eventfd they
// share).
pid_t StartFakeAggregator(const std::string& path,
                          std::unique_ptr<dm::testing::FakeAggregatorServer>* server) {
  auto created = dm::testing::FakeAggregatorServer::Create(path);
  if (!created.ok()) Die(created.status().ToString());
  *server = std::move(*created);
  const pid_t child = ::fork();
  if (child < 0) Die("fork");
  if (child == 0) {
    (*server)->Serve();
    ::_exit(0);
  }
  return child;
}

// Forks a process serving the real gpuvm-aggregator (the software GPU, threaded, no compute
// engine) on `path`; returns its pid once it listens, with a token for domain `domid`'s device
// model (what its control socket would issue). Everything is built in the child, so the GPU's
// engine thread lives where it is used.
pid_t StartRealAggregator(const std::string& path, hv::DomainId domid, ipc::VmToken* token) {
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) Die("pipe");
  const pid_t child = ::fork();
  if (child < 0) Die("fork");
  if (child == 0) {
    ::close(ready[0]);
    aggregator::SimGpuOptions gpu_options;
    gpu_options.vram_bytes = 256ull << 20;
    gpu_options.compute_engine = false;
    auto gpu = aggregator::SimGpu::Create(gpu_options);
    if (!gpu.ok()) ::_exit(20);
    auto core = aggregator::Aggregator::Create(std::move(*gpu));
    if (!core.ok()) ::_exit(21);
    aggregator::ServerOptions options;
    options.path = path;
    options.log = nullptr;
    auto server = aggregator::AggregatorServer::Create(std::move(*core), options);
    if (!server.ok()) ::_exit(22);
    auto issued = (*server)->aggregator().vm_tokens().Issue(domid);
    if (!issued.ok()) ::_exit(24);
    // Listening before the token tells the parent to connect (the server listens from Start()).
    if (!(*server)->Start().ok()) ::_exit(25);
    if (::write(ready[1], issued->data(), issued->size()) != ssize_t(issued->size())) ::_exit(23);
    for (;;) ::pause();  // until the parent kills us
  }
  ::close(ready[1]);
  if (::read(ready[0], token->data(), token->size()) != ssize_t(token->size())) {
    Die("the aggregator process did not start");
  }
  ::close(ready[0]);
  return child;
}

// This process as a device model talking to an aggregator process: the IPC leg of a trap alone.
class AggregatorCall {
 public:
  explicit AggregatorCall(bool real = false) {
    // A name per rig: the previous pass's aggregator may still hold its name while it exits.
    static int rigs = 0;
    const std::string path = "@gpuvm-trap-bench-ipc-" + std::to_string(::getpid()) + "-" +
                             std::to_string(rigs++) + (real ? "-real" : "");
    ipc::VmToken token{};  // the fake takes any
    if (real) {
      child_ = StartRealAggregator(path, 1, &token);
    } else {
      child_ = StartFakeAggregator(path, &server_);
    }
    dm::IpcConnectOptions options;
    options.path = path;
    options.token = token;
    options.vm.domid = 1;
    options.vm.guest_ram_bytes = 16 << 20;
    options.vm.bar0_size = 16 << 20;
    options.vm.bar1_size = 128 << 20;
    options.vm.bar3_size = 64 << 20;
    options.vm.name = "trap-bench-ipc";
    auto connection = dm::IpcAggregatorConnection::Connect(options);
    if (!connection.ok()) Die(connection.status().ToString());
    // The real aggregator drops a session without guest memory at its handshake deadline.
    auto ram = os::CreateSealedMemfd("trap-bench-ram", options.vm.guest_ram_bytes);
    if (!ram.ok()) Die(ram.status().ToString());
    const Status sent = (*connection)
                            ->SendGuestMemory(ipc::GuestMemoryKind::kLocalMemfd,
                                              options.vm.guest_ram_bytes, ram->get());
    if (!sent.ok()) Die(sent.ToString());
    connection_ = std::move(*connection);
  }
  ~AggregatorCall() {
    connection_.reset();
    ::kill(child_, SIGKILL);
    ::waitpid(child_, nullptr, 0);
  }
  double ReadMicros() {
    const auto start = Clock::now();
    if (!connection_->Read(dm::BarIndex::kBar0, 0x1700, 4, 0).ok()) Die("aggregator read");
    return Micros(Clock::now() - start);
  }

 private:
  std::unique_ptr<dm::testing::FakeAggregatorServer> server_;
  std::unique_ptr<dm::IpcAggregatorConnection> connection_;
  pid_t child_ = -1;
};

// --- the trap
// ----------------------------------------------------------------------------------------

// Runs a device model for `domain` (created in `backend` before the fork) until killed: the child
// process of a trap rig. With an empty `aggregator_path` the aggregator is an in-process fake.
[[noreturn]] void RunDeviceModel(hv::Backend& backend, const hv::DomainConfig& domain,
                                 const std::string& aggregator_path, const ipc::VmToken& token,
                                 bool busy_poll) {
  // The defaults, or every hop sleeping.
  const std::chrono::microseconds off(0);
  const std::chrono::microseconds dm_spin = busy_poll ? dm::DeviceModelConfig().busy_poll : off;
  const std::chrono::microseconds lane_spin = busy_poll ? dm::IpcConnectOptions().busy_poll : off;
  auto server = backend.CreateIoreqServer(domain.domid);
  auto memory = backend.OpenGuestMemory(domain.domid);
  if (!server.ok() || !memory.ok()) ::_exit(10);
  std::unique_ptr<dm::AggregatorConnection> aggregator;
  if (aggregator_path.empty()) {
    aggregator = std::make_unique<dm::testing::FakeAggregator>();
  } else {
    dm::IpcConnectOptions options;
    options.path = aggregator_path;
    options.token = token;
    options.vm.domid = domain.domid;
    options.vm.vcpus = domain.vcpus;
    options.vm.guest_ram_bytes = domain.ram_bytes;
    options.vm.bar0_size = 16 << 20;
    options.vm.bar1_size = 128 << 20;
    options.vm.bar3_size = 64 << 20;
    options.vm.name = "trap-bench";
    options.busy_poll = lane_spin;
    auto connection = dm::IpcAggregatorConnection::Connect(options);
    if (!connection.ok()) ::_exit(11);
    Result<int> ram_fd = backend.GuestRamFd(domain.domid);
    if (!ram_fd.ok()) ::_exit(12);
    if (!(*connection)
             ->SendGuestMemory(ipc::GuestMemoryKind::kLocalMemfd, options.vm.guest_ram_bytes,
                               *ram_fd)
             .ok()) {
      ::_exit(13);
    }
    aggregator = std::move(*connection);
  }
  dm::DeviceModelConfig config;
  config.busy_poll = dm_spin;
  auto model = dm::DeviceModel::Create(config, server->get(), aggregator.get(), memory->get());
  if (!model.ok()) ::_exit(12);
  for (;;) {
    if (!(*model)->RunOnce(std::chrono::milliseconds(1000)).ok()) ::_exit(0);
  }
}

// A local VM (this process is its guest) with its device model in a child process, and optionally
// an aggregator in another child speaking the real protocol. The bench measures the local backend's
// trap, so it picks that backend here.
class TrapRig {
 public:
  enum class Aggregator { kNone, kFake, kReal };
  // `busy_poll`: the guest's and the device model's defaults (the guest polls its ioreq slot, the
  // device model the fast lane for the aggregator's reply, before sleeping); off, every hop sleeps
  // and wakes.
  TrapRig(hv::DomainId domid, Aggregator which, bool busy_poll = true) {
    const bool via_aggregator = which != Aggregator::kNone;
    const hv::DomainConfig config{.domid = domid, .ram_bytes = 16 << 20, .vcpus = 1};
    backend_ = hv::OpenBackend(hv::BackendKind::kLocal);
    if (Status created = backend_->CreateDomain(config); !created.ok()) Die(created.ToString());
    std::string path;
    ipc::VmToken token{};  // the fake takes any
    if (via_aggregator) {
      // Listening before the fork, so the device model can connect at once. We keep our copy alive
      // until the child is gone: destroying it would signal the stop eventfd they share.
      path = "@gpuvm-trap-bench-" + std::to_string(::getpid()) + "-" + std::to_string(domid);
      if (which == Aggregator::kReal) {
        aggregator_pid_ = StartRealAggregator(path, domid, &token);
      } else {
        aggregator_pid_ = StartFakeAggregator(path, &aggregator_);
      }
    }
    dm_pid_ = ::fork();
    if (dm_pid_ < 0) Die("fork");
    if (dm_pid_ == 0) RunDeviceModel(*backend_, config, path, token, busy_poll);
    hv::GuestIoOptions guest_options;
    guest_options.timeout = std::chrono::seconds(10);
    guest_options.busy_poll =
        busy_poll ? hv::GuestIoOptions::kDefaultBusyPoll : std::chrono::microseconds(0);
    auto guest = backend_->OpenGuestIo(domid, guest_options);
    if (!guest.ok()) Die(guest.status().ToString());
    io_ = std::move(*guest);
    // Enumerate like firmware: wait for the device, program BAR0, turn on memory decoding.
    for (int i = 0; i < 5000 && !io_->IsPciClaimed(dm::kDefaultSbdf); ++i) {
      int status = 0;
      if (::waitpid(dm_pid_, &status, WNOHANG) == dm_pid_) {
        Die("the device model process exited with status " + std::to_string(WEXITSTATUS(status)));
      }
      ::usleep(1000);
    }
    if (!io_->IsPciClaimed(dm::kDefaultSbdf)) Die("the device model did not come up");
    if (!io_->ConfigWrite(0, dm::kDefaultSbdf, dm::kPciBar0, 4, kBar0At).ok() ||
        !io_->ConfigWrite(0, dm::kDefaultSbdf, dm::kPciCommand, 2, dm::kCommandMemory).ok()) {
      Die("programming BAR0 failed");
    }
  }
  ~TrapRig() {
    ::kill(dm_pid_, SIGKILL);
    ::waitpid(dm_pid_, nullptr, 0);
    if (aggregator_pid_ > 0) {
      ::kill(aggregator_pid_, SIGKILL);
      ::waitpid(aggregator_pid_, nullptr, 0);
    }
  }
  double WriteMicros(uint32_t value) {
    const auto start = Clock::now();
    if (!io_->Write(0, kBar0At + 0x1700, 4, value).ok()) Die("trapped write failed");
    last_ = value;
    return Micros(Clock::now() - start);
  }
  double ReadMicros() {
    const auto start = Clock::now();
    auto value = io_->Read(0, kBar0At + 0x1700, 4);
    const double us = Micros(Clock::now() - start);
    if (!value.ok() || *value != last_) Die("trapped read returned wrong data");
    return us;
  }

 private:
  std::unique_ptr<hv::Backend> backend_;  // holds the domain
  std::unique_ptr<dm::testing::FakeAggregatorServer> aggregator_;
  std::unique_ptr<hv::GuestIo> io_;
  pid_t aggregator_pid_ = -1;
  pid_t dm_pid_ = -1;
  uint32_t last_ = 0;
};

// One pass: every rig up, the cases taking turns in short interleaved rounds so load from the rest
// of the machine falls on every case alike (a sequential run on a busy 2-core machine compares
// apples to noise). Rigs are created here, so processes forked for them inherit the caller's CPU
// affinity.
std::vector<Figures> RunPass(int iterations) {
  PvdrmRing pvdrm_ring;  // first: its backend is forked while we have no thread
  PingPong ping_pong;
  SocketPingPong socket_ping_pong;
  AggregatorCall aggregator_call;
  AggregatorCall real_aggregator_call(/*real=*/true);
  TrapRig dm_only(1, TrapRig::Aggregator::kNone);
  TrapRig via_aggregator(2, TrapRig::Aggregator::kFake);
  TrapRig via_real(3, TrapRig::Aggregator::kReal);
  TrapRig via_real_sleeping(5, TrapRig::Aggregator::kReal, /*busy_poll=*/false);
  pvdrm_ring.Connect();
  // Cases 0-4 take one sample each (slots 0-4); cases 5-8 a rig's write and read (slots 5-12).
  constexpr int kSingleCases = 5;
  const std::function<double()> single[kSingleCases] = {
      [&] { return ping_pong.RoundTripMicros(); },
      [&] { return socket_ping_pong.RoundTripMicros(); },
      [&] { return aggregator_call.ReadMicros(); },
      [&] { return real_aggregator_call.ReadMicros(); },
      [&] { return pvdrm_ring.RoundTripMicros(); }};
  constexpr int kRigCases = 4;
  TrapRig* const rigs[kRigCases] = {&dm_only, &via_aggregator, &via_real, &via_real_sleeping};
  constexpr int kCases = kSingleCases + kRigCases;
  const int per_round = std::max(1, iterations / kRounds);
  // What each slot of `samples` measures, in the order of the report.
  static constexpr const char* kSlotNames[] = {"eventfd ping-pong (floor)",
                                               "unix seqpacket ping-pong",
                                               "aggregator call alone (fake)",
                                               "aggregator call alone (real)",
                                               "pvdrm ring round trip",
                                               "trap, dm only, write",
                                               "trap, dm only, read",
                                               "trap via fake aggregator, write",
                                               "trap via fake aggregator, read",
                                               "trap via gpuvm-aggregator, write",
                                               "trap via gpuvm-aggregator, read",
                                               "same, no busy poll, write",
                                               "same, no busy poll, read"};
  static_assert(std::size(kSlotNames) == kSingleCases + 2 * kRigCases);
  std::vector<std::vector<double>> samples(std::size(kSlotNames));
  for (int round = -1; round < kRounds; ++round) {  // round -1 warms everything up
    for (int c = 0; c < kCases; ++c) {
      const int which = (c + round + kRounds) % kCases;  // rotate who goes first
      for (int i = 0; i < per_round; ++i) {
        const uint32_t value = static_cast<uint32_t>(round * per_round + i) & 0xffffff;
        const bool keep = round >= 0;
        auto add = [&](int slot, double us) {
          if (keep) samples[slot].push_back(us);
        };
        if (which < kSingleCases) {
          add(which, single[which]());
        } else {
          TrapRig& rig = *rigs[which - kSingleCases];
          const int slot = kSingleCases + 2 * (which - kSingleCases);
          add(slot, rig.WriteMicros(value));
          add(slot + 1, rig.ReadMicros());
        }
      }
    }
  }
  std::vector<Figures> all;
  for (size_t slot = 0; slot < samples.size(); ++slot) {
    all.push_back(Summarize(kSlotNames[slot], samples[slot]));
  }
  return all;
}

// --profile: only the whole pass-through path (guest -> device model -> gpuvm-aggregator), for
// perf or strace -c to look at without the other cases' processes in the picture.
int Profile(int iterations) {
  const char* env = std::getenv("GPUVM_TRAP_PROFILE");  // "dm", "sleep", "dm-sleep"; else real
  const std::string which = env != nullptr ? env : "";
  TrapRig rig(4,
              which.rfind("dm", 0) == 0 ? TrapRig::Aggregator::kNone : TrapRig::Aggregator::kReal,
              which.find("sleep") == std::string::npos);
  std::vector<double> us;
  for (int i = 0; i < iterations; ++i) {
    us.push_back(rig.WriteMicros(static_cast<uint32_t>(i) & 0xffffff));
    us.push_back(rig.ReadMicros());
  }
  const Figures f = Summarize("trap via gpuvm-aggregator", std::move(us));
  std::printf("%s: %zu traps, median %.2f us, p99 %.2f us\n", f.name.c_str(), f.samples,
              f.median_us, f.p99_us);
  return 0;
}

std::string Revision() {
  std::string rev = "unknown";
  if (FILE* p = ::popen("git rev-parse --short HEAD 2>/dev/null", "r")) {
    char buf[64] = {};
    if (std::fgets(buf, sizeof(buf), p) != nullptr) {
      rev = buf;
      while (!rev.empty() && (rev.back() == '\n' || rev.back() == '\r')) rev.pop_back();
    }
    ::pclose(p);
  }
  return rev;
}

int Main(int argc, char** argv) {
  std::string out = ".";
  int iterations = 20000;
  bool profile = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--profile") {
      profile = true;
    } else if (flag == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (flag == "--iterations" && i + 1 < argc) {
      iterations = std::max(100, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: gpuvm-trap-bench --out DIR [--iterations N] [--profile]\n");
      return 2;
    }
  }
  if (profile) return Profile(iterations);
  // Two placements. Free: the scheduler puts the processes where it likes (cross-CPU wakeups, whose
  // cost on a VM depends on whether the other vCPU was idle — expect run-to-run swings). One CPU:
  // all processes pinned to the CPU we started on, every hop a context switch on it — steadier, and
  // the same rule for the floor and the trap.
  std::vector<std::pair<std::string, std::vector<Figures>>> passes;
  passes.emplace_back("free placement", RunPass(iterations));
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(std::max(0, ::sched_getcpu()), &one);
  if (::sched_setaffinity(0, sizeof(one), &one) == 0) {
    passes.emplace_back("one CPU", RunPass(iterations));
  }
  const std::string revision = Revision();
  std::ofstream json(out + "/trap.json");
  json << "{\n  \"benchmark\": \"gpuvm-trap-bench\",\n  \"revision\": \"" << revision
       << "\",\n  \"passes\": [\n";
  for (size_t p = 0; p < passes.size(); ++p) {
    const auto& [placement, all] = passes[p];
    const double floor = all[0].median_us;
    std::printf(
        "gpuvm-trap-bench (revision %s, local backend, %s: %zu samples per case in %d "
        "interleaved rounds)\n",
        revision.c_str(), placement.c_str(), all[0].samples, kRounds);
    std::printf("%-34s %12s %12s %14s\n", "case", "median us", "p99 us", "median/floor");
    for (const Figures& f : all) {
      std::printf("%-34s %12.2f %12.2f %14.2f\n", f.name.c_str(), f.median_us, f.p99_us,
                  floor > 0 ? f.median_us / floor : 0.0);
    }
    std::printf("\n");
    json << "    {\"placement\": \"" << placement << "\", \"samples\": " << all[0].samples
         << ", \"cases\": [\n";
    for (size_t i = 0; i < all.size(); ++i) {
      json << "      {\"name\": \"" << all[i].name << "\", \"median_us\": " << all[i].median_us
           << ", \"p99_us\": " << all[i].p99_us
           << ", \"median_over_floor\": " << (floor > 0 ? all[i].median_us / floor : 0.0) << "}"
           << (i + 1 < all.size() ? "," : "") << "\n";
    }
    json << "    ]}" << (p + 1 < passes.size() ? "," : "") << "\n";
  }
  json << "  ]\n}\n";
  if (!json) {
    std::fprintf(stderr, "gpuvm-trap-bench: could not write %s/trap.json\n", out.c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace gpuvm::bench

int main(int argc, char** argv) { return gpuvm::bench::Main(argc, argv); }
