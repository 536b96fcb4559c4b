#include "scheduler/scheduler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace gpuvm::sched {
namespace {

// Shares are percentages with a few decimals at most; allow for binary rounding when summing them.
constexpr double kShareSumSlack = 1e-6;
// A measured GPU time beyond this is a broken device or caller, not a kernel.
constexpr Duration kMaxReportedGpuTime = std::chrono::hours(24);

std::string Percent(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g%%", value);
  return buffer;
}

std::string HandleName(SubmissionHandle handle) { return "submission " + std::to_string(handle); }

}  // namespace

// Measures the scheduler's own time for one event: from the read at entry to the read at exit. Only
// time during which the GPU has nothing to run counts (that time is lost to the VMs; time spent
// while a submission runs overlaps it).
class Scheduler::OverheadMeter {
 public:
  OverheadMeter(Scheduler* scheduler, bool counts)
      : scheduler_(scheduler), counts_(counts), start_(scheduler->clock_->Now()) {}
  ~OverheadMeter() {
    if (!counts_) return;
    const Duration spent = scheduler_->clock_->Now() - start_;
    if (spent <= Duration(0)) return;
    scheduler_->scheduler_time_pending_ += spent;
    scheduler_->scheduler_time_total_ += spent;
  }
  OverheadMeter(const OverheadMeter&) = delete;
  OverheadMeter& operator=(const OverheadMeter&) = delete;

  TimePoint start() const { return start_; }

 private:
  Scheduler* const scheduler_;
  const bool counts_;
  const TimePoint start_;
};

Scheduler::VmRecord::VmRecord(VmId vm, double s)
    : id(vm),
      share(s),
      usage_fine(/*bucket=*/1ms, /*horizon=*/kUsageWindowMedium),
      usage_coarse(/*bucket=*/50ms, /*horizon=*/kUsageWindowLong) {}

Result<std::unique_ptr<Scheduler>> Scheduler::Create(Clock* clock,
                                                     const SchedulerOptions& options) {
  if (clock == nullptr) return Status::InvalidArgument("scheduler needs a clock");
  if (options.credit.period <= Duration(0)) {
    return Status::InvalidArgument("credit period must be positive");
  }
  const BandOptions& band = options.band;
  if (band.threshold <= Duration(0))
    return Status::InvalidArgument("band threshold must be positive");
  if (band.at_band < Duration(0) || band.at_band >= band.threshold) {
    return Status::InvalidArgument("band at_band must be in [0, threshold)");
  }
  if (band.hold_max < Duration(0) || band.hold_max > 1s) {
    return Status::InvalidArgument("band hold_max must be in [0, 1 s]");
  }
  if (band.idle_after <= Duration(0))
    return Status::InvalidArgument("band idle_after must be positive");
  if (band.forgive_after < Duration(0) || band.preempt_lag < Duration(0)) {
    return Status::InvalidArgument("band forgive_after and preempt_lag must not be negative");
  }
  if (options.max_queue_depth == 0)
    return Status::InvalidArgument("max_queue_depth must be positive");
  return std::unique_ptr<Scheduler>(new Scheduler(clock, options));
}

Scheduler::Scheduler(Clock* clock, const SchedulerOptions& options)
    : clock_(clock), options_(options), policy_(MakePolicy(options.policy, options)) {}

Scheduler::~Scheduler() = default;

Status Scheduler::ValidateShare(VmId vm, double share_percent) {
  if (!std::isfinite(share_percent) || share_percent < 0 || share_percent > 100) {
    return Status::InvalidArgument("VM " + std::to_string(vm) + ": share " +
                                   Percent(share_percent) + " is not between 0% and 100%");
  }
  return Status::Ok();
}

Status Scheduler::CheckSum(const std::map<VmId, double>& shares) const {
  double sum = 0;
  for (const auto& [vm, share] : shares) sum += share;
  if (sum > 100 + kShareSumSlack) {
    return Status::InvalidArgument("shares would sum to " + Percent(sum) + ", past 100%");
  }
  return Status::Ok();
}

Status Scheduler::AddVm(VmId vm, double share_percent) {
  std::lock_guard lock(mu_);
  if (vms_.contains(vm))
    return Status::AlreadyExists("VM " + std::to_string(vm) + " already exists");
  GPUVM_RETURN_IF_ERROR(ValidateShare(vm, share_percent));
  std::map<VmId, double> shares;
  for (const auto& [id, record] : vms_) shares[id] = record.share;
  shares[vm] = share_percent;
  GPUVM_RETURN_IF_ERROR(CheckSum(shares));
  vms_.emplace(vm, VmRecord(vm, share_percent));
  policy_->OnVmAdded(vm, clock_->Now());
  return Status::Ok();
}

