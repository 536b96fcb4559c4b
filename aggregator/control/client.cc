#include "aggregator/control/client.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>

#include "base/os.h"
#include "ipc/channel.h"

namespace gpuvm::control {
namespace {

// The reply the server queued before it hung up, if it did.
Result<Reply> PartingReply(int fd, const std::string& socket, const Status& failure) {
  Result<os::ReceivedMessage> last =
      os::ReceivePartingMessage(fd, kMaxReplyBytes + 1);
  if (!last.ok() || last->bytes.empty() || last->bytes.size() > kMaxReplyBytes) {
    return failure.WithContext(socket);
  }
  return ParseReply(
      std::string_view(reinterpret_cast<const char*>(last->bytes.data()), last->bytes.size()));
}

}  // namespace

std::string DefaultControlSocket(const std::string& aggregator_socket) {
  if (const char* env = std::getenv("GPUVM_CONTROL"); env != nullptr && *env != '\0') return env;
  return ControlSocketPathFor(aggregator_socket.empty() ? ipc::DefaultAggregatorSocketPath()
                                                        : aggregator_socket);
}

Result<Reply> Call(const std::string& socket, const Request& request, int timeout_ms) {
  GPUVM_ASSIGN_OR_RETURN(os::UniqueFd fd, os::ConnectSeqpacket(socket));
  const std::string text = FormatRequest(request);
  if (::send(fd.get(), text.data(), text.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(text.size())) {
    return PartingReply(fd.get(), socket, Status::FromErrno(errno, "send"));
  }
  GPUVM_RETURN_IF_ERROR(os::WaitReadable(fd.get(), timeout_ms).WithContext(socket));
  std::string reply(kMaxReplyBytes + 1, '\0');
  const ssize_t n = ::recv(fd.get(), reply.data(), reply.size(), MSG_DONTWAIT);
  if (n < 0) return PartingReply(fd.get(), socket, Status::FromErrno(errno, "recv"));
  if (n == 0) {
    return Status::Unavailable(socket + ": the aggregator closed the connection without a reply");
  }
  if (static_cast<size_t>(n) > kMaxReplyBytes) {
    return Status::DataLoss("reply longer than the protocol allows");
  }
  reply.resize(static_cast<size_t>(n));
  return ParseReply(reply);
}

}  // namespace gpuvm::control
