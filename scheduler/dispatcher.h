// The dispatcher: the piece between the aggregator and the physical GPU engine that makes the
// Scheduler's decisions happen. The aggregator hands it every VM's submissions (an IB_PUT a guest
// wrote to its shadow channel, later a PVDRM pushbuffer); the dispatcher keeps them queued per VM
// (in arrival order within a VM, so a channel's work is never reordered), releases them one at a
// time to a SubmissionSink (the physical channel) in the order the policy (FIFO, CREDIT, BAND)
// chooses, watches each one complete, and charges the measured GPU time to its VM.
//
//   aggregator (server thread)           Dispatcher                       SubmissionSink
//     AddVm / RemoveVm / Submit ───▶ per-VM queues, Scheduler ──Start──▶ e.g. write the physical
//     SetShare / SetPolicy / Stats                               ◀─Poll── IB_PUT; done when IB_GET
//     (control socket)             ◀── on_done(vm, handle, gpu time, wait)  caught up, engine idle
//
// Completion is polled, as GPUvm did (the channel's IB_GET catching up and the engine idle): Poll()
// is called every `poll_interval` while a submission runs, and at once after Wake() (an interrupt
// or fence the sink noticed). A sink that reports every possible completion itself
// (ReportsCompletion: it calls PollNow, as fv does when a channel runs dry on the software GPU)
// is polled only as a fallback, every `notified_poll_interval`, and the dispatch thread is not
// woken for each submission that starts on another thread. GPU time is the sink's own measurement
// when it has one (the engine's accounting), else the time from Start to the poll that saw it done
// (so it includes up to one poll interval of latency; documented in docs/SCHEDULER.md).
//
// Two ways to run it:
//  - own thread (DispatcherOptions::own_thread, the default in the aggregator): a dispatch thread
//    calls Step() whenever there is something to do; sink calls happen on that thread only.
//  - driven (own_thread = false): the owner calls Step() itself, e.g. from its event loop with
//    NextWakeup() as the epoll timeout, or from a test advancing a ManualClock (deterministic).
//
// Preemption (DispatcherOptions::quantum, docs/SCHEDULER.md "Preemption"): with a sink that can
// suspend a running submission and reports the GPU time it has used so far, every `quantum` of a
// run the dispatcher charges what it used since the last report (Scheduler::OnSliceEnd); when the
// policy says stop (a VM over its share while another waits), the sink suspends it at the device's
// next slice boundary, the scheduler puts it back at the head of its VM's queue, and the GPU goes
// to the next submission; a later Start resumes it. quantum 0 is GPUvm's non-preemptive dispatch;
// a sink that reports running GPU time still has it charged as it runs (every 1 ms), so a long or
// endless kernel shows in its VM's usage while it runs, not only when (if ever) it completes.
//
// The operator's controls (docs/SCHEDULER.md "Pause, kernel limit, kill-work"): Pause(vm) takes
// the VM's running submission off the engine at its next charge (as a preemption, whatever the
// policy and the quantum, when the sink can suspend) and dispatches nothing of it until Resume(vm);
// KillWork(vm) fails every submission of the VM — queued, suspended, chosen, running — with the
// given error: the sink cancels each (SubmissionSink::Cancel: off the engine for good, the guest
// told) and on_done reports each with that status; the VM stays and its next submission runs. A
// per-VM kernel limit (SetKernelLimit, default DispatcherOptions::kernel_limit, 0 = none) does the
// same by itself when one submission has been charged more GPU time than the limit (time while
// suspended or paused does not count): its VM's work is killed with DeadlineExceeded.
//
// Errors never change anything (unknown VM, a handle already held, a full queue, a bad share):
// the call returns a clear Status. A sink that fails to start a submission or reports a poll error
// gets that submission completed with the error (on_done says so) and the next one dispatched, so a
// broken channel of one VM cannot stall the others.
//
// Threading: every public method is thread-safe. SubmissionSink methods are called only from the
// thread that runs Step() (the dispatch thread, or a PollNow() caller), one Step at a time, never
// under the dispatcher's lock, so the sink may call back into the dispatcher (Wake, PollNow,
// Stats). on_done runs on that same thread. A Step run by a PollNow() caller kicks the dispatch
// thread when it leaves work that needs attention sooner than the dispatch thread's planned
// wake-up (a started submission to poll, a hold to end): the dispatch thread may have planned
// from the state that Step left while it waited on the sink.
#ifndef GPUVM_SCHEDULER_DISPATCHER_H_
#define GPUVM_SCHEDULER_DISPATCHER_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "scheduler/clock.h"
#include "scheduler/scheduler.h"
#include "scheduler/types.h"

