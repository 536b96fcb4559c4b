#include "ipc/channel.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "ipc/codec.h"

namespace gpuvm::ipc {

std::string DefaultAggregatorSocketPath() {
  if (const char* env = std::getenv("GPUVM_AGGREGATOR"); env != nullptr && *env != '\0') return env;
  return "@gpuvm-aggregator-" + std::to_string(::getuid());
}

Result<Channel> Channel::Connect(const std::string& path) {
  GPUVM_ASSIGN_OR_RETURN(UniqueFd socket, os::ConnectSeqpacket(path));
  return Channel(std::move(socket));
}

Status Channel::Send(const Message& message, std::span<const int> fds) {
  if (fds.size() != DescriptorCount(message.body)) {
    return Status::InvalidArgument("wrong number of descriptors for this message");
  }
  GPUVM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, Encode(message));
  return os::SendWithFds(socket_.get(), bytes, fds);
}

Status Channel::SetReceiveTimeout(int timeout_ms) {
  if (timeout_ms == receive_timeout_ms_) return Status::Ok();
  timeval tv{};
  if (timeout_ms > 0) {
    tv.tv_sec = timeout_ms / 1000;
    tv.tv_usec = (timeout_ms % 1000) * 1000;
  }
  if (::setsockopt(socket_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0) {
    return Status::FromErrno(errno, "SO_RCVTIMEO");
  }
  receive_timeout_ms_ = timeout_ms;
  return Status::Ok();
}

Result<Channel::Received> Channel::Receive(int timeout_ms) {
  const bool nonblocking = timeout_ms == 0;
  if (!nonblocking) GPUVM_RETURN_IF_ERROR(SetReceiveTimeout(timeout_ms < 0 ? -1 : timeout_ms));
  // One byte more than the largest valid message, so an oversized packet shows up as truncated. A
  // receive timeout shows up as DeadlineExceeded, like "nothing queued" does.
  GPUVM_ASSIGN_OR_RETURN(os::ReceivedMessage raw,
                         os::ReceiveWithFds(socket_.get(), kMaxMessageSize + 1, nonblocking));
  GPUVM_ASSIGN_OR_RETURN(Message message, Decode(raw.bytes, raw.fds.size()));
  return Received{std::move(message), std::move(raw.fds)};
}

Result<Channel::Received> Channel::ReceiveParting() {
  GPUVM_ASSIGN_OR_RETURN(os::ReceivedMessage raw,
                         os::ReceivePartingMessage(socket_.get(), kMaxMessageSize + 1));
  GPUVM_ASSIGN_OR_RETURN(Message message, Decode(raw.bytes, raw.fds.size()));
  return Received{std::move(message), std::move(raw.fds)};
}

}  // namespace gpuvm::ipc
