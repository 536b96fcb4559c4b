// gpuvm-aggregator's event loop: accepts device models on a unix SOCK_SEQPACKET socket
// (docs/IPC.md), runs one Session per connection, moves MMIO through the fast lanes, forwards the
// GPU's interrupt line to the VMs, and drops connections that stall their handshake.
//
// One thread does all of it (Run(), or Start() for a background thread). A trapped access costs
// that thread one epoll_wait and one eventfd write (the lane's doorbells are edge-triggered and
// never read back), which is the least a separate process can cost; GPU work itself runs on the
// device's own threads. A device model that disconnects — cleanly, by crashing, or killed — is
// seen as a closed socket: its session closes and its VM is removed (pt: the GPU is reset) before
// the next message of anyone is handled.
//
// Threading: Run/Start on the owner thread; Stop() from any thread (also a signal handler's
// thread: it only writes an eventfd).
#ifndef GPUVM_AGGREGATOR_SERVER_H_
#define GPUVM_AGGREGATOR_SERVER_H_

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "aggregator/aggregator.h"
#include "aggregator/session.h"
#include "base/os.h"

namespace gpuvm::aggregator {

struct ServerOptions {
  std::string path;  // the listening socket (see ipc::DefaultAggregatorSocketPath)
  size_t max_connections = 64;
  // A connection that has not been admitted (HELLO + VM_CONFIG answered) by then is dropped, so an
  // idle or slow peer cannot hold a connection slot.
  std::chrono::milliseconds handshake_timeout = std::chrono::seconds(5);
  // At most this many socket messages of one connection per wakeup (the others get their turn).
  int burst = 16;
  FILE* log = stderr;  // one line per session event; nullptr: quiet
};

class AggregatorServer {
 public:
  static Result<std::unique_ptr<AggregatorServer>> Create(std::unique_ptr<Aggregator> aggregator,
                                                          const ServerOptions& options);
  ~AggregatorServer();

  // Serves until Stop(); then tears every session down (TEARDOWN to each device model, each VM
  // removed).
  Status Run();
  Status Start();  // Run() on a background thread
  void Stop();

  // Calls `on_readable` on the server thread whenever `fd` is readable (level-triggered), e.g. the
  // control socket's own epoll descriptor (aggregator/control/). Before Run()/Start() only; the fd
  // must outlive the server's use of it.
  Status AddWatch(int fd, std::function<void()> on_readable);

  Aggregator& aggregator() { return *aggregator_; }
  const std::string& path() const { return options_.path; }
  // Sessions ever accepted / currently open (read on the owner thread, or after Stop).
  uint64_t sessions_accepted() const { return accepted_; }

 private:
  struct Connection;
  AggregatorServer(std::unique_ptr<Aggregator> aggregator, const ServerOptions& options);

  void Accept();
  void ServeSocket(Connection& c);
  void ServeLane(Connection& c);
  // BAR remap requests the VM's virtual GPU queued while serving (always on the socket).
  void SendBarRequests(Connection& c);
  void ForwardInterrupts();
  void Send(Connection& c, const ipc::Message& message);
  void Drop(Connection& c, const std::string& why);
  void ReapClosed();
  void ExpireHandshakes();
  void Log(const char* format, ...) __attribute__((format(printf, 2, 3)));

  std::unique_ptr<Aggregator> aggregator_;
  const ServerOptions options_;
  os::UniqueFd listen_;
  os::UniqueFd stop_;
  os::UniqueFd epoll_;
  std::thread thread_;
  std::map<uint64_t, std::unique_ptr<Connection>> connections_;
  std::map<uint64_t, std::function<void()>> watches_;  // AddWatch, by id
  uint64_t next_connection_ = 1;
  uint64_t accepted_ = 0;
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_SERVER_H_
