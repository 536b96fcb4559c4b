#include "scheduler/clock.h"

namespace gpuvm::sched {

TimePoint MonotonicClock::Now() {
  return std::chrono::time_point_cast<Duration>(std::chrono::steady_clock::now());
}

TimePoint ManualClock::Now() {
  reads_.fetch_add(1, std::memory_order_relaxed);
  const int64_t cost = read_cost_.load(std::memory_order_relaxed);
  return TimePoint(Duration(now_.fetch_add(cost, std::memory_order_relaxed)));
}

void ManualClock::AdvanceTo(TimePoint t) {
  const int64_t target = t.time_since_epoch().count();
  int64_t current = now_.load(std::memory_order_relaxed);
  while (current < target &&
         !now_.compare_exchange_weak(current, target, std::memory_order_relaxed)) {
  }
}

void ManualClock::Advance(Duration d) {
  if (d.count() > 0) now_.fetch_add(d.count(), std::memory_order_relaxed);
}

}  // namespace gpuvm::sched
