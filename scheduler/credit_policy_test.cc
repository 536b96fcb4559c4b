#include "scheduler/credit_policy.h"

#include <gtest/gtest.h>

#include "scheduler/test_driver.h"

namespace gpuvm::sched {
namespace {

using namespace std::chrono_literals;
using Action = Decision::Action;

// Two VMs 50/50, period 30 ms. VM 1 overruns its credit with a 40 ms run; then both queue work, VM
// 1's first. Leaves VM 1 at -25 ms and VM 2 with credit; B1 (VM 2) is running.
void Overrun(SchedulerDriver& d) {
  d.AddEvenPair();
  ASSERT_EQ(d.SubmitAt(0ms, 1, 10), Decision::Dispatch(1, 10));
  d.SubmitAt(0ms, 2, 20);
  // At 30 ms both are active and each gets 15 ms (VM 1's 30 ms from t=0, when it was alone, is
  // clipped to one period's worth); VM 1 is then charged 40 ms.
  ASSERT_EQ(d.CompleteAt(40ms, 10, 40ms), Decision::Dispatch(2, 20));
  EXPECT_EQ(d.Vm(1).credit, -25ms);
  EXPECT_EQ(d.Vm(1).standing, "over");
  EXPECT_EQ(d.Vm(2).standing, "under");
}

TEST(SchedCreditTest, VmsWithCreditGoBeforeOlderWorkOfVmsWithout) {
  SchedulerDriver d(PolicyKind::kCredit);
  Overrun(d);
  d.SubmitAt(40ms, 1, 11);  // older
  d.SubmitAt(40ms, 2, 21);
  EXPECT_EQ(d.CompleteAt(45ms, 20, 5ms), Decision::Dispatch(2, 21));
  // Only over-credit work left: Xen's credit scheduler is work-conserving, so it runs.
  EXPECT_EQ(d.CompleteAt(50ms, 21, 5ms), Decision::Dispatch(1, 11));
}

TEST(SchedCreditTest, StrictVariantWaitsForTheNextPeriods) {
  SchedulerOptions options;
  options.credit.work_conserving = false;
  SchedulerDriver d(PolicyKind::kCredit, options);
  Overrun(d);
  d.SubmitAt(40ms, 1, 11);
  EXPECT_EQ(d.CompleteAt(45ms, 20, 5ms), Decision::Hold(At(60ms)));
  EXPECT_EQ(d.TimerAt(60ms), Decision::Hold(At(90ms)));  // -25 + 15 = -10: still none
  // VM 2 has gone idle, so VM 1 alone gets the whole period: -10 + 30 = 20.
  EXPECT_EQ(d.TimerAt(90ms), Decision::Dispatch(1, 11));
}

TEST(SchedCreditTest, DebtIsClippedToOnePeriodsWorth) {
  SchedulerDriver d(PolicyKind::kCredit);
  d.EvenPairEachSubmitsOne();
  EXPECT_EQ(d.CompleteAt(200ms, 10, 200ms), Decision::Dispatch(2, 20));
  d.SubmitAt(200ms, 1, 11);
  // One period later the 200 ms overrun is forgotten down to one period's allotment (15 ms):
  // the root of CREDIT's trouble with long non-preemptive kernels.
  d.CompleteAt(211ms, 20, 11ms);
  EXPECT_EQ(d.Vm(1).credit, -15ms);
}

TEST(SchedCreditTest, IdleVmsNeitherBankCreditNorKeepDebt) {
  SchedulerDriver d(PolicyKind::kCredit);
  d.AddEvenPair();
  d.SubmitAt(0ms, 1, 10);
  d.CompleteAt(5ms, 10, 5ms);
  d.SubmitAt(100ms, 2, 20);  // several periods later: VM 1 has been idle for more than one
  EXPECT_EQ(d.Vm(1).credit, 0ms);
}

}  // namespace
}  // namespace gpuvm::sched
