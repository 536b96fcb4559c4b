#include "scheduler/dispatcher.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "base/os.h"

namespace gpuvm::sched {
namespace {

// Step() does at most this many start/complete rounds before returning, so a sink that completes
// everything instantly cannot keep one Step() forever (the thread loops again at once).
constexpr int kMaxRoundsPerStep = 64;

// Without preemption a running submission's time is still charged as it runs, this often.
constexpr Duration kChargeInterval = 1ms;

std::string Millis(Duration d) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f ms",
                std::chrono::duration<double, std::milli>(d).count());
  return buffer;
}

}  // namespace

Result<std::unique_ptr<Dispatcher>> Dispatcher::Create(Clock* clock, SubmissionSink* sink,
                                                       DispatcherOptions options) {
  if (clock == nullptr || sink == nullptr) {
    return Status::InvalidArgument("dispatcher needs a clock and a sink");
  }
  if (options.poll_interval <= Duration(0) || options.poll_interval > 1s) {
    return Status::InvalidArgument("dispatcher poll interval must be in (0, 1 s]");
  }
  if (options.notified_poll_interval <= Duration(0) || options.notified_poll_interval > 1s) {
    return Status::InvalidArgument("dispatcher notified poll interval must be in (0, 1 s]");
  }
  if (options.idle_linger < Duration(0) || options.idle_linger > 10s) {
    return Status::InvalidArgument("dispatcher idle linger must be in [0, 10 s]");
  }
  if (options.quantum < Duration(0) || options.quantum > 1s) {
    return Status::InvalidArgument("dispatcher quantum must be in [0, 1 s] (0: non-preemptive)");
  }
  if (options.arrival_min_run < Duration(0) || options.arrival_min_run > 1s) {
    return Status::InvalidArgument("dispatcher arrival_min_run must be in [0, 1 s]");
  }
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<Scheduler> scheduler,
                         Scheduler::Create(clock, options.scheduler));
  const bool own_thread = options.own_thread;
  std::unique_ptr<Dispatcher> d(
      new Dispatcher(clock, sink, std::move(options), std::move(scheduler)));
  if (own_thread) {
    d->thread_ = std::thread([raw = d.get()] {
      os::NameThisThread("gpuvm-dispatch");
      raw->ThreadMain();
    });
  }
  return d;
}

Dispatcher::Dispatcher(Clock* clock, SubmissionSink* sink, DispatcherOptions options,
                       std::unique_ptr<Scheduler> scheduler)
    : clock_(clock), sink_(sink), options_(std::move(options)), scheduler_(std::move(scheduler)) {}

Dispatcher::~Dispatcher() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status Dispatcher::AddVm(VmId vm, double share_percent) {
  std::lock_guard lock(mu_);
  GPUVM_RETURN_IF_ERROR(scheduler_->AddVm(vm, share_percent));
  kernel_limits_[vm] = options_.kernel_limit;
  return Status::Ok();
}

Result<std::vector<SubmissionHandle>> Dispatcher::RemoveVm(VmId vm) {
  std::lock_guard lock(mu_);
  GPUVM_ASSIGN_OR_RETURN(std::vector<SubmissionHandle> dropped, scheduler_->RemoveVm(vm));
  for (SubmissionHandle h : dropped) arrivals_.erase(h);
  std::erase_if(suspended_, [vm](const auto& entry) { return entry.second.vm == vm; });
  // The sink forgets the VM's work itself (it is gone): nothing of it is cancelled any more.
  std::erase_if(cancel_, [vm](const Cancel& c) { return c.vm == vm; });
  if (cancel_running_ && cancel_running_->vm == vm) cancel_running_.reset();
  paused_.erase(vm);
  kernel_limits_.erase(vm);
  killed_by_vm_.erase(vm);
  if (pending_ && pending_->vm == vm) {
    // Chosen but not started: the scheduler counts it as running. Complete it unstarted so the
    // engine goes to the next VM (it is charged to nobody: the VM is gone).
    const Pending p = *pending_;
    pending_.reset();
    dropped.push_back(p.handle);
    arrivals_.erase(p.handle);
    ApplyLocked(scheduler_->OnComplete(p.handle, Duration(0)), clock_->Now());
  }
  ++kicks_;
  cv_.notify_all();
  return dropped;
}

