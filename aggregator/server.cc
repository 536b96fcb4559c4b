#include "aggregator/server.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <vector>

#include "ipc/channel.h"
#include "ipc/codec.h"

namespace gpuvm::aggregator {
namespace {

// epoll tags: connection id << 2 | kind. Id 0 is the server's own descriptors.
enum Kind : uint64_t { kSocket = 0, kLane = 1, kWatch = 2 };
enum ServerFd : uint64_t { kListen = 0, kStop = 1, kInterrupt = 2 };
uint64_t Tag(uint64_t id, uint64_t kind) { return id << 2 | kind; }

// Connections accepted per wakeup of the listening socket: the pending ones accepted in one go
// are read (their HELLO and AUTH) before the next batch can push any of them out.
constexpr int kAcceptsPerWakeup = 8;

std::vector<uint8_t> FatalError(const Status& why) {
  ipc::Error e{why.code(), ""};
  for (char ch : why.message().substr(0, ipc::kMaxErrorText)) {
    e.text.push_back(ch >= 0x20 && ch <= 0x7e ? ch : '?');
  }
  Result<std::vector<uint8_t>> bytes = ipc::Encode(ipc::Message{0, std::move(e)});
  return bytes.ok() ? std::move(*bytes) : std::vector<uint8_t>();
}

}  // namespace

struct AggregatorServer::Connection {
  Connection(uint64_t id, os::UniqueFd socket, const os::PeerCredentials& peer,
             Aggregator* aggregator)
      : id(id),
        peer(peer),
        channel(std::move(socket)),
        session(std::make_unique<Session>(
            aggregator, "connection " + std::to_string(id) + " (" + DescribePeer(peer) + ")")),
        step_started(std::chrono::steady_clock::now()) {}

  const uint64_t id;
  const os::PeerCredentials peer;
  ipc::Channel channel;
  std::unique_ptr<Session> session;
  // When the handshake's current step began (the accept, then each answer that moved it on): the
  // deadline is the peer's to keep, not our admission's, which may take long (a Xen domain's
  // memory mapped under TCG).
  std::chrono::steady_clock::time_point step_started;
  bool dropped = false;
};

AggregatorServer::AggregatorServer(std::unique_ptr<Aggregator> aggregator,
                                   const ServerOptions& options)
    : aggregator_(std::move(aggregator)), options_(options) {}

Result<std::unique_ptr<AggregatorServer>> AggregatorServer::Create(
    std::unique_ptr<Aggregator> aggregator, const ServerOptions& options) {
  if (aggregator == nullptr) return Status::InvalidArgument("no aggregator");
  std::unique_ptr<AggregatorServer> s(new AggregatorServer(std::move(aggregator), options));
  s->allowed_uids_ = options.allowed_uids;
  if (s->allowed_uids_.empty()) s->allowed_uids_ = {::geteuid(), 0};
  // Bound now, listening from Start()/Run(): gpuvm-aggregator's main creates the control socket
  // after this, and a client that can connect here must find that one too (gpuvm-vm asks it for
  // the VM's token right after).
  GPUVM_ASSIGN_OR_RETURN(s->listen_, os::BindSeqpacket(options.path));
  if (options.socket_group) {
    GPUVM_RETURN_IF_ERROR(os::ShareSocketWithGroup(options.path, *options.socket_group));
  }
  GPUVM_ASSIGN_OR_RETURN(s->stop_, os::CreateEventFd());
  s->epoll_ = os::UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!s->epoll_.valid()) return Status::FromErrno(errno, "epoll_create1");
  const std::pair<int, uint64_t> fds[] = {{s->listen_.get(), EPOLLIN},
                                          {s->stop_.get(), EPOLLIN},
                                          {s->aggregator_->interrupt_fd(), EPOLLIN | EPOLLET}};
  for (uint64_t i = 0; i < 3; ++i) {
    epoll_event ev{};
    ev.events = static_cast<uint32_t>(fds[i].second);
    ev.data.u64 = Tag(0, i);
    if (::epoll_ctl(s->epoll_.get(), EPOLL_CTL_ADD, fds[i].first, &ev) != 0) {
      return Status::FromErrno(errno, "epoll_ctl");
    }
  }
  return s;
}

AggregatorServer::~AggregatorServer() {
  Stop();
  if (thread_.joinable()) thread_.join();
  connections_.clear();  // sessions close: VMs removed before the aggregator goes
}

