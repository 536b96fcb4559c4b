// The GPU scheduler: decides when each VM's GPU submissions reach the (single, non-preemptive or
// slice-preemptible) GPU engine, by policy (FIFO, CREDIT, BAND), with per-VM shares an operator
// sets live.
//
// Driven by events from its owner (the aggregator's dispatch thread, or the simulator in sim/):
//   OnSubmit     a VM's submission arrived (VM id, opaque handle, optional estimate)
//   OnGpuIdle    the GPU is free (at start, or after it stopped a preempted submission)
//   OnComplete   the submission on the GPU completed, with the GPU time it measured
//   OnSliceEnd   (devices that run work in bounded slices) the submission reached a slice boundary
//   OnTimer      the time a previous kHold decision named has come
// Each returns a Decision: dispatch submission X of VM v now, hold the GPU idle until t, or
// nothing. At most one submission is on the GPU at a time (GPUvm's single device queue); the owner
// starts exactly what it is told to and reports its completion before anything else runs.
//
// Time comes only from the Clock given to Create (see clock.h). The scheduler measures its own CPU
// time by reading the clock at the start and end of every event it handles while the GPU is not
// running anything (time the GPU sits idle because of the scheduler); BAND charges that time to the
// VMs (GPUvm's fix).
//
// Invalid input never changes anything: unknown VMs, duplicate handles, a completion for a
// submission that is not running, negative or non-finite shares, shares summing past 100 % all
// return a clear error.
//
// Threading: every method is thread-safe (one internal mutex). The event methods are meant for one
// dispatch thread; the control methods (AddVm, SetShare, SetPolicy, Stats) may come from a control
// thread.
#ifndef GPUVM_SCHEDULER_SCHEDULER_H_
#define GPUVM_SCHEDULER_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "scheduler/clock.h"
#include "scheduler/policy.h"
#include "scheduler/types.h"
#include "scheduler/usage_history.h"

