#include "scheduler/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <queue>

namespace gpuvm::sched::sim {
namespace {

// splitmix64: tiny, well mixed, and the same on every platform (std:: distributions are not).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  double Symmetric() { return static_cast<double>(Next() >> 11) * 0x1.0p-52 - 1.0; }
  Duration Vary(Duration base, double jitter) {
    const double factor = 1.0 + jitter * Symmetric();
    return std::max(
        Duration(1),
        Duration(static_cast<int64_t>(std::llround(static_cast<double>(base.count()) * factor))));
  }

 private:
  uint64_t state_;
};

TimePoint At(Duration since_start) { return TimePoint(since_start); }
Duration Since(TimePoint t) { return t.time_since_epoch(); }

class Simulation {
 public:
  Simulation(const SimConfig& config, Scheduler* scheduler, ManualClock* clock)
      : config_(config), scheduler_(scheduler), clock_(clock), rng_(config.seed) {
    const size_t n = config.vms.size();
    result_.completed.assign(n, 0);
    result_.finished_at.assign(n, config.duration);
    finished_.assign(n, false);
  }

  Result<SimResult> Run();

 private:
  enum class Kind : uint8_t { kSubmit, kGpuEnd, kTimer, kControl };
  struct Event {
    Duration at;
    uint64_t seq;
    Kind kind;
    size_t index;         // VM index (kSubmit) or control index (kControl)
    uint64_t generation;  // kGpuEnd / kTimer: stale when it no longer matches
    bool operator>(const Event& other) const {
      return at != other.at ? at > other.at : seq > other.seq;
    }
  };
  struct Job {
    size_t vm_index = 0;
    Duration remaining{0};
    bool stopped_before = false;  // preempted once: resuming costs switch_cost
  };
  struct Running {
    SubmissionHandle handle = 0;
    Duration segment_start{0};
  };

  void Push(Duration at, Kind kind, size_t index, uint64_t generation = 0) {
    events_.push(Event{at, next_seq_++, kind, index, generation});
  }
  Duration Now() const { return Since(clock_->Peek()); }
  VmId IdOf(size_t index) const { return static_cast<VmId>(index + 1); }
  Status Apply(const Decision& decision);
  Status StartSegment(SubmissionHandle handle, Duration not_before, bool resume);
  Status OnGpuEnd(Duration at);
  Status OnSubmit(size_t vm_index);
  Status OnControl(size_t index);
  bool AllFinished() const;

