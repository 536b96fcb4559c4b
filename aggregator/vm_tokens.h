// The aggregator's one-time VM tokens (docs/SECURITY.md): what lets a device model open a VM.
//
// Anyone who may reach the aggregator's VM socket (its own user and root, SO_PEERCRED) could
// otherwise announce any domain and have the aggregator charge it channels and VRAM — and, for a
// Xen VM, map that domain's memory. So the operator's side (the local launcher gpuvm-vm, or the
// Xen toolstack) asks the control socket for a token for one domain (`vm-token DOMID`, the
// control socket's own credential check applies), hands it to the device model it starts for that
// domain without a command line (an inherited pipe, or a file only root reads), and the device
// model presents it in AUTH before VM_CONFIG. A token:
//  - is 32 bytes from getrandom(2), compared in constant time;
//  - opens one session of one domain: Redeem removes it, and VM_CONFIG must name that domain;
//  - expires unused after `ttl` (default 120 s: a device model under TCG in the Xen test bed may
//    take seconds to get that far);
//  - is one of at most `capacity` outstanding (256), so a script that asks in a loop cannot grow
//    the table; the oldest are not dropped for new ones (a VM being started keeps its token).
//
// Threading: every method takes an internal lock; the server thread redeems while the control
// thread (or a test) issues.
#ifndef GPUVM_AGGREGATOR_VM_TOKENS_H_
#define GPUVM_AGGREGATOR_VM_TOKENS_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "ipc/protocol.h"

namespace gpuvm::aggregator {

class VmTokens {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    size_t capacity = 256;
    std::chrono::milliseconds ttl = std::chrono::seconds(120);
  };
  VmTokens() : VmTokens(Options{}) {}
  explicit VmTokens(Options options) : options_(options) {}

  // A fresh random token for `domid`. ResourceExhausted when `capacity` tokens are outstanding;
  // InvalidArgument for domain 0 (dom0 runs no device model of its own).
  Result<ipc::VmToken> Issue(uint16_t domid, Clock::time_point now = Clock::now());
  // Adds a token of the caller's choosing (fuzz targets and tests need known bytes).
  Status Add(const ipc::VmToken& token, uint16_t domid, Clock::time_point now = Clock::now());
  // The domain `token` was issued for; the token is gone afterwards. PermissionDenied when it is
  // unknown, used or expired (one message for all three: a guesser learns nothing).
  Result<uint16_t> Redeem(const ipc::VmToken& token, Clock::time_point now = Clock::now());
  // Tokens issued and neither redeemed nor expired.
  size_t outstanding(Clock::time_point now = Clock::now());
  void Clear();

 private:
  struct Entry {
    ipc::VmToken token;
    uint16_t domid;
    Clock::time_point expires;
  };
  void Expire(Clock::time_point now);  // with mutex_ held

  const Options options_;
  std::mutex mutex_;
  std::vector<Entry> entries_;
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_VM_TOKENS_H_
