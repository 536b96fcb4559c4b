#include "hypervisor/ioreq_server.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>

namespace gpuvm::hv {

Result<std::optional<IoRequest>> WaitForIoreq(IoreqServer& server,
                                              std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    GPUVM_ASSIGN_OR_RETURN(std::optional<IoRequest> request, server.Poll());
    if (request) return request;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::optional<IoRequest>();
    pollfd pfd{server.wait_fd(), POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) return Status::FromErrno(errno, "poll on ioreq wait fd");
  }
}

Status CheckNoOverlap(const MmioRangeList& ranges, uint64_t first, uint64_t last) {
  for (const auto& [f, l] : ranges) {
    if (first <= l && f <= last) {
      return Status::AlreadyExists("MMIO range " + Hex(first) + "-" + Hex(last) + " overlaps " +
                                   Hex(f) + "-" + Hex(l));
    }
  }
  return Status::Ok();
}

Status RemoveRange(MmioRangeList& ranges, uint64_t first, uint64_t last) {
  auto it = std::find(ranges.begin(), ranges.end(), std::make_pair(first, last));
  if (it == ranges.end()) {
    return Status::NotFound("MMIO range " + Hex(first) + "-" + Hex(last) + " not mapped");
  }
  ranges.erase(it);
  return Status::Ok();
}

}  // namespace gpuvm::hv