Status AggregatorServer::Start() {
  GPUVM_RETURN_IF_ERROR(os::StartListening(listen_.get()));
  thread_ = std::thread([this] {
    os::NameThisThread("gpuvm-agg-loop");
    Status s = Run();
    if (!s.ok()) Log(LogLevel::kError, {}, "server stopped: " + s.ToString());
  });
  return Status::Ok();
}

Status AggregatorServer::AddWatch(int fd, std::function<void()> on_readable) {
  const uint64_t id = watches_.size() + 1;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = Tag(id, kWatch);
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    return Status::FromErrno(errno, "epoll_ctl (watch)");
  }
  watches_[id] = std::move(on_readable);
  return Status::Ok();
}

void AggregatorServer::Stop() {
  if (stop_.valid()) (void)os::SignalEventFd(stop_.get());
}

void AggregatorServer::Log(LogLevel level, const std::string& fields, const std::string& msg) {
  WriteLogLine(options_.log, "gpuvm-aggregator", LogEvent(level, fields, msg));
}

Status AggregatorServer::Run() {
  GPUVM_RETURN_IF_ERROR(os::StartListening(listen_.get()));  // again after Start(): harmless
  Log(LogLevel::kInfo, {}, "serving " + aggregator_->gpu().Describe() + " on " + options_.path);
  for (;;) {
    bool handshaking = false;
    for (const auto& [id, c] : connections_) handshaking |= !c->session->established();
    epoll_event events[32];
    const int n = ::epoll_wait(epoll_.get(), events, 32, handshaking ? 250 : -1);
    if (n < 0 && errno != EINTR) return Status::FromErrno(errno, "epoll_wait");
    bool stopping = false;
    bool accepting = false;
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      const uint64_t id = tag >> 2;
      if (id != 0 && (tag & 3) == kWatch) {  // id 0: the server's own fds (kInterrupt is 2 too)
        if (auto w = watches_.find(id); w != watches_.end()) w->second();
        continue;
      }
      if (id == 0) {
        switch (tag & 3) {
          case kListen:
            accepting = true;  // after this batch's reads: see kAcceptsPerWakeup
            break;
          case kStop:
            stopping = true;
            break;
          case kInterrupt:
            ForwardInterrupts();
            break;
        }
        continue;
      }
      auto it = connections_.find(id);
      if (it == connections_.end() || it->second->dropped) continue;  // closed in this batch
      if ((tag & 3) == kLane) {
        ServeLane(*it->second);
      } else {
        ServeSocket(*it->second);
      }
    }
    if (accepting) Accept();
    ExpireHandshakes();
    ReapClosed();
    if (stopping) break;
  }
  for (auto& [id, c] : connections_) {
    if (c->session->state() == Session::State::kActive) {
      Send(*c, c->session->Teardown(ipc::TeardownReason::kAggregatorExit));
    }
    Drop(*c, "the aggregator is exiting");
  }
  ReapClosed();
  return Status::Ok();
}

bool AggregatorServer::MayConnect(const os::PeerCredentials& peer) const {
  if (options_.socket_group && os::PeerInGroup(peer, *options_.socket_group)) return true;
  return std::find(allowed_uids_.begin(), allowed_uids_.end(), peer.uid) != allowed_uids_.end();
}

void AggregatorServer::LogRefusal(const std::function<std::string()>& line) {
  refusal_log_.Note(0, "refused or dropped connections", line);
}

