// The GPU scheduler plugged into full virtualization: fv's SubmissionQueue (the guest's IB_PUT
// writes on its shadow channels, aggregator/submission_queue.h) implemented on the Dispatcher
// (scheduler/dispatcher.h), and the physical engine port the dispatcher releases them to.
//
//   FullVirtGpu ──Submit{vm, channel, ib_put}──▶ DispatchedSubmissionQueue ──▶ Dispatcher (policy)
//                                                    FvEngineSink::Start ◀──┘   (whoever steps)
//        FvHost::Forward (physical IB_PUT) ◀──────────────┘     Poll: IB_GET == ib_put and the
//                                                            channel not pending (CHAN_TABLE state)
//
// Completion is GPUvm's test, polled: the physical channel's IB_GET (its USER page) has caught up
// with the IB_PUT we wrote and PFIFO no longer reports work pending on the channel (the software
// GPU reads PENDING set while the channel is inside a time slice, so a fetched but unfinished grid
// is pending). The test runs at once when the GPU says a channel ran out of work
// (PhysicalGpu::SetChannelDrainedHandler: the software GPU does; the sink then calls the wake
// function, the dispatcher's PollNow: the next submission starts right there on the GPU's engine
// thread, no thread hand-off), else at the dispatcher's poll interval: without the signal
// every submission waited half a poll interval on average after it had finished (lud, 510
// launches, ~0.3 ms each at 250 us). A submission whose channel leaves CHAN_TABLE while it runs
// (its VM stopped the channel; the USER page is zeroed then, so IB_GET would never catch up) is
// done at the next poll (charged the device time it got) instead of holding the GPU until
// `max_run`. GPU time is what the device measured: the difference of the channel's busy-time
// counter (CHAN_BUSY_US, a gpuvm extension register of the software GPU, docs/SOFTWARE-GPU.md)
// between Start and the poll that saw it done; only this submission ran meanwhile. A submission
// that has not completed after `max_run` (its own run time: time suspended does not count) is
// completed with DeadlineExceeded so one stuck channel cannot hold the GPU from every other VM
// forever; it is charged the device time it got, like any other, and its physical channel is held
// (FvHost::HoldChannel) until the VM's next submission on it starts, so nothing of it runs on the
// GPU unknown to the scheduler.
//
// Stalls: `max_run` counts the time the aggregator ran, not wall time. A stopped aggregator process
// (SIGSTOP, a debugger) stops its GPU with it; when it continues, a submission that was running
// has not overrun anything, and must neither time out nor be charged the pause. So each poll adds
// the time since the previous one, at most kMaxPollGap: the dispatcher polls a running submission
// every poll interval (100 us), so a longer gap means this process (or this thread) did not run.
// The GPU time charged is the device's CHAN_BUSY_US, which does not count a stop either
// (docs/SCHEDULER.md, "Stalls").
//
// Lifetimes: the sink belongs to the control plane and outlives every fv host; a queue belongs to
// its FvHost (which lives while fv VMs exist) and attaches/detaches the sink to that host. After
// Detach (or ForgetVm of a VM) nothing more is forwarded for it, and its running submission counts
// as done at the next poll.
//
// A submission that finds the GPU free starts at once on the thread that queued it: Submit steps
// the dispatcher (PollNow) instead of leaving the start to a wake-up of the dispatch thread.
//
// Threading: FvEngineSink::Start/Poll on whichever thread steps the dispatcher (its dispatch
// thread, the GPU's engine thread through the drained handler, or the owner thread in
// DispatchedSubmissionQueue::Submit; one at a time), Attach/Detach/
// Forget from the aggregator's owner thread; one mutex, held while the sink touches the host, and
// never held while the drained handler is set. The queue: owner thread (as SubmissionQueue says).
#ifndef GPUVM_AGGREGATOR_FV_DISPATCH_H_
#define GPUVM_AGGREGATOR_FV_DISPATCH_H_

#include <atomic>
#include <functional>
#include <mutex>
#include <set>
#include <unordered_map>

#include "aggregator/fv_host.h"
#include "aggregator/submission_queue.h"
#include "scheduler/clock.h"
#include "scheduler/dispatcher.h"

namespace gpuvm::aggregator {

class FvEngineSink final : public sched::SubmissionSink {
 public:
  // A poll this long after the previous one adds only this much to a submission's run time.
  static constexpr sched::Duration kMaxPollGap = std::chrono::milliseconds(250);
  // `clock`: what max_run is measured on (null: the steady clock); it must outlive the sink.
  explicit FvEngineSink(sched::Duration max_run = std::chrono::seconds(5),
                        sched::Clock* clock = nullptr)
      : max_run_(max_run), clock_(clock != nullptr ? clock : &monotonic_) {}

  // What to call when the GPU says a channel ran out of work (the dispatcher's PollNow, which
  // completes the submission and starts the next on the GPU's engine thread, or Wake); empty:
  // none. Set it before the first Attach, and empty before whatever it calls goes.
  void SetWake(std::function<void()> wake);
  void Attach(FvHost* host);
  void Detach(FvHost* host);
  // What `handle` means on the GPU; before it is submitted to the dispatcher. Discard: the
  // dispatcher refused it.
  void Remember(sched::SubmissionHandle handle, const Submission& submission);
  void Discard(sched::SubmissionHandle handle);
  // Nothing more of `vm` is forwarded; a running submission of it is done at the next poll.
  void Forget(uint32_t vm);

