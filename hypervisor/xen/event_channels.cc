// Event channels over libxenevtchn.
#include <poll.h>

#include <cerrno>
#include <string>

#include "hypervisor/xen/libxen.h"
#include "hypervisor/xen/xen_backend.h"

namespace gpuvm::hv::xen {
namespace {

class XenEventChannels : public EventChannels {
 public:
  explicit XenEventChannels(EvtchnHandle h) : h_(std::move(h)) {}

  Result<EvtchnPort> AllocUnbound(DomainId remote) override {
    const xenevtchn_port_or_error_t port = xenevtchn_bind_unbound_port(h_.get(), remote);
    if (port < 0) return CallFailed("bind_unbound_port", errno);
    return static_cast<EvtchnPort>(port);
  }
  Result<EvtchnPort> BindInterdomain(DomainId remote, EvtchnPort remote_port) override {
    const xenevtchn_port_or_error_t port =
        xenevtchn_bind_interdomain(h_.get(), remote, remote_port);
    if (port < 0) return CallFailed("bind_interdomain", errno);
    return static_cast<EvtchnPort>(port);
  }
  Status Unbind(EvtchnPort local) override {
    if (xenevtchn_unbind(h_.get(), local) != 0) return CallFailed("unbind", errno);
    return Status::Ok();
  }
  Status Notify(EvtchnPort local) override {
    if (xenevtchn_notify(h_.get(), local) != 0) return CallFailed("notify", errno);
    return Status::Ok();
  }
  int fd() const override { return xenevtchn_fd(h_.get()); }
  Result<std::optional<EvtchnPort>> Pending() override {
    pollfd pfd{fd(), POLLIN, 0};  // xenevtchn_pending blocks when nothing is pending
    if (::poll(&pfd, 1, 0) <= 0) return std::optional<EvtchnPort>();
    const xenevtchn_port_or_error_t port = xenevtchn_pending(h_.get());
    if (port < 0) return CallFailed("pending", errno);
    return std::optional<EvtchnPort>(static_cast<EvtchnPort>(port));
  }
  Status Unmask(EvtchnPort local) override {
    if (xenevtchn_unmask(h_.get(), local) != 0) return CallFailed("unmask", errno);
    return Status::Ok();
  }

 private:
  EvtchnHandle h_;
};

}  // namespace

Result<std::unique_ptr<EventChannels>> OpenEventChannels() {
  GPUVM_ASSIGN_OR_RETURN(EvtchnHandle h, OpenEvtchn());
  return std::unique_ptr<EventChannels>(new XenEventChannels(std::move(h)));
}

}  // namespace gpuvm::hv::xen
