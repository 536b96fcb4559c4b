// The scheduler's vocabulary, shared by its core (scheduler.h), its policies (policy.h) and the
// simulator: who submits (VmId), what (SubmissionHandle), which policy, what the scheduler answers
// (Decision), and the knobs of each policy.
//
// Threading: plain values.
#ifndef GPUVM_SCHEDULER_TYPES_H_
#define GPUVM_SCHEDULER_TYPES_H_

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "base/status.h"
#include "scheduler/clock.h"

namespace gpuvm::sched {

using namespace std::chrono_literals;

// A VM as the aggregator numbers it (the Xen domid in the Xen backend).
using VmId = uint32_t;
// Opaque to the scheduler: the aggregator's name for one submission (e.g. a channel and its IB_PUT
// value). Unique among the submissions the scheduler currently holds (queued or on the GPU).
using SubmissionHandle = uint64_t;

enum class PolicyKind : uint8_t {
  kFifo,    // dispatch in arrival order
  kCredit,  // Xen's credit scheduler applied to GPU submissions
  kBand,    // Gdev's bandwidth-aware non-preemptive device scheduling, as GPUvm used it, plus our
            // changes
};

// "fifo", "credit", "band".
std::string_view PolicyKindName(PolicyKind kind);
// Inverse of PolicyKindName (case-sensitive); anything else is InvalidArgument.
Result<PolicyKind> ParsePolicyKind(std::string_view name);

// What the scheduler tells its owner to do with the GPU after an event.
struct Decision {
  enum class Action : uint8_t {
    kNothing,   // nothing to start: the GPU is busy, or idle with nothing queued
    kDispatch,  // start `submission` of `vm` now (or resume it, if the device stopped it between
                // slices)
    kHold,  // keep the GPU idle on purpose; call OnTimer() at `until` unless an event comes first
    kContinue,  // (OnSliceEnd only) let the running submission run its next slice
    kPreempt,   // (OnSliceEnd only) stop the running submission at this slice boundary, then call
                // OnGpuIdle(); the submission went back to the head of its VM's queue
  };

  Action action = Action::kNothing;
  VmId vm = 0;                      // kDispatch
  SubmissionHandle submission = 0;  // kDispatch
  TimePoint until{};                // kHold

  static Decision Nothing() { return {}; }
  static Decision Dispatch(VmId vm, SubmissionHandle submission) {
    return {Action::kDispatch, vm, submission, {}};
  }
  static Decision Hold(TimePoint until) { return {Action::kHold, 0, 0, until}; }
  static Decision Continue() { return {Action::kContinue, 0, 0, {}}; }
  static Decision Preempt() { return {Action::kPreempt, 0, 0, {}}; }

  friend bool operator==(const Decision&, const Decision&) = default;
};

std::string ToString(const Decision& decision);
inline std::ostream& operator<<(std::ostream& os, const Decision& d) { return os << ToString(d); }

// CREDIT: the Xen credit scheduler (credit1) idea applied to GPU command submission.
struct CreditOptions {
  // Every period each active VM receives share x period of credit; a VM never holds more than one
  // period's worth, nor owes more than one period's worth (Xen clips both ways the same way).
  Duration period = 30ms;
  // Xen's credit scheduler runs an OVER VM when no UNDER VM is runnable, and that is what made
  // CREDIT unfair for 2 VMs in GPUvm (Fig 4.11). false: only VMs with credit dispatch; the GPU
  // waits for the next replenishment otherwise.
  bool work_conserving = true;
  // On a device that runs work in bounded slices (OnSliceEnd), stop a VM out of credit when a VM
  // with credit is waiting. false: CREDIT stays non-preemptive.
  bool preempt_at_slices = true;
};

// BAND: see docs/SCHEDULER.md for the algorithm and what we changed against Gdev and GPUvm.
struct BandOptions {
  // Credits live in [-threshold, +threshold]; beyond, they are reset to the bound.
  Duration threshold = 50ms;
  // |credit| <= at_band counts as "at" the VM's share; above is "under" (owed GPU time), below is
  // "over".
  Duration at_band = 250us;
  // Time buffering: after a completion the GPU may be held this long at most for an under-served VM
  // that is about to submit again. Zero disables holding. Gdev's prototype waited 500 us.
  Duration hold_max = 500us;
  // A VM with nothing queued or running and no activity for this long stops accruing credit.
  Duration idle_after = 10ms;
  // A VM inactive for longer than this has its debt forgiven when it comes back.
  Duration forgive_after = 1s;
  // GPUvm's fix: the scheduler's own CPU time (measured through the Clock) is charged as GPU time,
  // split equally among the active VMs.
  bool charge_scheduler_time = true;
  // On a device that runs work in bounded slices (OnSliceEnd), stop a VM that is more than
  // preempt_lag over its share when a VM under its share is waiting. false: BAND stays
  // non-preemptive.
  bool preempt_at_slices = true;
  Duration preempt_lag = 2ms;
  // Work-conserving time buffering: where a hold would keep the GPU idle for an under-served VM
  // about to submit again, dispatch the best queued VM instead and stop it (a preemption) as soon
  // as the awaited VM's submission arrives, if that VM is still owed clearly more. Takes effect
  // only when the device can preempt a run the moment another VM's work arrives (the Dispatcher
  // says so: Scheduler::SetArrivalPreemption); otherwise BAND holds as Gdev does. Off by default:
  // the awaited VM's gaps then go to the others, which on real fv VMs took a long-kernel VM at a
  // 10 % share to 42 % of the GPU (docs/SCHEDULER.md "Buffering: idle or preempt").
  bool work_conserving = false;
};

struct SchedulerOptions {
  PolicyKind policy = PolicyKind::kBand;
  CreditOptions credit;
  BandOptions band;
  // A VM may not queue more submissions than this (ResourceExhausted): a guest cannot grow our
  // memory.
  uint32_t max_queue_depth = 1024;
};

}  // namespace gpuvm::sched

#endif  // GPUVM_SCHEDULER_TYPES_H_
