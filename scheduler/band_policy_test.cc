#include "scheduler/band_policy.h"

#include <gtest/gtest.h>

#include "scheduler/test_driver.h"

namespace gpuvm::sched {
namespace {

using namespace std::chrono_literals;
using Action = Decision::Action;

SchedulerOptions NoHolds() {
  SchedulerOptions options;
  options.band.hold_max = 0us;
  return options;
}

TEST(SchedBandTest, CreditIsGpuTimeOwedAndOverVmsYield) {
  SchedulerDriver d(PolicyKind::kBand, NoHolds());
  d.AddEvenPair();
  ASSERT_EQ(d.SubmitAt(0ms, 1, 10), Decision::Dispatch(1, 10));
  d.SubmitAt(0ms, 1, 11);  // older than VM 2's work
  d.SubmitAt(0ms, 2, 20);
  // 10 ms of GPU time: half of it was VM 2's due.
  EXPECT_EQ(d.CompleteAt(10ms, 10, 10ms), Decision::Dispatch(2, 20));
  EXPECT_EQ(d.Vm(1).credit, -5ms);
  EXPECT_EQ(d.Vm(1).standing, "over");
  EXPECT_EQ(d.Vm(2).credit, 5ms);
  EXPECT_EQ(d.Vm(2).standing, "under");
  EXPECT_EQ(d.CompleteAt(20ms, 20, 10ms), Decision::Dispatch(1, 11));
  EXPECT_EQ(d.Vm(1).credit, 0ms);
  EXPECT_EQ(d.Vm(1).standing, "at");
}

TEST(SchedBandTest, UnequalSharesSplitGpuTimeByShare) {
  SchedulerDriver d(PolicyKind::kBand, NoHolds());
  d.AddVm(1, 10);
  d.AddVm(2, 90);
  d.SubmitAt(0ms, 1, 10);
  d.SubmitAt(0ms, 2, 20);
  d.CompleteAt(10ms, 10, 10ms);
  EXPECT_EQ(d.Vm(1).credit, -9ms);
  EXPECT_EQ(d.Vm(2).credit, 9ms);
}

// VM 1 with a half share and VM 3 best-effort (share 0).
void AddShareAndBestEffort(SchedulerDriver& d) {
  d.AddVm(1, 50);
  d.AddVm(3, 0);
}

// VM 1 loops short kernels, VM 2 has a long one queued. After VM 1's kernel VM 1 has nothing queued
// for a moment; VM 1 is owed more than VM 2, so the GPU is held for it (Gdev's time buffering).
void ShortLoopMeetsLongKernel(SchedulerDriver& d) {
  d.AddEvenPair();
  ASSERT_EQ(d.SubmitAt(0ms, 2, 20), Decision::Dispatch(2, 20));
  d.SubmitAt(0ms, 1, 10);
  ASSERT_EQ(d.CompleteAt(10ms, 20, 10ms), Decision::Dispatch(1, 10));
  d.SubmitAt(10ms, 2, 21);
}

TEST(SchedBandTest, HoldsTheGpuForAnUnderServedVmAboutToSubmit) {
  SchedulerDriver d(PolicyKind::kBand);
  ShortLoopMeetsLongKernel(d);
  const Decision held = d.CompleteAt(11ms, 10, 1ms);
  ASSERT_EQ(held.action, Action::kHold);
  EXPECT_GT(held.until, At(11ms));
  EXPECT_LE(held.until, At(11ms) + SchedulerOptions{}.band.hold_max);
  // VM 1 comes back within the hold: it goes first although VM 2's work is older.
  EXPECT_EQ(d.SubmitAt(11ms + 50us, 1, 11), Decision::Dispatch(1, 11));
  EXPECT_EQ(d.scheduler->Stats().holds, 1u);
}

TEST(SchedBandTest, ExpiredHoldDispatchesAndStopsWaitingForTheLateVm) {
  SchedulerDriver d(PolicyKind::kBand);
  ShortLoopMeetsLongKernel(d);
  const Decision held = d.CompleteAt(11ms, 10, 1ms);
  ASSERT_EQ(held.action, Action::kHold);
  EXPECT_EQ(d.TimerAt(held.until.time_since_epoch()), Decision::Dispatch(2, 21));
  d.SubmitAt(20ms, 2, 22);
  // VM 1 is still owed GPU time but let a hold expire: no more holds for it until it submits again.
  EXPECT_EQ(d.CompleteAt(21ms, 21, 1ms), Decision::Dispatch(2, 22));
}

TEST(SchedBandTest, DoesNotHoldForAVmThatResubmitsSlowly) {
  SchedulerDriver d(PolicyKind::kBand);
  ShortLoopMeetsLongKernel(d);
  Decision held = d.CompleteAt(11ms, 10, 1ms);
  ASSERT_EQ(held.action, Action::kHold);
  // VM 1 only comes back after 2 ms, longer than hold_max: its measured gap rules it out next time.
  EXPECT_EQ(d.TimerAt(held.until.time_since_epoch()), Decision::Dispatch(2, 21));
  d.SubmitAt(13ms, 1, 11);
  ASSERT_EQ(d.CompleteAt(14ms, 21, 3ms), Decision::Dispatch(1, 11));
  d.SubmitAt(14ms, 2, 22);
  EXPECT_EQ(d.CompleteAt(15ms, 11, 1ms), Decision::Dispatch(2, 22));
}

// With a device that preempts at arrivals, the hold becomes a dispatch: VM 2's older work runs
// while VM 1 is away, and VM 1's return stops it (a slice ends at the arrival).
TEST(SchedBandTest, WorkConservingBufferingRunsOthersAndPreemptsOnTheAwaitedArrival) {
  SchedulerOptions options;
  options.band.work_conserving = true;
  SchedulerDriver d(PolicyKind::kBand, options);
  d.scheduler->SetArrivalPreemption(true);
  ShortLoopMeetsLongKernel(d);
  EXPECT_EQ(d.CompleteAt(11ms, 10, 1ms), Decision::Dispatch(2, 21));
  d.SubmitAt(11ms + 50us, 1, 11);
  EXPECT_EQ(d.SliceEndAt(11ms + 50us, 21, 50us), Decision::Preempt());
  Result<Decision> next = d.scheduler->OnGpuIdle();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, Decision::Dispatch(1, 11));
  EXPECT_EQ(d.scheduler->Stats().holds, 0u);
}

// Only the wait's own deadline lets the awaited VM stop a run that the usual rule (over by more
// than preempt_lag, here out of reach) would not: back in time it does, late it does not.
TEST(SchedBandTest, WorkConservingBufferingPreemptsOnlyForAnArrivalWithinTheWait) {
  for (const bool late : {false, true}) {
    SchedulerOptions options;
    options.band.work_conserving = true;
    options.band.preempt_lag = 50ms;
    SchedulerDriver d(PolicyKind::kBand, options);
    d.scheduler->SetArrivalPreemption(true);
    ShortLoopMeetsLongKernel(d);
    ASSERT_EQ(d.CompleteAt(11ms, 10, 1ms), Decision::Dispatch(2, 21));
    const Duration back = late ? 11ms + options.band.hold_max + 1ms : 11ms + 100us;
    EXPECT_EQ(d.SliceEndAt(back - 10us, 21, back - 10us - 11ms), Decision::Continue()) << late;
    d.SubmitAt(back, 1, 11);
    EXPECT_EQ(d.SliceEndAt(back + 10us, 21, 20us),
              late ? Decision::Continue() : Decision::Preempt())
        << late;
  }
}

// Asked to hold (buffering "idle") or on a device that cannot preempt at arrivals, BAND holds.
TEST(SchedBandTest, HoldsWhenWorkConservingIsOffOrTheDeviceCannotPreempt) {
  for (const bool off : {true, false}) {
    SchedulerOptions options;
    options.band.work_conserving = !off;
    SchedulerDriver d(PolicyKind::kBand, options);
    d.scheduler->SetArrivalPreemption(off);
    ShortLoopMeetsLongKernel(d);
    EXPECT_EQ(d.CompleteAt(11ms, 10, 1ms).action, Action::kHold) << off;
  }
}

TEST(SchedBandTest, CreditsAreResetAtTheThreshold) {
  SchedulerOptions options = NoHolds();
  options.band.threshold = 20ms;
  SchedulerDriver d(PolicyKind::kBand, options);
  d.EvenPairEachSubmitsOne();
  d.CompleteAt(100ms, 10, 100ms);
  EXPECT_EQ(d.Vm(1).credit, -20ms);
  EXPECT_EQ(d.Vm(2).credit, 20ms);
}

TEST(SchedBandTest, ChargesSchedulerTimeEquallyToActiveVms) {
  SchedulerDriver d(PolicyKind::kBand, NoHolds());
  d.AddVm(1, 25);
  d.AddVm(2, 75);
  d.clock.set_read_cost(10us);  // every event handled on a free GPU costs 10 us of scheduler time
  ASSERT_EQ(d.SubmitAt(0ms, 1, 10), Decision::Dispatch(1, 10));  // measured: 10 us
  d.SubmitAt(0ms, 2, 20);                                        // GPU busy: not measured
  d.CompleteAt(1ms, 10, 1ms);  // charges the pending 10 us, 5 us each (not 25/75)
  d.clock.set_read_cost(0us);
  const VmStats a = d.Vm(1);
  const VmStats b = d.Vm(2);
  EXPECT_EQ(a.scheduler_time_charged, 5us);
  EXPECT_EQ(b.scheduler_time_charged, 5us);
  // GPU time plus scheduler time is handed out by share; VM 1 pays its 1 ms, both pay 5 us.
  EXPECT_EQ(a.credit, Duration(252500) - 5us - 1ms);     // 25 % of 1.01 ms
  EXPECT_EQ(b.credit, Duration(757500) - 5us);           // 75 % of 1.01 ms
  EXPECT_EQ(d.scheduler->Stats().scheduler_time, 20us);  // the completion's own 10 us is pending
}

TEST(SchedBandTest, SchedulerTimeChargingCanBeTurnedOff) {
  SchedulerOptions options = NoHolds();
  options.band.charge_scheduler_time = false;
  SchedulerDriver d(PolicyKind::kBand, options);
  d.AddEvenPair();
  d.clock.set_read_cost(10us);
  d.SubmitAt(0ms, 1, 10);
  d.SubmitAt(0ms, 2, 20);
  d.CompleteAt(1ms, 10, 1ms);
  d.clock.set_read_cost(0us);
  EXPECT_EQ(d.Vm(1).scheduler_time_charged, 0us);
  EXPECT_EQ(d.Vm(1).credit, -500us);
}

TEST(SchedBandTest, BestEffortVmsRunOnlyWhenNoVmWithAShareWaits) {
  SchedulerDriver d(PolicyKind::kBand, NoHolds());
  AddShareAndBestEffort(d);
  ASSERT_EQ(d.SubmitAt(0ms, 1, 10), Decision::Dispatch(1, 10));
  d.SubmitAt(0ms, 3, 30);  // older
  d.SubmitAt(0ms, 1, 11);
  EXPECT_EQ(d.CompleteAt(5ms, 10, 5ms), Decision::Dispatch(1, 11));
  EXPECT_EQ(d.Vm(3).standing, "best-effort");
  EXPECT_EQ(d.CompleteAt(10ms, 11, 5ms), Decision::Dispatch(3, 30));
}

TEST(SchedBandTest, VmLeavingDropsWhatItWasOwed) {
  SchedulerDriver d(PolicyKind::kBand, NoHolds());
  d.EvenPairEachSubmitsOne();
  d.CompleteAt(10ms, 10, 10ms);  // VM 2 is owed 5 ms, VM 2 runs
  d.CompleteAt(11ms, 20, 1ms);   // VM 2 still owed 4.5 ms, then goes quiet
  EXPECT_EQ(d.Vm(2).credit, 4500us);
  d.SubmitAt(30ms, 1, 11);  // 19 ms later (idle_after is 10 ms)
  EXPECT_EQ(d.Vm(2).credit, 0ms);
  EXPECT_EQ(d.Vm(1).credit, -4500us);  // debts stay
}

TEST(SchedBandTest, StaysNonPreemptiveWhenAskedTo) {
  SchedulerOptions options = NoHolds();
  options.band.preempt_at_slices = false;
  SchedulerDriver d(PolicyKind::kBand, options);
  d.EvenPairEachSubmitsOne();
  for (int i = 1; i <= 50; ++i) {
    ASSERT_EQ(d.SliceEndAt(std::chrono::milliseconds(i), 10, 1ms), Decision::Continue());
  }
  EXPECT_EQ(d.Vm(1).credit, -25ms);
}

TEST(SchedBandTest, PreemptsBestEffortWorkAtOnceForAVmWithAShare) {
  SchedulerDriver d(PolicyKind::kBand, NoHolds());
  AddShareAndBestEffort(d);
  ASSERT_EQ(d.SubmitAt(0ms, 3, 30), Decision::Dispatch(3, 30));
  EXPECT_EQ(d.SliceEndAt(1ms, 30, 1ms), Decision::Continue());  // nobody else waits
  d.SubmitAt(1500us, 1, 10);
  EXPECT_EQ(d.SliceEndAt(2ms, 30, 1ms), Decision::Preempt());
  Result<Decision> next = d.scheduler->OnGpuIdle();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, Decision::Dispatch(1, 10));
}

}  // namespace
}  // namespace gpuvm::sched
