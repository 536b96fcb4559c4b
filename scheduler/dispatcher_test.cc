#include "scheduler/dispatcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

namespace gpuvm::sched {
namespace {

// A physical engine that runs one submission for the time the test gave it, on a ManualClock.
// Poll reports it done once the clock has passed its end; `report_gpu_time` says whether the
// engine tells its own GPU time (else the dispatcher measures it).
class FakeSink final : public SubmissionSink {
 public:
  explicit FakeSink(ManualClock* clock) : clock_(clock) {}

  void SetLength(SubmissionHandle h, Duration length) { lengths_[h] = length; }

  Status Start(VmId vm, SubmissionHandle h) override {
    if (running_) {
      ADD_FAILURE() << "Start while submission " << running_->handle << " runs";
      return Status::Internal("engine busy");
    }
    if (fail_start_.contains(h)) return Status::Unavailable("channel is gone");
    if (auto it = suspended_.find(h); it != suspended_.end()) {
      running_ = Run{vm, h, clock_->Peek(), clock_->Peek() + it->second.left, it->second.before};
      suspended_.erase(it);
      ++resumes;
      return Status::Ok();
    }
    const Duration length = lengths_.contains(h) ? lengths_[h] : 1ms;
    running_ = Run{vm, h, clock_->Peek(), clock_->Peek() + length};
    order.push_back(h);
    return Status::Ok();
  }

  bool CanSuspend() const override { return suspendable; }
  bool ReportsCompletion() const override { return reports_completion; }
  Status Suspend(VmId vm, SubmissionHandle h) override {
    if (!suspendable || !running_ || running_->handle != h || running_->vm != vm) {
      ADD_FAILURE() << "Suspend of submission " << h << " that is not running";
      return Status::Internal("not running");
    }
    const TimePoint now = clock_->Peek();
    suspended_[h] = Paused{running_->end - now, running_->before + (now - running_->start)};
    running_.reset();
    ++suspends;
    return Status::Ok();
  }

  // Kill-work: whatever state `h` is in, it never runs again; the GPU time it used is returned.
  Result<std::optional<Duration>> Cancel(VmId vm, SubmissionHandle h, const Status& why) override {
    if (!cancellable) return Status::Unimplemented("cannot cancel");
    cancelled.push_back(h);
    last_cancel_reason = why;
    if (running_ && running_->handle == h && running_->vm == vm) {
      const Duration ran = running_->before + (clock_->Peek() - running_->start);
      running_.reset();
      return std::optional<Duration>(ran);
    }
    if (auto it = suspended_.find(h); it != suspended_.end()) {
      const Duration ran = it->second.before;
      suspended_.erase(it);
      return std::optional<Duration>(ran);
    }
    return std::optional<Duration>();
  }

  Result<SinkPoll> Poll(VmId vm, SubmissionHandle h) override {
    ++polls;
    if (!running_ || running_->handle != h || running_->vm != vm) {
      ADD_FAILURE() << "Poll of submission " << h << " that is not running";
      return Status::Internal("not running");
    }
    if (fail_poll_.contains(h)) {
      running_.reset();
      return Status::DataLoss("channel faulted");
    }
    if (clock_->Peek() < running_->end) {
      if (!report_gpu_time || !report_running) return SinkPoll::Running();
      return SinkPoll::Running(running_->before + (clock_->Peek() - running_->start));
    }
    const Duration ran = running_->before + (running_->end - running_->start);
    running_.reset();
    return report_gpu_time ? SinkPoll::Done(ran) : SinkPoll::Done();
  }

  // When the running submission ends, if one runs.
  std::optional<TimePoint> end() const {
    return running_ ? std::optional<TimePoint>(running_->end) : std::nullopt;
  }

  void FailStart(SubmissionHandle h) { fail_start_[h] = true; }
  void FailPoll(SubmissionHandle h) { fail_poll_[h] = true; }

  bool report_gpu_time = true;
  bool suspendable = false;     // can stop a run and resume it (a preemptible engine)
  bool report_running = false;  // tells the GPU time of a run in progress
  bool cancellable = true;
  bool reports_completion = false;      // calls PollNow itself when a run ends (as fv's sink does)
  std::vector<SubmissionHandle> order;  // first starts
  std::vector<SubmissionHandle> cancelled;
  Status last_cancel_reason;
  uint64_t polls = 0, suspends = 0, resumes = 0;

 private:
  struct Run {
    VmId vm;
    SubmissionHandle handle;
    TimePoint start, end;
    Duration before{0};  // GPU time of its runs before a suspension
  };
  struct Paused {
    Duration left;
    Duration before;
  };
  std::map<SubmissionHandle, Paused> suspended_;
  ManualClock* clock_;
  std::map<SubmissionHandle, Duration> lengths_;
  std::map<SubmissionHandle, bool> fail_start_, fail_poll_;
  std::optional<Run> running_;
};

DispatcherOptions Driven(PolicyKind policy) {
  DispatcherOptions o;
  o.own_thread = false;
  o.scheduler.policy = policy;
  return o;
}

struct Fixture {
  explicit Fixture(DispatcherOptions options) : sink(&clock) {
    options.on_done = [this](const SubmissionDone& d) {
      done.push_back(d);
      if (on_done) on_done(d);
    };
    options.on_slice = [this](const SubmissionDone& d) {
      EXPECT_FALSE(d.completed);
      if (on_slice) on_slice(d);
    };
    Result<std::unique_ptr<Dispatcher>> d = Dispatcher::Create(&clock, &sink, std::move(options));
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    if (d.ok()) dispatcher = std::move(d).value();
  }

  // Advances the clock event by event (the dispatcher's wakeups, the engine's end, `extra` times)
  // up to `until`, stepping the dispatcher at each.
  void RunUntil(TimePoint until, const std::function<std::optional<TimePoint>()>& extra = {}) {
    for (int guard = 0; guard < 10'000'000; ++guard) {
      dispatcher->Step();
      std::optional<TimePoint> next = dispatcher->NextWakeup();
      if (std::optional<TimePoint> e = sink.end(); e && (!next || *e < *next)) next = e;
      if (extra) {
        if (std::optional<TimePoint> x = extra(); x && (!next || *x < *next)) next = x;
      }
      if (!next || *next > until) {
        clock.AdvanceTo(until);
        dispatcher->Step();
        return;
      }
      if (*next > clock.Peek()) clock.AdvanceTo(*next);
      if (sink.end() && clock.Peek() >= *sink.end()) dispatcher->Wake();  // the engine's interrupt
      if (extra) extra();  // lets the workload submit what is due
    }
    ADD_FAILURE() << "RunUntil did not finish";
  }

  VmStats Vm(VmId vm) const {
    for (const VmStats& s : dispatcher->Stats().scheduler.vms) {
      if (s.vm == vm) return s;
    }
    ADD_FAILURE() << "no VM " << vm;
    return {};
  }