namespace gpuvm::sched {

// What the sink says about the submission it is running.
struct SinkPoll {
  bool done = false;
  // The GPU time the engine measured for it since it was first started (across suspensions), if
  // the sink can tell (the engine's own accounting). nullopt: the dispatcher uses
  // Start-to-observed-completion wall time. While it runs (Running(t)) the time so far: what the
  // dispatcher charges at slice boundaries.
  std::optional<Duration> gpu_time;
  // Not OK: done, but failed (e.g. it ran too long), charged gpu_time all the same.
  Status status;

  static SinkPoll Running(std::optional<Duration> gpu_time = std::nullopt) {
    return {false, gpu_time, Status::Ok()};
  }
  static SinkPoll Done(std::optional<Duration> gpu_time = std::nullopt) {
    return {true, gpu_time, Status::Ok()};
  }
  static SinkPoll Failed(Status why, std::optional<Duration> gpu_time = std::nullopt) {
    return {true, gpu_time, std::move(why)};
  }
};

// The physical engine as the dispatcher sees it: one submission at a time.
class SubmissionSink {
 public:
  virtual ~SubmissionSink() = default;
  // Start `handle` of `vm` on the engine (e.g. copy the VM's IB entries up to this IB_PUT to the
  // physical channel and write its IB_PUT). Called only when nothing else is running. An error
  // completes the submission with that error.
  virtual Status Start(VmId vm, SubmissionHandle handle) = 0;
  // Is the started submission done? An error completes it with that error.
  virtual Result<SinkPoll> Poll(VmId vm, SubmissionHandle handle) = 0;
  // Preemption (optional). Can the sink suspend a running submission and resume it later?
  virtual bool CanSuspend() const { return false; }
  // Takes the running `handle` off the engine (at the device's next slice boundary: the caller
  // does not wait) so that nothing of it runs until Start(vm, handle) resumes it; the GPU time it
  // still uses before it stops is in its next gpu_time. An error: it could not be stopped (the
  // dispatcher then lets it run on).
  virtual Status Suspend(VmId /*vm*/, SubmissionHandle /*handle*/) {
    return Status::Unimplemented("this engine cannot suspend work");
  }
  // Kill-work (optional): `handle` of `vm` — running, suspended or never started — is failed with
  // `why`: nothing of it may run again, and its guest learns (fv: a channel error). Returns the
  // GPU time it used since its first Start if the engine knows it (nullopt: never started, or not
  // known). An error: it could not be cancelled (a running one then runs on to its completion).
  virtual Result<std::optional<Duration>> Cancel(VmId /*vm*/, SubmissionHandle /*handle*/,
                                                 const Status& /*why*/) {
    return Status::Unimplemented("this engine cannot cancel work");
  }
  // Optional: the sink itself calls the dispatcher's PollNow (or Wake) whenever the running
  // submission may have completed (fv on the software GPU: its channel ran dry). The dispatcher's
  // own polls are then only a fallback, every DispatcherOptions::notified_poll_interval.
  virtual bool ReportsCompletion() const { return false; }
};

// One finished submission, for on_done and the recent-completions log.
// on_slice reports each slice charged to a submission still running (completed false, waited 0),
// on_done its completion with what was charged since its last slice: each charge is reported once,
// so the slices and the completion of a submission add up to the GPU time it used.
struct SubmissionDone {
  VmId vm = 0;
  SubmissionHandle handle = 0;
  Duration gpu_time{0};   // as charged to the VM (this slice, or since the last slice)
  Duration waited{0};     // queued: Submit to first Start
  Status status;          // not OK: Start or Poll failed (the submission may not have run)
  bool completed = true;  // false: a slice of a submission that goes on
};

struct DispatcherOptions {
  SchedulerOptions scheduler;
  Duration poll_interval = 100us;
  // With a sink that reports completion itself (SubmissionSink::ReportsCompletion): how often a
  // running submission is polled all the same (a missed report costs at most this), and how
  // often the dispatch thread looks in while work comes and goes (idle_linger). Its wake-ups are
  // what this saves: with a poll per poll_interval and a kick per start, a host with two CPUs spent
  // ~20 us of CPU on the dispatch thread per launch of a program launching every ~60 us.
  Duration notified_poll_interval = 1ms;
  // With such a sink: for this long after the last start, an idle dispatch thread keeps waking
  // every notified_poll_interval instead of sleeping until kicked, so a submission another thread
  // starts (PollNow) needs no kick to get its fallback poll and its slice charges. After it, an
  // idle dispatcher sleeps until a Submit or Wake.
  Duration idle_linger = 20ms;
  // Preemption: how often a running submission's GPU time is charged as a slice, at which the
  // policy may stop it (BAND, CREDIT). Zero: non-preemptive (a submission runs to its end; GPUvm).
  // Takes effect only with a sink that can suspend and reports running GPU time.
  Duration quantum = 1ms;
  // With preemption: a submission of another VM arriving while one runs ends the running one's
  // slice at once (charged, and stopped if the policy says so), so a VM owed the GPU waits for the
  // device's next slice boundary, not for the rest of a quantum. False: slices end only every
  // quantum.
  bool slice_on_arrival = true;
  // With slice_on_arrival: an arrival does not cut a run that has had less than this since it was
  // started or resumed; its slice ends when it has (or at the quantum, whichever is first).
  // Stopping a run costs the device a yield, a context save and a restore — on the software GPU up
  // to about a millisecond for a large grid, charged to the run — so cutting a 0.3 ms kernel
  // 0.1 ms in, or a resumed grid right after its restore, spends more GPU time than it moves
  // (docs/SCHEDULER.md, "Preemption"). Zero: at once.
  Duration arrival_min_run = std::chrono::microseconds(500);
  // Every VM's kernel limit when it is added (SetKernelLimit changes it): a submission charged
  // more GPU time than this fails with its VM's other work (kill-work). Zero: no limit.
  Duration kernel_limit{0};
  bool own_thread = true;
  // Called on the dispatch thread after each completion, outside the dispatcher's lock.
  std::function<void(const SubmissionDone&)> on_done;
  // Called on the dispatch thread for each slice charged to a running submission, outside the lock.
  std::function<void(const SubmissionDone&)> on_slice;
  // How many completions Stats() keeps (most recent last).
  size_t recent_completions = 64;
};

struct DispatcherStats {
  SchedulerStats scheduler;  // per VM: share, queue depth, GPU time, waits, usage windows
  uint64_t started = 0;
  uint64_t completed = 0;
  uint64_t start_errors = 0;
  uint64_t poll_errors = 0;
  uint64_t polls = 0;
  uint64_t slices = 0;          // slices charged to running submissions
  uint64_t preemptions = 0;     // submissions suspended for another
  uint64_t suspend_errors = 0;  // suspensions the sink refused (the submission ran on)
  uint64_t killed = 0;          // submissions failed by KillWork or a kernel limit
  uint64_t limit_kills = 0;     // kernel limits that fired
  uint64_t cancel_errors = 0;   // cancellations the sink refused
  uint64_t thread_wakeups = 0;  // times the dispatch thread woke up (own_thread)
  // Per VM (every VM the dispatcher knows): its kernel limit (0: none) and how many of its
  // submissions were killed.
  std::map<VmId, Duration> kernel_limits;
  std::map<VmId, uint64_t> killed_by_vm;
  std::vector<SubmissionDone> recent;  // the last `recent_completions`, oldest first
};

class Dispatcher {
 public:
  // `clock` and `sink` must outlive the dispatcher. With own_thread, `clock` should be a
  // MonotonicClock (the thread sleeps on the real clock until the times the clock names).
  static Result<std::unique_ptr<Dispatcher>> Create(Clock* clock, SubmissionSink* sink,
                                                    DispatcherOptions options);
  // Stops the dispatch thread. A submission on the engine is left there (the owner tears the
  // channels down).
  ~Dispatcher();
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // --- VMs (the aggregator, as VMs come and go; the control socket for shares and policy) ---
  Status AddVm(VmId vm, double share_percent);
  // Drops the VM's queued submissions (returned, oldest first, so the owner can discard them). A
  // submission of it already on the engine runs to completion (or until the sink reports it gone)
  // and is then charged to nobody.
  Result<std::vector<SubmissionHandle>> RemoveVm(VmId vm);
  Status SetShare(VmId vm, double share_percent);
  Status SetShares(const std::vector<std::pair<VmId, double>>& shares);  // all or nothing
  void SetPolicy(PolicyKind kind);
  PolicyKind policy() const;

