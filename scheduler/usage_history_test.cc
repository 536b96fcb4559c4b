#include "scheduler/usage_history.h"

#include <gtest/gtest.h>

namespace gpuvm::sched {
namespace {

using namespace std::chrono_literals;

TimePoint T(Duration d) { return TimePoint(d); }

TEST(SchedUsageHistoryTest, SumsWholeBucketsInsideTheWindow) {
  UsageHistory usage(1ms, 10s);
  usage.AddEndingAt(T(130ms), 30ms);  // [100, 130)
  usage.AddEndingAt(T(160ms), 10ms);  // [150, 160)
  EXPECT_EQ(usage.UsedWithin(T(200ms), 100ms), 40ms);
  EXPECT_EQ(usage.UsedWithin(T(200ms), 50ms), 10ms);  // [150, 200): only the second run
}

TEST(SchedUsageHistoryTest, EdgeBucketsCountProportionally) {
  UsageHistory usage(1ms, 10s);
  usage.AddEndingAt(T(1ms), 1ms);  // one full bucket
  // The window [0.5 ms, 1.5 ms) covers half of that bucket.
  EXPECT_EQ(usage.UsedWithin(T(1500us), 1ms), 500us);
}

TEST(SchedUsageHistoryTest, ForgetsWhatIsPastTheHorizon) {
  UsageHistory usage(1ms, 100ms);
  usage.AddEndingAt(T(10ms), 10ms);
  usage.AddEndingAt(T(510ms), 10ms);  // reuses the ring slots of the first run
  EXPECT_EQ(usage.UsedWithin(T(520ms), 100ms), 10ms);
  EXPECT_EQ(usage.UsedWithin(T(520ms), 10s), 10ms);  // cut to the horizon
}

TEST(SchedUsageHistoryTest, IntervalLongerThanTheHorizonKeepsItsRecentPart) {
  UsageHistory usage(1ms, 100ms);
  usage.AddEndingAt(T(1s), 1s);
  EXPECT_EQ(usage.UsedWithin(T(1s), 100ms), 100ms);
}

TEST(SchedUsageHistoryTest, IgnoresEmptyAndNegativeAmounts) {
  UsageHistory usage(1ms, 10s);
  usage.AddEndingAt(T(5ms), 0ms);
  usage.AddEndingAt(T(9ms), -7ms);
  EXPECT_EQ(usage.UsedWithin(T(10ms), 10ms), 0ms);
}

TEST(SchedUsageHistoryTest, LateOldIntervalDoesNotEvictNewerUse) {
  UsageHistory usage(1ms, 100ms);
  usage.AddEndingAt(T(1010ms), 10ms);
  usage.AddEndingAt(T(905ms), 55ms);  // older than what the ring keeps: none of it evicts
  EXPECT_EQ(usage.UsedWithin(T(1010ms), 10ms), 10ms);
  EXPECT_LE(usage.UsedWithin(T(1010ms), 100ms), 16ms);
}

TEST(SchedUsageHistoryTest, UseIsPlacedRightBeforeItsEndWhenNothingIsInTheWay) {
  UsageHistory usage(1ms, 10s);
  usage.AddEndingAt(T(130ms), 30ms);    // [100, 130)
  usage.AddEndingAt(T(150ms), 9500us);  // [140.5, 150)
  EXPECT_EQ(usage.UsedWithin(T(150ms), 5ms), 5ms);
  EXPECT_EQ(usage.UsedWithin(T(150ms), 10ms), 9500us);
  EXPECT_EQ(usage.UsedWithin(T(150ms), 25ms), 14500us);
  EXPECT_EQ(usage.UsedWithin(T(150ms), 50ms), 39500us);
  EXPECT_EQ(usage.UsedWithin(T(150ms), 100ms), 39500us);
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
