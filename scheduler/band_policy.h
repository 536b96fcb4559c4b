// BAND: bandwidth-aware non-preemptive device scheduling (Kato et al., Gdev, USENIX ATC 2012,
// §5.2), as GPUvm used it to share one GPU among VMs (Suzuki et al., ATC 2014), with our changes.
// docs/SCHEDULER.md has the full story; in short:
//
//  - Credit per VM, in nanoseconds of GPU time. Every charge (a completion, or a slice boundary)
//  hands the
//    GPU time just used to the active VMs in proportion to their shares and takes it from the VM
//    that used it, so a VM's credit is how much GPU time it is owed (+) or has had too much of (-).
//    Gdev refills once per period; charging continuously is the same bookkeeping without the
//    period's rounding.
//  - Priority by standing: VMs under their share (credit > at_band) before VMs at it, before VMs
//  over it,
//    before best-effort VMs (share 0); among under/over VMs the most-owed first, among VMs at their
//    share the oldest submission first.
//  - A VM over its bandwidth yields: it runs only when no VM with a better standing has work
//  queued.
//  - Time buffering: when the GPU frees up and the best queued VM is owed less than a VM that just
//    completed and is about to submit again (it loops: submit, wait, submit), the GPU is held for
//    it, at most hold_max. Gdev waits a fixed time; we wait only for VMs whose measured
//    resubmission gap fits, and stop waiting for a VM that let a hold expire until it submits
//    again.
//  - Credits are reset to +/- threshold beyond it (Gdev resets to zero; clamping keeps part of the
//  debt of
//    a VM whose single kernel ran longer than the threshold, instead of forgiving all of it).
//  - GPUvm's fix: the scheduler's own CPU time while the GPU waits on it is charged as GPU time,
//  split
//    equally among the active VMs.
//  - Beyond Gdev/GPUvm: on a device that can stop a job between bounded slices, a VM more than
//    preempt_lag over its share is stopped when a VM owed more is waiting
//    (BandOptions::preempt_at_slices).
//  - Work-conserving buffering: on a device that can also stop a job the moment another VM's work
//    arrives, the GPU is not held idle for the awaited VM; the best queued VM runs meanwhile and
//    is stopped when the awaited one arrives (BandOptions::work_conserving). The awaited VM waits
//    a context switch instead of nothing; the GPU no longer idles for it.
//
// Threading: called only by its Scheduler, under the Scheduler's lock.
#ifndef GPUVM_SCHEDULER_BAND_POLICY_H_
#define GPUVM_SCHEDULER_BAND_POLICY_H_

#include <map>
#include <optional>
#include <vector>

#include "scheduler/policy.h"

namespace gpuvm::sched {

class BandPolicy final : public Policy {
 public:
  enum class Standing : uint8_t { kUnder = 0, kAt = 1, kOver = 2, kBestEffort = 3 };

  explicit BandPolicy(const BandOptions& options) : options_(options) {}

  PolicyKind kind() const override { return PolicyKind::kBand; }
  void OnVmAdded(VmId vm, TimePoint now) override;
  void OnVmRemoved(VmId vm) override;
  void OnArrival(VmViews vms, VmId vm, bool was_idle, TimePoint now) override;
  void Charge(VmViews vms, VmId vm, Duration gpu_time, Duration scheduler_time,
              TimePoint now) override;
  Choice Choose(VmViews vms, Trigger trigger, TimePoint now) override;
  bool ShouldPreempt(VmViews vms, VmId running, TimePoint now) override;
  PolicyVmInfo Describe(VmId vm) const override;
  void SetArrivalPreemption(bool on) override { arrival_preemption_ = on; }

 private:
  struct Vm {
    Duration credit{0};
    bool active = false;
    bool best_effort = false;  // share 0 while some active VM has a share
    TimePoint inactive_since{};
    bool has_gap = false;  // gap_ewma holds a measurement
    Duration gap_ewma{0};  // completion -> next submission, when the VM had nothing else queued
    Duration gap_dev{0};   // EWMA of |gap - gap_ewma|: how irregular the VM's rhythm is
    Duration run_ewma{0};  // GPU time per run (completion or slice): what letting it go costs
    bool expected = true;  // false after a hold for it expired, until it submits again
    Duration scheduler_time_charged{0};
  };

  // Updates who is active (has work, or was active within idle_after), applying the rules for VMs
  // that leave (positive credit dropped) and come back after forgive_after (debt forgiven).
  void RefreshActivity(VmViews vms, TimePoint now);
  Standing StandingOf(const Vm& vm) const;
  bool WorkConserving() const;
  // True when a should run before b (both have work queued).
  bool Before(const VmView& a, const VmView& b) const;
  // The VM worth holding the GPU for instead of dispatching `candidate`, if any; fills *until.
  std::optional<VmId> HoldTarget(VmViews vms, const VmView& candidate, TimePoint now,
                                 TimePoint* until);

  const BandOptions options_;
  std::map<VmId, Vm> vms_;
  std::vector<bool> active_scratch_;
  std::vector<double> weights_scratch_;
  std::optional<VmId> hold_for_;
  TimePoint hold_until_{};
  // Work-conserving buffering (BandOptions::work_conserving): the VM a hold would have waited for,
  // and until when; its arrival before then preempts a run it is owed clearly more than.
  bool arrival_preemption_ = false;
  std::optional<VmId> awaited_;
  TimePoint awaited_until_{};
};

}  // namespace gpuvm::sched

#endif  // GPUVM_SCHEDULER_BAND_POLICY_H_