  // --- the operator's controls (see the file comment) ---
  // NotFound (unknown VM); FailedPrecondition (already paused / not paused): nothing changes.
  Status Pause(VmId vm);
  Status Resume(VmId vm);
  // Fails every submission of `vm` with `why` (not OK); returns how many. The running one is
  // cancelled by the next Step (the thread is woken). NotFound for an unknown VM.
  Result<size_t> KillWork(VmId vm, Status why);
  // 0: none. NotFound (unknown VM), InvalidArgument (negative, or above kMaxKernelLimit).
  Status SetKernelLimit(VmId vm, Duration limit);
  static constexpr Duration kMaxKernelLimit = std::chrono::hours(24);

  // --- work ---
  // Queues a submission. `handle` must be unique among those the dispatcher holds (e.g. channel
  // << 32 | IB_PUT value, with a generation). NotFound (unknown VM), AlreadyExists,
  // ResourceExhausted (the VM's queue is full) change nothing.
  Status Submit(VmId vm, SubmissionHandle handle, Duration estimate = Duration(0));
  // Submit, then PollNow on this thread: when the engine is free and the policy dispatches it, the
  // submission starts here and then. The dispatch thread is woken only when that leaves it
  // something to do sooner than it planned (Submit alone always wakes it). Errors as Submit (then
  // nothing is stepped).
  Status SubmitAndPoll(VmId vm, SubmissionHandle handle, Duration estimate = Duration(0));
  // The sink saw something (an interrupt, a fence): poll at the next Step instead of waiting for
  // the poll interval.
  void Wake();

