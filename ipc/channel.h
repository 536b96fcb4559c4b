// One end of a device model <-> aggregator connection: typed send/receive of protocol messages over
// a unix SOCK_SEQPACKET socket, descriptors included. Both sides use it.
//
// Threading: one owner thread per Channel.
#ifndef GPUVM_IPC_CHANNEL_H_
#define GPUVM_IPC_CHANNEL_H_

#include <string>
#include <vector>

#include "base/os.h"
#include "ipc/protocol.h"

namespace gpuvm::ipc {

using os::UniqueFd;

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
  // Waits up to timeout_ms (-1: forever, 0: only what is already queued) for one message.
  // DeadlineExceeded on timeout, Unavailable when the peer closed, DataLoss for a malformed message
  // (the caller should hang up). One system call when a message is there: the wait is the socket's
  // receive timeout, not a poll first (this is the trap's hot path).
  Result<Received> Receive(int timeout_ms);
  // After Send or Receive said the peer is gone (Unavailable): the last message it queued before
  // hanging up — typically a fatal ERROR saying why (os::ReceivePartingMessage).
  Result<Received> ReceiveParting();

  int fd() const { return socket_.get(); }

 private:
  Status SetReceiveTimeout(int timeout_ms);

  UniqueFd socket_;
  int receive_timeout_ms_ = -1;  // what SO_RCVTIMEO is set to (-1: none)
};

}  // namespace gpuvm::ipc

#endif  // GPUVM_IPC_CHANNEL_H_
