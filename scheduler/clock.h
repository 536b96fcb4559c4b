// Time as the scheduler sees it. Every policy reads time only through a Clock, so the same code
// runs on the real monotonic clock in the aggregator and on a manual clock in tests and in the
// simulator (sim/), where runs are deterministic.
//
// ManualClock can also charge a fixed cost for every read. The scheduler reads the clock when an
// event handler starts and when it ends and treats the difference as its own CPU time (which BAND
// charges to the VMs, GPUvm's fix). A read cost therefore injects a known scheduler overhead into a
// simulated run.
//
// Threading: MonotonicClock is thread-safe. ManualClock is thread-safe too (one atomic), but a test
// that advances it from one thread while another reads it gets whatever interleaving the threads
// produce.
#ifndef GPUVM_SCHEDULER_CLOCK_H_
#define GPUVM_SCHEDULER_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace gpuvm::sched {

using Duration = std::chrono::nanoseconds;
// A point on the scheduler's clock: nanoseconds since the clock's own epoch (boot for the monotonic
// clock, zero for a ManualClock unless it is started elsewhere).
using TimePoint = std::chrono::time_point<std::chrono::steady_clock, Duration>;

class Clock {
 public:
  virtual ~Clock() = default;
  // Not const: a ManualClock with a read cost advances on every read.
  virtual TimePoint Now() = 0;
};

// CLOCK_MONOTONIC through std::chrono::steady_clock.
class MonotonicClock final : public Clock {
 public:
  TimePoint Now() override;
};

// A clock that moves only when told to, plus an optional cost per read (see the file comment).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimePoint start = TimePoint{}) : now_(start.time_since_epoch().count()) {}

  // Returns the current time, then advances it by the read cost.
  TimePoint Now() override;
  // The current time, without charging a read (for the owner of the clock: tests, the simulator).
  TimePoint Peek() const { return TimePoint(Duration(now_.load(std::memory_order_relaxed))); }
  // Moves the clock forward to `t`; a `t` in the past is ignored (time never runs backwards).
  void AdvanceTo(TimePoint t);
  // Moves the clock forward by `d` (negative values are ignored).
  void Advance(Duration d);

  void set_read_cost(Duration cost) { read_cost_.store(cost.count(), std::memory_order_relaxed); }
  Duration read_cost() const { return Duration(read_cost_.load(std::memory_order_relaxed)); }
  uint64_t reads() const { return reads_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> now_;
  std::atomic<int64_t> read_cost_{0};
  std::atomic<uint64_t> reads_{0};
};

}  // namespace gpuvm::sched

#endif  // GPUVM_SCHEDULER_CLOCK_H_