  const SimConfig& config_;
  Scheduler* const scheduler_;
  ManualClock* const clock_;
  Rng rng_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t next_seq_ = 0;
  std::map<SubmissionHandle, Job> jobs_;
  SubmissionHandle next_handle_ = 1;
  std::optional<Running> running_;
  uint64_t gpu_generation_ = 0;
  uint64_t timer_generation_ = 0;
  bool hold_pending_ = false;
  std::vector<bool> finished_;
  SimResult result_;
};

Status Simulation::Apply(const Decision& decision) {
  switch (decision.action) {
    case Decision::Action::kNothing:
      hold_pending_ = false;
      return Status::Ok();
    case Decision::Action::kHold:
      if (running_) return Status::Internal("scheduler held a busy GPU");
      if (!hold_pending_) ++result_.holds;
      hold_pending_ = true;
      Push(std::max(Since(decision.until), Now()), Kind::kTimer, 0, ++timer_generation_);
      return Status::Ok();
    case Decision::Action::kDispatch: {
      if (running_) return Status::Internal("scheduler dispatched onto a busy GPU");
      hold_pending_ = false;
      ++timer_generation_;  // a pending hold timer is moot now
      if (decision.vm == 0 || decision.vm > config_.vms.size()) {
        return Status::Internal("scheduler dispatched for unknown VM " +
                                std::to_string(decision.vm));
      }
      auto it = jobs_.find(decision.submission);
      if (it == jobs_.end()) return Status::Internal("scheduler dispatched an unknown submission");
      return StartSegment(decision.submission, Now(), it->second.stopped_before);
    }
    case Decision::Action::kContinue:
    case Decision::Action::kPreempt:
      return Status::Internal("slice decision outside a slice boundary");
  }
  return Status::Ok();
}

Status Simulation::StartSegment(SubmissionHandle handle, Duration not_before, bool resume) {
  auto it = jobs_.find(handle);
  if (it == jobs_.end()) return Status::Internal("scheduler dispatched an unknown submission");
  Job& job = it->second;
  Duration start = not_before;
  if (resume) start += config_.switch_cost;
  running_ = Running{handle, start};
  Duration length = job.remaining;
  if (config_.slice > Duration(0)) length = std::min(length, config_.slice);
  Push(start + length, Kind::kGpuEnd, 0, ++gpu_generation_);
  return Status::Ok();
}

Status Simulation::OnSubmit(size_t vm_index) {
  if (finished_[vm_index]) return Status::Ok();
  const SimVm& vm = config_.vms[vm_index];
  const SubmissionHandle handle = next_handle_++;
  jobs_[handle] = Job{vm_index, rng_.Vary(vm.job, vm.jitter), false};
  Result<Decision> decision = scheduler_->OnSubmit(IdOf(vm_index), handle);
  if (!decision.ok()) return decision.status().WithContext("OnSubmit");
  if (running_) {
    if (decision->action != Decision::Action::kNothing) {
      return Status::Internal("scheduler acted on a busy GPU: " + ToString(*decision));
    }
    return Status::Ok();
  }
  return Apply(*decision);
}

Status Simulation::OnGpuEnd(Duration at) {
  const Running run = *running_;
  Job& job = jobs_.at(run.handle);
  const size_t vm_index = job.vm_index;
  // The GPU's own accounting: exact, whatever the scheduler's clock reads when it hears about it.
  const Duration ran = at - run.segment_start;
  if (ran > Duration(0)) result_.runs.push_back(SimRun{run.segment_start, at, vm_index});
  job.remaining -= ran;
  running_.reset();

  if (job.remaining <= Duration(0)) {
    jobs_.erase(run.handle);
    Result<Decision> decision = scheduler_->OnComplete(run.handle, ran);
    if (!decision.ok()) return decision.status().WithContext("OnComplete");
    const SimVm& vm = config_.vms[vm_index];
    ++result_.completed[vm_index];
    if (vm.max_jobs != 0 && result_.completed[vm_index] >= vm.max_jobs) {
      finished_[vm_index] = true;
      result_.finished_at[vm_index] = at;
    } else {
      Push(at + rng_.Vary(vm.think, vm.jitter), Kind::kSubmit, vm_index);
    }
    return Apply(*decision);
  }

  running_ = run;  // still on the GPU while the scheduler decides
  Result<Decision> verdict = scheduler_->OnSliceEnd(run.handle, ran);
  if (!verdict.ok()) return verdict.status().WithContext("OnSliceEnd");
  if (verdict->action == Decision::Action::kContinue) {
    return StartSegment(run.handle, std::max(at, Now()), /*resume=*/false);
  }
  if (verdict->action != Decision::Action::kPreempt) {
    return Status::Internal("slice boundary answered with " + ToString(*verdict));
  }
  running_.reset();
  job.stopped_before = true;
  ++result_.preemptions;
  Result<Decision> next = scheduler_->OnGpuIdle();
  if (!next.ok()) return next.status().WithContext("OnGpuIdle");
  return Apply(*next);
}

Status Simulation::OnControl(size_t index) {
  const SimControl& control = config_.control[index];
  if (control.kind == SimControl::Kind::kSetShare) {
    if (control.vm_index >= config_.vms.size()) {
      result_.control_errors.push_back(Status::InvalidArgument("control names no VM"));
      return Status::Ok();
    }
    Status status = scheduler_->SetShare(IdOf(control.vm_index), control.share_percent);
    if (!status.ok()) result_.control_errors.push_back(status);
    return Status::Ok();
  }
  // Decides nothing by itself: a pending hold timer (if any) asks the new policy when it fires.
  scheduler_->SetPolicy(control.policy);
  return Status::Ok();
}

bool Simulation::AllFinished() const {
  for (size_t i = 0; i < config_.vms.size(); ++i) {
    if (config_.vms[i].max_jobs == 0 || !finished_[i]) return false;
  }
  return true;
}

Result<SimResult> Simulation::Run() {
  for (size_t i = 0; i < config_.vms.size(); ++i) {
    for (uint32_t d = 0; d < std::max<uint32_t>(config_.vms[i].depth, 1); ++d) {
      Push(config_.vms[i].start, Kind::kSubmit, i);
    }
  }
  for (size_t i = 0; i < config_.control.size(); ++i)
    Push(config_.control[i].at, Kind::kControl, i);
  {
    Result<Decision> first = scheduler_->OnGpuIdle();
    if (!first.ok()) return first.status();
    GPUVM_RETURN_IF_ERROR(Apply(*first));
  }

  Duration end = config_.duration;
  while (!events_.empty()) {
    const Event event = events_.top();
    if (event.at > config_.duration) break;
    events_.pop();
    clock_->AdvanceTo(At(event.at));
    switch (event.kind) {
      case Kind::kSubmit:
        GPUVM_RETURN_IF_ERROR(OnSubmit(event.index));
        break;
      case Kind::kGpuEnd:
        if (!running_ || event.generation != gpu_generation_) break;
        GPUVM_RETURN_IF_ERROR(OnGpuEnd(event.at));
        break;
      case Kind::kTimer:
        if (running_ || event.generation != timer_generation_) break;
        hold_pending_ = false;
        GPUVM_RETURN_IF_ERROR(Apply(scheduler_->OnTimer()));
        break;
      case Kind::kControl:
        GPUVM_RETURN_IF_ERROR(OnControl(event.index));
        break;
    }
    if (AllFinished()) {
      end = event.at;
      break;
    }
  }
  // Work still on the GPU at the end counts up to the end, so the last window is not biased.
  if (running_ && end > running_->segment_start) {
    result_.runs.push_back(
        SimRun{running_->segment_start, end, jobs_.at(running_->handle).vm_index});
  }
  result_.end = end;
  result_.final_stats = scheduler_->Stats();
  result_.scheduler_time = result_.final_stats.scheduler_time;
  return std::move(result_);
}

}  // namespace