  Status Start(sched::VmId vm, sched::SubmissionHandle handle) override;
  Result<sched::SinkPoll> Poll(sched::VmId vm, sched::SubmissionHandle handle) override;
  // Preemption: on a GPU with CHAN_BUSY_US and PREEMPT (the software GPU) a running submission is
  // suspended by holding its physical channel (FvHost::HoldChannel: RUNNABLE clear whatever the VM
  // writes, its grid switched out) and resumed by releasing it; its busy-time baseline stays, so
  // what it ran before, and the rest of the slice it was in when held, are charged when next
  // polled.
  bool CanSuspend() const override { return preemptible_.load(); }
  // True while attached to a GPU that reports channels running dry and a wake callback is set:
  // every completion then steps the dispatcher at once (SetWake), its polls are a fallback.
  bool ReportsCompletion() const override { return drain_reported_.load() && wake_set_.load(); }
  Status Suspend(sched::VmId vm, sched::SubmissionHandle handle) override;
  // Kill-work and the kernel limit: the submission's physical channel is held (nothing of it runs
  // again until the VM's next submission on that channel starts, like a timed-out one) and the VM
  // is told through FvHost::FailChannel: a channel error its guest driver reports (the kernel
  // limit, `why` DeadlineExceeded: PSUBFIFO KERNEL_TIME_LIMIT; otherwise KILLED_BY_HOST).
  Result<std::optional<sched::Duration>> Cancel(sched::VmId vm, sched::SubmissionHandle handle,
                                                const Status& why) override;

  uint64_t forwarded() const { return forwarded_.load(); }
  uint64_t timeouts() const { return timeouts_.load(); }
  uint64_t suspends() const { return suspends_.load(); }
  uint64_t cancels() const { return cancels_.load(); }

 private:
  struct Running {
    Submission submission;
    sched::TimePoint last_poll;     // Start, then each Poll
    sched::Duration ran{0};         // since Start, gaps between polls capped at kMaxPollGap
    uint32_t busy_us_at_start = 0;  // CHAN_BUSY_US of its physical channel at Start
    bool bound_at_start = false;    // its physical channel was in CHAN_TABLE at Start
  };
  // CHAN_BUSY_US of a physical channel (mu_ held, host_ set).
  uint32_t BusyUs(uint32_t physical_channel);
  // Is the physical channel in CHAN_TABLE? (mu_ held, host_ set)
  bool Bound(uint32_t physical_channel);
  // Has the submission's channel finished everything up to its IB_PUT? (mu_ held, host_ set)
  bool CaughtUp(const Submission& submission);
  const sched::Duration max_run_;
  sched::MonotonicClock monotonic_;
  sched::Clock* const clock_;
  // Guards wake_, called on the GPU's engine thread; recursive: wake_ may step the dispatcher,
  // whose Start may call wake_ again on the same thread.
  std::recursive_mutex wake_mu_;
  std::function<void()> wake_;
  std::mutex mu_;
  FvHost* host_ = nullptr;
  bool busy_counter_ = false;  // the host's GPU has CHAN_BUSY_US
  std::unordered_map<sched::SubmissionHandle, Submission> submissions_;
  std::unordered_map<sched::SubmissionHandle, Running> running_;
  std::unordered_map<sched::SubmissionHandle, Running> suspended_;
  // Physical channels held after their submission timed out (max_run): nothing of them runs until
  // their VM's next submission on that channel starts (and is charged what it then runs).
  std::set<uint32_t> held_after_timeout_;
  std::set<uint32_t> forgotten_;
  std::atomic<uint64_t> forwarded_{0};
  std::atomic<uint64_t> timeouts_{0};
  std::atomic<uint64_t> suspends_{0};
  std::atomic<uint64_t> cancels_{0};
  std::atomic<bool> preemptible_{false};
  std::atomic<bool> drain_reported_{false};  // the attached GPU reports channels running dry
  std::atomic<bool> wake_set_{false};
};

class DispatchedSubmissionQueue final : public SubmissionQueue {
 public:
  // `register_vm` makes the dispatcher know a VM it has not seen (the control service's Reconcile:
  // the VM gets its configured share). All pointers outlive the queue.
  DispatchedSubmissionQueue(FvHost* host, sched::Dispatcher* dispatcher, FvEngineSink* sink,
                            std::function<void()> register_vm);
  ~DispatchedSubmissionQueue() override;

  Status Submit(const Submission& submission) override;
  void ForgetVm(uint32_t vm) override;
  uint64_t pending() const override;
  uint64_t forwarded() const override { return sink_->forwarded(); }
  uint64_t refused() const { return refused_; }

 private:
  FvHost* const host_;
  sched::Dispatcher* const dispatcher_;
  FvEngineSink* const sink_;
  const std::function<void()> register_vm_;
  uint64_t next_handle_ = 1;
  uint64_t refused_ = 0;
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_FV_DISPATCH_H_