Status Dispatcher::SetShare(VmId vm, double share_percent) {
  return scheduler_->SetShare(vm, share_percent);
}

Status Dispatcher::SetShares(const std::vector<std::pair<VmId, double>>& shares) {
  return scheduler_->SetShares(shares);
}

void Dispatcher::SetPolicy(PolicyKind kind) {
  std::lock_guard lock(mu_);
  scheduler_->SetPolicy(kind);
  hold_until_ = scheduler_->NextTimer();
  ++kicks_;
  cv_.notify_all();
}

PolicyKind Dispatcher::policy() const { return scheduler_->policy(); }

Status Dispatcher::Pause(VmId vm) {
  {
    std::lock_guard lock(mu_);
    GPUVM_RETURN_IF_ERROR(scheduler_->SetPaused(vm, true));
    paused_.insert(vm);
    if (pending_ && pending_->vm == vm) {
      // Chosen but not started: back to the head of its queue (a slice boundary of nothing, at
      // which the scheduler stops a paused VM), and the GPU goes to someone else.
      const Pending p = *pending_;
      pending_.reset();
      (void)scheduler_->OnSliceEnd(p.handle, Duration(0), /*may_preempt=*/true);
      ApplyLocked(scheduler_->OnGpuIdle(), clock_->Now());
    }
    if (running_ && running_->vm == vm) {
      // Charged and stopped at the next Step (SliceLocked preempts a paused VM's work).
      running_->slice_due = TimePoint::min();
      poll_now_ = true;
    }
    ++kicks_;
  }
  cv_.notify_all();
  return Status::Ok();
}

Status Dispatcher::Resume(VmId vm) {
  {
    std::lock_guard lock(mu_);
    GPUVM_RETURN_IF_ERROR(scheduler_->SetPaused(vm, false));
    paused_.erase(vm);
    // A free GPU may have nothing armed (the paused work was invisible): ask now.
    if (!running_ && !pending_) ApplyLocked(scheduler_->OnGpuIdle(), clock_->Now());
    ++kicks_;
  }
  cv_.notify_all();
  return Status::Ok();
}

Status Dispatcher::SetKernelLimit(VmId vm, Duration limit) {
  if (limit < Duration(0) || limit > kMaxKernelLimit) {
    return Status::InvalidArgument("kernel limit must be 0 (none) to 24 h");
  }
  std::lock_guard lock(mu_);
  auto it = kernel_limits_.find(vm);
  if (it == kernel_limits_.end()) return Status::NotFound("no VM " + std::to_string(vm));
  it->second = limit;
  return Status::Ok();
}

Result<size_t> Dispatcher::KillWork(VmId vm, Status why) {
  if (why.ok()) why = Status::Aborted("GPU work killed");
  std::unique_lock lock(mu_);
  Result<size_t> killed = KillLocked(vm, why, clock_->Now());
  ++kicks_;
  lock.unlock();
  cv_.notify_all();
  return killed;
}

Result<size_t> Dispatcher::KillLocked(VmId vm, const Status& why, TimePoint now) {
  GPUVM_ASSIGN_OR_RETURN(std::vector<SubmissionHandle> queued, scheduler_->DropQueued(vm));
  size_t count = queued.size();
  for (SubmissionHandle h : queued) {
    cancel_.push_back(Cancel{vm, h, why});  // suspended ones among them: the sink holds them
    arrivals_.erase(h);
  }
  if (pending_ && pending_->vm == vm) {
    const Pending p = *pending_;
    pending_.reset();
    cancel_.push_back(Cancel{vm, p.handle, why});
    arrivals_.erase(p.handle);
    ++count;
    ApplyLocked(scheduler_->OnComplete(p.handle, Duration(0)), now);
  }
  if (running_ && running_->vm == vm) {
    cancel_running_ = Cancel{vm, running_->handle, why};
    poll_now_ = true;
    ++count;
  }
  killed_ += count;
  killed_by_vm_[vm] += count;
  return count;
}