  // Does everything due at the clock's current time: polls the running submission, completes it,
  // fires an expired hold, starts what the scheduler chose. Driven mode only (own_thread: the
  // thread calls it; calling it too is harmless but pointless).
  void Step();
  // The caller saw something (as Wake) and steps now on its own thread: polls the running
  // submission and, when it is done, starts the next one there and then — no wake-up of the
  // dispatch thread on the way. For the GPU's engine thread when a channel runs dry. If a Step is
  // running elsewhere it is Wake() instead (false).
  bool PollNow();
  // When Step() next has something to do: nullopt means only a Submit/Wake/policy change can
  // create work.
  std::optional<TimePoint> NextWakeup() const;

  DispatcherStats Stats() const;
  bool busy() const;  // a submission is on the engine or about to be started

 private:
  struct Running {
    VmId vm = 0;
    SubmissionHandle handle = 0;
    TimePoint started{};
    TimePoint decided{};
    TimePoint next_poll{};
    Duration reported{0};     // GPU time already charged as slices (preemption)
    TimePoint slice_due{};    // when the next slice is charged
    TimePoint first_start{};  // before any suspension
  };
  struct Pending {
    VmId vm = 0;
    SubmissionHandle handle = 0;
    TimePoint decided{};
  };

  Dispatcher(Clock* clock, SubmissionSink* sink, DispatcherOptions options,
             std::unique_ptr<Scheduler> scheduler);
  bool TryStep(bool poll_now);
  void ApplyLocked(const Result<Decision>& decision, TimePoint now);
  void RecordLocked(const SubmissionDone& done);
  void FinishLocked(const Running& run, Duration gpu_time, Status status,
                    std::vector<SubmissionDone>* done);
  std::optional<TimePoint> NextWakeupLocked() const;
  // NextWakeupLocked, or for an idle dispatch thread within idle_linger of the last start, the
  // next look-in (see DispatcherOptions::idle_linger).
  std::optional<TimePoint> PlanSleepLocked() const;
  Duration ChargeInterval() const;
  // How long a running submission goes unpolled (poll_interval, or notified_poll_interval when
  // the sink reports completion).
  Duration PollInterval() const;
  // When the running submission, just polled at `now` and still running, is polled next.
  TimePoint NextPollLocked(TimePoint now) const;
  Status SubmitLocked(VmId vm, SubmissionHandle handle, Duration estimate);
  // Whether a run is sliced when another VM's work arrives (slice_on_arrival, a quantum, a sink
  // that can suspend now); tells the scheduler when that changes.
  bool SyncArrivalPreemptionLocked();
  // Charges the running submission's GPU time since the last slice (total: since first Start) and
  // suspends it if the policy says so. Returns true when it was suspended.
  bool SliceLocked(std::unique_lock<std::mutex>& lock, Duration total,
                   std::vector<SubmissionDone>* done);
  void ThreadMain();
  // KillWork under mu_: drops the VM's queued and chosen work into cancel_ and marks its running
  // submission for cancellation.
  Result<size_t> KillLocked(VmId vm, const Status& why, TimePoint now);
  // Cancels what KillLocked marked (sink calls without the lock). True when it did anything.
  bool CancelMarkedLocked(std::unique_lock<std::mutex>& lock, std::vector<SubmissionDone>* done);

