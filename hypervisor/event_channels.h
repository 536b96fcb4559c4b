// Port: event channels — a doorbell between two domains (or two processes of one domain).
//
// One side allocates an unbound port for a remote domain and publishes its number (usually in the
// store); the other side binds to (domain, port). Notify() on either end makes the other end's
// Pending() report its local port. As with Xen's evtchn device, a port that fired is masked until
// Unmask(), so a flood of notifications costs one wakeup.
//
// Xen: libxenevtchn. Local: a pair of eventfds per channel, brokered by the local hypervisor daemon
// (hypervisor/local/hv_daemon.h).
//
// Threading: one owner thread per EventChannels handle.
#ifndef GPUVM_HYPERVISOR_EVENT_CHANNELS_H_
#define GPUVM_HYPERVISOR_EVENT_CHANNELS_H_

#include <cstdint>
#include <optional>

#include "base/status.h"
#include "hypervisor/types.h"

namespace gpuvm::hv {

using EvtchnPort = uint32_t;

class EventChannels {
 public:
  virtual ~EventChannels() = default;

  // A new local port that `remote` may bind to.
  virtual Result<EvtchnPort> AllocUnbound(DomainId remote) = 0;
  // A new local port connected to `remote_port` of `remote`, which must have been allocated unbound
  // for our domain.
  virtual Result<EvtchnPort> BindInterdomain(DomainId remote, EvtchnPort remote_port) = 0;
  virtual Status Unbind(EvtchnPort local) = 0;
  virtual Status Notify(EvtchnPort local) = 0;

  // Polls readable when Pending() may have something.
  virtual int fd() const = 0;
  // A local port that fired, or nullopt. The port stays masked until Unmask(port).
  virtual Result<std::optional<EvtchnPort>> Pending() = 0;
  virtual Status Unmask(EvtchnPort local) = 0;
};

}  // namespace gpuvm::hv

#endif  // GPUVM_HYPERVISOR_EVENT_CHANNELS_H_