bool Dispatcher::CancelMarkedLocked(std::unique_lock<std::mutex>& lock,
                                    std::vector<SubmissionDone>* done) {
  bool any = false;
  if (cancel_running_) {
    if (running_ && running_->handle == cancel_running_->handle) {
      const Running run = *running_;
      const Cancel c = *cancel_running_;
      cancel_running_.reset();
      lock.unlock();
      Result<std::optional<Duration>> used = sink_->Cancel(run.vm, run.handle, c.why);
      lock.lock();
      if (!used.ok()) {
        ++cancel_errors_;             // it runs on to its completion (or max_run)
        uncancellable_ = run.handle;  // its kernel limit does not fire again at every poll
      } else {
        // The device's time since the first Start, less what slices already charged.
        const Duration charge =
            *used ? std::max(Duration(0), **used - run.reported) : clock_->Now() - run.started;
        FinishLocked(run, charge, c.why, done);
      }
    } else {
      cancel_running_.reset();  // it completed before it could be cancelled
    }
    any = true;
  }
  if (!cancel_.empty()) {
    std::vector<Cancel> batch;
    batch.swap(cancel_);
    for (const Cancel& c : batch) suspended_.erase(c.handle);
    lock.unlock();
    std::vector<bool> cancelled;
    for (const Cancel& c : batch) cancelled.push_back(sink_->Cancel(c.vm, c.handle, c.why).ok());
    lock.lock();
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!cancelled[i]) ++cancel_errors_;
      SubmissionDone d;
      d.vm = batch[i].vm;
      d.handle = batch[i].handle;
      d.status = batch[i].why;
      RecordLocked(d);
      done->push_back(std::move(d));
    }
    any = true;
  }
  return any;
}

Status Dispatcher::Submit(VmId vm, SubmissionHandle handle, Duration estimate) {
  {
    std::lock_guard lock(mu_);
    GPUVM_RETURN_IF_ERROR(SubmitLocked(vm, handle, estimate));
    ++kicks_;
  }
  cv_.notify_all();
  return Status::Ok();
}

Status Dispatcher::SubmitAndPoll(VmId vm, SubmissionHandle handle, Duration estimate) {
  {
    std::lock_guard lock(mu_);
    GPUVM_RETURN_IF_ERROR(SubmitLocked(vm, handle, estimate));
  }
  // TryStep kicks the dispatch thread when it leaves it work sooner than planned, and when a Step
  // runs elsewhere (that one may have passed the point where it would see this arrival).
  (void)TryStep(true);
  return Status::Ok();
}

Status Dispatcher::SubmitLocked(VmId vm, SubmissionHandle handle, Duration estimate) {
  const TimePoint now = clock_->Now();
  Result<Decision> decision = scheduler_->OnSubmit(vm, handle, estimate);
  if (!decision.ok()) return decision.status();
  arrivals_[handle] = now;
  ApplyLocked(decision, now);
  if (SyncArrivalPreemptionLocked() && running_ && running_->vm != vm) {
    // Another VM's work arrived while this one runs: charge the running one now and let the
    // policy decide at once whether the newcomer is owed the GPU, instead of at the next quantum.
    // A VM that submits, waits and resubmits is then not kept waiting a quantum behind a VM over
    // its share each time it comes back, so the policy need not hold the GPU idle for it.
    // Not before it has run arrival_min_run since its (re)start: then the slice ends there.
    running_->slice_due =
        std::min(running_->slice_due, running_->started + options_.arrival_min_run);
    poll_now_ = true;
  }
  return Status::Ok();
}

void Dispatcher::Wake() {
  {
    std::lock_guard lock(mu_);
    poll_now_ = true;
    ++kicks_;
  }
  cv_.notify_all();
}

