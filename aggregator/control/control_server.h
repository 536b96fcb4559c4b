// The aggregator's control socket: a unix SOCK_SEQPACKET listener (path: the aggregator's socket
// path + "-control", see protocol.h) that answers control requests through a ControlService.
//
// Only a peer running as the aggregator's own user or as root is served (SO_PEERCRED): on the
// abstract namespace anyone on the host can connect, and shares are the operator's business. A
// request that is too long, or a peer that does not read its reply, loses its connection; at most
// `max_clients` are connected at once (more are closed on accept).
//
// It owns an epoll descriptor of its own (fd()) that becomes readable when there is something to
// do; the aggregator's server loop watches it (AggregatorServer::AddWatch) and calls Serve() on its
// thread, so the service reads the aggregator's VMs on the thread that owns them.
//
// Threading: Serve() and the destructor on one thread (the aggregator's server thread).
#ifndef GPUVM_AGGREGATOR_CONTROL_CONTROL_SERVER_H_
#define GPUVM_AGGREGATOR_CONTROL_CONTROL_SERVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "aggregator/control/service.h"
#include "base/os.h"

namespace gpuvm::control {

class ControlServer {
 public:
  static Result<std::unique_ptr<ControlServer>> Create(const std::string& path,
                                                       ControlService* service,
                                                       size_t max_clients = 16);
  ~ControlServer();

  int fd() const { return epoll_.get(); }
  const std::string& path() const { return path_; }
  // Accepts, reads and answers whatever is ready, without blocking.
  void Serve();

  uint64_t requests() const { return requests_; }
  uint64_t refused_peers() const { return refused_peers_; }

 private:
  ControlServer(std::string path, ControlService* service, size_t max_clients)
      : path_(std::move(path)), service_(service), max_clients_(max_clients) {}
  void Accept();
  void ServeClient(int fd);
  void Close(int fd);

  const std::string path_;
  ControlService* const service_;
  const size_t max_clients_;
  os::UniqueFd listen_;
  os::UniqueFd epoll_;
  std::map<int, os::UniqueFd> clients_;
  uint64_t requests_ = 0;
  uint64_t refused_peers_ = 0;
};

}  // namespace gpuvm::control

#endif  // GPUVM_AGGREGATOR_CONTROL_CONTROL_SERVER_H_