void AggregatorServer::Accept() {
  for (int i = 0; i < kAcceptsPerWakeup; ++i) {
    os::UniqueFd socket(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!socket.valid()) return;  // nothing more, the peer gave up, or out of descriptors
    Result<os::PeerCredentials> peer = os::PeerCredentialsOf(socket.get());
    if (!peer.ok() || !MayConnect(*peer)) {
      ++refused_peers_;
      std::string rule = "this aggregator serves root only";
      if (allowed_uids_.size() != 2 || allowed_uids_[0] != 0) {
        rule = "this aggregator serves uid";
        for (uid_t uid : allowed_uids_) rule += " " + std::to_string(uid);
      }
      if (options_.socket_group) rule += " and group " + std::to_string(*options_.socket_group);
      const std::string who =
          peer.ok() ? "uid " + std::to_string(peer->uid) : std::string("an unknown peer");
      const Status why =
          Status::PermissionDenied(who + " may not connect: " + rule + " (docs/SECURITY.md)");
      os::SendPartingMessage(socket.get(), FatalError(why));
      LogRefusal([&] {
        return "refused " + (peer.ok() ? DescribePeer(*peer) : std::string("a peer")) + ": " +
               why.message();
      });
      continue;
    }
    size_t authenticated = 0;
    for (const auto& [id, c] : connections_) {
      authenticated += !c->dropped && c->session->authenticated();
    }
    if (authenticated >= options_.max_connections) {
      ++refused_peers_;
      const Status why = Status::ResourceExhausted(std::to_string(authenticated) +
                                                   " device models are connected already");
      os::SendPartingMessage(socket.get(), FatalError(why));
      LogRefusal([&] { return "refused " + DescribePeer(*peer) + ": " + why.message(); });
      continue;
    }
    EvictPending();
    const uint64_t id = next_connection_++;
    auto c = std::make_unique<Connection>(id, std::move(socket), *peer, aggregator_.get());
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = Tag(id, kSocket);
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c->channel.fd(), &ev) != 0) continue;
    ++accepted_;
    Connection& added = *c;
    connections_[id] = std::move(c);
    // A device model sends HELLO and AUTH right after connecting: often they are here already.
    ServeSocket(added);
  }
}

void AggregatorServer::EvictPending() {
  std::map<uid_t, size_t> pending_of;
  size_t pending = 0;
  for (const auto& [id, c] : connections_) {
    if (c->dropped || c->session->authenticated()) continue;
    ++pending_of[c->peer.uid];
    ++pending;
  }
  if (pending < options_.max_pending) return;
  // The user holding the most pending connections loses its oldest: floods push out their own.
  uid_t most = 0;
  size_t most_count = 0;
  for (const auto& [uid, count] : pending_of) {
    if (count > most_count) {
      most = uid;
      most_count = count;
    }
  }
  for (auto& [id, c] : connections_) {  // ids ascend with accept time: the first is the oldest
    if (c->dropped || c->session->authenticated() || c->peer.uid != most) continue;
    ++evicted_pending_;
    // (Named again: clang before 16 cannot capture a structured binding.)
    LogRefusal([&, &conn = c] {
      return conn->session->peer() + ": dropped before authenticating: " + std::to_string(pending) +
             " connections wait to authenticate";
    });
    DropTelling(*c, Status::ResourceExhausted(
                        "dropped before authenticating: " + std::to_string(pending) +
                        " newer connections wait to; a device model sends HELLO and AUTH at once"));
    return;
  }
}

void AggregatorServer::Send(Connection& c, const ipc::Message& message) {
  if (c.dropped) return;
  // Non-blocking: a device model that stops reading its socket must not stall everyone else.
  Status sent = c.channel.Send(message);
  if (!sent.ok()) Drop(c, "cannot send to the device model: " + sent.ToString());
}

void AggregatorServer::ServeSocket(Connection& c) {
  for (int i = 0; i < options_.burst && !c.dropped; ++i) {
    Result<ipc::Channel::Received> received = c.channel.Receive(0);
    if (!received.ok()) {
      const Status& s = received.status();
      if (s.code() == StatusCode::kDeadlineExceeded) return;  // nothing more queued
      if (s.code() == StatusCode::kDataLoss) {
        // A malformed packet: say why (fatal), then hang up.
        (void)c.channel.Send(
            ipc::Message{0, ipc::Error{StatusCode::kDataLoss, "malformed packet"}});
        Drop(c, "malformed packet: " + s.message());
      } else {
        Drop(c, "device model disconnected");
      }
      return;
    }
    const int step = c.session->handshake_step();
    Session::Output out = c.session->OnMessage(received->message, std::move(received->fds));
    if (c.session->handshake_step() != step) c.step_started = std::chrono::steady_clock::now();
    // BAR requests an access caused go before its reply, so the device model has them when the
    // reply comes and applies them before the guest's access completes (docs/IPC.md).
    SendBarRequests(c);
    for (const ipc::Message& m : out.send) Send(c, m);
    if (out.lane_opened && !c.dropped) {
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLET;
      ev.data.u64 = Tag(c.id, kLane);
      const int doorbell = c.session->lane()->doorbell(ipc::FastLane::Side::kAggregator);
      if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, doorbell, &ev) != 0) {
        Drop(c, "cannot watch the fast lane");
        return;
      }
      ServeLane(c);  // anything rung before we watched
    }
    if (out.close) {
      Drop(c, c.session->close_reason());
      return;
    }
  }
}

