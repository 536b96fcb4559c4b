// The aggregator's control socket: a unix SOCK_SEQPACKET listener (path: the aggregator's socket
// path + "-control", see protocol.h) that answers control requests through a ControlService.
//
// Only a peer running as the aggregator's own user or as root is served (SO_PEERCRED): on the
// abstract namespace anyone on the host can connect, and shares (and VM tokens, docs/SECURITY.md)
// are the operator's business. A refused peer gets `error PermissionDenied: ...` and its queued
// request is discarded before the close, so it reads that reply instead of a reset. A request that
// is too long, or a peer that does not read its reply, loses its connection. At most `max_clients`
// are connected at once; when all slots are taken, a new client takes the slot of the one idle
// longest (and a client idle for `idle_timeout` is closed whenever the socket is served), so idle
// connections — of any user allowed in — can never lock the operator out. A new client's request
// is answered at once when it is already there (gpuvm-ctl sends right after connecting).
//
// It owns an epoll descriptor of its own (fd()) that becomes readable when there is something to
// do; the aggregator's server loop watches it (AggregatorServer::AddWatch) and calls Serve() on its
// thread, so the service reads the aggregator's VMs on the thread that owns them.
//
// Threading: Serve() and the destructor on one thread (the aggregator's server thread).
#ifndef GPUVM_AGGREGATOR_CONTROL_CONTROL_SERVER_H_
#define GPUVM_AGGREGATOR_CONTROL_CONTROL_SERVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "aggregator/control/service.h"
#include "base/log.h"
#include "base/os.h"
#include "base/rate_limited_log.h"

namespace gpuvm::control {

struct ControlServerOptions {
  size_t max_clients = 16;
  std::chrono::milliseconds idle_timeout = std::chrono::seconds(10);
  // Refused peers, at most 10 lines a second; empty: nowhere.
  std::function<void(const std::string&)> log;
  // Members of this group may control the aggregator too (its user and root always may); a
  // filesystem socket is made theirs, mode 0660 (docs/SECURITY.md).
  std::optional<gid_t> group;
};

class ControlServer {
 public:
  static Result<std::unique_ptr<ControlServer>> Create(const std::string& path,
                                                       ControlService* service,
                                                       ControlServerOptions options = {});
  ~ControlServer();

  int fd() const { return epoll_.get(); }
  const std::string& path() const { return path_; }
  // Accepts, reads and answers whatever is ready, without blocking.
  void Serve();

  uint64_t requests() const { return requests_; }
  uint64_t refused_peers() const { return refused_peers_; }
  // Clients closed to make room for a new one, or for being idle.
  uint64_t evicted_clients() const { return evicted_clients_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Client {
    os::UniqueFd fd;
    Clock::time_point last_active;
  };
  ControlServer(std::string path, ControlService* service, ControlServerOptions options)
      : path_(std::move(path)), service_(service), options_(std::move(options)) {}
  void Accept();
  void ServeClient(int fd);
  void Close(int fd);
  // Closes clients idle past options_.idle_timeout, and when all slots are still taken the one idle
  // longest.
  void MakeRoom();

  const std::string path_;
  ControlService* const service_;
  const ControlServerOptions options_;
  // Refused peers: ten lines, then one summary a second while they keep coming.
  RateLimitedLog refusal_log_{
      [this](const std::string& line) {
        if (options_.log) options_.log(LogEvent(LogLevel::kWarn, {}, line));
      },
      {.burst = 10, .interval = std::chrono::seconds(1), .refill_after = std::chrono::seconds(1)}};
  os::UniqueFd listen_;
  os::UniqueFd epoll_;
  std::map<int, Client> clients_;
  uint64_t requests_ = 0;
  uint64_t refused_peers_ = 0;
  uint64_t evicted_clients_ = 0;
};

}  // namespace gpuvm::control

#endif  // GPUVM_AGGREGATOR_CONTROL_CONTROL_SERVER_H_
