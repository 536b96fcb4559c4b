#include "qemu-device/testing/fake_aggregator_server.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "ipc/codec.h"
#include "qemu-device/testing/fake_aggregator.h"

namespace gpuvm::dm::testing {

Result<std::unique_ptr<FakeAggregatorServer>> FakeAggregatorServer::Create(
    const std::string& path) {
  std::unique_ptr<FakeAggregatorServer> s(new FakeAggregatorServer());
  s->path_ = path;
  GPUVM_ASSIGN_OR_RETURN(s->listen_, os::ListenSeqpacket(path));
  GPUVM_ASSIGN_OR_RETURN(s->stop_, os::CreateEventFd());
  return s;
}

FakeAggregatorServer::~FakeAggregatorServer() {
  Release();  // a held serving thread would never see the stop
  Stop();
  if (thread_.joinable()) thread_.join();
}

Status FakeAggregatorServer::Start() {
  thread_ = std::thread([this] { Serve(); });
  return Status::Ok();
}

void FakeAggregatorServer::Stop() {
  if (stop_.valid()) (void)os::SignalEventFd(stop_.get());
}

std::vector<ipc::Message> FakeAggregatorServer::received() const {
  std::lock_guard<std::mutex> lock(mu_);
  return received_;
}

Status FakeAggregatorServer::SendToDm(const ipc::Message& message, std::span<const int> fds) {
  std::lock_guard<std::mutex> lock(mu_);
  if (connection_fd_ < 0) return Status::FailedPrecondition("no device model connected");
  GPUVM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ipc::Encode(message));
  return os::SendWithFds(connection_fd_, bytes, fds);
}

void FakeAggregatorServer::Serve() {
  for (;;) {
    pollfd fds[2] = {{stop_.get(), POLLIN, 0}, {listen_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[0].revents & POLLIN) return;
    os::UniqueFd accepted(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!accepted.valid()) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      connection_fd_ = accepted.get();
    }
    ipc::Channel channel(std::move(accepted));
    // One epoll set: stop and the socket level-triggered, the lane's doorbell (once there)
    // edge-triggered, so a lane request costs epoll_wait + the reply's doorbell, nothing more.
    os::UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
    for (int fd : {stop_.get(), channel.fd()}) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = fd;
      ::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd, &ev);
    }
    bool stopping = false;
    for (bool open = true; open;) {
      epoll_event events[4];
      const int n = ::epoll_wait(epoll.get(), events, 4, -1);
      if (const int64_t stall = stall_ms_.exchange(0); stall > 0 && n > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(stall));
      }
      for (int i = 0; i < n && open; ++i) {
        const int fd = events[i].data.fd;
        if (fd == stop_.get()) {
          stopping = true;
          open = false;
        } else if (fd == channel.fd()) {
          open = HandleOne(channel, epoll.get());
        } else {
          open = DrainLane();
        }
      }
    }
    lane_.reset();
    lane_in_use_ = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      connection_fd_ = -1;
    }
    if (stopping) return;
  }
}

void FakeAggregatorServer::Hold() {
  std::lock_guard<std::mutex> lock(hold_mu_);
  held_ = true;
}

void FakeAggregatorServer::Release() {
  {
    std::lock_guard<std::mutex> lock(hold_mu_);
    held_ = false;
  }
  hold_cv_.notify_all();
}

std::optional<ipc::Body> FakeAggregatorServer::AnswerMmio(const ipc::Body& request) {
  ++mmio_requests_;
  {
    std::unique_lock<std::mutex> lock(hold_mu_);
    hold_cv_.wait(lock, [this] { return !held_; });
  }
  if (behaviour_ == Behaviour::kSilent) return std::nullopt;
  if (const auto* read = std::get_if<ipc::MmioRead>(&request)) {
    uint64_t value = 0;
    for (uint32_t i = 0; i < read->size; ++i) {
      auto it = bytes_.find({static_cast<uint8_t>(read->bar), read->offset + i});
      const uint8_t b = it != bytes_.end()
                            ? it->second
                            : FakePatternByte(static_cast<BarIndex>(read->bar), read->offset + i);
      value |= uint64_t{b} << (8 * i);
    }
    return ipc::MmioReadReply{value};
  }
  if (const auto* block = std::get_if<ipc::MmioReadBlock>(&request)) {
    ipc::MmioReadBlockReply reply;
    for (uint64_t i = 0; i < uint64_t{block->count} * block->size; ++i) {
      auto it = bytes_.find({static_cast<uint8_t>(block->bar), block->offset + i});
      reply.data.push_back(it != bytes_.end() ? it->second
                                              : FakePatternByte(static_cast<BarIndex>(block->bar),
                                                                block->offset + i));
    }
    return reply;
  }
  if (const auto* block = std::get_if<ipc::MmioWriteBlock>(&request)) {
    for (size_t i = 0; i < block->data.size(); ++i) {
      bytes_[{static_cast<uint8_t>(block->bar), block->offset + i}] = block->data[i];
    }
    return ipc::MmioWriteAck{};
  }
  if (const auto* fill = std::get_if<ipc::MmioWriteFill>(&request)) {
    for (uint64_t i = 0; i < uint64_t{fill->count} * fill->size; ++i) {
      bytes_[{static_cast<uint8_t>(fill->bar), fill->offset + i}] =
          static_cast<uint8_t>(fill->value >> (8 * (i % fill->size)));
    }
    return ipc::MmioWriteAck{};
  }
  const auto& write = std::get<ipc::MmioWrite>(request);
  if (refuse_at_ && refuse_at_->first == static_cast<uint8_t>(write.bar) &&
      refuse_at_->second == write.offset) {
    return ipc::Error{StatusCode::kPermissionDenied, "write refused (test)"};
  }
  for (uint32_t i = 0; i < write.size; ++i) {
    bytes_[{static_cast<uint8_t>(write.bar), write.offset + i}] =
        static_cast<uint8_t>(write.value >> (8 * i));
  }
  return ipc::MmioWriteAck{};
}