  Clock* const clock_;
  SubmissionSink* const sink_;
  const DispatcherOptions options_;
  const std::unique_ptr<Scheduler> scheduler_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Pending> pending_;  // chosen by the scheduler, not yet started
  std::optional<Running> running_;
  // Suspended submissions (back in their VM's queue), as they stood when suspended.
  std::unordered_map<SubmissionHandle, Running> suspended_;
  std::optional<TimePoint> hold_until_;
  std::unordered_map<SubmissionHandle, TimePoint> arrivals_;  // for SubmissionDone::waited
  bool poll_now_ = false;                                     // Wake(): poll at the next Step
  bool arrival_preemption_ = false;                           // what the scheduler was last told
  uint64_t kicks_ = 0;  // bumped by anything that may create work for the thread
  bool stopping_ = false;
  bool stepping_ = false;  // one Step at a time (the sink is single-threaded)
  // The dispatch thread asleep, and until when (nullopt: until kicked). A Step on another thread
  // (PollNow) that leaves work needing attention sooner kicks it: the thread may have planned its
  // sleep from the state that Step left while it was under way (e.g. no submission on the GPU in
  // the middle of a preemption) and would otherwise sleep through a hold's end or a poll.
  bool dispatch_waiting_ = false;
  std::optional<TimePoint> dispatch_plan_;
  // The dispatch thread found a Step running elsewhere and waits for it to end (not spinning).
  bool thread_awaits_step_ = false;
  std::optional<TimePoint> last_start_;  // for idle_linger
  uint64_t started_ = 0, completed_ = 0, start_errors_ = 0, poll_errors_ = 0, polls_ = 0;
  uint64_t slices_ = 0, preemptions_ = 0, suspend_errors_ = 0, thread_wakeups_ = 0;
  std::deque<SubmissionDone> recent_;
  // The operator's controls.
  std::set<VmId> paused_;
  std::map<VmId, Duration> kernel_limits_;  // every VM added (0: none)
  std::map<VmId, uint64_t> killed_by_vm_;
  struct Cancel {
    VmId vm = 0;
    SubmissionHandle handle = 0;
    Status why;
  };
  std::vector<Cancel> cancel_;                     // killed, not yet cancelled in the sink
  std::optional<Cancel> cancel_running_;           // the running submission, to cancel at next Step
  std::optional<SubmissionHandle> uncancellable_;  // the sink refused to cancel it while it ran
  uint64_t killed_ = 0, limit_kills_ = 0, cancel_errors_ = 0;
  std::thread thread_;  // last: started after everything above exists
};

}  // namespace gpuvm::sched

#endif  // GPUVM_SCHEDULER_DISPATCHER_H_
