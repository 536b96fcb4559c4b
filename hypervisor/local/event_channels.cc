#include "hypervisor/local/event_channels.h"

#include <sys/epoll.h>

#include <cerrno>

namespace gpuvm::hv::local {

Result<std::unique_ptr<LocalEventChannels>> LocalEventChannels::Connect(
    const std::string& daemon_path, DomainId self) {
  std::unique_ptr<LocalEventChannels> e(new LocalEventChannels());
  GPUVM_ASSIGN_OR_RETURN(e->client_, LocalHvClient::Connect(daemon_path, self));
  e->epoll_ = os::UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!e->epoll_.valid()) return Status::FromErrno(errno, "epoll_create1");
  return e;
}

LocalEventChannels::~LocalEventChannels() = default;

Result<EvtchnPort> LocalEventChannels::Adopt(LocalHvClient::Reply reply) {
  HvReader in(reply.results);
  std::optional<uint32_t> port = in.U32();
  if (!port || !in.Done() || reply.fds.size() != 2) {
    return Status::DataLoss("malformed event channel reply");
  }
  if (channels_.contains(*port)) return Status::DataLoss("daemon handed out a port we hold");
  Channel channel{std::move(reply.fds[0]), std::move(reply.fds[1])};
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.u32 = *port;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, channel.wait.get(), &ev) != 0) {
    return Status::FromErrno(errno, "epoll_ctl add event channel");
  }
  channels_.emplace(*port, std::move(channel));
  return *port;
}

Result<EvtchnPort> LocalEventChannels::AllocUnbound(DomainId remote) {
  HvWriter w;
  w.U16(remote);
  const std::vector<uint8_t> payload = w.Take();
  GPUVM_ASSIGN_OR_RETURN(LocalHvClient::Reply reply,
                         client_->Call(HvOp::kEvtchnAllocUnbound, payload));
  return Adopt(std::move(reply));
}

Result<EvtchnPort> LocalEventChannels::BindInterdomain(DomainId remote, EvtchnPort remote_port) {
  HvWriter w;
  w.U16(remote).U32(remote_port);
  const std::vector<uint8_t> payload = w.Take();
  GPUVM_ASSIGN_OR_RETURN(LocalHvClient::Reply reply, client_->Call(HvOp::kEvtchnBind, payload));
  return Adopt(std::move(reply));
}

Status LocalEventChannels::Unbind(EvtchnPort local) {
  auto it = channels_.find(local);
  if (it == channels_.end())
    return Status::NotFound("port " + std::to_string(local) + " not bound");
  channels_.erase(it);  // closing the eventfd removes it from the epoll set
  HvWriter w;
  w.U32(local);
  const std::vector<uint8_t> payload = w.Take();
  return client_->Call(HvOp::kEvtchnClose, payload).status();
}

Status LocalEventChannels::Notify(EvtchnPort local) {
  auto it = channels_.find(local);
  if (it == channels_.end())
    return Status::NotFound("port " + std::to_string(local) + " not bound");
  return os::SignalEventFd(it->second.notify.get());
}

Result<std::optional<EvtchnPort>> LocalEventChannels::Pending() {
  epoll_event ev{};
  const int ready = ::epoll_wait(epoll_.get(), &ev, 1, 0);
  if (ready < 0) {
    if (errno == EINTR) return std::optional<EvtchnPort>();
    return Status::FromErrno(errno, "epoll_wait");
  }
  if (ready == 0) return std::optional<EvtchnPort>();
  const EvtchnPort port = ev.data.u32;
  auto it = channels_.find(port);
  if (it != channels_.end()) os::DrainEventFd(it->second.wait.get());
  return std::optional<EvtchnPort>(port);
}

Status LocalEventChannels::Unmask(EvtchnPort local) {
  auto it = channels_.find(local);
  if (it == channels_.end())
    return Status::NotFound("port " + std::to_string(local) + " not bound");
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.u32 = local;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, it->second.wait.get(), &ev) != 0) {
    return Status::FromErrno(errno, "epoll_ctl re-arm event channel");
  }
  return Status::Ok();
}

}  // namespace gpuvm::hv::local
