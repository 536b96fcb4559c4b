// GPU time used by one VM over the recent past, so the operator can ask "how much of the GPU did
// this VM get in the last 100 ms / 500 ms / 10 s" without the scheduler keeping every interval.
//
// Busy intervals are spread over fixed-width buckets in a ring that covers the longest window. A
// query sums the buckets inside the window and a proportional part of the two edge buckets,
// assuming use was spread evenly inside a bucket; the error is therefore at most one bucket width
// per edge (1 ms buckets: at most 2 % of a 100 ms window). The simulator measures fairness from
// exact intervals instead (sim/fairness.h).
//
// Threading: a value type with no locking; its owner (the Scheduler) serializes access.
#ifndef GPUVM_SCHEDULER_USAGE_HISTORY_H_
#define GPUVM_SCHEDULER_USAGE_HISTORY_H_

#include <cstdint>
#include <vector>

#include "scheduler/clock.h"

namespace gpuvm::sched {

class UsageHistory {
 public:
  // `bucket` > 0 and `horizon` >= `bucket` (the Scheduler passes constants that satisfy this).
  UsageHistory(Duration bucket, Duration horizon);

  // Records `amount` of use that ended at `end`, placed as late as it fits: from `end` backwards,
  // each bucket filled up to the time it spans (the last one only up to `end`) less what it already
  // holds. Where the VM's earlier use leaves [end - amount, end) free that is exactly the interval;
  // a late report of GPU time that ran before the VM's last recorded interval ended (a suspended
  // submission's busy time the device published only at its completion) goes into the free time
  // before it instead of overlapping it, so no window ever holds more use than its length. What
  // does not fit within the horizon, or would land in buckets older than the ring keeps, is
  // dropped; a zero or negative amount records nothing.
  void AddEndingAt(TimePoint end, Duration amount);

  // GPU time used within [now - window, now). A window longer than the horizon is cut to the
  // horizon.
  Duration UsedWithin(TimePoint now, Duration window) const;

  Duration horizon() const { return horizon_; }

 private:
  struct Bucket {
    int64_t index = -1;  // absolute bucket number (time / bucket width); -1: never used
    int64_t used_ns = 0;
  };

  int64_t BucketOf(TimePoint t) const;
  Bucket& Slot(int64_t index);
  const Bucket* Find(int64_t index) const;

  Duration bucket_;
  Duration horizon_;
  std::vector<Bucket> ring_;
  int64_t newest_ = -1;  // highest bucket index written so far
};

}  // namespace gpuvm::sched

#endif  // GPUVM_SCHEDULER_USAGE_HISTORY_H_