Result<std::vector<SubmissionHandle>> Scheduler::RemoveVm(VmId vm) {
  std::lock_guard lock(mu_);
  auto it = vms_.find(vm);
  if (it == vms_.end()) return Status::NotFound("no VM " + std::to_string(vm));
  std::vector<SubmissionHandle> dropped = DropQueueLocked(it->second);
  if (running_ && running_->vm == vm) running_->vm_removed = true;
  policy_->OnVmRemoved(vm);
  vms_.erase(it);
  return dropped;
}

Status Scheduler::SetShare(VmId vm, double share_percent) {
  return SetShares({{vm, share_percent}});
}

Status Scheduler::SetShares(const std::vector<std::pair<VmId, double>>& changes) {
  std::lock_guard lock(mu_);
  std::map<VmId, double> shares;
  for (const auto& [id, record] : vms_) shares[id] = record.share;
  std::map<VmId, bool> seen;
  for (const auto& [vm, share] : changes) {
    if (!vms_.contains(vm)) return Status::NotFound("no VM " + std::to_string(vm));
    if (seen[vm]) return Status::InvalidArgument("VM " + std::to_string(vm) + " given twice");
    seen[vm] = true;
    GPUVM_RETURN_IF_ERROR(ValidateShare(vm, share));
    shares[vm] = share;
  }
  GPUVM_RETURN_IF_ERROR(CheckSum(shares));
  for (const auto& [vm, share] : changes) vms_.at(vm).share = share;
  return Status::Ok();
}

Status Scheduler::SetPaused(VmId vm, bool paused) {
  std::lock_guard lock(mu_);
  auto it = vms_.find(vm);
  if (it == vms_.end()) return Status::NotFound("no VM " + std::to_string(vm));
  VmRecord& record = it->second;
  if (record.paused == paused) {
    return Status::FailedPrecondition("VM " + std::to_string(vm) +
                                      (paused ? " is already paused" : " is not paused"));
  }
  record.paused = paused;
  if (!paused && !record.queue.empty()) {
    // Its work reappears to the policy as if it had just arrived at an idle VM.
    const TimePoint now = clock_->Now();
    RefreshViews();
    policy_->OnArrival(views_, vm, /*was_idle=*/true, now);
  }
  return Status::Ok();
}

Result<std::vector<SubmissionHandle>> Scheduler::DropQueued(VmId vm) {
  std::lock_guard lock(mu_);
  auto it = vms_.find(vm);
  if (it == vms_.end()) return Status::NotFound("no VM " + std::to_string(vm));
  return DropQueueLocked(it->second);
}

std::vector<SubmissionHandle> Scheduler::DropQueueLocked(VmRecord& vm) {
  std::vector<SubmissionHandle> dropped;
  for (const Queued& q : vm.queue) {
    dropped.push_back(q.handle);
    handles_.erase(q.handle);
  }
  vm.queue.clear();
  return dropped;
}

void Scheduler::SetPolicy(PolicyKind kind) {
  std::lock_guard lock(mu_);
  const TimePoint now = clock_->Now();
  policy_ = MakePolicy(kind, options_);
  policy_->SetArrivalPreemption(arrival_preemption_);
  for (const auto& [id, record] : vms_) policy_->OnVmAdded(id, now);
  // hold_until_ stays: the owner's timer is armed for it and OnTimer will ask the new policy.
}

void Scheduler::SetArrivalPreemption(bool on) {
  std::lock_guard lock(mu_);
  arrival_preemption_ = on;
  policy_->SetArrivalPreemption(on);
}

PolicyKind Scheduler::policy() const {
  std::lock_guard lock(mu_);
  return policy_->kind();
}

void Scheduler::RefreshViews() {
  views_.clear();
  for (const auto& [id, record] : vms_) {
    VmView view;
    view.id = id;
    view.share = record.share;
    // A paused VM's work is invisible to the policy: it cannot be dispatched.
    view.queued = record.paused ? 0 : static_cast<uint32_t>(record.queue.size());
    if (view.queued > 0) {
      view.head_seq = record.queue.front().seq;
      view.head_arrival = record.queue.front().arrival;
      view.head_estimate = record.queue.front().estimate;
    }
    view.running = running_ && !running_->vm_removed && running_->vm == id;
    view.last_completion = record.last_completion;
    view.last_arrival = record.last_arrival;
    views_.push_back(view);
  }
}

