// The seam between the scheduler core (scheduler.h) and its policies (FIFO, CREDIT, BAND). The core
// owns everything that outlives a policy: the VMs, their shares, their queues in arrival order, the
// submission on the GPU and the accounting. A policy keeps only its own bookkeeping (credits) and
// answers one question whenever the GPU is free: which VM goes next, or should the GPU wait. That
// split is what lets the owner switch policies live without losing or reordering queued work.
//
// Threading: a policy is called only by its Scheduler, under the Scheduler's lock.
#ifndef GPUVM_SCHEDULER_POLICY_H_
#define GPUVM_SCHEDULER_POLICY_H_

#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "scheduler/clock.h"
#include "scheduler/types.h"

namespace gpuvm::sched {

// What a policy may see of one VM (a snapshot the core refreshes before each call).
struct VmView {
  VmId id = 0;
  double share = 0;     // percent of the GPU, as the operator set it
  uint32_t queued = 0;  // submissions waiting; the one on the GPU is not counted
  uint64_t head_seq =
      0;  // arrival number (global, increasing) of the oldest waiting one; queued > 0
  TimePoint head_arrival{};  // when that one arrived
  Duration
      head_estimate{};   // the owner's estimate of its GPU time (zero: none); a hint, never trusted
  bool running = false;  // a submission of this VM is on the GPU
  std::optional<TimePoint> last_completion;  // when its last GPU run ended (completion or slice)
  std::optional<TimePoint> last_arrival;     // when its last submission arrived
};
// All VMs, sorted by id.
using VmViews = std::span<const VmView>;

// Why the core asks the policy to choose.
enum class Trigger : uint8_t {
  kArrival,      // a submission arrived while the GPU was free
  kCompletion,   // the GPU's submission completed
  kGpuIdle,      // the owner reported the GPU free (start, or after a preemption)
  kTimer,        // the owner's timer fired with no hold pending
  kHoldExpired,  // the hold the policy asked for ran out (possibly asked for by the previous
                 // policy)
};

// A policy's answer when the GPU is free.
struct Choice {
  enum class Kind : uint8_t { kIdle, kDispatch, kHold };
  Kind kind = Kind::kIdle;
  VmId vm = 0;        // kDispatch: the head of this VM's queue goes to the GPU
  TimePoint until{};  // kHold: keep the GPU free until then

  static Choice Idle() { return {}; }
  static Choice Dispatch(VmId vm) { return {Kind::kDispatch, vm, {}}; }
  static Choice Hold(TimePoint until) { return {Kind::kHold, 0, until}; }
};

// A policy's view of one VM, for statistics.
struct PolicyVmInfo {
  Duration credit{0};              // zero for policies without credit
  std::string_view standing = "";  // "under", "at", "over", "best-effort" or "" (no notion)
  Duration scheduler_time_charged{0};
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual PolicyKind kind() const = 0;

  virtual void OnVmAdded(VmId /*vm*/, TimePoint /*now*/) {}
  virtual void OnVmRemoved(VmId /*vm*/) {}
  // A submission of `vm` arrived. `was_idle`: the VM had nothing queued and nothing on the GPU
  // before.
  virtual void OnArrival(VmViews /*vms*/, VmId /*vm*/, bool /*was_idle*/, TimePoint /*now*/) {}
  // `vm` used the GPU for `gpu_time`, ending at `now` (a completion or a slice boundary).
  // `scheduler_time` is the scheduler's own CPU time measured since the previous charge.
  virtual void Charge(VmViews /*vms*/, VmId /*vm*/, Duration /*gpu_time*/,
                      Duration /*scheduler_time*/, TimePoint /*now*/) {}
  // The GPU is free: dispatch the head of some VM's queue (that VM must have queued > 0), hold, or
  // idle.
  virtual Choice Choose(VmViews vms, Trigger trigger, TimePoint now) = 0;
  // The running submission of `running` reached a slice boundary (already charged): stop it there?
  virtual bool ShouldPreempt(VmViews /*vms*/, VmId /*running*/, TimePoint /*now*/) { return false; }
  // The owner can stop a run as soon as another VM's work arrives (ShouldPreempt is then asked at
  // that arrival, not only every quantum).
  virtual void SetArrivalPreemption(bool /*on*/) {}
  virtual PolicyVmInfo Describe(VmId /*vm*/) const { return {}; }
};

std::unique_ptr<Policy> MakePolicy(PolicyKind kind, const SchedulerOptions& options);

// Helpers shared by the policies.

// The VM with the oldest waiting submission (smallest head_seq), or nullopt when nothing waits.
std::optional<VmId> OldestWaiting(VmViews vms);

// The view of `vm`, or null when it has none.
const VmView* FindView(VmViews vms, VmId vm);

// Weight of each VM among `active` ones: its share over the active shares' sum (the unreserved rest
// of the GPU goes to active VMs in proportion to their shares). When no active VM has a share, all
// active VMs weigh the same. Inactive VMs weigh 0. Returns weights in the order of `vms`.
void ActiveWeights(VmViews vms, const std::vector<bool>& active, std::vector<double>* weights);

}  // namespace gpuvm::sched

#endif  // GPUVM_SCHEDULER_POLICY_H_
