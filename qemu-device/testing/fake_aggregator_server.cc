#include "qemu-device/testing/fake_aggregator_server.h"

#include <poll.h>
#include <sys/socket.h>

#include "qemu-device/ipc/codec.h"
#include "qemu-device/testing/fake_aggregator.h"

namespace gpuvm::dm::testing {

Result<std::unique_ptr<FakeAggregatorServer>> FakeAggregatorServer::Create(
    const std::string& path) {
  std::unique_ptr<FakeAggregatorServer> s(new FakeAggregatorServer());
  s->path_ = path;
  GPUVM_ASSIGN_OR_RETURN(s->listen_, hv::local::ListenSeqpacket(path));
  GPUVM_ASSIGN_OR_RETURN(s->stop_, hv::local::CreateEventFd());
  return s;
}

FakeAggregatorServer::~FakeAggregatorServer() {
  Stop();
  if (thread_.joinable()) thread_.join();
}

Status FakeAggregatorServer::Start() {
  thread_ = std::thread([this] { Serve(); });
  return Status::Ok();
}

void FakeAggregatorServer::Stop() {
  if (stop_.valid()) (void)hv::local::SignalEventFd(stop_.get());
}

std::vector<ipc::Message> FakeAggregatorServer::received() const {
  std::lock_guard<std::mutex> lock(mu_);
  return received_;
}

Status FakeAggregatorServer::SendToDm(const ipc::Message& message, std::span<const int> fds) {
  std::lock_guard<std::mutex> lock(mu_);
  if (connection_fd_ < 0) return Status::FailedPrecondition("no device model connected");
  GPUVM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ipc::Encode(message));
  return hv::local::SendWithFds(connection_fd_, bytes, fds);
}

void FakeAggregatorServer::Serve() {
  for (;;) {
    pollfd fds[2] = {{stop_.get(), POLLIN, 0}, {listen_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue;
    if (fds[0].revents & POLLIN) return;
    hv::local::UniqueFd accepted(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!accepted.valid()) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      connection_fd_ = accepted.get();
    }
    ipc::Channel channel(std::move(accepted));
    for (;;) {
      pollfd conn[2] = {{stop_.get(), POLLIN, 0}, {channel.fd(), POLLIN, 0}};
      if (::poll(conn, 2, -1) < 0) continue;
      if (conn[0].revents & POLLIN) {
        std::lock_guard<std::mutex> lock(mu_);
        connection_fd_ = -1;
        return;
      }
      if (!HandleOne(channel)) break;
    }
    std::lock_guard<std::mutex> lock(mu_);
    connection_fd_ = -1;
  }
}

bool FakeAggregatorServer::HandleOne(ipc::Channel& channel) {
  Result<ipc::Channel::Received> received = channel.Receive(0);
  if (!received.ok()) return received.status().code() == StatusCode::kDeadlineExceeded;
  const ipc::Message m = received->message;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (received_.size() < 100000) received_.push_back(m);
  }
  const Behaviour behaviour = behaviour_;
  auto reply = [&](ipc::Body body) {
    std::lock_guard<std::mutex> lock(mu_);
    auto bytes = ipc::Encode(ipc::Message{m.seq, std::move(body)});
    return bytes.ok() && hv::local::SendWithFds(channel.fd(), *bytes, {}).ok();
  };
  if (std::holds_alternative<ipc::Hello>(m.body))
    return reply(ipc::HelloAck{ipc::kProtocolVersion});
  if (std::holds_alternative<ipc::VmConfig>(m.body)) {
    if (behaviour == Behaviour::kRefuseVm) {
      return reply(ipc::Error{StatusCode::kFailedPrecondition,
                              "pass-through GPU already owned by another VM"});
    }
    return reply(ipc::VmAccept{1, 0, 1ull << 30});
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
  const auto* read = std::get_if<ipc::MmioRead>(&m.body);
  const auto* write = std::get_if<ipc::MmioWrite>(&m.body);
  if (read == nullptr && write == nullptr) return false;
  ++mmio_requests_;
  if (behaviour == Behaviour::kSilent) return true;
  if (behaviour == Behaviour::kGarbage) {
    const uint8_t junk[] = {0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    std::lock_guard<std::mutex> lock(mu_);
    return hv::local::SendWithFds(channel.fd(), junk, {}).ok();
  }
  if (read != nullptr) {
    uint64_t value = 0;
    for (uint32_t i = 0; i < read->size; ++i) {
      auto it = bytes_.find({static_cast<uint8_t>(read->bar), read->offset + i});
      const uint8_t b = it != bytes_.end()
                            ? it->second
                            : FakePatternByte(static_cast<BarIndex>(read->bar), read->offset + i);
      value |= uint64_t{b} << (8 * i);
    }
    return reply(ipc::MmioReadReply{value});
  }
  for (uint32_t i = 0; i < write->size; ++i) {
    bytes_[{static_cast<uint8_t>(write->bar), write->offset + i}] =
        static_cast<uint8_t>(write->value >> (8 * i));
  }
  return reply(ipc::MmioWriteAck{});
}

}  // namespace gpuvm::dm::testing
