// Bounded busy-polling before blocking, for the hops of a trapped access (docs/IPC.md, "Waiting").
//
// A blocking wait costs a sleep and a wakeup (on a VM, an IPI and two context switches): about half
// an eventfd ping-pong. When the answer is a few microseconds away — the aggregator serving an MMIO
// access, a guest driver issuing its next register write — polling shared memory for that long
// costs less than sleeping, and the peer can skip its doorbell system call too (the waiter says it
// is polling; see FastLane::BeginPolling, IoreqServer::BeginBusyPoll). BusyPoll bounds the spin and
// adapts it: a spin that ends in success restores the full limit; one that runs out halves the
// budget (down to a sixteenth of the limit), so a peer that is slow, idle or descheduled soon costs
// little CPU. A limit of zero turns it off (Spin returns false at once).
//
// Threading: one owner thread.
#ifndef GPUVM_BASE_BUSY_POLL_H_
#define GPUVM_BASE_BUSY_POLL_H_

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace gpuvm {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

class BusyPoll {
 public:
  using Clock = std::chrono::steady_clock;

  explicit BusyPoll(std::chrono::nanoseconds limit = std::chrono::nanoseconds(0))
      : limit_(std::max(limit, std::chrono::nanoseconds(0))), budget_(limit_) {}

  bool enabled() const { return limit_.count() > 0; }
  std::chrono::nanoseconds limit() const { return limit_; }
  std::chrono::nanoseconds budget() const { return budget_; }

  // Calls `done()` until it returns true (then true) or the budget is spent (then false).
  template <typename Done>
  bool Spin(Done done) {
    if (!enabled()) return false;
    const Clock::time_point start = Clock::now();
    for (uint32_t i = 1;; ++i) {
      if (done()) {
        budget_ = limit_;
        return true;
      }
      CpuRelax();
      // The clock costs ~50 ns through the vDSO; a look every 16 polls is plenty.
      if (i % 16 == 0 && Clock::now() - start >= budget_) {
        budget_ = std::max(budget_ / 2, limit_ / 16);
        return false;
      }
    }
  }

 private:
  std::chrono::nanoseconds limit_;
  std::chrono::nanoseconds budget_;
};

}  // namespace gpuvm

#endif  // GPUVM_BASE_BUSY_POLL_H_
