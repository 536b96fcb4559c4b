#include "scheduler/dispatcher.h"

#include <algorithm>

namespace gpuvm::sched {
namespace {

// Step() does at most this many start/complete rounds before returning, so a sink that completes
// everything instantly cannot keep one Step() forever (the thread loops again at once).
constexpr int kMaxRoundsPerStep = 64;

}  // namespace

Result<std::unique_ptr<Dispatcher>> Dispatcher::Create(Clock* clock, SubmissionSink* sink,
                                                       DispatcherOptions options) {
  if (clock == nullptr || sink == nullptr) {
    return Status::InvalidArgument("dispatcher needs a clock and a sink");
  }
  if (options.poll_interval <= Duration(0) || options.poll_interval > 1s) {
    return Status::InvalidArgument("dispatcher poll interval must be in (0, 1 s]");
  }
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<Scheduler> scheduler,
                         Scheduler::Create(clock, options.scheduler));
  const bool own_thread = options.own_thread;
  std::unique_ptr<Dispatcher> d(
      new Dispatcher(clock, sink, std::move(options), std::move(scheduler)));
  if (own_thread) d->thread_ = std::thread([raw = d.get()] { raw->ThreadMain(); });
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
  return scheduler_->AddVm(vm, share_percent);
}

Result<std::vector<SubmissionHandle>> Dispatcher::RemoveVm(VmId vm) {
  std::lock_guard lock(mu_);
  GPUVM_ASSIGN_OR_RETURN(std::vector<SubmissionHandle> dropped, scheduler_->RemoveVm(vm));
  for (SubmissionHandle h : dropped) arrivals_.erase(h);
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

Status Dispatcher::Submit(VmId vm, SubmissionHandle handle, Duration estimate) {
  std::lock_guard lock(mu_);
  const TimePoint now = clock_->Now();
  Result<Decision> decision = scheduler_->OnSubmit(vm, handle, estimate);
  if (!decision.ok()) return decision.status();
  arrivals_[handle] = now;
  ApplyLocked(decision, now);
  ++kicks_;
  cv_.notify_all();
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
    d.waited = std::max(Duration(0), run.started - it->second);
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
  std::vector<SubmissionDone> done;
  for (int round = 0; round < kMaxRoundsPerStep; ++round) {
    bool progressed = false;
    TimePoint now = clock_->Now();
    if (running_ && (poll_now_ || now >= running_->next_poll)) {
      poll_now_ = false;
      const Running run = *running_;
      lock.unlock();
      Result<SinkPoll> polled = sink_->Poll(run.vm, run.handle);
      lock.lock();
      ++polls_;
      now = clock_->Now();
      if (!polled.ok()) {
        ++poll_errors_;
        FinishLocked(run, now - run.started, polled.status(), &done);
        progressed = true;
      } else if (polled->done) {
        if (!polled->status.ok()) ++poll_errors_;
        FinishLocked(run, polled->gpu_time.value_or(now - run.started), polled->status, &done);
        progressed = true;
      } else {
        running_->next_poll = now + options_.poll_interval;
      }
    }
    if (!running_ && !pending_ && hold_until_ && now >= *hold_until_) {
      ApplyLocked(scheduler_->OnTimer(), now);
      progressed = true;
    }
    if (pending_ && !running_) {
      const Pending p = *pending_;
      pending_.reset();
      // Marks the engine taken before the lock is dropped, so nothing else starts meanwhile.
      running_ = Running{p.vm, p.handle, now, p.decided, now + options_.poll_interval};
      lock.unlock();
      Status started = sink_->Start(p.vm, p.handle);
      lock.lock();
      now = clock_->Now();
      running_->started = now;
      running_->next_poll = now + options_.poll_interval;
      if (!started.ok()) {
        ++start_errors_;
        FinishLocked(*running_, Duration(0), std::move(started), &done);
      } else {
        ++started_;
      }
      progressed = true;
    }
    if (!progressed) break;
  }
  if (!running_) poll_now_ = false;
  stepping_ = false;
  lock.unlock();
  if (options_.on_done) {
    for (const SubmissionDone& d : done) options_.on_done(d);
  }
  return true;
}

std::optional<TimePoint> Dispatcher::NextWakeupLocked() const {
  if (pending_ && !running_) return TimePoint::min();
  if (running_) return poll_now_ ? TimePoint::min() : running_->next_poll;
  return hold_until_;
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
    Step();
    lock.lock();
    if (stopping_) break;
    const std::optional<TimePoint> next = NextWakeupLocked();
    const auto woken = [&] { return stopping_ || kicks_ != seen; };
    if (!next) {
      cv_.wait(lock, woken);
    } else if (*next > clock_->Now()) {
      cv_.wait_until(lock,
                     std::chrono::steady_clock::time_point(
                         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             next->time_since_epoch())),
                     woken);
    }
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
  s.recent.assign(recent_.begin(), recent_.end());
  return s;
}

bool Dispatcher::busy() const {
  std::lock_guard lock(mu_);
  return pending_.has_value() || running_.has_value();
}

}  // namespace gpuvm::sched
