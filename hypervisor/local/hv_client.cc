#include "hypervisor/local/hv_client.h"

#include <sys/epoll.h>

#include <cerrno>

namespace gpuvm::hv::local {
namespace {

// The daemon's reply with seq 0 says why it dropped us (hv_daemon.h); anything else is no such
// notice.
std::optional<Status> DropNotice(std::span<const uint8_t> bytes) {
  Result<HvMessage> parsed = ParseHvMessage(bytes);
  if (!parsed.ok() || parsed->header.op != static_cast<uint16_t>(HvOp::kReply) ||
      parsed->header.seq != 0) {
    return std::nullopt;
  }
  Result<HvReader> status = ParseHvReplyStatus(parsed->payload);
  if (status.ok()) return std::nullopt;  // "OK, goodbye" is not a notice we send
  return status.status().WithContext("the local hypervisor daemon hung up");
}

// After a send or receive found the daemon gone: its notice, if it left one.
Status PeerGone(int socket, Status why) {
  if (why.code() != StatusCode::kUnavailable) return why;
  Result<os::ReceivedMessage> last = os::ReceivePartingMessage(socket, kHvMaxMessage);
  if (last.ok()) {
    if (std::optional<Status> notice = DropNotice(last->bytes)) return *notice;
  }
  return why;
}

}  // namespace

Result<std::unique_ptr<LocalHvClient>> LocalHvClient::Connect(const std::string& path,
                                                              DomainId self) {
  std::unique_ptr<LocalHvClient> c(new LocalHvClient());
  c->self_ = self;
  GPUVM_ASSIGN_OR_RETURN(c->socket_, os::ConnectSeqpacket(path));
  GPUVM_ASSIGN_OR_RETURN(c->queued_, os::CreateEventFd());
  c->epoll_ = os::UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!c->epoll_.valid()) return Status::FromErrno(errno, "epoll_create1");
  for (int fd : {c->socket_.get(), c->queued_.get()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(c->epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      return Status::FromErrno(errno, "epoll_ctl");
    }
  }
  HvWriter hello;
  hello.U16(self);
  const std::vector<uint8_t> payload = hello.Take();
  GPUVM_RETURN_IF_ERROR(c->Call(HvOp::kHello, payload).status());
  return c;
}

Status LocalHvClient::QueueEvent(std::span<const uint8_t> payload) {
  HvReader in(payload);
  std::optional<std::string> path = in.Str(kMaxStorePathLength);
  std::optional<std::string> token = in.Str(4096);
  if (!path || !token || !in.Done()) return Status::DataLoss("malformed watch event");
  events_.push_back({std::move(*path), std::move(*token)});
  return os::SignalEventFd(queued_.get());
}

Result<LocalHvClient::Reply> LocalHvClient::Call(HvOp op, std::span<const uint8_t> payload,
                                                 std::span<const int> fds) {
  const uint32_t seq = next_seq_++;
  const std::vector<uint8_t> request = EncodeHvMessage(op, seq, payload);
  if (Status sent = os::SendWithFds(socket_.get(), request, fds); !sent.ok()) {
    return PeerGone(socket_.get(), sent);
  }
  for (;;) {
    GPUVM_RETURN_IF_ERROR(os::WaitReadable(socket_.get(), static_cast<int>(timeout_.count()))
                              .WithContext("waiting for the local hypervisor daemon"));
    Result<os::ReceivedMessage> received = os::ReceiveWithFds(socket_.get(), kHvMaxMessage, false);
    if (!received.ok()) return PeerGone(socket_.get(), received.status());
    os::ReceivedMessage& m = *received;
    if (std::optional<Status> notice = DropNotice(m.bytes)) return *notice;
    GPUVM_ASSIGN_OR_RETURN(HvMessage parsed, ParseHvMessage(m.bytes));
    if (parsed.header.op == static_cast<uint16_t>(HvOp::kWatchEvent)) {
      GPUVM_RETURN_IF_ERROR(QueueEvent(parsed.payload));
      continue;
    }
    if (parsed.header.op != static_cast<uint16_t>(HvOp::kReply) || parsed.header.seq != seq) {
      return Status::DataLoss("unexpected message from the local hypervisor daemon");
    }
    GPUVM_ASSIGN_OR_RETURN(HvReader results, ParseHvReplyStatus(parsed.payload));
    Reply reply;
    reply.results.assign(results.rest().begin(), results.rest().end());
    reply.fds = std::move(m.fds);
    return reply;
  }
}

Result<std::optional<WatchEvent>> LocalHvClient::PollEvent() {
  while (events_.empty()) {
    Result<os::ReceivedMessage> m = os::ReceiveWithFds(socket_.get(), kHvMaxMessage, true);
    if (!m.ok()) {
      if (m.status().code() == StatusCode::kDeadlineExceeded) return std::optional<WatchEvent>();
      return m.status();
    }
    GPUVM_ASSIGN_OR_RETURN(HvMessage parsed, ParseHvMessage(m->bytes));
    if (parsed.header.op != static_cast<uint16_t>(HvOp::kWatchEvent)) {
      return Status::DataLoss("unsolicited message from the local hypervisor daemon");
    }
    GPUVM_RETURN_IF_ERROR(QueueEvent(parsed.payload));
  }
  WatchEvent event = std::move(events_.front());
  events_.pop_front();
  if (events_.empty()) os::DrainEventFd(queued_.get());
  return std::optional<WatchEvent>(std::move(event));
}

Status RegisterDomain(LocalHvClient& client, const LocalDomain& domain) {
  const std::vector<uint8_t> header = domain.EncodeHeader();
  const std::vector<int> fds = domain.fds();
  return client.Call(HvOp::kDomainRegister, header, fds).status();
}

Status UnregisterDomain(LocalHvClient& client, DomainId domid) {
  HvWriter w;
  w.U16(domid);
  const std::vector<uint8_t> payload = w.Take();
  return client.Call(HvOp::kDomainUnregister, payload).status();
}

Result<std::shared_ptr<const LocalDomain>> AttachDomain(LocalHvClient& client, DomainId domid) {
  HvWriter w;
  w.U16(domid);
  const std::vector<uint8_t> payload = w.Take();
  GPUVM_ASSIGN_OR_RETURN(LocalHvClient::Reply reply, client.Call(HvOp::kDomainAttach, payload));
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<LocalDomain> domain,
                         LocalDomain::FromWire(reply.results, std::move(reply.fds)));
  if (domain->domid() != domid) return Status::DataLoss("daemon answered with another domain");
  return std::shared_ptr<const LocalDomain>(std::move(domain));
}

}  // namespace gpuvm::hv::local
