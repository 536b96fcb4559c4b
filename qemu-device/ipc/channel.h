// One end of a device model <-> aggregator connection: typed send/receive of protocol messages over
// a unix SOCK_SEQPACKET socket, descriptors included. Both sides use it.
//
// Threading: one owner thread per Channel.
#ifndef GPUVM_QEMU_DEVICE_IPC_CHANNEL_H_
#define GPUVM_QEMU_DEVICE_IPC_CHANNEL_H_

#include <string>
#include <vector>

#include "hypervisor/local/os.h"
#include "qemu-device/ipc/protocol.h"

namespace gpuvm::ipc {

using hv::local::UniqueFd;

// $GPUVM_AGGREGATOR if set, else "@gpuvm-aggregator-<uid>" (abstract unix socket namespace).
std::string DefaultAggregatorSocketPath();

class Channel {
 public:
  explicit Channel(UniqueFd socket) : socket_(std::move(socket)) {}
  static Result<Channel> Connect(const std::string& path);

  // Validates, encodes and sends. Unavailable when the peer has gone.
  Status Send(const Message& message, std::span<const int> fds = {});

  struct Received {
    Message message;
    std::vector<UniqueFd> fds;
  };
  // Waits up to timeout_ms (-1: forever) for one message. DeadlineExceeded on timeout, Unavailable
  // when the peer closed, DataLoss for a malformed message (the caller should hang up).
  Result<Received> Receive(int timeout_ms);

  int fd() const { return socket_.get(); }

 private:
  UniqueFd socket_;
};

}  // namespace gpuvm::ipc

#endif  // GPUVM_QEMU_DEVICE_IPC_CHANNEL_H_