void Dispatcher::ApplyLocked(const Result<Decision>& decision, TimePoint now) {
  // The scheduler only refuses events that break its protocol, which this class follows; if it
  // ever does, nothing is dispatched and the hold state is taken from the scheduler again.
  if (decision.ok() && decision->action == Decision::Action::kDispatch) {
    pending_ = Pending{decision->vm, decision->submission, now};
  }
  hold_until_ = scheduler_->NextTimer();
}

void Dispatcher::RecordLocked(const SubmissionDone& done) {
  ++completed_;
  if (options_.recent_completions == 0) return;
  recent_.push_back(done);
  while (recent_.size() > options_.recent_completions) recent_.pop_front();
}

void Dispatcher::FinishLocked(const Running& run, Duration gpu_time, Status status,
                              std::vector<SubmissionDone>* done) {
  const TimePoint now = clock_->Now();
  gpu_time = std::clamp(gpu_time, Duration(0), std::max(Duration(0), now - run.decided));
  SubmissionDone d;
  d.vm = run.vm;
  d.handle = run.handle;
  d.gpu_time = gpu_time;
  d.status = std::move(status);
  if (auto it = arrivals_.find(run.handle); it != arrivals_.end()) {
    d.waited = std::max(Duration(0), run.first_start - it->second);
    arrivals_.erase(it);
  }
  running_.reset();
  ApplyLocked(scheduler_->OnComplete(run.handle, gpu_time), now);
  RecordLocked(d);
  done->push_back(std::move(d));
}

void Dispatcher::Step() { (void)TryStep(false); }

bool Dispatcher::PollNow() { return TryStep(true); }

bool Dispatcher::TryStep(bool poll_now) {
  std::unique_lock lock(mu_);
  if (poll_now) poll_now_ = true;
  if (stepping_) {
    if (poll_now) {  // as Wake(): the stepping thread, or the dispatch thread after it, polls
      ++kicks_;
      lock.unlock();
      cv_.notify_all();
    }
    return false;
  }
  stepping_ = true;
  (void)SyncArrivalPreemptionLocked();
  std::vector<SubmissionDone> done;
  for (int round = 0; round < kMaxRoundsPerStep; ++round) {
    bool progressed = CancelMarkedLocked(lock, &done);
    TimePoint now = clock_->Now();
    if (running_ && (poll_now_ || now >= running_->next_poll)) {
      poll_now_ = false;
      const Running run = *running_;
      lock.unlock();
      Result<SinkPoll> polled = sink_->Poll(run.vm, run.handle);
      lock.lock();
      ++polls_;
      now = clock_->Now();
      if (cancel_running_ && cancel_running_->handle == run.handle) {
        progressed = true;  // killed meanwhile: cancelled at the next round, not charged here
      } else if (!polled.ok()) {
        ++poll_errors_;
        FinishLocked(run, now - run.started, polled.status(), &done);
        progressed = true;
      } else if (polled->done) {
        if (!polled->status.ok()) ++poll_errors_;
        // The device's time since the first Start, less what slices already charged.
        const Duration used = polled->gpu_time
                                  ? std::max(Duration(0), *polled->gpu_time - run.reported)
                                  : now - run.started;
        FinishLocked(run, used, polled->status, &done);
        progressed = true;
      } else {
        // The VM's kernel limit counts the GPU time charged to this submission (the device's,
        // across suspensions; without it, the time since it started).
        const Duration used =
            polled->gpu_time ? *polled->gpu_time : run.reported + (now - run.started);
        const auto limit = kernel_limits_.find(run.vm);
        if (limit != kernel_limits_.end() && limit->second > Duration(0) && used > limit->second &&
            uncancellable_ != run.handle) {
          ++limit_kills_;
          (void)KillLocked(run.vm,
                           Status::DeadlineExceeded("kernel ran " + Millis(used) +
                                                    " of GPU time, past its VM's " +
                                                    "kernel limit of " + Millis(limit->second)),
                           now);
          progressed = true;
        } else if (polled->gpu_time && now >= running_->slice_due &&
                   SliceLocked(lock, *polled->gpu_time, &done)) {
          // The time a running submission used is charged every quantum (every
          // kChargeInterval without preemption), so a long or endless kernel shows in every
          // VM's usage as it runs.
          progressed = true;
        }
        if (running_ && running_->handle == run.handle) running_->next_poll = NextPollLocked(now);
      }
    }
    if (!running_ && !pending_ && hold_until_ && now >= *hold_until_) {
      ApplyLocked(scheduler_->OnTimer(), now);
      progressed = true;
    }
    if (pending_ && !running_) {
      const Pending p = *pending_;
      pending_.reset();
      // A Wake before this start was about the previous run; one during Start sets it again.
      poll_now_ = false;
      // Marks the engine taken before the lock is dropped, so nothing else starts meanwhile.
      running_ = Running{p.vm, p.handle, now, p.decided, now + PollInterval()};
      bool resumed = false;
      if (auto it = suspended_.find(p.handle); it != suspended_.end()) {
        // A suspended submission comes back: the sink resumes it, slices charged stay charged.
        resumed = true;
        running_->reported = it->second.reported;
        running_->first_start = it->second.first_start;
        running_->decided = std::min(it->second.decided, p.decided);
        suspended_.erase(it);
      }
      lock.unlock();
      Status started = sink_->Start(p.vm, p.handle);
      lock.lock();
      now = clock_->Now();
      running_->started = now;
      if (!resumed) running_->first_start = now;
      running_->next_poll = now + PollInterval();
      last_start_ = now;
      running_->slice_due = now + ChargeInterval();
      if (!started.ok()) {
        ++start_errors_;
        FinishLocked(*running_, Duration(0), std::move(started), &done);
      } else if (!resumed) {
        ++started_;
      }
      progressed = true;
    }
    if (!progressed) break;
  }
  if (!running_) poll_now_ = false;
  stepping_ = false;
  bool kick = thread_awaits_step_;  // the dispatch thread waits for this Step to end
  if (dispatch_waiting_) {
    const std::optional<TimePoint> next = NextWakeupLocked();
    if (next && (!dispatch_plan_ || *next < *dispatch_plan_)) {
      ++kicks_;
      kick = true;
    }
  }
  lock.unlock();
  if (kick) cv_.notify_all();
  for (const SubmissionDone& d : done) {
    const auto& report = d.completed ? options_.on_done : options_.on_slice;
    if (report) report(d);
  }
  return true;
}