  ManualClock clock;
  FakeSink sink;
  std::unique_ptr<Dispatcher> dispatcher;
  std::vector<SubmissionDone> done;
  std::function<void(const SubmissionDone&)> on_done;
  std::function<void(const SubmissionDone&)> on_slice;
};

TEST(DispatcherTest, RejectsBadConstruction) {
  ManualClock clock;
  FakeSink sink(&clock);
  EXPECT_FALSE(Dispatcher::Create(nullptr, &sink, Driven(PolicyKind::kFifo)).ok());
  EXPECT_FALSE(Dispatcher::Create(&clock, nullptr, Driven(PolicyKind::kFifo)).ok());
  DispatcherOptions o = Driven(PolicyKind::kFifo);
  o.poll_interval = Duration(0);
  EXPECT_EQ(Dispatcher::Create(&clock, &sink, o).status().code(), StatusCode::kInvalidArgument);
  o = Driven(PolicyKind::kFifo);
  o.notified_poll_interval = Duration(0);
  EXPECT_EQ(Dispatcher::Create(&clock, &sink, o).status().code(), StatusCode::kInvalidArgument);
  o = Driven(PolicyKind::kFifo);
  o.idle_linger = Duration(-1);
  EXPECT_EQ(Dispatcher::Create(&clock, &sink, o).status().code(), StatusCode::kInvalidArgument);
}

TEST(DispatcherTest, FifoReleasesInArrivalOrderOneAtATime) {
  Fixture f(Driven(PolicyKind::kFifo));
  ASSERT_TRUE(f.dispatcher->AddVm(1, 50).ok());
  ASSERT_TRUE(f.dispatcher->AddVm(2, 50).ok());
  ASSERT_TRUE(f.dispatcher->Submit(1, 10).ok());
  ASSERT_TRUE(f.dispatcher->Submit(2, 20).ok());
  ASSERT_TRUE(f.dispatcher->Submit(1, 11).ok());
  f.sink.SetLength(10, 2ms);
  f.sink.SetLength(20, 3ms);
  f.sink.SetLength(11, 1ms);
  f.RunUntil(TimePoint(20ms));
  EXPECT_EQ(f.sink.order, (std::vector<SubmissionHandle>{10, 20, 11}));
  ASSERT_EQ(f.done.size(), 3u);
  EXPECT_EQ(f.done[0].gpu_time, 2ms);
  EXPECT_EQ(f.done[1].gpu_time, 3ms);
  EXPECT_EQ(f.done[1].waited, 2ms);  // queued behind 10
  EXPECT_EQ(f.done[2].waited, 5ms);
  EXPECT_EQ(f.Vm(1).gpu_time, 3ms);
  EXPECT_EQ(f.Vm(2).gpu_time, 3ms);
  const DispatcherStats s = f.dispatcher->Stats();
  EXPECT_EQ(s.started, 3u);
  EXPECT_EQ(s.completed, 3u);
  EXPECT_EQ(s.recent.size(), 3u);
  EXPECT_FALSE(f.dispatcher->busy());
}

TEST(DispatcherTest, MeasuresGpuTimeByPollingWhenTheEngineCannotTell) {
  DispatcherOptions o = Driven(PolicyKind::kFifo);
  o.poll_interval = 100us;
  Fixture f(o);
  f.sink.report_gpu_time = false;
  ASSERT_TRUE(f.dispatcher->AddVm(1, 100).ok());
  f.sink.SetLength(1, 1050us);
  ASSERT_TRUE(f.dispatcher->Submit(1, 1).ok());
  // Step only at the dispatcher's own wakeups (no interrupt): completion is seen at the first poll
  // at or after 1050 us, i.e. 1100 us.
  for (int i = 0; i < 100 && f.done.empty(); ++i) {
    f.dispatcher->Step();
    if (!f.done.empty()) break;
    std::optional<TimePoint> next = f.dispatcher->NextWakeup();
    ASSERT_TRUE(next.has_value());
    f.clock.AdvanceTo(*next);
  }
  ASSERT_EQ(f.done.size(), 1u);
  EXPECT_EQ(f.done[0].gpu_time, 1100us);
  EXPECT_EQ(f.Vm(1).gpu_time, 1100us);
}

// Whoever sees the engine finish (the GPU's engine thread) calls PollNow: the submission completes
// and the next one starts right then, on the caller's thread, before the poll interval is up.
// FIFO, polls only when asked (a 1 s interval), VM 1 whose submissions 1 and 2 take 10 us each.
DispatcherOptions SlowPolling() {
  DispatcherOptions o = Driven(PolicyKind::kFifo);
  o.poll_interval = 1s;
  return o;
}
void TwoShortSubmissionsOfVm1(Fixture& f) {
  ASSERT_TRUE(f.dispatcher->AddVm(1, 100).ok());
  f.sink.SetLength(1, 10us);
  f.sink.SetLength(2, 10us);
}

TEST(DispatcherTest, PollNowCompletesAndStartsTheNextAtOnce) {
  Fixture f(SlowPolling());
  TwoShortSubmissionsOfVm1(f);
  ASSERT_TRUE(f.dispatcher->Submit(1, 1).ok());
  ASSERT_TRUE(f.dispatcher->Submit(1, 2).ok());
  f.dispatcher->Step();  // 1 starts
  ASSERT_EQ(f.sink.order, std::vector<SubmissionHandle>{1});
  f.clock.Advance(10us);
  f.dispatcher->Step();  // the poll is not due: nothing
  EXPECT_TRUE(f.done.empty());
  EXPECT_TRUE(f.dispatcher->PollNow());
  ASSERT_EQ(f.done.size(), 1u);
  EXPECT_EQ(f.done[0].handle, 1u);
  EXPECT_EQ(f.sink.order, (std::vector<SubmissionHandle>{1, 2}));
  // From another thread (the engine's), the same.
  f.clock.Advance(10us);
  f.sink.SetLength(3, 10us);
  ASSERT_TRUE(f.dispatcher->Submit(1, 3).ok());
  bool stepped = false;
  std::thread engine([&] { stepped = f.dispatcher->PollNow(); });
  engine.join();
  EXPECT_TRUE(stepped);
  ASSERT_EQ(f.done.size(), 2u);
  EXPECT_EQ(f.sink.order, (std::vector<SubmissionHandle>{1, 2, 3}));
}

// A submitter that steps itself (SubmitAndPoll) starts the submission there and then when the
// engine is free; with the engine busy it only queues.
TEST(DispatcherTest, SubmitAndPollStartsOnTheSubmittersThread) {
  Fixture f(SlowPolling());
  TwoShortSubmissionsOfVm1(f);
  ASSERT_TRUE(f.dispatcher->SubmitAndPoll(1, 1).ok());
  EXPECT_EQ(f.sink.order, std::vector<SubmissionHandle>{1});
  ASSERT_TRUE(f.dispatcher->SubmitAndPoll(1, 2).ok());  // 1 still runs: 2 waits
  EXPECT_EQ(f.sink.order, std::vector<SubmissionHandle>{1});
  f.clock.Advance(10us);
  ASSERT_TRUE(f.dispatcher->SubmitAndPoll(1, 3).ok());  // 1 is done: 2 starts, 3 waits
  EXPECT_EQ(f.sink.order, (std::vector<SubmissionHandle>{1, 2}));
  // Errors as Submit, nothing stepped.
  EXPECT_EQ(f.dispatcher->SubmitAndPoll(9, 4).code(), StatusCode::kNotFound);
  EXPECT_EQ(f.dispatcher->SubmitAndPoll(1, 3).code(), StatusCode::kAlreadyExists);
}

// A sink that reports every completion itself is polled only as a fallback
// (notified_poll_interval); one that does not, every poll_interval.
TEST(DispatcherTest, ASinkThatReportsCompletionIsPolledOnlyAsAFallback) {
  for (const bool reports : {false, true}) {
    DispatcherOptions o = Driven(PolicyKind::kFifo);
    o.poll_interval = 100us;
    o.notified_poll_interval = 300us;
    o.quantum = Duration(0);
    Fixture f(o);
    f.sink.reports_completion = reports;
    ASSERT_TRUE(f.dispatcher->AddVm(1, 100).ok());
    f.sink.SetLength(1, 5ms);
    ASSERT_TRUE(f.dispatcher->SubmitAndPoll(1, 1).ok());
    ASSERT_EQ(f.sink.order, std::vector<SubmissionHandle>{1});
    EXPECT_EQ(f.sink.polls, 0u);  // not right after its start
    const TimePoint first = *f.dispatcher->NextWakeup();
    EXPECT_EQ(first, TimePoint(reports ? 300us : 100us)) << reports;
    f.clock.AdvanceTo(first);
    f.dispatcher->Step();
    EXPECT_EQ(f.sink.polls, 1u);
    EXPECT_EQ(*f.dispatcher->NextWakeup(), first + (reports ? 300us : 100us)) << reports;
  }
}

TEST(DispatcherTest, KeepsEachVmsOrderUnderEveryPolicy) {
  for (PolicyKind kind : {PolicyKind::kFifo, PolicyKind::kCredit, PolicyKind::kBand}) {
    Fixture f(Driven(kind));
    ASSERT_TRUE(f.dispatcher->AddVm(1, 30).ok());
    ASSERT_TRUE(f.dispatcher->AddVm(2, 70).ok());
    for (SubmissionHandle h = 0; h < 40; ++h) {
      f.sink.SetLength(h, (h % 2 == 0) ? 1ms : 7ms);
      ASSERT_TRUE(f.dispatcher->Submit(h % 2 == 0 ? 1 : 2, h).ok());
    }
    f.RunUntil(TimePoint(1s));
    ASSERT_EQ(f.sink.order.size(), 40u) << PolicyKindName(kind);
    SubmissionHandle last[3] = {0, 0, 0};
    bool seen[3] = {false, false, false};
    for (SubmissionHandle h : f.sink.order) {
      const int vm = h % 2 == 0 ? 1 : 2;
      if (seen[vm]) {
        EXPECT_GT(h, last[vm]) << PolicyKindName(kind);
      }
      seen[vm] = true;
      last[vm] = h;
    }
  }
}

TEST(DispatcherTest, InvalidInputChangesNothing) {
  Fixture f(Driven(PolicyKind::kBand));
  ASSERT_TRUE(f.dispatcher->AddVm(1, 60).ok());
  EXPECT_EQ(f.dispatcher->AddVm(1, 10).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(f.dispatcher->AddVm(2, 50).code(), StatusCode::kInvalidArgument);  // 110 %
  EXPECT_EQ(f.dispatcher->Submit(9, 1).code(), StatusCode::kNotFound);
  ASSERT_TRUE(f.dispatcher->Submit(1, 1).ok());
  EXPECT_EQ(f.dispatcher->Submit(1, 1).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(f.dispatcher->SetShare(1, -5).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.dispatcher->SetShare(7, 5).code(), StatusCode::kNotFound);
  EXPECT_EQ(f.dispatcher->RemoveVm(7).status().code(), StatusCode::kNotFound);
  const DispatcherStats s = f.dispatcher->Stats();
  ASSERT_EQ(s.scheduler.vms.size(), 1u);
  EXPECT_EQ(s.scheduler.vms[0].share_percent, 60);
  EXPECT_EQ(s.scheduler.vms[0].submitted, 1u);
}

TEST(DispatcherTest, AFullQueueIsRefused) {
  DispatcherOptions o = Driven(PolicyKind::kFifo);
  o.scheduler.max_queue_depth = 3;
  Fixture f(o);
  ASSERT_TRUE(f.dispatcher->AddVm(1, 10).ok());
  // The first is chosen at once (pending, not queued); three more fill the queue.
  for (SubmissionHandle h = 0; h < 4; ++h) ASSERT_TRUE(f.dispatcher->Submit(1, h).ok());
  EXPECT_EQ(f.dispatcher->Submit(1, 99).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(f.Vm(1).queue_depth, 3u);
}

TEST(DispatcherTest, SinkErrorsCompleteTheSubmissionAndTheNextOneRuns) {
  Fixture f(Driven(PolicyKind::kFifo));
  ASSERT_TRUE(f.dispatcher->AddVm(1, 50).ok());
  ASSERT_TRUE(f.dispatcher->AddVm(2, 50).ok());
  f.sink.FailStart(1);
  f.sink.FailPoll(2);
  ASSERT_TRUE(f.dispatcher->Submit(1, 1).ok());
  ASSERT_TRUE(f.dispatcher->Submit(2, 2).ok());
  ASSERT_TRUE(f.dispatcher->Submit(2, 3).ok());
  f.RunUntil(TimePoint(10ms));
  ASSERT_EQ(f.done.size(), 3u);
  EXPECT_EQ(f.done[0].handle, 1u);
  EXPECT_EQ(f.done[0].status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(f.done[1].handle, 2u);
  EXPECT_EQ(f.done[1].status.code(), StatusCode::kDataLoss);
  EXPECT_EQ(f.done[2].handle, 3u);
  EXPECT_TRUE(f.done[2].status.ok());
  const DispatcherStats s = f.dispatcher->Stats();
  EXPECT_EQ(s.start_errors, 1u);
  EXPECT_EQ(s.poll_errors, 1u);
}

TEST(DispatcherTest, RemovingAVmDropsItsQueueAndTheOthersContinue) {
  Fixture f(Driven(PolicyKind::kFifo));
  ASSERT_TRUE(f.dispatcher->AddVm(1, 50).ok());
  ASSERT_TRUE(f.dispatcher->AddVm(2, 50).ok());
  f.sink.SetLength(1, 5ms);
  ASSERT_TRUE(f.dispatcher->Submit(1, 1).ok());
  ASSERT_TRUE(f.dispatcher->Submit(1, 2).ok());
  ASSERT_TRUE(f.dispatcher->Submit(2, 3).ok());
  f.dispatcher->Step();  // 1 starts
  Result<std::vector<SubmissionHandle>> dropped = f.dispatcher->RemoveVm(1);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, (std::vector<SubmissionHandle>{2}));
  f.RunUntil(TimePoint(20ms));
  EXPECT_EQ(f.sink.order, (std::vector<SubmissionHandle>{1, 3}));
  EXPECT_EQ(f.Vm(2).completed, 1u);
}

TEST(DispatcherTest, RemovingAVmWhoseSubmissionWasChosenButNotStarted) {
  Fixture f(Driven(PolicyKind::kFifo));
  ASSERT_TRUE(f.dispatcher->AddVm(1, 50).ok());
  ASSERT_TRUE(f.dispatcher->AddVm(2, 50).ok());
  ASSERT_TRUE(f.dispatcher->Submit(1, 1).ok());  // chosen, pending until the next Step
  ASSERT_TRUE(f.dispatcher->Submit(2, 2).ok());
  Result<std::vector<SubmissionHandle>> dropped = f.dispatcher->RemoveVm(1);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, (std::vector<SubmissionHandle>{1}));
  f.RunUntil(TimePoint(5ms));
  EXPECT_EQ(f.sink.order, (std::vector<SubmissionHandle>{2}));
}

// The looping workload's submitter: every VM whose next submission is due (`next_submit`; on_done
// sets the next time after a completion) submits one of length `length_of(vm)`. Returns the
// earliest time still to come.
std::optional<TimePoint> SubmitDue(Fixture& f, std::map<VmId, TimePoint>& next_submit,
                                   SubmissionHandle& next_handle,
                                   const std::function<Duration(VmId)>& length_of) {
  std::optional<TimePoint> earliest;
  for (auto& [vm, at] : next_submit) {
    if (at == TimePoint::max()) continue;
    if (f.clock.Peek() >= at) {
      const SubmissionHandle h = next_handle++;
      f.sink.SetLength(h, length_of(vm));
      EXPECT_TRUE(f.dispatcher->Submit(vm, h).ok());
      at = TimePoint::max();
      continue;
    }
    if (!earliest || at < *earliest) earliest = at;
  }
  return earliest;
}

// Two VMs with equal shares loop "submit, wait, think 50 us, submit": VM 1 runs madd (1 ms), VM 2
// long-madd (15 ms). Returns each VM's fraction of the GPU time used in [1 s, 5 s), with `policy`
// (switched to `switch_to` at 3 s if given) and optional share changes at 3 s.
struct TwoVmRun {
  double vm1 = 0, vm2 = 0;
};
TwoVmRun RunMaddAgainstLongMadd(PolicyKind policy, double share1, double share2,
                                std::optional<PolicyKind> switch_to = std::nullopt,
                                std::optional<std::pair<double, double>> reshare = std::nullopt,
                                Duration measure_from = 1s, Duration until = 5s) {
  Fixture f(Driven(policy));
  EXPECT_TRUE(f.dispatcher->AddVm(1, share1).ok());
  EXPECT_TRUE(f.dispatcher->AddVm(2, share2).ok());
  std::map<VmId, TimePoint> next_submit = {{1, TimePoint(0us)}, {2, TimePoint(10us)}};
  SubmissionHandle next_handle = 1;
  std::map<VmId, Duration> used_before, used_total;
  bool measuring = false;
  f.on_done = [&](const SubmissionDone& d) {
    next_submit[d.vm] = f.clock.Peek() + 50us;
    if (measuring) used_total[d.vm] += d.gpu_time;
  };
  const auto submit_due = [&] {
    return SubmitDue(f, next_submit, next_handle, [](VmId vm) { return vm == 1 ? 1ms : 15ms; });
  };
  f.RunUntil(TimePoint(measure_from), submit_due);
  measuring = true;
  if (switch_to || reshare) {
    f.RunUntil(TimePoint(3s), submit_due);
    used_total.clear();  // measure only after the change, once it settled
    if (switch_to) f.dispatcher->SetPolicy(*switch_to);
    if (reshare) {
      EXPECT_TRUE(f.dispatcher->SetShares({{1, reshare->first}, {2, reshare->second}}).ok());
    }
    f.RunUntil(TimePoint(3500ms), submit_due);
    used_total.clear();
  }
  f.RunUntil(TimePoint(until), submit_due);
  const double total = static_cast<double>((used_total[1] + used_total[2]).count());
  EXPECT_GT(total, 0);
  return {used_total[1].count() / total, used_total[2].count() / total};
}

TEST(DispatcherTest, TwoVmCreditIsUnfairAsInGpuvm) {
  // GPUvm Fig 4.11: with 2 VMs CREDIT behaves like FIFO, the long-madd VM takes ~15/16.
  const TwoVmRun fifo = RunMaddAgainstLongMadd(PolicyKind::kFifo, 50, 50);
  const TwoVmRun credit = RunMaddAgainstLongMadd(PolicyKind::kCredit, 50, 50);
  EXPECT_GT(fifo.vm2, 0.85);
  EXPECT_GT(credit.vm2, 0.85);
}

TEST(DispatcherTest, TwoVmBandIsFair) {
  const TwoVmRun band = RunMaddAgainstLongMadd(PolicyKind::kBand, 50, 50);
  EXPECT_NEAR(band.vm1, 0.5, 0.05);
  EXPECT_NEAR(band.vm2, 0.5, 0.05);
}

TEST(DispatcherTest, BandHoldsUnequalShares) {
  // 10/90 with the long kernels on the 10 % VM: the hard case.
  const TwoVmRun band = RunMaddAgainstLongMadd(PolicyKind::kBand, 90, 10);
  EXPECT_NEAR(band.vm1, 0.9, 0.05);
  EXPECT_NEAR(band.vm2, 0.1, 0.05);
}

TEST(DispatcherTest, LivePolicySwitchFromCreditToBandFixesIt) {
  const TwoVmRun run = RunMaddAgainstLongMadd(PolicyKind::kCredit, 50, 50, PolicyKind::kBand);
  EXPECT_NEAR(run.vm1, 0.5, 0.05);
}

TEST(DispatcherTest, LiveShareChangeTakesEffect) {
  const TwoVmRun run =
      RunMaddAgainstLongMadd(PolicyKind::kBand, 50, 50, std::nullopt, std::make_pair(20.0, 80.0));
  EXPECT_NEAR(run.vm1, 0.2, 0.05);
  EXPECT_NEAR(run.vm2, 0.8, 0.05);
}

// Preemption (DispatcherOptions::quantum): one VM at share 10 % submits a kernel that never ends,
// three others loop 1 ms kernels at 30 % each. Returns each VM's fraction of the GPU time charged
// in [1 s, 4 s) (slices included), and how many suspensions the engine saw.
struct EaterRun {
  std::map<VmId, double> share;
  uint64_t suspends = 0;
  uint64_t slices = 0;
};
EaterRun RunEndlessKernelBeside(PolicyKind policy, Duration quantum, bool suspendable = true) {
  DispatcherOptions o = Driven(policy);
  o.quantum = quantum;
  Fixture f(o);
  f.sink.suspendable = suspendable;
  f.sink.report_running = true;
  EXPECT_TRUE(f.dispatcher->AddVm(1, 10).ok());
  for (VmId vm : {2, 3, 4}) EXPECT_TRUE(f.dispatcher->AddVm(vm, 30).ok());
  std::map<VmId, TimePoint> next_submit = {
      {1, TimePoint(0us)}, {2, TimePoint(10us)}, {3, TimePoint(20us)}, {4, TimePoint(30us)}};
  SubmissionHandle next_handle = 1;
  std::map<VmId, Duration> used;
  bool measuring = false;
  f.on_done = [&](const SubmissionDone& d) {
    next_submit[d.vm] = f.clock.Peek() + 50us;
    if (measuring) used[d.vm] += d.gpu_time;
  };
  f.on_slice = [&](const SubmissionDone& d) {
    if (measuring) used[d.vm] += d.gpu_time;
  };
  const auto submit_due = [&] {
    return SubmitDue(f, next_submit, next_handle,
                     [](VmId vm) { return vm == 1 ? Duration(1h) : Duration(1ms); });
  };
  f.RunUntil(TimePoint(1s), submit_due);
  measuring = true;
  f.RunUntil(TimePoint(4s), submit_due);
  EaterRun r;
  Duration total{0};
  for (auto& [vm, d] : used) total += d;
  EXPECT_GT(total.count(), 0);
  for (VmId vm : {1, 2, 3, 4}) r.share[vm] = double(used[vm].count()) / double(total.count());
  r.suspends = f.sink.suspends;
  r.slices = f.dispatcher->Stats().slices;
  return r;
}

TEST(DispatcherTest, BandPreemptsAnEndlessKernelDownToItsShare) {
  const EaterRun band = RunEndlessKernelBeside(PolicyKind::kBand, 1ms);
  EXPECT_NEAR(band.share.at(1), 0.10, 0.03);
  for (VmId vm : {2, 3, 4}) EXPECT_NEAR(band.share.at(vm), 0.30, 0.03) << vm;
  EXPECT_GT(band.suspends, 10u);
  EXPECT_GT(band.slices, band.suspends);
}

TEST(DispatcherTest, CreditPreemptsAnEndlessKernelToo) {
  const EaterRun credit = RunEndlessKernelBeside(PolicyKind::kCredit, 1ms);
  EXPECT_NEAR(credit.share.at(1), 0.10, 0.03);
  EXPECT_GT(credit.suspends, 10u);
}

TEST(DispatcherTest, NonPreemptiveDispatchLetsTheEndlessKernelKeepTheGpu) {
  // quantum 0 (GPUvm's behaviour), or an engine that cannot suspend: once the endless kernel
  // starts nothing else runs.
  for (auto [quantum, suspendable] :
       {std::pair<Duration, bool>{Duration(0), true}, std::pair<Duration, bool>{1ms, false}}) {
    const EaterRun r = RunEndlessKernelBeside(PolicyKind::kBand, quantum, suspendable);
    EXPECT_GT(r.share.at(1), 0.99);
    EXPECT_EQ(r.suspends, 0u);
    EXPECT_GT(r.slices, 1000u);  // charged as it runs all the same
  }
}

// Two VMs at 50 % on a suspendable engine that reports running time; VM 1's submission 10 (100 ms
// long) starts at time zero.
void StartALongRunOfVm1(Fixture& f) {
  f.sink.suspendable = true;
  f.sink.report_running = true;
  f.sink.SetLength(10, 100ms);
  ASSERT_TRUE(f.dispatcher->AddVm(1, 50).ok());
  ASSERT_TRUE(f.dispatcher->AddVm(2, 50).ok());
  ASSERT_TRUE(f.dispatcher->Submit(1, 10).ok());
  f.dispatcher->Step();
}

// Another VM's submission ends the running one's slice there and then (charged, and a chance for
// the policy to stop it), not at the quantum; the running VM's own submissions do not.
TEST(DispatcherTest, AnotherVmsArrivalEndsTheRunningSliceAtOnce) {
  for (const bool on : {true, false}) {
    DispatcherOptions o = Driven(PolicyKind::kBand);
    o.slice_on_arrival = on;
    o.arrival_min_run = Duration(0);
    Fixture f(o);
    std::vector<std::pair<TimePoint, Duration>> slices;
    f.on_slice = [&](const SubmissionDone& d) { slices.push_back({f.clock.Peek(), d.gpu_time}); };
    StartALongRunOfVm1(f);
    f.clock.AdvanceTo(TimePoint(200us));
    ASSERT_TRUE(f.dispatcher->Submit(1, 11).ok());
    f.dispatcher->Step();
    EXPECT_TRUE(slices.empty()) << on;
    f.clock.AdvanceTo(TimePoint(300us));
    ASSERT_TRUE(f.dispatcher->Submit(2, 20).ok());
    f.dispatcher->Step();
    if (on) {
      ASSERT_EQ(slices.size(), 1u);
      EXPECT_EQ(slices[0].first, TimePoint(300us));
      EXPECT_EQ(slices[0].second, 300us);
    } else {
      EXPECT_TRUE(slices.empty());
    }
  }
}

// An arrival does not cut a run younger than arrival_min_run: its slice ends when the run is that
// old (a stop costs the device more than such a run has left to give); an older run's slice ends at
// the arrival. Restarted (resumed) runs count from their restart.
TEST(DispatcherTest, AnArrivalWaitsForTheRunningSubmissionsMinimumRun) {
  DispatcherOptions o = Driven(PolicyKind::kBand);
  o.arrival_min_run = 500us;
  o.poll_interval = 50us;
  Fixture f(o);
  std::vector<std::pair<TimePoint, Duration>> slices;
  f.on_slice = [&](const SubmissionDone& d) { slices.push_back({f.clock.Peek(), d.gpu_time}); };
  StartALongRunOfVm1(f);
  f.clock.AdvanceTo(TimePoint(300us));
  ASSERT_TRUE(f.dispatcher->Submit(2, 20).ok());
  f.dispatcher->Step();
  EXPECT_TRUE(slices.empty()) << "cut 300 us into the run";
  f.clock.AdvanceTo(TimePoint(450us));
  f.dispatcher->Step();
  EXPECT_TRUE(slices.empty());
  f.clock.AdvanceTo(TimePoint(500us));
  f.dispatcher->Step();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0].first, TimePoint(500us));
  EXPECT_EQ(slices[0].second, 500us);

  // The same with the arrival after the minimum: the slice ends there and then.
  Fixture g(o);
  std::vector<TimePoint> at;
  g.on_slice = [&](const SubmissionDone&) { at.push_back(g.clock.Peek()); };
  StartALongRunOfVm1(g);
  g.clock.AdvanceTo(TimePoint(700us));
  ASSERT_TRUE(g.dispatcher->Submit(2, 20).ok());
  g.dispatcher->Step();
  ASSERT_EQ(at.size(), 1u);
  EXPECT_EQ(at[0], TimePoint(700us));
}

// The fallback never delays a slice: an arrival that ends the running slice at arrival_min_run is
// polled for then, not at the next fallback poll.
TEST(DispatcherTest, AReportingSinksSliceIsStillChargedWhenDue) {
  DispatcherOptions o = Driven(PolicyKind::kBand);
  o.arrival_min_run = 500us;
  o.poll_interval = 50us;
  o.notified_poll_interval = 1ms;
  Fixture f(o);
  f.sink.reports_completion = true;
  std::vector<TimePoint> at;
  f.on_slice = [&](const SubmissionDone&) { at.push_back(f.clock.Peek()); };
  StartALongRunOfVm1(f);
  f.clock.AdvanceTo(TimePoint(300us));
  ASSERT_TRUE(f.dispatcher->SubmitAndPoll(2, 20).ok());
  EXPECT_TRUE(at.empty());
  ASSERT_EQ(f.dispatcher->NextWakeup(), TimePoint(500us));
  f.clock.AdvanceTo(TimePoint(500us));
  f.dispatcher->Step();
  ASSERT_EQ(at.size(), 1u);
  EXPECT_EQ(at[0], TimePoint(500us));
}

// The dispatch thread is not woken for each submission a submitter starts itself when the sink
// reports completions: it keeps a fallback poll planned (idle_linger) and that covers them.
TEST(DispatcherTest, SelfSteppedStartsDoNotWakeTheDispatchThread) {
  // An engine whose work is done as soon as it starts, on the real clock (the thread sleeps on it).
  class InstantSink final : public SubmissionSink {
   public:
    Status Start(VmId, SubmissionHandle) override { return Status::Ok(); }
    Result<SinkPoll> Poll(VmId, SubmissionHandle) override { return SinkPoll::Done(Duration(1us)); }
    bool ReportsCompletion() const override { return true; }
  };
  MonotonicClock clock;
  InstantSink sink;
  DispatcherOptions o;
  o.scheduler.policy = PolicyKind::kFifo;
  o.notified_poll_interval = 1s;  // so the count does not depend on how fast this host is
  o.idle_linger = 10s;
  auto d = Dispatcher::Create(&clock, &sink, o);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE((*d)->AddVm(1, 100).ok());
  for (SubmissionHandle h = 1; h <= 200; ++h) ASSERT_TRUE((*d)->SubmitAndPoll(1, h).ok());
  const DispatcherStats s = (*d)->Stats();
  EXPECT_EQ(s.started, 200u);
  EXPECT_GE(s.completed, 199u);  // the last one is seen at the next submission or poll
  EXPECT_LE(s.thread_wakeups, 5u);
}

// While a Step runs on another thread (a PollNow whose sink call takes long, or whose thread was
// preempted), the dispatch thread, woken meanwhile, waits for that Step to end instead of going
// round its loop: it used to spin there, 3.5 ms at a time on a host with one free CPU.
TEST(DispatcherTest, TheDispatchThreadWaitsForAStepElsewhereInsteadOfSpinning) {
  class BlockingSink final : public SubmissionSink {
   public:
    Status Start(VmId, SubmissionHandle) override { return Status::Ok(); }
    Result<SinkPoll> Poll(VmId, SubmissionHandle) override {
      std::unique_lock lock(mu);
      if (block && std::this_thread::get_id() == blocked) {  // only the "engine" thread's polls
        entered = true;
        cv.notify_all();
        cv.wait(lock, [&] { return !block; });
      }
      return SinkPoll::Running(Duration(0));
    }
    std::mutex mu;
    std::condition_variable cv;
    bool block = false, entered = false;
    std::thread::id blocked;
  };
  MonotonicClock clock;
  BlockingSink sink;
  DispatcherOptions o;
  o.scheduler.policy = PolicyKind::kFifo;
  auto d = Dispatcher::Create(&clock, &sink, o);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE((*d)->AddVm(1, 100).ok());
  ASSERT_TRUE((*d)->SubmitAndPoll(1, 1).ok());  // runs now
  {
    std::lock_guard lock(sink.mu);
    sink.block = true;
  }
  // The engine's PollNow blocks in Poll, holding the Step (tried again until it, not the dispatch
  // thread, is the one stepping).
  std::thread engine([&] {
    {
      std::lock_guard lock(sink.mu);
      sink.blocked = std::this_thread::get_id();
    }
    for (;;) {
      (void)(*d)->PollNow();
      std::lock_guard lock(sink.mu);
      if (sink.entered) return;
    }
  });
  {
    std::unique_lock lock(sink.mu);
    sink.cv.wait(lock, [&] { return sink.entered; });
  }
  const uint64_t before = (*d)->Stats().thread_wakeups;
  (*d)->Wake();  // the dispatch thread has something to do, but the Step is taken
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const uint64_t during = (*d)->Stats().thread_wakeups - before;
  {
    std::lock_guard lock(sink.mu);
    sink.block = false;
  }
  sink.cv.notify_all();
  engine.join();
  EXPECT_LE(during, 3u);
}

TEST(DispatcherTest, ArrivalMinRunOutOfRangeIsRefused) {
  ManualClock clock;
  FakeSink sink(&clock);
  for (Duration d : {Duration(-1), Duration(2s)}) {
    DispatcherOptions o = Driven(PolicyKind::kBand);
    o.arrival_min_run = d;
    EXPECT_FALSE(Dispatcher::Create(&clock, &sink, o).ok());
  }
}

TEST(DispatcherTest, QuantumOutOfRangeIsRefused) {
  ManualClock clock;
  FakeSink sink(&clock);
  for (Duration q : {Duration(-1), Duration(2s)}) {
    DispatcherOptions o = Driven(PolicyKind::kBand);
    o.quantum = q;
    EXPECT_FALSE(Dispatcher::Create(&clock, &sink, o).ok());
  }
}

// ---- the operator's controls: pause, resume, kill-work, the kernel limit ----

// VM 1 (share 50) runs a kernel that never ends, VM 2 (share 50) loops 1 ms kernels, on a
// preemptible engine that reports running time.
struct ControlRun {
  explicit ControlRun(Duration quantum = 1ms, PolicyKind policy = PolicyKind::kBand)
      : f([&] {
          DispatcherOptions o = Driven(policy);
          o.quantum = quantum;
          return o;
        }()) {
    f.sink.suspendable = true;
    f.sink.report_running = true;
    EXPECT_TRUE(f.dispatcher->AddVm(1, 50).ok());
    EXPECT_TRUE(f.dispatcher->AddVm(2, 50).ok());
    f.on_done = [this](const SubmissionDone& d) {
      if (d.vm == 2) {
        next_submit[2] = f.clock.Peek() + 50us;
        if (d.status.ok()) ++vm2_completed;
      }
    };
  }
  void Run(TimePoint until) {
    f.RunUntil(until, [this] {
      return SubmitDue(f, next_submit, next_handle,
                       [this](VmId vm) { return vm == 1 ? vm1_length : Duration(1ms); });
    });
  }
  Fixture f;
  std::map<VmId, TimePoint> next_submit = {{1, TimePoint(0us)}, {2, TimePoint(10us)}};
  SubmissionHandle next_handle = 1;
  Duration vm1_length = 1h;
  uint64_t vm2_completed = 0;
};

TEST(DispatcherControlTest, PauseStopsAVmAndResumeContinuesIt) {
  // Also at quantum 0 (non-preemptive dispatch): a pause stops the work all the same.
  for (Duration quantum : {Duration(1ms), Duration(0)}) {
    ControlRun r(quantum);
    r.Run(TimePoint(500ms));
    const Duration before_pause = r.f.Vm(1).gpu_time;
    EXPECT_GT(before_pause, 10ms);
    ASSERT_TRUE(r.f.dispatcher->Pause(1).ok());
    EXPECT_TRUE(r.f.Vm(1).paused);
    r.Run(TimePoint(520ms));  // the stop takes effect at the next Step
    const Duration paused_at = r.f.Vm(1).gpu_time;
    EXPECT_LE(paused_at - before_pause, 2ms);
    const uint64_t vm2_before = r.vm2_completed;
    r.Run(TimePoint(1500ms));
    // Nothing of VM 1 ran or was charged; VM 2 had the GPU.
    EXPECT_EQ(r.f.Vm(1).gpu_time, paused_at);
    EXPECT_FALSE(r.f.Vm(1).running);
    EXPECT_EQ(r.f.Vm(1).queue_depth, 1u);  // its kernel waits, suspended, at the head
    EXPECT_GT(r.vm2_completed - vm2_before, 800u);
    ASSERT_TRUE(r.f.dispatcher->Resume(1).ok());
    EXPECT_FALSE(r.f.Vm(1).paused);
    r.Run(TimePoint(2500ms));
    EXPECT_GT(r.f.Vm(1).gpu_time, paused_at + 100ms) << "quantum " << quantum.count();
    EXPECT_EQ(r.f.sink.order.front(), 1u);  // the same kernel resumed, not restarted
    EXPECT_GE(r.f.sink.resumes, 1u);
  }
}

TEST(DispatcherControlTest, APausedVmsWorkWaitsAndRunsInOrderAfterResume) {
  Fixture f(Driven(PolicyKind::kFifo));
  ASSERT_TRUE(f.dispatcher->AddVm(1, 0).ok());
  ASSERT_TRUE(f.dispatcher->AddVm(2, 0).ok());
  ASSERT_TRUE(f.dispatcher->Pause(1).ok());
  for (SubmissionHandle h : {1, 2, 3}) ASSERT_TRUE(f.dispatcher->Submit(1, h).ok());
  ASSERT_TRUE(f.dispatcher->Submit(2, 4).ok());
  f.RunUntil(TimePoint(100ms));
  EXPECT_EQ(f.sink.order, (std::vector<SubmissionHandle>{4}));
  EXPECT_EQ(f.Vm(1).queue_depth, 3u);
  EXPECT_EQ(f.Vm(1).gpu_time, Duration(0));
  ASSERT_TRUE(f.dispatcher->Resume(1).ok());
  f.RunUntil(TimePoint(200ms));
  EXPECT_EQ(f.sink.order, (std::vector<SubmissionHandle>{4, 1, 2, 3}));
  EXPECT_EQ(f.Vm(1).completed, 3u);
}

TEST(DispatcherControlTest, PausingAVmWhoseWorkWasChosenButNotStarted) {
  Fixture f(Driven(PolicyKind::kFifo));
  ASSERT_TRUE(f.dispatcher->AddVm(1, 0).ok());
  ASSERT_TRUE(f.dispatcher->AddVm(2, 0).ok());
  ASSERT_TRUE(f.dispatcher->Submit(1, 1).ok());  // chosen at once (the GPU is free), not started
  ASSERT_TRUE(f.dispatcher->Submit(2, 2).ok());
  ASSERT_TRUE(f.dispatcher->Pause(1).ok());
  f.RunUntil(TimePoint(50ms));
  EXPECT_EQ(f.sink.order, (std::vector<SubmissionHandle>{2}));
  ASSERT_TRUE(f.dispatcher->Resume(1).ok());
  f.RunUntil(TimePoint(100ms));
  EXPECT_EQ(f.sink.order, (std::vector<SubmissionHandle>{2, 1}));
}

TEST(DispatcherControlTest, BadControlCallsChangeNothing) {
  Fixture f(Driven(PolicyKind::kBand));
  ASSERT_TRUE(f.dispatcher->AddVm(1, 10).ok());
  EXPECT_EQ(f.dispatcher->Pause(9).code(), StatusCode::kNotFound);
  EXPECT_EQ(f.dispatcher->Resume(9).code(), StatusCode::kNotFound);
  EXPECT_EQ(f.dispatcher->KillWork(9, Status::Aborted("x")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(f.dispatcher->SetKernelLimit(9, 1s).code(), StatusCode::kNotFound);
  EXPECT_EQ(f.dispatcher->Resume(1).code(), StatusCode::kFailedPrecondition);  // not paused
  ASSERT_TRUE(f.dispatcher->Pause(1).ok());
  EXPECT_EQ(f.dispatcher->Pause(1).code(), StatusCode::kFailedPrecondition);  // twice
  EXPECT_TRUE(f.Vm(1).paused);
  EXPECT_EQ(f.dispatcher->SetKernelLimit(1, Duration(-1)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(f.dispatcher->SetKernelLimit(1, Dispatcher::kMaxKernelLimit + 1ns).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(f.dispatcher->Stats().kernel_limits.at(1), Duration(0));
  ASSERT_TRUE(f.dispatcher->SetKernelLimit(1, 2s).ok());
  EXPECT_EQ(f.dispatcher->Stats().kernel_limits.at(1), Duration(2s));
  ASSERT_TRUE(f.dispatcher->Resume(1).ok());
  EXPECT_EQ(f.dispatcher->Resume(1).code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(f.Vm(1).paused);
}

TEST(DispatcherControlTest, KillWorkFailsRunningSuspendedAndQueuedWorkAndTheVmRunsOn) {
  ControlRun r;
  r.Run(TimePoint(300ms));  // VM 1's kernel has been preempted many times, VM 2 loops
  EXPECT_GT(r.f.sink.suspends, 10u);
  // Two more of VM 1 queue behind its endless kernel.
  ASSERT_TRUE(r.f.dispatcher->Submit(1, 1000).ok());
  ASSERT_TRUE(r.f.dispatcher->Submit(1, 1001).ok());
  const Duration charged_before = r.f.Vm(1).gpu_time;
  Result<size_t> killed = r.f.dispatcher->KillWork(1, Status::Aborted("killed by the operator"));
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ(*killed, 3u);
  r.next_submit[1] = TimePoint::max();
  r.Run(TimePoint(400ms));
  std::vector<SubmissionHandle> failed;
  for (const SubmissionDone& d : r.f.done) {
    if (d.vm != 1) continue;
    EXPECT_EQ(d.status.code(), StatusCode::kAborted);
    failed.push_back(d.handle);
  }
  std::sort(failed.begin(), failed.end());
  EXPECT_EQ(failed, (std::vector<SubmissionHandle>{1, 1000, 1001}));
  std::vector<SubmissionHandle> cancelled = r.f.sink.cancelled;
  std::sort(cancelled.begin(), cancelled.end());
  EXPECT_EQ(cancelled, failed);
  EXPECT_EQ(r.f.Vm(1).queue_depth, 0u);
  EXPECT_FALSE(r.f.Vm(1).running);
  EXPECT_LE(r.f.Vm(1).gpu_time - charged_before, 2ms);  // the rest of a slice at most
  const DispatcherStats stats = r.f.dispatcher->Stats();
  EXPECT_EQ(stats.killed, 3u);
  EXPECT_EQ(stats.killed_by_vm.at(1), 3u);
  EXPECT_EQ(stats.limit_kills, 0u);
  // The VM stays: its next submission runs normally; VM 2 went on throughout.
  const uint64_t vm2_before = r.vm2_completed;
  r.vm1_length = 1ms;
  r.next_submit[1] = r.f.clock.Peek();
  r.Run(TimePoint(600ms));
  EXPECT_GT(r.vm2_completed, vm2_before + 50);
  bool vm1_ok = false;
  for (const SubmissionDone& d : r.f.done) vm1_ok |= d.vm == 1 && d.status.ok();
  EXPECT_TRUE(vm1_ok);
  // A VM with nothing to kill: nothing happens.
  Result<size_t> none = r.f.dispatcher->KillWork(2, Status::Aborted("x"));
  ASSERT_TRUE(none.ok());
  EXPECT_LE(*none, 1u);  // VM 2's own kernel, if it was on the GPU right now
}

TEST(DispatcherControlTest, KernelLimitKillsAnEndlessKernelCountingOnlyItsGpuTime) {
  // BAND at 50/50 gives the endless kernel about half the GPU: it reaches 100 ms of GPU time
  // after about 200 ms of wall time, and is killed then, not at 100 ms of wall time.
  ControlRun r;
  ASSERT_TRUE(r.f.dispatcher->SetKernelLimit(1, 100ms).ok());
  r.Run(TimePoint(150ms));
  for (const SubmissionDone& d : r.f.done) EXPECT_NE(d.vm, 1u) << "killed too early";
  r.Run(TimePoint(1s));
  int kills = 0;
  for (const SubmissionDone& d : r.f.done) {
    if (d.vm != 1) continue;
    ++kills;
    EXPECT_EQ(d.status.code(), StatusCode::kDeadlineExceeded);
    EXPECT_NE(d.status.message().find("kernel limit of 100.0 ms"), std::string::npos)
        << d.status.message();
  }
  EXPECT_EQ(kills, 1);
  EXPECT_EQ(r.f.dispatcher->Stats().limit_kills, 1u);
  EXPECT_EQ(r.f.sink.cancelled, (std::vector<SubmissionHandle>{1}));
  EXPECT_GE(r.f.Vm(1).gpu_time, 100ms);
  EXPECT_LE(r.f.Vm(1).gpu_time, 103ms);
}

TEST(DispatcherControlTest, APausedKernelIsNotKilledByItsLimitWhilePaused) {
  ControlRun r;
  r.Run(TimePoint(100ms));
  ASSERT_TRUE(r.f.dispatcher->Pause(1).ok());
  ASSERT_TRUE(r.f.dispatcher->SetKernelLimit(1, r.f.Vm(1).gpu_time + 50ms).ok());
  r.Run(TimePoint(2s));  // far longer than the limit in wall time
  EXPECT_EQ(r.f.dispatcher->Stats().limit_kills, 0u);
  ASSERT_TRUE(r.f.dispatcher->Resume(1).ok());
  r.Run(TimePoint(3s));
  EXPECT_EQ(r.f.dispatcher->Stats().limit_kills, 1u);
}

TEST(DispatcherControlTest, KillWorkOfAPausedVmFailsItsSuspendedKernelAndLeavesItPaused) {
  ControlRun r;
  r.Run(TimePoint(200ms));
  ASSERT_TRUE(r.f.dispatcher->Pause(1).ok());
  r.Run(TimePoint(250ms));
  Result<size_t> killed = r.f.dispatcher->KillWork(1, Status::Aborted("killed"));
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ(*killed, 1u);  // its suspended endless kernel
  r.next_submit[1] = TimePoint::max();
  r.Run(TimePoint(300ms));
  EXPECT_EQ(r.f.sink.cancelled, (std::vector<SubmissionHandle>{1}));
  EXPECT_TRUE(r.f.Vm(1).paused);  // the operator's pause stands until resume
  EXPECT_EQ(r.f.Vm(1).queue_depth, 0u);
  // New work waits for the resume, then runs.
  r.vm1_length = 1ms;
  ASSERT_TRUE(r.f.dispatcher->Submit(1, 5000).ok());
  r.Run(TimePoint(400ms));
  EXPECT_EQ(r.f.Vm(1).queue_depth, 1u);
  ASSERT_TRUE(r.f.dispatcher->Resume(1).ok());
  r.Run(TimePoint(500ms));
  bool ran = false;
  for (const SubmissionDone& d : r.f.done) ran |= d.handle == 5000 && d.status.ok();
  EXPECT_TRUE(ran);
}

TEST(DispatcherControlTest, AnEngineThatCannotCancelLetsTheKernelRunOnAndTheLimitFiresOnce) {
  ControlRun r;
  r.f.sink.cancellable = false;
  ASSERT_TRUE(r.f.dispatcher->SetKernelLimit(1, 50ms).ok());
  r.Run(TimePoint(1s));
  const DispatcherStats stats = r.f.dispatcher->Stats();
  EXPECT_EQ(stats.limit_kills, 1u);
  EXPECT_EQ(stats.cancel_errors, 1u);
  EXPECT_GT(r.f.Vm(1).gpu_time, 200ms);  // it ran on, charged as it ran
  EXPECT_GT(r.vm2_completed, 100u);      // and was still preempted for VM 2
}

TEST(DispatcherControlTest, TheDefaultKernelLimitAppliesToEveryNewVm) {
  DispatcherOptions o = Driven(PolicyKind::kBand);
  o.kernel_limit = 30ms;
  Fixture f(o);
  f.sink.suspendable = true;
  f.sink.report_running = true;
  ASSERT_TRUE(f.dispatcher->AddVm(1, 0).ok());
  EXPECT_EQ(f.dispatcher->Stats().kernel_limits.at(1), Duration(30ms));
  f.sink.SetLength(1, 1h);
  ASSERT_TRUE(f.dispatcher->Submit(1, 1).ok());
  f.RunUntil(TimePoint(100ms));
  ASSERT_EQ(f.done.size(), 1u);
  EXPECT_EQ(f.done[0].status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_GE(f.Vm(1).gpu_time, 30ms);
  EXPECT_LE(f.Vm(1).gpu_time, 32ms);
}

// The real dispatch thread on the real clock, with an engine that completes at once: no timing is
// asserted, only that every submission from several threads runs exactly once, in order per VM.
class InstantSink final : public SubmissionSink {
 public:
  Status Start(VmId vm, SubmissionHandle h) override {
    std::lock_guard lock(mu);
    if (running) ++overlaps;
    running = true;
    order[vm].push_back(h);
    return Status::Ok();
  }
  Result<SinkPoll> Poll(VmId, SubmissionHandle) override {
    std::lock_guard lock(mu);
    running = false;
    return SinkPoll::Done(1us);
  }
  std::mutex mu;
  bool running = false;
  int overlaps = 0;
  std::map<VmId, std::vector<SubmissionHandle>> order;
};

TEST(DispatcherTest, OwnThreadRunsEverythingOnceInOrderPerVm) {
  MonotonicClock clock;
  InstantSink sink;
  std::atomic<int> done{0};
  DispatcherOptions o;
  o.poll_interval = 20us;
  o.on_done = [&](const SubmissionDone&) { ++done; };
  Result<std::unique_ptr<Dispatcher>> d = Dispatcher::Create(&clock, &sink, o);
  ASSERT_TRUE(d.ok());
  constexpr int kVms = 4, kEach = 200;
  for (VmId vm = 1; vm <= kVms; ++vm) ASSERT_TRUE((*d)->AddVm(vm, 25).ok());
  std::vector<std::thread> submitters;
  for (VmId vm = 1; vm <= kVms; ++vm) {
    submitters.emplace_back([&, vm] {
      for (int i = 0; i < kEach; ++i) {
        const SubmissionHandle h = static_cast<SubmissionHandle>(vm) << 32 | i;
        while ((*d)->Submit(vm, h).code() == StatusCode::kResourceExhausted) {
          std::this_thread::yield();
        }
      }
    });
  }
  for (std::thread& t : submitters) t.join();
  for (int i = 0; i < 20000 && done.load() < kVms * kEach; ++i) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(done.load(), kVms * kEach);
  (*d)->SetPolicy(PolicyKind::kFifo);  // live, on an idle dispatcher
  d->reset();
  EXPECT_EQ(sink.overlaps, 0);
  for (VmId vm = 1; vm <= kVms; ++vm) {
    ASSERT_EQ(sink.order[vm].size(), static_cast<size_t>(kEach));
    for (int i = 0; i < kEach; ++i) {
      EXPECT_EQ(sink.order[vm][i], static_cast<SubmissionHandle>(vm) << 32 | i);
    }
  }
}

// A preemption that PollNow performs on another thread (the GPU's engine thread, in fv) while the
// dispatch thread wakes: the dispatch thread finds the Step taken and plans its sleep from the
// state that Step left while it waited for the sink's Suspend, with no submission on the GPU and
// nothing chosen yet. The Step then starts the next submission, which needs polling. Unless the
// Step kicks the sleeping thread, nothing polls it and the GPU stalls with work queued: the
// fairness bench's 298 s stall (docs/results/2026-11-28-band-wait-slack.md, "Run 4").
class GatedSuspendSink final : public SubmissionSink {
 public:
  Status Start(VmId vm, SubmissionHandle h) override {
    std::lock_guard lock(mu);
    if (vm == 1 && dispatch_thread == std::thread::id())
      dispatch_thread = std::this_thread::get_id();
    running = h;
    started_at[h] = std::chrono::steady_clock::now();
    return Status::Ok();
  }
  bool CanSuspend() const override { return true; }
  Status Suspend(VmId, SubmissionHandle) override {
    {
      std::lock_guard lock(mu);
      in_suspend = true;
    }
    gate.wait();  // the test decides when the suspension is over
    std::lock_guard lock(mu);
    running.reset();
    return Status::Ok();
  }
  Result<SinkPoll> Poll(VmId vm, SubmissionHandle h) override {
    std::lock_guard lock(mu);
    if (vm == 1) {
      // Only a poll from outside the dispatch thread reports GPU time (and so charges a slice,
      // where the paused VM is stopped): the test chooses which thread preempts.
      if (std::this_thread::get_id() == dispatch_thread) return SinkPoll::Running();
      return SinkPoll::Running(
          std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - started_at[h]));
    }
    // The second VM's submission runs a little while, so its first poll (on the Step that starts
    // it) does not end it: a later poll must.
    if (std::chrono::steady_clock::now() - started_at[h] < 5ms) return SinkPoll::Running();
    running.reset();
    return SinkPoll::Done(5ms);
  }
  std::mutex mu;
  std::thread::id dispatch_thread;
  std::optional<SubmissionHandle> running;
  std::map<SubmissionHandle, std::chrono::steady_clock::time_point> started_at;
  bool in_suspend = false;
  std::shared_future<void> gate;
};

TEST(DispatcherTest, APreemptionOnAnotherThreadWakesTheSleepingDispatchThread) {
  MonotonicClock clock;
  GatedSuspendSink sink;
  std::promise<void> open;
  sink.gate = open.get_future().share();
  std::atomic<int> done{0};
  DispatcherOptions o;
  o.poll_interval = 2ms;
  o.quantum = 1ms;
  o.slice_on_arrival = false;  // the second VM's arrival must not make the dispatch thread poll
  o.on_done = [&](const SubmissionDone& d) {
    if (d.vm == 2) ++done;
  };
  Result<std::unique_ptr<Dispatcher>> d = Dispatcher::Create(&clock, &sink, o);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE((*d)->AddVm(1, 50).ok());
  ASSERT_TRUE((*d)->AddVm(2, 50).ok());
  ASSERT_TRUE((*d)->Submit(1, 1).ok());
  auto started = [&] {
    std::lock_guard lock(sink.mu);
    return sink.running.has_value();
  };
  for (int i = 0; i < 2000 && !started(); ++i) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(started());
  ASSERT_TRUE((*d)->Submit(2, 2).ok());
  ASSERT_TRUE((*d)->Pause(1).ok());  // stopped at its next charged slice
  std::this_thread::sleep_for(5ms);  // a slice is due
  std::thread engine([&] { (void)(*d)->PollNow(); });
  auto suspending = [&] {
    std::lock_guard lock(sink.mu);
    return sink.in_suspend;
  };
  for (int i = 0; i < 2000 && !suspending(); ++i) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(suspending()) << "the other thread's poll did not stop the paused VM";
  // Meanwhile the dispatch thread wakes (its poll is due), finds the Step taken and goes to sleep.
  std::this_thread::sleep_for(30ms);
  open.set_value();
  engine.join();
  for (int i = 0; i < 2000 && done.load() == 0; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(done.load(), 1) << "the second VM's submission started and was never polled to its end";
  (void)(*d)->Resume(1);
  d->reset();
}

}  // namespace
}  // namespace gpuvm::sched
