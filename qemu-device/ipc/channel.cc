#include "qemu-device/ipc/channel.h"

#include <unistd.h>

#include <cstdlib>

#include "qemu-device/ipc/codec.h"

namespace gpuvm::ipc {

std::string DefaultAggregatorSocketPath() {
  if (const char* env = std::getenv("GPUVM_AGGREGATOR"); env != nullptr && *env != '\0') return env;
  return "@gpuvm-aggregator-" + std::to_string(::getuid());
}

Result<Channel> Channel::Connect(const std::string& path) {
  GPUVM_ASSIGN_OR_RETURN(UniqueFd socket, hv::local::ConnectSeqpacket(path));
  return Channel(std::move(socket));
}

Status Channel::Send(const Message& message, std::span<const int> fds) {
  if (fds.size() != DescriptorCount(message.body)) {
    return Status::InvalidArgument("wrong number of descriptors for this message");
  }
  GPUVM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, Encode(message));
  return hv::local::SendWithFds(socket_.get(), bytes, fds);
}

Result<Channel::Received> Channel::Receive(int timeout_ms) {
  GPUVM_RETURN_IF_ERROR(hv::local::WaitReadable(socket_.get(), timeout_ms));
  // One byte more than the largest valid message, so an oversized packet shows up as truncated.
  GPUVM_ASSIGN_OR_RETURN(hv::local::ReceivedMessage raw,
                         hv::local::ReceiveWithFds(socket_.get(), kMaxMessageSize + 1, false));
  GPUVM_ASSIGN_OR_RETURN(Message message, Decode(raw.bytes, raw.fds.size()));
  return Received{std::move(message), std::move(raw.fds)};
}

}  // namespace gpuvm::ipc