bool Dispatcher::SyncArrivalPreemptionLocked() {
  // The sink may learn only later that it can suspend (fv: once the GPU is attached).
  const bool can =
      options_.slice_on_arrival && options_.quantum > Duration(0) && sink_->CanSuspend();
  if (can != arrival_preemption_) {
    arrival_preemption_ = can;
    scheduler_->SetArrivalPreemption(can);
  }
  return can;
}

Duration Dispatcher::ChargeInterval() const {
  return options_.quantum > Duration(0) ? options_.quantum : kChargeInterval;
}

bool Dispatcher::SliceLocked(std::unique_lock<std::mutex>& lock, Duration total,
                             std::vector<SubmissionDone>* done) {
  Running& run = *running_;
  const TimePoint now = clock_->Now();
  run.slice_due = now + ChargeInterval();
  const Duration slice = std::max(Duration(0), total - run.reported);
  run.reported = std::max(run.reported, total);
  ++slices_;
  done->push_back(SubmissionDone{run.vm, run.handle, slice, Duration(0), Status::Ok(), false});
  // A paused VM's work is stopped whatever the quantum (only the operator asked for it).
  const bool may_preempt =
      sink_->CanSuspend() && (options_.quantum > Duration(0) || paused_.contains(run.vm));
  Result<Decision> decision = scheduler_->OnSliceEnd(run.handle, slice, may_preempt);
  if (!decision.ok() || decision->action != Decision::Action::kPreempt) return false;
  // The scheduler put it back at the head of its VM's queue (or dropped it: its VM is gone).
  const Running stopped = run;
  running_.reset();
  // Nothing starts while the lock is dropped: starts happen in Step, and this is the one Step.
  lock.unlock();
  Status suspended = sink_->Suspend(stopped.vm, stopped.handle);
  lock.lock();
  // Even when the sink refused (it lost the submission), it is treated as suspended: its next
  // Start then fails and completes it with that error; nothing is charged twice.
  if (!suspended.ok()) ++suspend_errors_;
  ++preemptions_;
  suspended_[stopped.handle] = stopped;
  ApplyLocked(scheduler_->OnGpuIdle(), clock_->Now());
  return true;
}

