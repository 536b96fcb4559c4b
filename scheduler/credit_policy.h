// CREDIT: Xen's credit scheduler (credit1) applied to GPU command submission, as Gdev and GPUvm
// tried it. Every period each active VM receives credit in proportion to its share; the measured
// GPU time of each run is charged against it. VMs with credit left ("under") dispatch first, oldest
// submission first; VMs without ("over") dispatch only when no VM with credit has work
// (work-conserving, like Xen), or never until the next period (CreditOptions::work_conserving =
// false).
//
// Why it fails on a GPU (Gdev §5.2, GPUvm Fig 4.11): it presumes preemptible, always-busy CPU work.
// A GPU run cannot be cut when its credit is gone, and a VM that loops short kernels has nothing
// queued for a moment after each completion, so with two VMs the long-kernel VM's over-credit work
// is always "the only runnable thing" and runs. With more VMs another under-credit VM usually
// waits, and it evens out.
//
// Threading: called only by its Scheduler, under the Scheduler's lock.
#ifndef GPUVM_SCHEDULER_CREDIT_POLICY_H_
#define GPUVM_SCHEDULER_CREDIT_POLICY_H_

#include <map>
#include <optional>

#include "scheduler/policy.h"

namespace gpuvm::sched {

class CreditPolicy final : public Policy {
 public:
  explicit CreditPolicy(const CreditOptions& options) : options_(options) {}

  PolicyKind kind() const override { return PolicyKind::kCredit; }
  void OnVmAdded(VmId vm, TimePoint now) override;
  void OnVmRemoved(VmId vm) override { vms_.erase(vm); }
  void Charge(VmViews vms, VmId vm, Duration gpu_time, Duration scheduler_time,
              TimePoint now) override;
  Choice Choose(VmViews vms, Trigger trigger, TimePoint now) override;
  // On a device that stops work between slices: a VM without credit left yields to a waiting VM
  // with credit (CreditOptions::preempt_at_slices).
  bool ShouldPreempt(VmViews vms, VmId running, TimePoint now) override;
  PolicyVmInfo Describe(VmId vm) const override;

 private:
  struct Vm {
    Duration credit{0};
  };

  // Runs every replenishment due by `now` (lazily: the scheduler has no periodic thread).
  void Replenish(VmViews vms, TimePoint now);

  const CreditOptions options_;
  std::map<VmId, Vm> vms_;
  std::optional<TimePoint> next_replenish_;
};

}  // namespace gpuvm::sched

#endif  // GPUVM_SCHEDULER_CREDIT_POLICY_H_
