#include "aggregator/control/control_server.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace gpuvm::control {
namespace {

constexpr uint64_t kListenTag = ~uint64_t{0};

}  // namespace

Result<std::unique_ptr<ControlServer>> ControlServer::Create(const std::string& path,
                                                             ControlService* service,
                                                             ControlServerOptions options) {
  if (service == nullptr) return Status::InvalidArgument("control server needs a service");
  if (options.max_clients == 0) {
    return Status::InvalidArgument("control server needs a client slot");
  }
  std::unique_ptr<ControlServer> s(new ControlServer(path, service, std::move(options)));
  GPUVM_ASSIGN_OR_RETURN(s->listen_, os::BindSeqpacket(path));
  if (s->options_.group) GPUVM_RETURN_IF_ERROR(os::ShareSocketWithGroup(path, *s->options_.group));
  GPUVM_RETURN_IF_ERROR(os::StartListening(s->listen_.get()));
  s->epoll_ = os::UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!s->epoll_.valid()) return Status::FromErrno(errno, "epoll_create1");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenTag;
  if (::epoll_ctl(s->epoll_.get(), EPOLL_CTL_ADD, s->listen_.get(), &ev) != 0) {
    return Status::FromErrno(errno, "epoll_ctl");
  }
  return s;
}

ControlServer::~ControlServer() {
  if (!path_.empty() && path_[0] != '@' && listen_.valid()) ::unlink(path_.c_str());
}

void ControlServer::Serve() {
  epoll_event events[16];
  const int n = ::epoll_wait(epoll_.get(), events, 16, 0);
  bool accepting = false;
  // Requests first, then new clients: a client with its request in cannot be pushed out by them.
  for (int i = 0; i < n; ++i) {
    if (events[i].data.u64 == kListenTag) {
      accepting = true;
    } else {
      ServeClient(static_cast<int>(events[i].data.u64));
    }
  }
  if (accepting) Accept();
}

void ControlServer::MakeRoom() {
  const Clock::time_point now = Clock::now();
  std::vector<int> idle;
  for (const auto& [fd, client] : clients_) {
    if (now - client.last_active >= options_.idle_timeout) idle.push_back(fd);
  }
  for (int fd : idle) {
    ++evicted_clients_;
    Close(fd);
  }
  if (clients_.size() < options_.max_clients) return;
  auto oldest = clients_.begin();
  for (auto it = clients_.begin(); it != clients_.end(); ++it) {
    if (it->second.last_active < oldest->second.last_active) oldest = it;
  }
  ++evicted_clients_;
  Close(oldest->first);
}

void ControlServer::Accept() {
  for (int i = 0; i < 16; ++i) {
    os::UniqueFd client(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!client.valid()) return;
    Result<os::PeerCredentials> peer = os::PeerCredentialsOf(client.get());
    const bool member = peer.ok() && options_.group && os::PeerInGroup(*peer, *options_.group);
    if (!peer.ok() || (peer->uid != ::geteuid() && peer->uid != 0 && !member)) {
      ++refused_peers_;
      const Status why = Status::PermissionDenied(
          (peer.ok() ? "uid " + std::to_string(peer->uid) : std::string("an unknown peer")) +
          " may not control this aggregator: only its user (uid " + std::to_string(::geteuid()) +
          (options_.group ? "), members of group " + std::to_string(*options_.group) : ")") +
          " or root may");
      refusal_log_.Note(0, "refused peers", [&] {
        return "refused " + (peer.ok() ? DescribePeer(*peer) : std::string("a peer")) + ": " +
               why.message();
      });
      const std::string reply = FormatReply(Reply{why, ""});
      os::SendPartingMessage(
          client.get(), std::span(reinterpret_cast<const uint8_t*>(reply.data()), reply.size()));
      continue;  // closed
    }
    MakeRoom();
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = static_cast<uint64_t>(client.get());
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, client.get(), &ev) != 0) continue;
    const int fd = client.get();
    clients_[fd] = Client{std::move(client), Clock::now()};
    ServeClient(fd);  // its request may be here already
  }
}

void ControlServer::Close(int fd) {
  (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  clients_.erase(fd);
}

void ControlServer::ServeClient(int fd) {
  auto client = clients_.find(fd);
  if (client == clients_.end()) return;
  char buffer[kMaxRequestBytes + 1];
  // MSG_TRUNC: the real length of a message longer than the buffer, so it is refused, not cut.
  const ssize_t got = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT | MSG_TRUNC);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (got <= 0) {
    Close(fd);  // closed by the peer (or an error)
    return;
  }
  client->second.last_active = Clock::now();
  ++requests_;
  std::string reply;
  if (static_cast<size_t>(got) > kMaxRequestBytes) {
    reply = FormatReply(Reply{Status::InvalidArgument("request longer than " +
                                                      std::to_string(kMaxRequestBytes) + " bytes"),
                              ""});
  } else {
    reply = service_->Handle(std::string_view(buffer, static_cast<size_t>(got)));
  }
  if (reply.size() > kMaxReplyBytes) {
    reply = FormatReply(Reply{Status::ResourceExhausted("reply too long"), ""});
  }
  const ssize_t sent = ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (sent != static_cast<ssize_t>(reply.size())) Close(fd);  // not reading: no waiting for it
}

}  // namespace gpuvm::control
