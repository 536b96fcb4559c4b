// The local hypervisor daemon: the local backend's stand-in for what Xen and xenstored provide to
// the several processes of a run (VM processes, their gpuvm-dm, the aggregator, backends):
//   - the store: one tree of keys with watches, shared by every process (LocalStore is its client);
//   - the domain registry: the process that creates a local VM registers its LocalDomain
//   descriptors
//     here; dom0 processes (the device model, a backend mapping grants) attach to them by domain
//     id;
//   - the event-channel broker: allocating an unbound port makes a pair of eventfds, binding hands
//   the
//     other ends to the peer (LocalEventChannels is its client).
// It serves a unix SOCK_SEQPACKET socket (hv_protocol.h) from one thread, either inside a process
// (Start(), as tests and the launcher do) or as the program gpuvm-local-hvd.
//
// Trust: only the daemon's own user and root may connect (SO_PEERCRED, checked on accept; anyone
// else gets a reply with seq 0 and PermissionDenied, then the connection closes: the local backend
// has no other user boundary, docs/SECURITY.md). Clients declare their domain id in Hello; the
// local backend is not a security boundary between processes of one user (docs/HYPERVISOR.md). A
// connection that has not said Hello within hello_timeout is closed (told so), and at most
// max_pending such connections exist — a new one pushes out the oldest — so idle connections
// cannot fill the max_clients slots the VMs need. Still, every message is parsed as untrusted,
// non-dom0 clients may only write the store below /local/domain/<id>/ and may not touch the domain
// registry, quotas bound what one client can allocate, and a client that sends garbage or stops
// reading its events is disconnected (its watches, ports and registered domains go with it).
//
// Threading: Start/Stop/~ from the owner thread; Stop is also safe from any thread or signal-free
// context. All state is owned by the serving thread.
#ifndef GPUVM_HYPERVISOR_LOCAL_HV_DAEMON_H_
#define GPUVM_HYPERVISOR_LOCAL_HV_DAEMON_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/rate_limited_log.h"
#include "base/os.h"
#include "base/status.h"
#include "hypervisor/local/domain.h"
#include "hypervisor/local/hv_protocol.h"

namespace gpuvm::hv::local {

struct HvDaemonLimits {
  size_t max_clients = 256;
  size_t max_pending = 16;  // connections that have not said Hello yet
  std::chrono::milliseconds hello_timeout = std::chrono::seconds(5);
  size_t max_store_nodes = 65536;
  size_t max_watches_per_client = 256;
  uint32_t max_ports_per_domain = 4096;
  // Who may connect; empty: the daemon's effective uid and root.
  std::vector<uid_t> allowed_uids;
};

class LocalHvDaemon {
 public:
  static Result<std::unique_ptr<LocalHvDaemon>> Create(const std::string& socket_path,
                                                       HvDaemonLimits limits = {});
  ~LocalHvDaemon();

  const std::string& path() const { return path_; }
  // Where refused and dropped peers are noted (at most 10 lines a second); before Start()/Run().
  void set_log(std::function<void(const std::string&)> log) { log_ = std::move(log); }
  // Serves on a background thread until Stop() or destruction.
  Status Start();
  // Serves on the calling thread until Stop().
  Status Run();
  void Stop();

 private:
  struct Client;
  struct Port;
  LocalHvDaemon() = default;

  void Accept();
  // Tells a client why with a reply of seq 0 (its Call returns that status), then drops it.
  void DropTelling(Client& client, const Status& why);
  // Closes clients that did not say Hello in time; true while some have not yet.
  bool ExpirePending();
  // Handles one message; a non-OK result disconnects the client.
  Status Serve(Client& client);
  Status Dispatch(Client& client, const HvMessage& message, std::vector<os::UniqueFd>& fds);
  Status Reply(Client& client, uint32_t seq, const Status& status,
               std::span<const uint8_t> results = {}, std::span<const int> fds = {});
  void Drop(Client& client);

  Status CheckStoreWrite(const Client& client, const std::string& path) const;
  Status StoreWrite(const std::string& path, const std::string& value);
  Status StoreRemove(const std::string& path);
  void FireWatches(const std::string& changed, bool removal);
  void SendWatchEvent(Client& client, const std::string& path, const std::string& token);

  std::string path_;
  HvDaemonLimits limits_;
  std::function<void(const std::string&)> log_;
  // Refused and dropped clients: ten lines, then one summary a second while they keep coming.
  RateLimitedLog refusal_log_{[this](const std::string& line) {
                                if (log_) log_(line);
                              },
                              {.burst = 10,
                               .interval = std::chrono::seconds(1),
                               .refill_after = std::chrono::seconds(1)}};
  void LogRefusal(const std::string& line);
  os::UniqueFd listen_;
  os::UniqueFd stop_;
  std::thread thread_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::map<std::string, std::string> nodes_;
  std::map<DomainId, std::pair<Client*, std::unique_ptr<LocalDomain>>> domains_;
  std::map<std::pair<DomainId, uint32_t>, std::unique_ptr<Port>> ports_;
};

}  // namespace gpuvm::hv::local

#endif  // GPUVM_HYPERVISOR_LOCAL_HV_DAEMON_H_