Result<Decision> Scheduler::OnSubmit(VmId vm, SubmissionHandle submission, Duration estimate) {
  std::lock_guard lock(mu_);
  OverheadMeter meter(this, /*counts=*/!running_);
  const TimePoint now = meter.start();
  auto it = vms_.find(vm);
  if (it == vms_.end()) return Status::NotFound("submission from unknown VM " + std::to_string(vm));
  if (handles_.contains(submission)) {
    return Status::AlreadyExists(HandleName(submission) + " is already queued or running");
  }
  VmRecord& record = it->second;
  if (record.queue.size() >= options_.max_queue_depth) {
    return Status::ResourceExhausted("VM " + std::to_string(vm) + " has " +
                                     std::to_string(record.queue.size()) +
                                     " submissions queued, the most allowed");
  }
  const bool was_idle = record.queue.empty() && !(running_ && running_->vm == vm);
  record.queue.push_back(
      Queued{submission, next_seq_++, now, std::max(estimate, Duration(0)), false});
  record.last_arrival = now;
  ++record.submitted;
  handles_[submission] = vm;
  RefreshViews();
  if (!record.paused) policy_->OnArrival(views_, vm, was_idle, now);
  if (running_) return Decision::Nothing();
  return ChooseLocked(Trigger::kArrival, now);
}

Result<Decision> Scheduler::OnGpuIdle() {
  std::lock_guard lock(mu_);
  OverheadMeter meter(this, /*counts=*/true);
  if (running_) {
    return Status::FailedPrecondition(HandleName(running_->entry.handle) +
                                      " is on the GPU; report its completion instead");
  }
  return ChooseLocked(Trigger::kGpuIdle, meter.start());
}

void Scheduler::Account(VmRecord& vm, Duration gpu_time, TimePoint now) {
  vm.gpu_time += gpu_time;
  // Ending now, as late as fits: a suspended submission's time reported only at its completion
  // ran before the VM's last recorded slice, and must not pile onto it (usage over 100 %).
  vm.usage_fine.AddEndingAt(now, gpu_time);
  vm.usage_coarse.AddEndingAt(now, gpu_time);
  vm.last_completion = now;
}

Result<Decision> Scheduler::ReportRun(SubmissionHandle submission, Duration gpu_time,
                                      bool completed, bool may_preempt) {
  OverheadMeter meter(this, /*counts=*/true);
  const TimePoint now = meter.start();
  if (gpu_time < Duration(0) || gpu_time > kMaxReportedGpuTime) {
    return Status::InvalidArgument("GPU time " + std::to_string(gpu_time.count()) + " ns of " +
                                   HandleName(submission) + " is out of range");
  }
  if (!running_ || running_->entry.handle != submission) {
    return Status::FailedPrecondition(HandleName(submission) + " is not on the GPU");
  }
  // A submission cannot have used more GPU time than has passed since it was first dispatched.
  // The bound is over its whole life, not since the last report: a device publishes its busy time
  // in steps (at the end of its own time slices), so one report may carry more than the time since
  // the previous report, and the slack is made up by the reports before it. What the bound holds
  // back is offered again at the next report (a slice at another VM's arrival can come right after
  // a dispatch, carrying a device slice that began before it); only a completion drops the rest.
  const Running run = *running_;
  const Duration offered = gpu_time + run.entry.deferred;
  gpu_time =
      std::min(offered, std::max(Duration(0), now - run.entry.first_dispatch - run.entry.charged));
  running_->entry.deferred = std::min(offered - gpu_time, kMaxReportedGpuTime);
  running_->entry.charged += gpu_time;
  if (!completed) running_->since = now;
  VmRecord* record = nullptr;
  if (!run.vm_removed) record = &vms_.at(run.vm);
  if (completed) {
    running_.reset();
    handles_.erase(submission);
  }
  if (record != nullptr) {
    Account(*record, gpu_time, now);
    if (completed) ++record->completed;
    RefreshViews();
    policy_->Charge(views_, run.vm, gpu_time, scheduler_time_pending_, now);
    scheduler_time_pending_ = Duration(0);
  }
  if (completed) return ChooseLocked(Trigger::kCompletion, now);

  // A slice boundary.
  if (!may_preempt) return Decision::Continue();
  if (record == nullptr) {
    // Its VM is gone: stop the work; it is not requeued anywhere.
    running_.reset();
    handles_.erase(submission);
    return Decision::Preempt();
  }
  RefreshViews();
  // A paused VM leaves the GPU at its first slice boundary, whatever the policy thinks.
  if (!record->paused && !policy_->ShouldPreempt(views_, run.vm, now)) return Decision::Continue();
  Queued entry = running_->entry;
  entry.started = true;
  record->queue.push_front(entry);
  ++record->preempted;
  running_.reset();
  return Decision::Preempt();
}