std::optional<TimePoint> Dispatcher::NextWakeupLocked() const {
  if (pending_ && !running_) return TimePoint::min();
  if (running_) return poll_now_ ? TimePoint::min() : running_->next_poll;
  return hold_until_;
}

std::optional<TimePoint> Dispatcher::PlanSleepLocked() const {
  std::optional<TimePoint> next = NextWakeupLocked();
  if (next || !last_start_ || !sink_->ReportsCompletion()) return next;
  const TimePoint now = clock_->Now();
  if (now - *last_start_ >= options_.idle_linger) return next;
  return now + options_.notified_poll_interval;
}

Duration Dispatcher::PollInterval() const {
  if (!sink_->ReportsCompletion()) return options_.poll_interval;
  // Never past a slice: charges and preemption are decided at polls.
  return std::max(options_.poll_interval,
                  std::min(options_.notified_poll_interval, ChargeInterval()));
}

TimePoint Dispatcher::NextPollLocked(TimePoint now) const {
  if (!sink_->ReportsCompletion()) return now + options_.poll_interval;
  // A slice due sooner (an arrival cut it short) is polled for when it is due, but not sooner than
  // poll_interval: a slice that stays due (no GPU time to charge) must not make polls back to back.
  return std::min(now + PollInterval(),
                  std::max(running_->slice_due, now + options_.poll_interval));
}

std::optional<TimePoint> Dispatcher::NextWakeup() const {
  std::lock_guard lock(mu_);
  return NextWakeupLocked();
}

void Dispatcher::ThreadMain() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const uint64_t seen = kicks_;
    lock.unlock();
    const bool stepped = TryStep(false);
    lock.lock();
    if (stopping_) break;
    if (!stepped) {
      // A Step runs on another thread (PollNow). Going round again at once would spin here while
      // that thread holds the step — on a busy host perhaps preempted: one CPU showed this thread
      // running 3.5 ms at a time, every other thread of the VM's chain waiting. Wait for that Step
      // to end, then step again (what woke us may need a Step after it).
      thread_awaits_step_ = true;
      cv_.wait(lock, [&] { return stopping_ || !stepping_; });
      thread_awaits_step_ = false;
      continue;
    }
    const std::optional<TimePoint> next = PlanSleepLocked();
    const auto woken = [&] { return stopping_ || kicks_ != seen; };
    dispatch_waiting_ = true;
    dispatch_plan_ = next;
    if (!next) {
      cv_.wait(lock, woken);
    } else if (*next > clock_->Now()) {
      cv_.wait_until(lock,
                     std::chrono::steady_clock::time_point(
                         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             next->time_since_epoch())),
                     woken);
    }
    dispatch_waiting_ = false;
    ++thread_wakeups_;
  }
}

DispatcherStats Dispatcher::Stats() const {
  std::lock_guard lock(mu_);
  DispatcherStats s;
  s.scheduler = scheduler_->Stats();
  s.started = started_;
  s.completed = completed_;
  s.start_errors = start_errors_;
  s.poll_errors = poll_errors_;
  s.polls = polls_;
  s.slices = slices_;
  s.preemptions = preemptions_;
  s.suspend_errors = suspend_errors_;
  s.killed = killed_;
  s.limit_kills = limit_kills_;
  s.cancel_errors = cancel_errors_;
  s.thread_wakeups = thread_wakeups_;
  s.kernel_limits = kernel_limits_;
  s.killed_by_vm = killed_by_vm_;
  s.recent.assign(recent_.begin(), recent_.end());
  return s;
}

bool Dispatcher::busy() const {
  std::lock_guard lock(mu_);
  return pending_.has_value() || running_.has_value();
}

}  // namespace gpuvm::sched