Result<SimResult> Simulate(const SimConfig& config) {
  if (config.vms.empty()) return Status::InvalidArgument("simulation needs at least one VM");
  if (config.duration <= Duration(0)) return Status::InvalidArgument("duration must be positive");
  for (const SimVm& vm : config.vms) {
    if (vm.job <= Duration(0))
      return Status::InvalidArgument("VM '" + vm.name + "': job must be positive");
    if (vm.think < Duration(0) || vm.start < Duration(0) || !(vm.jitter >= 0 && vm.jitter < 1)) {
      return Status::InvalidArgument("VM '" + vm.name + "': think, start and jitter out of range");
    }
  }
  if (config.slice < Duration(0) || config.switch_cost < Duration(0) ||
      config.scheduler_cost < Duration(0)) {
    return Status::InvalidArgument("slice, switch_cost and scheduler_cost must not be negative");
  }
  ManualClock clock;
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<Scheduler> scheduler,
                         Scheduler::Create(&clock, config.scheduler));
  for (size_t i = 0; i < config.vms.size(); ++i) {
    GPUVM_RETURN_IF_ERROR(scheduler->AddVm(static_cast<VmId>(i + 1), config.vms[i].share_percent));
  }
  clock.set_read_cost(config.scheduler_cost);
  Simulation simulation(config, scheduler.get(), &clock);
  return simulation.Run();
}

std::vector<SimVm> MaddMix(size_t n, Duration job, Duration think) {
  std::vector<SimVm> vms;
  for (size_t i = 0; i < n; ++i) {
    SimVm vm;
    const bool long_kernel = i % 2 == 1;
    vm.name = long_kernel ? "long-madd" : "madd";
    vm.share_percent = 100.0 / static_cast<double>(n);
    vm.job = long_kernel ? job * 15 : job;
    vm.think = think;
    vms.push_back(vm);
  }
  return vms;
}

}  // namespace gpuvm::sched::sim
