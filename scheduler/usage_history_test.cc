#include "scheduler/usage_history.h"

#include <gtest/gtest.h>

namespace gpuvm::sched {
namespace {

using namespace std::chrono_literals;

TimePoint T(Duration d) { return TimePoint(d); }

TEST(SchedUsageHistoryTest, SumsWholeBucketsInsideTheWindow) {
  UsageHistory usage(1ms, 10s);
  usage.Add(T(100ms), T(130ms));
  usage.Add(T(150ms), T(160ms));
  EXPECT_EQ(usage.UsedWithin(T(200ms), 100ms), 40ms);
  EXPECT_EQ(usage.UsedWithin(T(200ms), 50ms), 10ms);  // [150, 200): only the second run
}

TEST(SchedUsageHistoryTest, EdgeBucketsCountProportionally) {
  UsageHistory usage(1ms, 10s);
  usage.Add(T(0ms), T(1ms));  // one full bucket
  // The window [0.5 ms, 1.5 ms) covers half of that bucket.
  EXPECT_EQ(usage.UsedWithin(T(1500us), 1ms), 500us);
}

TEST(SchedUsageHistoryTest, ForgetsWhatIsPastTheHorizon) {
  UsageHistory usage(1ms, 100ms);
  usage.Add(T(0ms), T(10ms));
  usage.Add(T(500ms), T(510ms));  // reuses the ring slots of the first run
  EXPECT_EQ(usage.UsedWithin(T(520ms), 100ms), 10ms);
  EXPECT_EQ(usage.UsedWithin(T(520ms), 10s), 10ms);  // cut to the horizon
}

TEST(SchedUsageHistoryTest, IntervalLongerThanTheHorizonKeepsItsRecentPart) {
  UsageHistory usage(1ms, 100ms);
  usage.Add(T(0ms), T(1s));
  EXPECT_EQ(usage.UsedWithin(T(1s), 100ms), 100ms);
}

TEST(SchedUsageHistoryTest, IgnoresEmptyAndReversedIntervals) {
  UsageHistory usage(1ms, 10s);
  usage.Add(T(5ms), T(5ms));
  usage.Add(T(9ms), T(2ms));
  EXPECT_EQ(usage.UsedWithin(T(10ms), 10ms), 0ms);
}

TEST(SchedUsageHistoryTest, LateOldIntervalDoesNotEvictNewerUse) {
  UsageHistory usage(1ms, 100ms);
  usage.Add(T(1000ms), T(1010ms));
  usage.Add(T(850ms),
            T(905ms));  // mostly older than what the ring keeps: only the recent part stays
  EXPECT_EQ(usage.UsedWithin(T(1010ms), 10ms), 10ms);
  EXPECT_LE(usage.UsedWithin(T(1010ms), 100ms), 16ms);
}

TEST(SchedUsageHistoryTest, AddEndingAtIsAddWhenNothingIsInTheWay) {
  UsageHistory a(1ms, 10s), b(1ms, 10s);
  a.Add(T(100ms), T(130ms));
  a.Add(T(140500us), T(150ms));
  b.AddEndingAt(T(130ms), 30ms);
  b.AddEndingAt(T(150ms), 9500us);
  for (Duration window : {5ms, 10ms, 25ms, 50ms, 100ms}) {
    EXPECT_EQ(a.UsedWithin(T(150ms), window), b.UsedWithin(T(150ms), window)) << window.count();
  }
}

// A submission ran 6 ms, was suspended, the VM's next work ran 10 ms (reported as it ran), then the
// first one completed and its 6 ms were reported at once: laid over [now - 6 ms, now) they would
// overlap the 10 ms and a 10 ms window would read 160 %. Placed into the free time before, every
// window stays within its length and nothing is lost.
TEST(SchedUsageHistoryTest, LateReportedTimeFillsTheFreeTimeBeforeInsteadOfOverlapping) {
  UsageHistory usage(1ms, 10s);
  usage.AddEndingAt(T(110ms), 10ms);  // [100, 110) recorded as it ran
  usage.AddEndingAt(T(110ms), 6ms);   // ran during [90, 96), reported now
  EXPECT_EQ(usage.UsedWithin(T(110ms), 10ms), 10ms);
  EXPECT_EQ(usage.UsedWithin(T(110ms), 100ms), 16ms);
  for (Duration window = 1ms; window <= 100ms; window += 1ms) {
    EXPECT_LE(usage.UsedWithin(T(110ms), window), window) << window.count();
  }
}

TEST(SchedUsageHistoryTest, AddEndingAtDropsWhatDoesNotFitTheHorizon) {
  UsageHistory usage(1ms, 100ms);
  usage.AddEndingAt(T(1s), 250ms);  // more than the horizon's wall time
  EXPECT_EQ(usage.UsedWithin(T(1s), 100ms), 100ms);
  usage.AddEndingAt(T(1s), 0ms);
  usage.AddEndingAt(T(1s), -5ms);
  EXPECT_EQ(usage.UsedWithin(T(1s), 100ms), 100ms);
}

}  // namespace
}  // namespace gpuvm::sched
