// A connection to the local hypervisor daemon (hv_daemon.h), and the domain-registry calls on it.
//
// Threading: one owner thread per connection.
#ifndef GPUVM_HYPERVISOR_LOCAL_HV_CLIENT_H_
#define GPUVM_HYPERVISOR_LOCAL_HV_CLIENT_H_

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/os.h"
#include "hypervisor/local/domain.h"
#include "hypervisor/local/hv_protocol.h"
#include "hypervisor/store.h"

namespace gpuvm::hv::local {

class LocalHvClient {
 public:
  // Connects and says hello as domain `self`. Unavailable when no daemon listens at `path`.
  static Result<std::unique_ptr<LocalHvClient>> Connect(const std::string& path, DomainId self);

  DomainId self() const { return self_; }

  struct Reply {
    std::vector<uint8_t> results;  // the op-specific part after the status
    std::vector<os::UniqueFd> fds;
  };
  // Sends a request and waits for its reply (watch events arriving meanwhile are queued). A non-OK
  // status in the reply comes back as this call's error.
  Result<Reply> Call(HvOp op, std::span<const uint8_t> payload, std::span<const int> fds = {});

  // Polls readable when a watch event may be waiting: an epoll set of the socket and of an eventfd
  // that is signalled while events wait in our queue (an event that arrives during Call() is queued
  // and would not make the socket readable again).
  int fd() const { return epoll_.get(); }
  // The next watch event, or nullopt. Non-blocking.
  Result<std::optional<WatchEvent>> PollEvent();
  bool has_queued_events() const { return !events_.empty(); }

 private:
  LocalHvClient() = default;
  Status QueueEvent(std::span<const uint8_t> payload);

  DomainId self_ = 0;
  os::UniqueFd socket_;
  os::UniqueFd queued_;
  os::UniqueFd epoll_;
  uint32_t next_seq_ = 1;
  std::deque<WatchEvent> events_;
  std::chrono::milliseconds timeout_ = std::chrono::seconds(10);
};

// Domain registry (dom0 clients only).
Status RegisterDomain(LocalHvClient& client, const LocalDomain& domain);
Status UnregisterDomain(LocalHvClient& client, DomainId domid);
Result<std::shared_ptr<const LocalDomain>> AttachDomain(LocalHvClient& client, DomainId domid);

}  // namespace gpuvm::hv::local

#endif  // GPUVM_HYPERVISOR_LOCAL_HV_CLIENT_H_
