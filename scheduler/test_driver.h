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
