#include "scheduler/fifo_policy.h"

#include <gtest/gtest.h>

#include "scheduler/test_driver.h"

namespace gpuvm::sched {
namespace {

using namespace std::chrono_literals;

TEST(SchedFifoTest, DispatchesInArrivalOrderWhateverTheSharesAndLengths) {
  SchedulerDriver d(PolicyKind::kFifo);
  d.AddVm(1, 90);
  d.AddVm(2, 10);
  d.AddVm(3, 0);
  EXPECT_EQ(d.SubmitAt(0ms, 2, 20), Decision::Dispatch(2, 20));
  d.SubmitAt(0ms, 3, 30);
  d.SubmitAt(1ms, 1, 10);
  d.SubmitAt(2ms, 2, 21);
  d.SubmitAt(3ms, 1, 11);
  // VM 2 just ran 100 ms on a 10 % share: FIFO does not care.
  EXPECT_EQ(d.CompleteAt(100ms, 20, 100ms), Decision::Dispatch(3, 30));
  EXPECT_EQ(d.CompleteAt(101ms, 30, 1ms), Decision::Dispatch(1, 10));
  EXPECT_EQ(d.CompleteAt(102ms, 10, 1ms), Decision::Dispatch(2, 21));
  EXPECT_EQ(d.CompleteAt(103ms, 21, 1ms), Decision::Dispatch(1, 11));
  EXPECT_EQ(d.CompleteAt(104ms, 11, 1ms), Decision::Nothing());
  EXPECT_EQ(d.Vm(1).standing, "");
  EXPECT_EQ(d.Vm(1).credit, 0ms);
}

TEST(SchedFifoTest, NeverHolds) {
  SchedulerDriver d(PolicyKind::kFifo);
  d.EvenPairEachSubmitsOne();
  EXPECT_EQ(d.CompleteAt(1ms, 10, 1ms), Decision::Dispatch(2, 20));
  EXPECT_EQ(d.scheduler->Stats().holds, 0u);
}

}  // namespace
}  // namespace gpuvm::sched
