// Test helper: a Scheduler on a ManualClock with terse event calls that fail the test on errors.
// Tests of the policies drive the scheduler through its public interface with it.
//
// Threading: test thread only.
#ifndef GPUVM_SCHEDULER_TEST_DRIVER_H_
#define GPUVM_SCHEDULER_TEST_DRIVER_H_

#include <gtest/gtest.h>

#include <memory>

#include "scheduler/scheduler.h"

namespace gpuvm::sched {

class SchedulerDriver {
 public:
  explicit SchedulerDriver(PolicyKind policy, SchedulerOptions options = {}) {
    options.policy = policy;
    Result<std::unique_ptr<Scheduler>> s = Scheduler::Create(&clock, options);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) scheduler = std::move(s).value();
  }

  void AddVm(VmId vm, double share) { ASSERT_TRUE(scheduler->AddVm(vm, share).ok()); }
  // The opening most policy tests share: VMs 1 and 2 with even shares (50/50).
  void AddEvenPair() {
    AddVm(1, 50);
    AddVm(2, 50);
  }
  // The even pair, each with one submission queued at t=0: VM 1's (handle 10) before VM 2's (20).
  void EvenPairEachSubmitsOne() {
    AddEvenPair();
    SubmitAt(Duration(0), 1, 10);
    SubmitAt(Duration(0), 2, 20);
  }
  // Moves the clock to `t` (from the start) first.
  Decision SubmitAt(Duration t, VmId vm, SubmissionHandle h) {
    clock.AdvanceTo(TimePoint(t));
    Result<Decision> d = scheduler->OnSubmit(vm, h);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? *d : Decision::Nothing();
  }
  // The submission ran `ran` of GPU time ending at `t`.
  Decision CompleteAt(Duration t, SubmissionHandle h, Duration ran) {
    clock.AdvanceTo(TimePoint(t));
    Result<Decision> d = scheduler->OnComplete(h, ran);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? *d : Decision::Nothing();
  }
  // The running submission's slice ended at `t` after `ran` of GPU time (BAND's preemption point).
  Decision SliceEndAt(Duration t, SubmissionHandle h, Duration ran) {
    clock.AdvanceTo(TimePoint(t));
    Result<Decision> d = scheduler->OnSliceEnd(h, ran);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? *d : Decision::Nothing();
  }
  Decision TimerAt(Duration t) {
    clock.AdvanceTo(TimePoint(t));
    return scheduler->OnTimer();
  }
  VmStats Vm(VmId vm) const {
    for (const VmStats& s : scheduler->Stats().vms) {
      if (s.vm == vm) return s;
    }
    ADD_FAILURE() << "no VM " << vm;
    return {};
  }

  ManualClock clock;
  std::unique_ptr<Scheduler> scheduler;
};

inline TimePoint At(Duration t) { return TimePoint(t); }

}  // namespace gpuvm::sched

#endif  // GPUVM_SCHEDULER_TEST_DRIVER_H_
