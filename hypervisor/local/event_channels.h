// Local backend of EventChannels: each channel is a pair of eventfds, brokered by the local
// hypervisor daemon (hv_daemon.h) — AllocUnbound creates the pair, BindInterdomain hands the peer
// its ends. Our fd() is an epoll set of the eventfds we wait on, registered one-shot, which gives
// Xen's "masked until unmasked" behaviour: a port that fired is not reported again until Unmask()
// re-arms it, and notifications meanwhile accumulate in the eventfd and fire on re-arm.
//
// Threading: one owner thread, as EventChannels.
#ifndef GPUVM_HYPERVISOR_LOCAL_EVENT_CHANNELS_H_
#define GPUVM_HYPERVISOR_LOCAL_EVENT_CHANNELS_H_

#include <map>
#include <memory>

#include "hypervisor/event_channels.h"
#include "hypervisor/local/hv_client.h"

namespace gpuvm::hv::local {

class LocalEventChannels : public EventChannels {
 public:
  static Result<std::unique_ptr<LocalEventChannels>> Connect(const std::string& daemon_path,
                                                             DomainId self);
  ~LocalEventChannels() override;

  Result<EvtchnPort> AllocUnbound(DomainId remote) override;
  Result<EvtchnPort> BindInterdomain(DomainId remote, EvtchnPort remote_port) override;
  Status Unbind(EvtchnPort local) override;
  Status Notify(EvtchnPort local) override;
  int fd() const override { return epoll_.get(); }
  Result<std::optional<EvtchnPort>> Pending() override;
  Status Unmask(EvtchnPort local) override;

 private:
  struct Channel {
    os::UniqueFd notify;  // we write
    os::UniqueFd wait;    // we read
  };
  LocalEventChannels() = default;
  Result<EvtchnPort> Adopt(LocalHvClient::Reply reply);

  std::unique_ptr<LocalHvClient> client_;
  os::UniqueFd epoll_;
  std::map<EvtchnPort, Channel> channels_;
};

}  // namespace gpuvm::hv::local

#endif  // GPUVM_HYPERVISOR_LOCAL_EVENT_CHANNELS_H_