namespace gpuvm::sched {

// The windows the operator sees usage over.
inline constexpr Duration kUsageWindowShort = 100ms;
inline constexpr Duration kUsageWindowMedium = 500ms;
inline constexpr Duration kUsageWindowLong = 10s;

struct VmStats {
  VmId vm = 0;
  double share_percent = 0;
  uint32_t queue_depth = 0;  // waiting submissions (not counting one on the GPU)
  bool running = false;      // a submission of this VM is on the GPU
  uint64_t submitted = 0;
  uint64_t dispatched = 0;  // first dispatches (resumptions after preemption not counted)
  uint64_t completed = 0;
  uint64_t preempted = 0;
  // The operator paused it (SetPaused): nothing of it is dispatched until it is resumed.
  bool paused = false;
  Duration gpu_time{0};    // measured GPU time, all time
  Duration wait_total{0};  // arrival to first dispatch, summed over dispatched submissions
  Duration wait_max{0};
  // Fraction of wall-clock time this VM used the GPU within the last 100 ms / 500 ms / 10 s (0..1).
  double usage_100ms = 0;
  double usage_500ms = 0;
  double usage_10s = 0;
  // From the current policy.
  Duration credit{0};
  std::string standing;
  Duration scheduler_time_charged{0};
};

struct SchedulerStats {
  PolicyKind policy = PolicyKind::kBand;
  TimePoint now{};
  Duration scheduler_time{0};  // the scheduler's own time while the GPU was not running anything
  uint64_t holds = 0;          // kHold decisions that started a new hold
  uint64_t policy_errors =
      0;  // a policy named a VM with nothing queued (a bug; the core fell back to FIFO)
  std::vector<VmStats> vms;  // sorted by VM id
};

class Scheduler {
 public:
  // `clock` must outlive the scheduler. Options are validated (positive periods, sane thresholds).
  static Result<std::unique_ptr<Scheduler>> Create(Clock* clock, const SchedulerOptions& options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // --- VMs and shares (control) ---
  // share_percent in [0, 100]; the sum over all VMs may not pass 100. A VM with share 0 gets GPU
  // time only when no VM with a share wants it.
  Status AddVm(VmId vm, double share_percent);
  // Forgets the VM. Returns its waiting submissions (dropped: the owner discards them). If one of
  // its submissions is on the GPU, its completion is still accepted but charged to nobody.
  Result<std::vector<SubmissionHandle>> RemoveVm(VmId vm);
  Status SetShare(VmId vm, double share_percent);
  // All or nothing: either every share changes or none does.
  Status SetShares(const std::vector<std::pair<VmId, double>>& shares);
  // The operator's pause (docs/SCHEDULER.md "Pause, kernel limit, kill-work"): a paused VM's
  // submissions stay queued but are never dispatched (the policy sees it with nothing queued), and
  // at the next slice boundary its running submission is preempted (put back at the head of its
  // queue) whatever the policy says, when the owner may preempt. Resuming makes it schedulable
  // again; the call itself never dispatches (the owner asks with OnGpuIdle when the GPU is free).
  // NotFound for an unknown VM; FailedPrecondition to pause a paused VM or resume one that is not
  // paused (nothing changes).
  Status SetPaused(VmId vm, bool paused);
  // Drops the VM's waiting submissions (not the one on the GPU) and returns them, oldest first;
  // the VM stays. NotFound for an unknown VM.
  Result<std::vector<SubmissionHandle>> DropQueued(VmId vm);
  // Switches policy live. Queued submissions stay queued in their arrival order, the one on the GPU
  // keeps running and is charged to the new policy; credits start afresh (every VM "at" its share).
  // The switch itself never dispatches, so a control thread cannot start work behind the dispatch
  // thread's back: a free GPU with work queued always has a hold timer armed, and the owner's next
  // OnTimer (or any event) decides with the new policy.
  void SetPolicy(PolicyKind kind);
  PolicyKind policy() const;
  // The owner can stop a run as soon as another VM's work arrives (Dispatcher: slice on arrival,
  // a quantum, a sink that can suspend). Policies may then trade idle waiting for preemption
  // (BandOptions::work_conserving). Kept across SetPolicy.
  void SetArrivalPreemption(bool on);

  // --- events (dispatch thread) ---
  // NotFound for an unknown VM, AlreadyExists for a handle the scheduler holds, ResourceExhausted
  // when the VM's queue is full.
  Result<Decision> OnSubmit(VmId vm, SubmissionHandle submission, Duration estimate = Duration(0));
  // FailedPrecondition if a submission is on the GPU (report its completion instead).
  Result<Decision> OnGpuIdle();
  // `gpu_time`: GPU time the submission used since it was (re)started or since its last slice
  // report. FailedPrecondition if `submission` is not the one on the GPU; InvalidArgument for a
  // negative time.
  Result<Decision> OnComplete(SubmissionHandle submission, Duration gpu_time);
  // For devices that can stop a job between bounded slices (the software GPU's compute engine): the
  // running submission finished a slice of `slice_gpu_time` and could stop here. kContinue or
  // kPreempt. may_preempt false (an engine that cannot stop it): the time is charged and the answer
  // is kContinue.
  Result<Decision> OnSliceEnd(SubmissionHandle submission, Duration slice_gpu_time,
                              bool may_preempt = true);
  Decision OnTimer();

  // The time OnTimer should be called at, if a hold is pending.
  std::optional<TimePoint> NextTimer() const;
  SchedulerStats Stats() const;

 private:
  struct Queued {
    SubmissionHandle handle = 0;
    uint64_t seq = 0;
    TimePoint arrival{};
    Duration estimate{0};
    bool started = false;        // preempted earlier: its wait was already counted
    TimePoint first_dispatch{};  // valid once started (or running)
    Duration charged{0};         // GPU time charged to it so far (slices of a preempted run)
    // Reported GPU time the bound below held back (more than the wall time since first_dispatch
    // had passed): offered again at its next report, so an early report loses nothing.
    Duration deferred{0};
  };
  struct VmRecord {
    VmId id = 0;
    double share = 0;
    std::deque<Queued> queue;
    std::optional<TimePoint> last_completion;
    std::optional<TimePoint> last_arrival;
    bool paused = false;
    uint64_t submitted = 0, dispatched = 0, completed = 0, preempted = 0;
    Duration gpu_time{0}, wait_total{0}, wait_max{0};
    // 1 ms buckets for the 100 ms and 500 ms windows, 50 ms buckets for the 10 s one: each query
    // sums at most a few hundred buckets, and the edge error stays within 2 % of the window.
    UsageHistory usage_fine;
    UsageHistory usage_coarse;
    explicit VmRecord(VmId vm, double s);
  };
  struct Running {
    Queued entry;
    VmId vm = 0;
    bool vm_removed = false;
    TimePoint since{};  // dispatched, resumed or last reported
  };
  class OverheadMeter;

  Scheduler(Clock* clock, const SchedulerOptions& options);

  static Status ValidateShare(VmId vm, double share_percent);
  Status CheckSum(const std::map<VmId, double>& shares) const;
  void RefreshViews();
  void Account(VmRecord& vm, Duration gpu_time, TimePoint now);
  // Empties the VM's queue and forgets its handles; returns them (RemoveVm, DropQueued).
  std::vector<SubmissionHandle> DropQueueLocked(VmRecord& vm);
  Decision ChooseLocked(Trigger trigger, TimePoint now);
  Decision Apply(const Choice& choice, TimePoint now);
  Result<Decision> ReportRun(SubmissionHandle submission, Duration gpu_time, bool completed,
                             bool may_preempt = true);

  Clock* const clock_;
  const SchedulerOptions options_;
  bool arrival_preemption_ = false;  // guarded by mu_
  mutable std::mutex mu_;
  std::unique_ptr<Policy> policy_;
  std::map<VmId, VmRecord> vms_;
  std::vector<VmView> views_;  // refreshed from vms_ before every policy call
  std::unordered_map<SubmissionHandle, VmId> handles_;  // every waiting or running handle
  std::optional<Running> running_;
  std::optional<TimePoint> hold_until_;
  uint64_t next_seq_ = 0;
  Duration scheduler_time_pending_{0};  // measured, not yet charged
  Duration scheduler_time_total_{0};
  uint64_t holds_ = 0;
  uint64_t policy_errors_ = 0;
};

}  // namespace gpuvm::sched

#endif  // GPUVM_SCHEDULER_SCHEDULER_H_