Result<Decision> Scheduler::OnComplete(SubmissionHandle submission, Duration gpu_time) {
  std::lock_guard lock(mu_);
  return ReportRun(submission, gpu_time, /*completed=*/true);
}

Result<Decision> Scheduler::OnSliceEnd(SubmissionHandle submission, Duration slice_gpu_time,
                                       bool may_preempt) {
  std::lock_guard lock(mu_);
  return ReportRun(submission, slice_gpu_time, /*completed=*/false, may_preempt);
}

Decision Scheduler::OnTimer() {
  std::lock_guard lock(mu_);
  OverheadMeter meter(this, /*counts=*/!running_);
  const TimePoint now = meter.start();
  if (running_) return Decision::Nothing();
  if (hold_until_) {
    if (now < *hold_until_) return Decision::Hold(*hold_until_);  // early: keep waiting
    hold_until_.reset();
    return ChooseLocked(Trigger::kHoldExpired, now);
  }
  return ChooseLocked(Trigger::kTimer, now);
}

std::optional<TimePoint> Scheduler::NextTimer() const {
  std::lock_guard lock(mu_);
  return hold_until_;
}

Decision Scheduler::ChooseLocked(Trigger trigger, TimePoint now) {
  RefreshViews();
  return Apply(policy_->Choose(views_, trigger, now), now);
}

Decision Scheduler::Apply(const Choice& choice, TimePoint now) {
  // A policy bug must never stall the GPU or crash the host: a hold already over, a dispatch of a
  // VM with nothing queued, or idling with work queued all fall back to arrival order (and are
  // counted).
  Choice effective = choice;
  const std::optional<VmId> oldest = OldestWaiting(views_);
  bool broken = false;
  switch (choice.kind) {
    case Choice::Kind::kIdle:
      broken = oldest.has_value();
      break;
    case Choice::Kind::kHold:
      broken = choice.until <= now;
      break;
    case Choice::Kind::kDispatch: {
      auto it = vms_.find(choice.vm);
      broken = it == vms_.end() || it->second.queue.empty();
      break;
    }
  }
  if (broken) {
    ++policy_errors_;
    effective = oldest ? Choice::Dispatch(*oldest) : Choice::Idle();
  }
  switch (effective.kind) {
    case Choice::Kind::kIdle:
      hold_until_.reset();
      return Decision::Nothing();
    case Choice::Kind::kHold:
      if (!hold_until_) ++holds_;
      hold_until_ = effective.until;
      return Decision::Hold(effective.until);
    case Choice::Kind::kDispatch:
      break;
  }
  hold_until_.reset();
  VmRecord& record = vms_.at(effective.vm);
  Queued entry = record.queue.front();
  record.queue.pop_front();
  if (!entry.started) {
    const Duration waited = now - entry.arrival;
    record.wait_total += waited;
    record.wait_max = std::max(record.wait_max, waited);
    ++record.dispatched;
  }
  if (!entry.started) entry.first_dispatch = now;
  running_ = Running{entry, effective.vm, false, now};
  return Decision::Dispatch(effective.vm, entry.handle);
}

SchedulerStats Scheduler::Stats() const {
  std::lock_guard lock(mu_);
  SchedulerStats stats;
  stats.policy = policy_->kind();
  stats.now = clock_->Now();
  stats.scheduler_time = scheduler_time_total_;
  stats.holds = holds_;
  stats.policy_errors = policy_errors_;
  const auto fraction = [&](const UsageHistory& usage, Duration window) {
    return static_cast<double>(usage.UsedWithin(stats.now, window).count()) /
           static_cast<double>(window.count());
  };
  for (const auto& [id, r] : vms_) {
    VmStats s;
    s.vm = id;
    s.share_percent = r.share;
    s.queue_depth = static_cast<uint32_t>(r.queue.size());
    s.running = running_ && !running_->vm_removed && running_->vm == id;
    s.submitted = r.submitted;
    s.dispatched = r.dispatched;
    s.completed = r.completed;
    s.preempted = r.preempted;
    s.paused = r.paused;
    s.gpu_time = r.gpu_time;
    s.wait_total = r.wait_total;
    s.wait_max = r.wait_max;
    s.usage_100ms = fraction(r.usage_fine, kUsageWindowShort);
    s.usage_500ms = fraction(r.usage_fine, kUsageWindowMedium);
    s.usage_10s = fraction(r.usage_coarse, kUsageWindowLong);
    const PolicyVmInfo info = policy_->Describe(id);
    s.credit = info.credit;
    s.standing = std::string(info.standing);
    s.scheduler_time_charged = info.scheduler_time_charged;
    stats.vms.push_back(std::move(s));
  }
  return stats;
}

}  // namespace gpuvm::sched
