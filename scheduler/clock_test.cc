#include "scheduler/clock.h"

#include <gtest/gtest.h>

namespace gpuvm::sched {
namespace {

using namespace std::chrono_literals;

TEST(SchedClockTest, ManualClockMovesOnlyWhenTold) {
  ManualClock clock;
  EXPECT_EQ(clock.Now(), TimePoint{});
  EXPECT_EQ(clock.Now(), TimePoint{});
  clock.Advance(5ms);
  EXPECT_EQ(clock.Peek(), TimePoint(5ms));
  clock.AdvanceTo(TimePoint(7ms));
  EXPECT_EQ(clock.Now(), TimePoint(7ms));
}

TEST(SchedClockTest, ManualClockNeverRunsBackwards) {
  ManualClock clock(TimePoint(10ms));
  clock.AdvanceTo(TimePoint(3ms));
  clock.Advance(-2ms);
  EXPECT_EQ(clock.Peek(), TimePoint(10ms));
}

TEST(SchedClockTest, ReadCostIsChargedAfterEachRead) {
  ManualClock clock;
  clock.set_read_cost(3us);
  EXPECT_EQ(clock.Now(), TimePoint{});
  EXPECT_EQ(clock.Now(), TimePoint(3us));
  EXPECT_EQ(clock.Peek(), TimePoint(6us));  // Peek is free
  EXPECT_EQ(clock.Peek(), TimePoint(6us));
  EXPECT_EQ(clock.reads(), 2u);
}

TEST(SchedClockTest, MonotonicClockDoesNotGoBack) {
  MonotonicClock clock;
  TimePoint previous = clock.Now();
  for (int i = 0; i < 1000; ++i) {
    const TimePoint now = clock.Now();
    EXPECT_GE(now, previous);
    previous = now;
  }
}

}  // namespace
}  // namespace gpuvm::sched
