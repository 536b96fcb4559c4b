#include "aggregator/vm_tokens.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <string>

namespace gpuvm::aggregator {
namespace {

// Every byte is looked at whatever the first difference, so the time a comparison takes says
// nothing about how much of a guess was right.
bool SameToken(const ipc::VmToken& a, const ipc::VmToken& b) {
  volatile uint8_t difference = 0;
  for (size_t i = 0; i < a.size(); ++i) difference = difference | (a[i] ^ b[i]);
  return difference == 0;
}

}  // namespace

void VmTokens::Expire(Clock::time_point now) {
  std::erase_if(entries_, [now](const Entry& e) { return e.expires <= now; });
}

Status VmTokens::Add(const ipc::VmToken& token, uint16_t domid, Clock::time_point now) {
  if (domid == 0) return Status::InvalidArgument("domain 0 runs no device model of a VM");
  std::lock_guard<std::mutex> lock(mutex_);
  Expire(now);
  if (entries_.size() >= options_.capacity) {
    return Status::ResourceExhausted(
        std::to_string(entries_.size()) + " VM tokens are outstanding; each expires " +
        std::to_string(options_.ttl.count() / 1000) + " s after it was issued");
  }
  entries_.push_back({token, domid, now + options_.ttl});
  return Status::Ok();
}

Result<ipc::VmToken> VmTokens::Issue(uint16_t domid, Clock::time_point now) {
  ipc::VmToken token;
  size_t got = 0;
  while (got < token.size()) {
    const ssize_t n = ::getrandom(token.data() + got, token.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "getrandom");
    }
    got += static_cast<size_t>(n);
  }
  GPUVM_RETURN_IF_ERROR(Add(token, domid, now));
  return token;
}

Result<uint16_t> VmTokens::Redeem(const ipc::VmToken& token, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  Expire(now);
  // Every entry is compared, the match or not, for the same reason SameToken looks at every byte.
  size_t match = entries_.size();
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (SameToken(entries_[i].token, token)) match = i;
  }
  if (match == entries_.size()) {
    return Status::PermissionDenied(
        "the VM token is unknown, used or expired (ask the aggregator's control socket for one: "
        "vm-token DOMID)");
  }
  const uint16_t domid = entries_[match].domid;
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(match));
  return domid;
}

size_t VmTokens::outstanding(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mutex_);
  Expire(now);
  return entries_.size();
}

void VmTokens::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
}

}  // namespace gpuvm::aggregator
