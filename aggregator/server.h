// gpuvm-aggregator's event loop: accepts device models on a unix SOCK_SEQPACKET socket
// (docs/IPC.md), runs one Session per connection, moves MMIO through the fast lanes, forwards the
// GPU's interrupt line to the VMs, and drops connections that stall their handshake.
//
// Who may connect (docs/SECURITY.md): the peer's credentials (SO_PEERCRED) are checked on accept —
// only the aggregator's own user and root, as on the control socket; anyone else gets a fatal
// ERROR PermissionDenied naming the rule and is closed (logged, at most 10 lines a second). A
// connection then authenticates with its VM's one-time token (session.h) before anything is
// charged to it. Until it has (`pending`), a connection is cheap to hold and cheap to lose: at
// most max_pending exist, and a new one pushes out the oldest pending connection of the user that
// holds the most (each told why), so idle or half-open connections can neither lock admission out
// nor push out another user's. Every step of the handshake (HELLO, AUTH, VM_CONFIG, GUEST_MEMORY)
// must come within handshake_timeout of the previous one's answer (of the accept, for HELLO), else
// the connection is told and dropped — with its VM, if it was admitted. Accepting
// never waits for a peer: at most 8 connections per wakeup, each read at once if its HELLO and
// AUTH are already there, and every socket is non-blocking.
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

#include <sys/types.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/aggregator.h"
#include "aggregator/session.h"
#include "base/log.h"
#include "base/os.h"
#include "base/rate_limited_log.h"

namespace gpuvm::aggregator {

struct ServerOptions {
  std::string path;  // the listening socket (see ipc::DefaultAggregatorSocketPath)
  // Authenticated connections (the aggregator admits at most AggregatorOptions::max_vms VMs).
  size_t max_connections = 64;
  // Connections not yet authenticated (see the file comment).
  size_t max_pending = 16;
  // Each step of the handshake (HELLO, AUTH, VM_CONFIG, GUEST_MEMORY) must come within this of the
  // previous answer, else the connection is dropped: an idle, slow or silent peer holds no slot,
  // channels or VRAM for longer.
  std::chrono::milliseconds handshake_timeout = std::chrono::seconds(5);
  // Who may connect; empty: the aggregator's effective uid and root.
  std::vector<uid_t> allowed_uids;
  // --socket-group: its members may connect too, and a filesystem socket is made theirs (mode
  // 0660, docs/SECURITY.md); the control socket follows (ControlPlane).
  std::optional<gid_t> socket_group;
  // At most this many socket messages of one connection per wakeup (the others get their turn).
  int burst = 16;
  FILE* log = stderr;  // one line per session event (base/log.h's format); nullptr: quiet
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
  const std::optional<gid_t>& socket_group() const { return options_.socket_group; }
  // Sessions ever accepted / currently open (read on the owner thread, or after Stop).
  uint64_t sessions_accepted() const { return accepted_; }
  // Connections refused for their credentials, and pending ones pushed out by newer ones.
  uint64_t refused_peers() const { return refused_peers_; }
  uint64_t evicted_pending() const { return evicted_pending_; }

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
  // Drop, after telling the peer why with a fatal ERROR (seq 0).
  void DropTelling(Connection& c, const Status& why);
  // Makes room for one more pending connection, if need be by dropping one.
  void EvictPending();
  bool MayConnect(const os::PeerCredentials& peer) const;
  // At most 10 refusal lines a second; true when this one may be logged.
  void LogRefusal(const std::function<std::string()>& line);
  void ReapClosed();
  void ExpireHandshakes();
  // One line (base/log.h); `fields` start with the VM's (VmControlBlock::LogFields) when it is
  // about a VM.
  void Log(LogLevel level, const std::string& fields, const std::string& msg);

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
  uint64_t refused_peers_ = 0;
  uint64_t evicted_pending_ = 0;
  std::vector<uid_t> allowed_uids_;
  // Refused and dropped peers: ten lines, then one summary a second while they keep coming.
  RateLimitedLog refusal_log_{
      [this](const std::string& line) { Log(LogLevel::kWarn, {}, line); },
      {.burst = 10, .interval = std::chrono::seconds(1), .refill_after = std::chrono::seconds(1)}};
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_SERVER_H_