void AggregatorServer::ServeLane(Connection& c) {
  ipc::FastLane* lane = c.session->lane();
  while (!c.dropped && lane != nullptr) {
    Result<std::optional<ipc::Message>> m = lane->TryReceive(ipc::FastLane::Side::kAggregator);
    if (!m.ok()) {
      Drop(c, "fast lane: " + m.status().ToString());
      return;
    }
    if (!m->has_value()) return;
    Result<ipc::Message> reply = c.session->OnLaneMessage(**m);
    if (!reply.ok()) {
      (void)c.channel.Send(ipc::Message{
          0, ipc::Error{reply.status().code(), reply.status().message().substr(0, 200)}});
      Drop(c, "fast lane: " + reply.status().ToString());
      return;
    }
    SendBarRequests(c);  // before the reply, as on the socket
    if (c.dropped) return;
    Status sent = lane->Send(ipc::FastLane::Side::kAggregator, *reply);
    if (!sent.ok()) {
      Drop(c, "fast lane: " + sent.ToString());
      return;
    }
  }
}

void AggregatorServer::SendBarRequests(Connection& c) {
  if (c.dropped) return;
  for (const Session::Request& r : c.session->TakeBarRequests()) {
    const int fds[1] = {r.fd};
    Status sent =
        c.channel.Send(r.message, r.fd >= 0 ? std::span<const int>(fds) : std::span<const int>());
    if (!sent.ok()) {
      Drop(c, "cannot send to the device model: " + sent.ToString());
      return;
    }
  }
}

void AggregatorServer::ForwardInterrupts() {
  for (auto& [id, c] : connections_) {
    if (c->dropped) continue;
    if (std::optional<ipc::Message> m = c->session->InterruptUpdate()) Send(*c, *m);
  }
}

void AggregatorServer::DropTelling(Connection& c, const Status& why) {
  if (c.dropped) return;
  os::SendPartingMessage(c.channel.fd(), FatalError(why));
  Drop(c, why.ToString());
}

void AggregatorServer::Drop(Connection& c, const std::string& why) {
  if (c.dropped) return;
  c.dropped = true;
  c.session->Close(why);  // no-op when the session closed itself; removes the VM otherwise
  const Session::Summary& summary = c.session->summary();
  if (!summary.had_vm) {
    LogRefusal([&] {
      return c.session->peer() + ": closed before a VM was admitted (" + c.session->close_reason() +
             ")";
    });
    return;
  }
  const VmCounters& k = summary.counters;
  const Status& reset = c.session->teardown_status();
  char counts[256];
  std::snprintf(counts, sizeof(counts), "BAR0/1/3 reads %llu/%llu/%llu writes %llu/%llu/%llu",
                (unsigned long long)k.reads[0], (unsigned long long)k.reads[1],
                (unsigned long long)k.reads[2], (unsigned long long)k.writes[0],
                (unsigned long long)k.writes[1], (unsigned long long)k.writes[2]);
  Log(reset.ok() ? LogLevel::kInfo : LogLevel::kError, summary.log_fields,
      summary.vm + ": session ended (" + c.session->close_reason() + "); " + counts + ", " +
          DescribeRefusals(summary.refusals) + ", interrupt changes " +
          std::to_string(k.interrupts) + "; " +
          (reset.ok() ? "GPU reset (" + std::to_string(aggregator_->gpu().resets()) + " so far)"
                      : "GPU RESET FAILED: " + reset.ToString()));
  if (!summary.detail.empty()) Log(LogLevel::kInfo, summary.log_fields, summary.detail);
}

void AggregatorServer::ExpireHandshakes() {
  const auto now = std::chrono::steady_clock::now();
  for (auto& [id, c] : connections_) {
    if (!c->dropped && !c->session->established() &&
        now - c->step_started > options_.handshake_timeout) {
      DropTelling(*c, Status::DeadlineExceeded(
                          "no handshake step (HELLO, AUTH, VM_CONFIG, GUEST_MEMORY) within " +
                          std::to_string(options_.handshake_timeout.count()) + " ms"));
    }
  }
}

void AggregatorServer::ReapClosed() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->second->dropped) {
      it = connections_.erase(it);  // closes the socket (and the lane, with the session)
    } else {
      ++it;
    }
  }
}

}  // namespace gpuvm::aggregator