bool FakeAggregatorServer::DrainLane() {
  if (!lane_) return true;
  for (;;) {
    Result<std::optional<ipc::Message>> m = lane_->TryReceive(ipc::FastLane::Side::kAggregator);
    if (!m.ok()) return false;
    if (!m->has_value()) return true;
    const ipc::Message& request = **m;
    if (!std::holds_alternative<ipc::MmioRead>(request.body) &&
        !std::holds_alternative<ipc::MmioWrite>(request.body) &&
        !std::holds_alternative<ipc::MmioReadBlock>(request.body) &&
        !std::holds_alternative<ipc::MmioWriteBlock>(request.body) &&
        !std::holds_alternative<ipc::MmioWriteFill>(request.body)) {
      return false;  // only MMIO travels in the lane
    }
    if (behaviour_ == Behaviour::kGarbage) {
      ++mmio_requests_;
      const uint8_t junk[] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3};
      if (!lane_->SendRawForTesting(ipc::FastLane::Side::kAggregator, junk, sizeof(junk)).ok()) {
        return false;
      }
      continue;
    }
    std::optional<ipc::Body> answer = AnswerMmio(request.body);
    if (answer && !lane_->Send(ipc::FastLane::Side::kAggregator, {request.seq, *answer}).ok()) {
      return false;
    }
  }
}

bool FakeAggregatorServer::HandleOne(ipc::Channel& channel, int epoll) {
  Result<ipc::Channel::Received> received = channel.Receive(0);
  if (!received.ok()) return received.status().code() == StatusCode::kDeadlineExceeded;
  const ipc::Message m = received->message;
  const bool mmio = std::holds_alternative<ipc::MmioRead>(m.body) ||
                    std::holds_alternative<ipc::MmioWrite>(m.body) ||
                    std::holds_alternative<ipc::MmioReadBlock>(m.body) ||
                    std::holds_alternative<ipc::MmioWriteBlock>(m.body) ||
                    std::holds_alternative<ipc::MmioWriteFill>(m.body);
  if (!mmio) {  // MMIO is only counted: recording every access would dominate the benchmark
    std::lock_guard<std::mutex> lock(mu_);
    if (received_.size() < 10000) received_.push_back(m);
  }
  const Behaviour behaviour = behaviour_;
  auto reply = [&](ipc::Body body) {
    std::lock_guard<std::mutex> lock(mu_);
    auto bytes = ipc::Encode(ipc::Message{m.seq, std::move(body)});
    return bytes.ok() && os::SendWithFds(channel.fd(), *bytes, {}).ok();
  };
  if (std::holds_alternative<ipc::Hello>(m.body))
    return reply(ipc::HelloAck{ipc::kProtocolVersion});
  if (const auto* auth = std::get_if<ipc::Auth>(&m.body)) {
    std::optional<ipc::VmToken> wanted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      wanted = token_;
    }
    if (wanted && auth->token != *wanted) {
      reply(ipc::Error{StatusCode::kPermissionDenied, "the VM token is unknown"});
      return false;
    }
    return reply(ipc::AuthAck{});
  }
  if (std::holds_alternative<ipc::VmConfig>(m.body)) {
    if (behaviour == Behaviour::kRefuseVm) {
      return reply(ipc::Error{StatusCode::kFailedPrecondition,
                              "pass-through GPU already owned by another VM"});
    }
    return reply(ipc::VmAccept{1, offer_fast_lane_ ? ipc::kAcceptFastLane : 0u, 1ull << 30});
  }
  if (std::holds_alternative<ipc::FastLaneOffer>(m.body)) {
    auto lane = ipc::FastLane::Adopt(std::move(received->fds));
    if (!lane.ok() || lane_ != nullptr) {
      return reply(ipc::Error{StatusCode::kInvalidArgument, "unusable fast lane"});
    }
    lane_ = std::move(*lane);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.fd = lane_->doorbell(ipc::FastLane::Side::kAggregator);
    ::epoll_ctl(epoll, EPOLL_CTL_ADD, ev.data.fd, &ev);
    lane_in_use_ = true;
    return reply(ipc::FastLaneAck{});
  }
  if (std::holds_alternative<ipc::GuestMemory>(m.body)) return reply(ipc::GuestMemoryAck{});
  if (std::holds_alternative<ipc::Teardown>(m.body)) {
    reply(ipc::TeardownAck{});
    return false;
  }
  if (std::holds_alternative<ipc::Pong>(m.body) || std::holds_alternative<ipc::BarMapAck>(m.body) ||
      std::holds_alternative<ipc::Error>(m.body)) {
    return true;  // answers to what a test sent with SendToDm
  }
  if (!mmio) return false;
  if (behaviour == Behaviour::kGarbage) {
    ++mmio_requests_;
    const uint8_t junk[] = {0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    std::lock_guard<std::mutex> lock(mu_);
    return os::SendWithFds(channel.fd(), junk, {}).ok();
  }
  std::optional<ipc::Body> answer = AnswerMmio(m.body);
  return !answer || reply(*answer);
}

}  // namespace gpuvm::dm::testing
