// The scheduler core: validation, queues, dispatch protocol, accounting, live share and policy
// changes, scheduler-time measurement and the slice (preemption) seam. Policy behaviour has its own
// tests.
#include "scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <thread>

namespace gpuvm::sched {
namespace {

using namespace std::chrono_literals;
using Action = Decision::Action;

class SchedCoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<Scheduler> Make(PolicyKind policy, SchedulerOptions options = {}) {
    options.policy = policy;
    Result<std::unique_ptr<Scheduler>> s = Scheduler::Create(&clock_, options);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }
  Decision Submit(Scheduler& s, VmId vm, SubmissionHandle h) {
    Result<Decision> d = s.OnSubmit(vm, h);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? *d : Decision::Nothing();
  }
  Decision Complete(Scheduler& s, SubmissionHandle h, Duration ran) {
    clock_.Advance(ran);
    Result<Decision> d = s.OnComplete(h, ran);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? *d : Decision::Nothing();
  }
  static std::vector<double> Shares(const Scheduler& s) {
    std::vector<double> shares;
    for (const VmStats& v : s.Stats().vms) shares.push_back(v.share_percent);
    return shares;
  }

  ManualClock clock_;
};

TEST_F(SchedCoreTest, CreateRejectsBadOptions) {
  SchedulerOptions options;
  options.credit.period = 0ms;
  EXPECT_EQ(Scheduler::Create(&clock_, options).status().code(), StatusCode::kInvalidArgument);
  options = {};
  options.band.at_band = options.band.threshold;
  EXPECT_EQ(Scheduler::Create(&clock_, options).status().code(), StatusCode::kInvalidArgument);
  options = {};
  options.max_queue_depth = 0;
  EXPECT_EQ(Scheduler::Create(&clock_, options).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Scheduler::Create(nullptr, {}).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SchedCoreTest, ParsesPolicyNames) {
  for (PolicyKind kind : {PolicyKind::kFifo, PolicyKind::kCredit, PolicyKind::kBand}) {
    Result<PolicyKind> parsed = ParsePolicyKind(PolicyKindName(kind));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, kind);
  }
  Result<PolicyKind> bad = ParsePolicyKind("round-robin");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("fifo, credit or band"), std::string::npos);
}

