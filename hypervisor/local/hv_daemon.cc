#include "hypervisor/local/hv_daemon.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "hypervisor/store.h"

namespace gpuvm::hv::local {

struct LocalHvDaemon::Client {
  os::UniqueFd fd;
  os::PeerCredentials peer;
  std::chrono::steady_clock::time_point accepted;
  std::optional<DomainId> domid;
  std::vector<std::pair<std::string, std::string>> watches;  // (path, token)
  bool dead = false;
};

// One end of an event channel, in the namespace of the owner's domain.
struct LocalHvDaemon::Port {
  Client* owner = nullptr;
  DomainId remote = 0;
  bool bound = false;
  // Held by the daemon only while the port is unbound, to hand to the peer that binds.
  os::UniqueFd to_remote;    // the owner writes, the peer reads
  os::UniqueFd from_remote;  // the peer writes, the owner reads
};

namespace {

constexpr size_t kMaxTokenLength = 256;

bool AtOrBelow(const std::string& path, const std::string& base) {
  if (base == "/") return true;
  return path.size() >= base.size() && path.compare(0, base.size(), base) == 0 &&
         (path.size() == base.size() || path[base.size()] == '/');
}

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Result<std::unique_ptr<LocalHvDaemon>> LocalHvDaemon::Create(const std::string& socket_path,
                                                             HvDaemonLimits limits) {
  std::unique_ptr<LocalHvDaemon> d(new LocalHvDaemon());
  d->path_ = socket_path;
  d->limits_ = limits;
  if (d->limits_.allowed_uids.empty()) d->limits_.allowed_uids = {::geteuid(), 0};
  GPUVM_ASSIGN_OR_RETURN(d->listen_, os::ListenSeqpacket(socket_path));
  GPUVM_ASSIGN_OR_RETURN(d->stop_, os::CreateEventFd());
  d->nodes_["/"] = "";
  return d;
}

LocalHvDaemon::~LocalHvDaemon() {
  Stop();
  if (thread_.joinable()) thread_.join();
}

Status LocalHvDaemon::Start() {
  if (thread_.joinable()) return Status::FailedPrecondition("daemon already started");
  thread_ = std::thread([this] { (void)Run(); });
  return Status::Ok();
}

void LocalHvDaemon::Stop() {
  if (stop_.valid()) (void)os::SignalEventFd(stop_.get());
}

Status LocalHvDaemon::Run() {
  for (;;) {
    std::vector<pollfd> polled = {{stop_.get(), POLLIN, 0}, {listen_.get(), POLLIN, 0}};
    std::vector<Client*> order;
    for (auto& c : clients_) {
      polled.push_back({c->fd.get(), POLLIN, 0});
      order.push_back(c.get());
    }
    const bool pending = ExpirePending();
    if (::poll(polled.data(), polled.size(), pending ? 250 : -1) < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "hv daemon poll");
    }
    if (polled[0].revents & POLLIN) return Status::Ok();
    for (size_t i = 0; i < order.size(); ++i) {
      if (order[i]->dead || !(polled[i + 2].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (!Serve(*order[i]).ok()) order[i]->dead = true;
    }
    if (polled[1].revents & POLLIN) Accept();
    for (auto& c : clients_) {
      if (c->dead) Drop(*c);
    }
    std::erase_if(clients_, [](const std::unique_ptr<Client>& c) { return c->dead; });
  }
}

void LocalHvDaemon::Accept() {
  for (int i = 0; i < 16; ++i) {
    os::UniqueFd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd.valid()) return;
    Result<os::PeerCredentials> peer = os::PeerCredentialsOf(fd.get());
    const auto& allowed = limits_.allowed_uids;
    if (!peer.ok() || std::find(allowed.begin(), allowed.end(), peer->uid) == allowed.end()) {
      const Status why = Status::PermissionDenied(
          (peer.ok() ? "uid " + std::to_string(peer->uid) : std::string("a peer")) +
          " may not use this local hypervisor daemon: it serves uid " +
          std::to_string(::geteuid()) + " and root (docs/SECURITY.md)");
      os::SendPartingMessage(fd.get(), EncodeHvReply(0, why));
      LogRefusal("refused " + (peer.ok() ? os::DescribePeer(*peer) : std::string("a peer")) + ": " +
                 why.message());
      continue;
    }
    size_t pending = 0;
    Client* oldest_pending = nullptr;
    for (auto& c : clients_) {
      if (c->dead || c->domid) continue;
      ++pending;
      if (oldest_pending == nullptr || c->accepted < oldest_pending->accepted) {
        oldest_pending = c.get();
      }
    }
    if (pending >= limits_.max_pending && oldest_pending != nullptr) {
      DropTelling(*oldest_pending,
                  Status::ResourceExhausted("dropped before hello: newer connections wait"));
    }
    size_t live = 0;
    for (auto& c : clients_) live += !c->dead;
    if (live >= limits_.max_clients) {
      os::SendPartingMessage(fd.get(),
                         EncodeHvReply(0, Status::ResourceExhausted(std::to_string(live) +
                                                                    " clients are connected")));
      continue;
    }
    auto client = std::make_unique<Client>();
    client->fd = std::move(fd);
    client->peer = *peer;
    client->accepted = std::chrono::steady_clock::now();
    clients_.push_back(std::move(client));
  }
}

void LocalHvDaemon::LogRefusal(const std::string& line) {
  refusal_log_.Note(0, "refused or dropped clients", [&] { return line; });
}

void LocalHvDaemon::DropTelling(Client& client, const Status& why) {
  if (client.dead) return;
  LogRefusal("dropped " + os::DescribePeer(client.peer) + ": " + why.message());
  os::SendPartingMessage(client.fd.get(), EncodeHvReply(0, why));
  client.dead = true;
}

bool LocalHvDaemon::ExpirePending() {
  const auto now = std::chrono::steady_clock::now();
  bool waiting = false;
  for (auto& c : clients_) {
    if (c->dead || c->domid) continue;
    if (now - c->accepted >= limits_.hello_timeout) {
      DropTelling(*c,
                  Status::DeadlineExceeded("no hello within " +
                                           std::to_string(limits_.hello_timeout.count()) + " ms"));
    } else {
      waiting = true;
    }
  }
  return waiting;
}

void LocalHvDaemon::Drop(Client& client) {
  for (auto it = domains_.begin(); it != domains_.end();) {
    it = it->second.first == &client ? domains_.erase(it) : std::next(it);
  }
  for (auto it = ports_.begin(); it != ports_.end();) {
    it = it->second->owner == &client ? ports_.erase(it) : std::next(it);
  }
  client.watches.clear();
  client.fd.Reset();
}

Status LocalHvDaemon::Serve(Client& client) {
  Result<os::ReceivedMessage> received = os::ReceiveWithFds(client.fd.get(), kHvMaxMessage, true);
  if (!received.ok()) {
    if (received.status().code() == StatusCode::kDeadlineExceeded) return Status::Ok();
    return received.status();
  }
  GPUVM_ASSIGN_OR_RETURN(HvMessage message, ParseHvMessage(received->bytes));
  return Dispatch(client, message, received->fds);
}

Status LocalHvDaemon::Reply(Client& client, uint32_t seq, const Status& status,
                            std::span<const uint8_t> results, std::span<const int> fds) {
  const std::vector<uint8_t> bytes = EncodeHvReply(seq, status, results);
  return os::SendWithFds(client.fd.get(), bytes, fds);
}

void LocalHvDaemon::SendWatchEvent(Client& client, const std::string& path,
                                   const std::string& token) {
  if (client.dead) return;
  HvWriter w;
  w.Str(path).Str(token);
  const std::vector<uint8_t> payload = w.Take();
  const std::vector<uint8_t> bytes = EncodeHvMessage(HvOp::kWatchEvent, 0, payload);
  // The socket is non-blocking: a client that lets its events pile up until the socket buffer is
  // full is not reading them, and is disconnected rather than allowed to stall everyone.
  if (!os::SendWithFds(client.fd.get(), bytes, {}).ok()) client.dead = true;
}

void LocalHvDaemon::FireWatches(const std::string& changed, bool removal) {
  for (auto& c : clients_) {
    for (const auto& [path, token] : c->watches) {
      if (AtOrBelow(changed, path)) {
        SendWatchEvent(*c, changed, token);
      } else if (removal && AtOrBelow(path, changed)) {
        SendWatchEvent(*c, path, token);  // a watched node went away with its ancestor
      }
    }
  }
}

Status LocalHvDaemon::CheckStoreWrite(const Client& client, const std::string& path) const {
  if (*client.domid == kControlDomain) return Status::Ok();
  const std::string own = "/local/domain/" + std::to_string(*client.domid);
  if (AtOrBelow(path, own)) return Status::Ok();
  return Status::PermissionDenied("domain " + std::to_string(*client.domid) + " may not write " +
                                  path);
}

Status LocalHvDaemon::StoreWrite(const std::string& path, const std::string& value) {
  std::vector<std::string> missing;
  for (std::string p = path; p != "/" && !nodes_.contains(p); p = Parent(p)) missing.push_back(p);
  if (nodes_.size() + missing.size() > limits_.max_store_nodes) {
    return Status::ResourceExhausted("store is full");
  }
  for (const std::string& p : missing) nodes_[p] = "";
  nodes_[path] = value;
  FireWatches(path, false);
  return Status::Ok();
}

Status LocalHvDaemon::StoreRemove(const std::string& path) {
  if (path == "/") return Status::InvalidArgument("cannot remove the store's root");
  auto it = nodes_.find(path);
  if (it == nodes_.end()) return Status::NotFound(path + " does not exist");
  const std::string prefix = path + "/";
  it = nodes_.erase(it);
  while (it != nodes_.end() && it->first.compare(0, prefix.size(), prefix) == 0) {
    it = nodes_.erase(it);
  }
  FireWatches(path, true);
  return Status::Ok();
}

Status LocalHvDaemon::Dispatch(Client& client, const HvMessage& message,
                               std::vector<os::UniqueFd>& fds) {
  const uint32_t seq = message.header.seq;
  const auto op = static_cast<HvOp>(message.header.op);
  HvReader in(message.payload);
  const Status malformed = Status::DataLoss("malformed hv request");

  if (!client.domid) {
    if (op != HvOp::kHello) return Status::FailedPrecondition("first message must be hello");
    std::optional<uint16_t> domid = in.U16();
    if (!domid || !in.Done()) return malformed;
    client.domid = *domid;
    return Reply(client, seq, Status::Ok());
  }
  const DomainId self = *client.domid;

  switch (op) {
    case HvOp::kStoreRead:
    case HvOp::kStoreRemove:
    case HvOp::kStoreList: {
      std::optional<std::string> path = in.Str(kMaxStorePathLength);
      if (!path || !in.Done()) return malformed;
      if (Status valid = ValidateStorePath(*path); !valid.ok()) return Reply(client, seq, valid);
      if (op == HvOp::kStoreRemove) {
        if (Status allowed = CheckStoreWrite(client, *path); !allowed.ok()) {
          return Reply(client, seq, allowed);
        }
        return Reply(client, seq, StoreRemove(*path));
      }
      auto it = nodes_.find(*path);
      if (it == nodes_.end())
        return Reply(client, seq, Status::NotFound(*path + " does not exist"));
      HvWriter out;
      if (op == HvOp::kStoreRead) {
        out.Str(it->second);
      } else {
        const std::string prefix = *path == "/" ? "/" : *path + "/";
        std::vector<std::string> children;
        for (auto c = nodes_.upper_bound(prefix);
             c != nodes_.end() && c->first.compare(0, prefix.size(), prefix) == 0; ++c) {
          const std::string rest = c->first.substr(prefix.size());
          if (!rest.empty() && rest.find('/') == std::string::npos) children.push_back(rest);
        }
        out.U32(static_cast<uint32_t>(children.size()));
        for (const std::string& child : children) out.Str(child);
      }
      const std::vector<uint8_t> results = out.Take();
      return Reply(client, seq, Status::Ok(), results);
    }
    case HvOp::kStoreWrite: {
      std::optional<std::string> path = in.Str(kMaxStorePathLength);
      std::optional<std::string> value = in.Str(kMaxStoreValueLength);
      if (!path || !value || !in.Done()) return malformed;
      Status status = ValidateStorePath(*path);
      if (status.ok()) status = CheckStoreWrite(client, *path);
      if (status.ok()) status = StoreWrite(*path, *value);
      return Reply(client, seq, status);
    }
    case HvOp::kStoreWatch:
    case HvOp::kStoreUnwatch: {
      std::optional<std::string> path = in.Str(kMaxStorePathLength);
      std::optional<std::string> token = in.Str(kMaxTokenLength);
      if (!path || !token || !in.Done()) return malformed;
      if (Status valid = ValidateStorePath(*path); !valid.ok()) return Reply(client, seq, valid);
      auto it =
          std::find(client.watches.begin(), client.watches.end(), std::make_pair(*path, *token));
      if (op == HvOp::kStoreUnwatch) {
        if (it == client.watches.end()) {
          return Reply(client, seq, Status::NotFound("no such watch on " + *path));
        }
        client.watches.erase(it);
        return Reply(client, seq, Status::Ok());
      }
      if (it != client.watches.end()) {
        return Reply(client, seq, Status::AlreadyExists("watch already set on " + *path));
      }
      if (client.watches.size() >= limits_.max_watches_per_client) {
        return Reply(client, seq, Status::ResourceExhausted("too many watches"));
      }
      client.watches.emplace_back(*path, *token);
      GPUVM_RETURN_IF_ERROR(Reply(client, seq, Status::Ok()));
      SendWatchEvent(client, *path, *token);  // xenstore fires a new watch once
      return Status::Ok();
    }
    case HvOp::kDomainRegister: {
      if (self != kControlDomain) {
        return Reply(client, seq, Status::PermissionDenied("only dom0 registers domains"));
      }
      Result<std::unique_ptr<LocalDomain>> domain =
          LocalDomain::FromWire(in.rest(), std::move(fds));
      if (!domain.ok()) return Reply(client, seq, domain.status());
      const DomainId id = (*domain)->domid();
      if (id == kControlDomain || domains_.contains(id)) {
        return Reply(client, seq,
                     Status::AlreadyExists("domain " + std::to_string(id) + " already exists"));
      }
      domains_[id] = {&client, std::move(*domain)};
      return Reply(client, seq, Status::Ok());
    }
    case HvOp::kDomainAttach:
    case HvOp::kDomainUnregister: {
      std::optional<uint16_t> id = in.U16();
      if (!id || !in.Done()) return malformed;
      if (self != kControlDomain) {
        return Reply(client, seq, Status::PermissionDenied("only dom0 attaches to domains"));
      }
      auto it = domains_.find(*id);
      if (it == domains_.end()) {
        return Reply(client, seq, Status::NotFound("no local domain " + std::to_string(*id)));
      }
      if (op == HvOp::kDomainUnregister) {
        if (it->second.first != &client) {
          return Reply(client, seq, Status::PermissionDenied("domain registered by someone else"));
        }
        domains_.erase(it);
        return Reply(client, seq, Status::Ok());
      }
      const std::vector<uint8_t> header = it->second.second->EncodeHeader();
      const std::vector<int> domain_fds = it->second.second->fds();
      return Reply(client, seq, Status::Ok(), header, domain_fds);
    }
    case HvOp::kEvtchnAllocUnbound:
    case HvOp::kEvtchnBind: {
      std::optional<uint16_t> remote = in.U16();
      std::optional<uint32_t> remote_port;
      if (op == HvOp::kEvtchnBind) remote_port = in.U32();
      if (!remote || (op == HvOp::kEvtchnBind && !remote_port) || !in.Done()) return malformed;
      Port* peer = nullptr;
      if (op == HvOp::kEvtchnBind) {
        auto it = ports_.find({*remote, *remote_port});
        if (it == ports_.end() || it->second->bound || it->second->remote != self) {
          return Reply(client, seq,
                       Status::NotFound("no unbound port " + std::to_string(*remote_port) +
                                        " of domain " + std::to_string(*remote) + " for us"));
        }
        peer = it->second.get();
      }
      uint32_t port = 1;
      while (port <= limits_.max_ports_per_domain && ports_.contains({self, port})) ++port;
      if (port > limits_.max_ports_per_domain) {
        return Reply(client, seq, Status::ResourceExhausted("no free event channel port"));
      }
      auto entry = std::make_unique<Port>();
      entry->owner = &client;
      entry->remote = *remote;
      int handed[2];
      if (peer == nullptr) {
        GPUVM_ASSIGN_OR_RETURN(entry->to_remote, os::CreateEventFd());
        GPUVM_ASSIGN_OR_RETURN(entry->from_remote, os::CreateEventFd());
        handed[0] = entry->to_remote.get();    // we notify through it
        handed[1] = entry->from_remote.get();  // we wait on it
      } else {
        entry->bound = true;
        handed[0] = peer->from_remote.get();
        handed[1] = peer->to_remote.get();
      }
      HvWriter out;
      out.U32(port);
      const std::vector<uint8_t> results = out.Take();
      Status sent = Reply(client, seq, Status::Ok(), results, handed);
      if (peer != nullptr) {
        peer->bound = true;
        peer->to_remote.Reset();  // both ends have their descriptors now
        peer->from_remote.Reset();
      }
      ports_[{self, port}] = std::move(entry);
      return sent;
    }
    case HvOp::kEvtchnClose: {
      std::optional<uint32_t> port = in.U32();
      if (!port || !in.Done()) return malformed;
      auto it = ports_.find({self, *port});
      if (it == ports_.end() || it->second->owner != &client) {
        return Reply(client, seq,
                     Status::NotFound("no port " + std::to_string(*port) + " of ours"));
      }
      ports_.erase(it);
      return Reply(client, seq, Status::Ok());
    }
    case HvOp::kHello:
      return Status::FailedPrecondition("hello twice");
    case HvOp::kReply:
    case HvOp::kWatchEvent:
      break;
  }
  return Status::DataLoss("unknown hv op " + std::to_string(message.header.op));
}

}  // namespace gpuvm::hv::local