TEST_F(SchedCoreTest, AddVmRejectsInvalidSharesAndChangesNothing) {
  auto s = Make(PolicyKind::kFifo);
  ASSERT_TRUE(s->AddVm(1, 60).ok());
  EXPECT_EQ(s->AddVm(1, 10).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(s->AddVm(2, -1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->AddVm(2, 100.5).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->AddVm(2, std::nan("")).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->AddVm(2, std::numeric_limits<double>::infinity()).code(),
            StatusCode::kInvalidArgument);
  const Status past = s->AddVm(2, 41);
  EXPECT_EQ(past.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(past.message().find("past 100%"), std::string::npos) << past.message();
  EXPECT_EQ(Shares(*s), std::vector<double>({60}));
  EXPECT_TRUE(s->AddVm(2, 40).ok());
  EXPECT_TRUE(s->AddVm(3, 0).ok());  // best effort fits on top of 100 %
}

TEST_F(SchedCoreTest, SetShareRejectsInvalidInputAndChangesNothing) {
  auto s = Make(PolicyKind::kBand);
  ASSERT_TRUE(s->AddVm(1, 30).ok());
  ASSERT_TRUE(s->AddVm(2, 30).ok());
  EXPECT_EQ(s->SetShare(7, 10).code(), StatusCode::kNotFound);
  EXPECT_EQ(s->SetShare(1, -5).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->SetShare(1, 71).code(), StatusCode::kInvalidArgument);
  // All or nothing: the valid first change must not stick when the second one is rejected.
  EXPECT_EQ(s->SetShares({{1, 10}, {2, 95}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->SetShares({{1, 10}, {9, 5}}).code(), StatusCode::kNotFound);
  EXPECT_EQ(s->SetShares({{1, 10}, {1, 20}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Shares(*s), std::vector<double>({30, 30}));
  // Moving share between VMs in one call is fine even where the steps alone would pass 100 %.
  ASSERT_TRUE(s->SetShares({{1, 70}, {2, 30}}).ok());
  ASSERT_TRUE(s->SetShares({{1, 10}, {2, 90}}).ok());
  EXPECT_EQ(Shares(*s), std::vector<double>({10, 90}));
}

TEST_F(SchedCoreTest, SubmitRejectsUnknownVmDuplicatesAndFullQueues) {
  SchedulerOptions options;
  options.max_queue_depth = 2;
  auto s = Make(PolicyKind::kFifo, options);
  ASSERT_TRUE(s->AddVm(1, 50).ok());
  EXPECT_EQ(s->OnSubmit(2, 100).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Submit(*s, 1, 100), Decision::Dispatch(1, 100));
  EXPECT_EQ(s->OnSubmit(1, 100).status().code(), StatusCode::kAlreadyExists);  // running
  EXPECT_EQ(Submit(*s, 1, 101), Decision::Nothing());
  EXPECT_EQ(s->OnSubmit(1, 101).status().code(), StatusCode::kAlreadyExists);  // queued
  EXPECT_EQ(Submit(*s, 1, 102), Decision::Nothing());
  EXPECT_EQ(s->OnSubmit(1, 103).status().code(), StatusCode::kResourceExhausted);
  const SchedulerStats stats = s->Stats();
  EXPECT_EQ(stats.vms[0].queue_depth, 2u);
  EXPECT_EQ(stats.vms[0].submitted, 3u);
}

TEST_F(SchedCoreTest, CompletionMustNameTheRunningSubmission) {
  auto s = Make(PolicyKind::kFifo);
  ASSERT_TRUE(s->AddVm(1, 50).ok());
  EXPECT_EQ(s->OnComplete(5, 1ms).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_EQ(Submit(*s, 1, 5), Decision::Dispatch(1, 5));
  Submit(*s, 1, 6);
  EXPECT_EQ(s->OnComplete(6, 1ms).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s->OnComplete(5, -1ms).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s->OnComplete(5, std::chrono::hours(100)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(s->OnSliceEnd(6, 1ms).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s->OnGpuIdle().status().code(), StatusCode::kFailedPrecondition);
  SchedulerStats stats = s->Stats();
  EXPECT_TRUE(stats.vms[0].running);
  EXPECT_EQ(stats.vms[0].completed, 0u);
  EXPECT_EQ(stats.vms[0].gpu_time, 0ms);
  EXPECT_EQ(Complete(*s, 5, 1ms), Decision::Dispatch(1, 6));
}

TEST_F(SchedCoreTest, DispatchesOnlyOntoAFreeGpu) {
  auto s = Make(PolicyKind::kFifo);
  ASSERT_TRUE(s->AddVm(1, 50).ok());
  ASSERT_TRUE(s->AddVm(2, 50).ok());
  Result<Decision> idle = s->OnGpuIdle();
  ASSERT_TRUE(idle.ok());
  EXPECT_EQ(*idle, Decision::Nothing());
  EXPECT_EQ(Submit(*s, 1, 10), Decision::Dispatch(1, 10));
  EXPECT_EQ(Submit(*s, 2, 20), Decision::Nothing());
  EXPECT_EQ(Submit(*s, 1, 11), Decision::Nothing());
  EXPECT_EQ(Complete(*s, 10, 2ms), Decision::Dispatch(2, 20));
  EXPECT_EQ(Complete(*s, 20, 2ms), Decision::Dispatch(1, 11));
  EXPECT_EQ(Complete(*s, 11, 2ms), Decision::Nothing());
  EXPECT_EQ(s->OnTimer(), Decision::Nothing());
}

TEST_F(SchedCoreTest, AccountsGpuTimeWaitsAndUsageWindows) {
  auto s = Make(PolicyKind::kFifo);
  ASSERT_TRUE(s->AddVm(1, 50).ok());
  ASSERT_TRUE(s->AddVm(2, 50).ok());
  Submit(*s, 1, 10);  // t = 0, runs at once
  Submit(*s, 2, 20);  // waits 30 ms
  Complete(*s, 10, 30ms);
  Complete(*s, 20, 20ms);  // t = 50 ms
  clock_.Advance(50ms);    // t = 100 ms
  const SchedulerStats stats = s->Stats();
  ASSERT_EQ(stats.vms.size(), 2u);
  const VmStats& a = stats.vms[0];
  const VmStats& b = stats.vms[1];
  EXPECT_EQ(a.gpu_time, 30ms);
  EXPECT_EQ(b.gpu_time, 20ms);
  EXPECT_EQ(a.wait_total, 0ms);
  EXPECT_EQ(b.wait_total, 30ms);
  EXPECT_EQ(b.wait_max, 30ms);
  EXPECT_EQ(a.dispatched, 1u);
  EXPECT_EQ(b.completed, 1u);
  EXPECT_NEAR(a.usage_100ms, 0.30, 0.001);
  EXPECT_NEAR(b.usage_100ms, 0.20, 0.001);
  EXPECT_NEAR(a.usage_500ms, 0.06, 0.001);
  EXPECT_NEAR(b.usage_10s, 0.002, 0.0001);
}

TEST_F(SchedCoreTest, ReportedGpuTimeIsCappedAtTheWallTimeTheSubmissionHad) {
  auto s = Make(PolicyKind::kBand);
  ASSERT_TRUE(s->AddVm(1, 50).ok());
  Submit(*s, 1, 10);
  clock_.Advance(1ms);
  ASSERT_TRUE(s->OnSliceEnd(10, 4ms).ok());  // claims 4 ms after 1 ms: counted as 1 ms
  clock_.Advance(2ms);
  ASSERT_TRUE(s->OnComplete(10, 9ms).ok());  // 2 ms since the slice report
  const SchedulerStats stats = s->Stats();
  EXPECT_EQ(stats.vms[0].gpu_time, 3ms);
  EXPECT_LE(stats.vms[0].usage_100ms, 0.031);
}

// A report that comes right after the dispatch (a slice at another VM's arrival) may carry device
// time from before it; what the bound holds back then is charged at the next report with room, so
// the total is what the device reported.
TEST_F(SchedCoreTest, TimeTheBoundHeldBackIsChargedAtTheNextReport) {
  auto s = Make(PolicyKind::kBand);
  ASSERT_TRUE(s->AddVm(1, 50).ok());
  Submit(*s, 1, 10);
  clock_.Advance(100us);
  ASSERT_TRUE(s->OnSliceEnd(10, 1ms).ok());
  EXPECT_EQ(s->Stats().vms[0].gpu_time, 100us);
  clock_.Advance(2ms);
  ASSERT_TRUE(s->OnSliceEnd(10, 500us).ok());
  EXPECT_EQ(s->Stats().vms[0].gpu_time, 1500us);
  clock_.Advance(1ms);
  ASSERT_TRUE(s->OnComplete(10, 200us).ok());
  EXPECT_EQ(s->Stats().vms[0].gpu_time, 1700us);
}

TEST_F(SchedCoreTest, RemoveVmDropsItsQueueAndAcceptsItsRunningCompletion) {
  auto s = Make(PolicyKind::kFifo);
  ASSERT_TRUE(s->AddVm(1, 50).ok());
  ASSERT_TRUE(s->AddVm(2, 50).ok());
  Submit(*s, 1, 10);
  Submit(*s, 1, 11);
  Submit(*s, 2, 20);
  Submit(*s, 1, 12);
  Result<std::vector<SubmissionHandle>> dropped = s->RemoveVm(1);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, std::vector<SubmissionHandle>({11, 12}));
  EXPECT_EQ(s->RemoveVm(1).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s->OnSubmit(1, 13).status().code(), StatusCode::kNotFound);
  // 10 is still on the GPU: its completion is accepted, charged to nobody, and VM 2 goes next.
  EXPECT_EQ(Complete(*s, 10, 1ms), Decision::Dispatch(2, 20));
  EXPECT_EQ(s->Stats().vms.size(), 1u);
  // The freed handles can be reused.
  ASSERT_TRUE(s->AddVm(1, 50).ok());
  EXPECT_EQ(Submit(*s, 1, 11), Decision::Nothing());
}

TEST_F(SchedCoreTest, PolicySwitchKeepsQueuedWorkInArrivalOrder) {
  auto s = Make(PolicyKind::kFifo);
  ASSERT_TRUE(s->AddVm(1, 50).ok());
  ASSERT_TRUE(s->AddVm(2, 50).ok());
  Submit(*s, 1, 10);  // running
  Submit(*s, 2, 20);
  Submit(*s, 1, 11);
  Submit(*s, 2, 21);
  s->SetPolicy(PolicyKind::kBand);
  EXPECT_EQ(s->policy(), PolicyKind::kBand);
  s->SetPolicy(PolicyKind::kFifo);
  EXPECT_EQ(s->Stats().vms[0].queue_depth + s->Stats().vms[1].queue_depth, 3u);
  // The running submission's completion is charged by the new policy; the queue order survived.
  EXPECT_EQ(Complete(*s, 10, 1ms), Decision::Dispatch(2, 20));
  EXPECT_EQ(Complete(*s, 20, 1ms), Decision::Dispatch(1, 11));
  EXPECT_EQ(Complete(*s, 11, 1ms), Decision::Dispatch(2, 21));
  EXPECT_EQ(Complete(*s, 21, 1ms), Decision::Nothing());
}

TEST_F(SchedCoreTest, PolicySwitchOnAHeldGpuDecidesWhenTheHoldTimerFires) {
  SchedulerOptions options;
  options.credit.work_conserving = false;
  auto s = Make(PolicyKind::kCredit, options);
  ASSERT_TRUE(s->AddVm(1, 50).ok());
  ASSERT_TRUE(s->AddVm(2, 50).ok());
  EXPECT_EQ(Submit(*s, 1, 10), Decision::Dispatch(1, 10));
  Submit(*s, 1, 11);
  // VM 1 (alone, so entitled to the whole 30 ms period) used 40 ms: under strict CREDIT the GPU
  // waits for the next period.
  const Decision held = Complete(*s, 10, 40ms);
  ASSERT_EQ(held.action, Action::kHold);
  EXPECT_EQ(s->NextTimer(), held.until);
  s->SetPolicy(PolicyKind::kFifo);
  EXPECT_EQ(s->NextTimer(), held.until);  // the owner's armed timer stays valid
  clock_.AdvanceTo(held.until);
  EXPECT_EQ(s->OnTimer(), Decision::Dispatch(1, 11));
  EXPECT_EQ(s->NextTimer(), std::nullopt);
}

TEST_F(SchedCoreTest, EarlyTimerKeepsTheHold) {
  SchedulerOptions options;
  options.credit.work_conserving = false;
  auto s = Make(PolicyKind::kCredit, options);
  ASSERT_TRUE(s->AddVm(1, 50).ok());
  Submit(*s, 1, 10);
  Submit(*s, 1, 11);
  const Decision held = Complete(*s, 10, 40ms);
  ASSERT_EQ(held.action, Action::kHold);
  EXPECT_EQ(s->OnTimer(), held);  // too early: still holding
  clock_.AdvanceTo(held.until);
  EXPECT_EQ(s->OnTimer(), Decision::Dispatch(1, 11));
}

TEST_F(SchedCoreTest, MeasuresSchedulerTimeOnlyWhileTheGpuWaits) {
  auto s = Make(PolicyKind::kFifo);
  ASSERT_TRUE(s->AddVm(1, 50).ok());
  clock_.set_read_cost(2us);
  Submit(*s, 1, 10);  // GPU free: counts (2 us between the entry and exit reads)
  Submit(*s, 1, 11);  // GPU busy: overlaps GPU work, does not count
  clock_.Advance(1ms);
  ASSERT_TRUE(s->OnComplete(10, 1ms).ok());  // counts
  clock_.set_read_cost(0us);
  EXPECT_EQ(s->Stats().scheduler_time, 4us);
}

TEST_F(SchedCoreTest, SliceBoundaryCanStopAndLaterResumeASubmission) {
  SchedulerOptions options;
  options.band.preempt_lag = 1ms;
  options.band.hold_max = 0us;
  auto s = Make(PolicyKind::kBand, options);
  ASSERT_TRUE(s->AddVm(1, 50).ok());
  ASSERT_TRUE(s->AddVm(2, 50).ok());
  EXPECT_EQ(Submit(*s, 1, 10), Decision::Dispatch(1, 10));
  Submit(*s, 2, 20);
  // VM 1 runs 1 ms slices while VM 2 waits; it is stopped once it is clearly over its share.
  int slices = 0;
  Decision verdict;
  do {
    clock_.Advance(1ms);
    Result<Decision> r = s->OnSliceEnd(10, 1ms);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    verdict = *r;
    ++slices;
  } while (verdict.action == Action::kContinue && slices < 100);
  ASSERT_EQ(verdict.action, Action::kPreempt);
  EXPECT_GE(slices, 2);
  Result<Decision> next = s->OnGpuIdle();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, Decision::Dispatch(2, 20));
  EXPECT_EQ(Complete(*s, 20, 1ms), Decision::Dispatch(1, 10));  // resumed: same handle
  EXPECT_EQ(Complete(*s, 10, 1ms), Decision::Nothing());
  const SchedulerStats stats = s->Stats();
  EXPECT_EQ(stats.vms[0].dispatched, 1u);  // a resumption is not a new dispatch
  EXPECT_EQ(stats.vms[0].preempted, 1u);
  EXPECT_EQ(stats.vms[0].completed, 1u);
  EXPECT_EQ(stats.vms[0].gpu_time, std::chrono::milliseconds(slices + 1));
}

TEST_F(SchedCoreTest, SliceOfARemovedVmStopsIt) {
  auto s = Make(PolicyKind::kBand);
  ASSERT_TRUE(s->AddVm(1, 50).ok());
  Submit(*s, 1, 10);
  ASSERT_TRUE(s->RemoveVm(1).ok());
  clock_.Advance(1ms);
  Result<Decision> r = s->OnSliceEnd(10, 1ms);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, Decision::Preempt());
  Result<Decision> next = s->OnGpuIdle();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, Decision::Nothing());
  EXPECT_EQ(s->OnComplete(10, 1ms).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(SchedCoreTest, NonPreemptivePoliciesAlwaysContinue) {
  // FIFO never preempts; CREDIT does only with preempt_at_slices (CreditPreemptsAVmOutOfCredit).
  SchedulerOptions no_slices;
  no_slices.credit.preempt_at_slices = false;
  for (PolicyKind kind : {PolicyKind::kFifo, PolicyKind::kCredit}) {
    auto s = Make(kind, no_slices);
    ASSERT_TRUE(s->AddVm(1, 50).ok());
    ASSERT_TRUE(s->AddVm(2, 50).ok());
    Submit(*s, 1, 10);
    Submit(*s, 2, 20);
    for (int i = 0; i < 50; ++i) {
      clock_.Advance(1ms);
      Result<Decision> r = s->OnSliceEnd(10, 1ms);
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(*r, Decision::Continue()) << PolicyKindName(kind);
    }
  }
}

TEST_F(SchedCoreTest, CreditPreemptsAVmOutOfCredit) {
  // VM 1 runs on past its credit while VM 2, with credit, waits: stopped at a slice boundary once
  // out of credit, not before. (The first period's 30 ms all went to VM 1, the only active VM when
  // it was handed out; from the second on each gets 15 ms: VM 1 is out after about 44 ms.)
  auto s = Make(PolicyKind::kCredit);
  ASSERT_TRUE(s->AddVm(1, 50).ok());
  ASSERT_TRUE(s->AddVm(2, 50).ok());
  Submit(*s, 1, 10);
  Submit(*s, 2, 20);
  int slices = 0;
  Result<Decision> r = Decision::Continue();
  while (*r == Decision::Continue() && slices < 100) {
    clock_.Advance(1ms);
    r = s->OnSliceEnd(10, 1ms);
    ASSERT_TRUE(r.ok());
    ++slices;
  }
  EXPECT_EQ(*r, Decision::Preempt());
  EXPECT_GE(slices, 40);
  EXPECT_LE(slices, 46);
  Result<Decision> next = s->OnGpuIdle();
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, Decision::Dispatch(2, 20));
}

// The documented threading contract: events from one dispatch thread, control calls (shares,
// policy, statistics) from another, on the real clock. No timing is asserted; the counters must add
// up.
TEST(SchedThreadTest, ControlCallsRaceWithEventsSafely) {
  MonotonicClock clock;
  auto created = Scheduler::Create(&clock, {});
  ASSERT_TRUE(created.ok());
  Scheduler& s = **created;
  ASSERT_TRUE(s.AddVm(1, 50).ok());
  ASSERT_TRUE(s.AddVm(2, 50).ok());
  std::atomic<bool> done{false};
  std::thread control([&] {
    const PolicyKind kinds[] = {PolicyKind::kFifo, PolicyKind::kCredit, PolicyKind::kBand};
    for (int i = 0; !done.load(); ++i) {
      (void)s.SetShares({{1, 10.0 + i % 80}, {2, 90.0 - i % 80}});
      (void)s.SetShare(2, 200);  // always rejected
      if (i % 16 == 0) s.SetPolicy(kinds[i % 3]);
      (void)s.Stats();
    }
  });
  // The dispatch thread: each VM keeps two submissions outstanding; holds are cut short by OnTimer.
  SubmissionHandle running = 0;  // 0: the GPU is free (handles start at 1)
  SubmissionHandle next = 1;
  uint64_t completed = 0;
  const auto act = [&](const Decision& d) {
    if (d.action == Decision::Action::kDispatch) running = d.submission;
  };
  for (VmId vm : {1u, 2u}) {
    for (int k = 0; k < 2; ++k) {
      auto d = s.OnSubmit(vm, next++);
      ASSERT_TRUE(d.ok());
      if (running == 0) act(*d);
    }
  }
  while (completed < 2000) {
    if (running == 0) {
      act(s.OnTimer());  // a hold (at most hold_max) or an early timer: keep asking until it
                         // dispatches
      continue;
    }
    auto d = s.OnComplete(running, 10us);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    const VmId vm = 1 + static_cast<VmId>(completed % 2);
    running = 0;
    act(*d);
    ++completed;
    auto again = s.OnSubmit(vm, next++);
    ASSERT_TRUE(again.ok());
    if (running == 0) act(*again);
  }
  done.store(true);
  control.join();
  uint64_t submitted = 0, finished = 0, queued = 0;
  for (const VmStats& v : s.Stats().vms) {
    submitted += v.submitted;
    finished += v.completed;
    queued += v.queue_depth + (v.running ? 1 : 0);
  }
  EXPECT_EQ(finished, completed);
  EXPECT_EQ(submitted, finished + queued);
}

}  // namespace
}  // namespace gpuvm::sched
