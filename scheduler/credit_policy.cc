#include "scheduler/credit_policy.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace gpuvm::sched {
namespace {

Duration Scale(Duration d, double factor) {
  return Duration(static_cast<int64_t>(std::llround(static_cast<double>(d.count()) * factor)));
}

}  // namespace

void CreditPolicy::OnVmAdded(VmId vm, TimePoint /*now*/) { vms_.try_emplace(vm); }

void CreditPolicy::Charge(VmViews vms, VmId vm, Duration gpu_time, Duration /*scheduler_time*/,
                          TimePoint now) {
  Replenish(vms, now);
  auto it = vms_.find(vm);
  if (it != vms_.end()) it->second.credit -= gpu_time;
}

void CreditPolicy::Replenish(VmViews vms, TimePoint now) {
  const Duration period = options_.period;
  if (!next_replenish_)
    next_replenish_ = now;  // the first event hands out the first period's credit
  if (now < *next_replenish_) return;
  // After a long idle stretch only the last period matters: credits are clipped to one period
  // anyway.
  const int64_t missed = (now - *next_replenish_) / period;
  if (missed > 1) *next_replenish_ += period * (missed - 1);

  std::vector<bool> active(vms.size());
  std::vector<double> weights;
  while (now >= *next_replenish_) {
    const TimePoint period_start = *next_replenish_ - period;
    for (size_t i = 0; i < vms.size(); ++i) {
      const VmView& v = vms[i];
      active[i] = v.queued > 0 || v.running ||
                  (v.last_completion && *v.last_completion >= period_start) ||
                  (v.last_arrival && *v.last_arrival >= period_start);
    }
    ActiveWeights(vms, active, &weights);
    for (size_t i = 0; i < vms.size(); ++i) {
      Vm& vm = vms_[vms[i].id];
      if (!active[i]) {
        vm.credit = Duration(0);  // idle VMs neither bank credit nor keep debt (Xen parks them)
        continue;
      }
      const Duration allotment = Scale(period, weights[i]);
      vm.credit = std::clamp(vm.credit + allotment, -allotment, allotment);
    }
    *next_replenish_ += period;
  }
}

Choice CreditPolicy::Choose(VmViews vms, Trigger /*trigger*/, TimePoint now) {
  Replenish(vms, now);
  std::optional<VmId> best;
  uint64_t best_seq = 0;
  bool anything_waiting = false;
  for (const VmView& v : vms) {
    if (v.queued == 0) continue;
    anything_waiting = true;
    if (vms_[v.id].credit <= Duration(0)) continue;
    if (!best || v.head_seq < best_seq) {
      best = v.id;
      best_seq = v.head_seq;
    }
  }
  if (best) return Choice::Dispatch(*best);
  if (!anything_waiting) return Choice::Idle();
  if (options_.work_conserving) return Choice::Dispatch(*OldestWaiting(vms));
  return Choice::Hold(*next_replenish_);
}

bool CreditPolicy::ShouldPreempt(VmViews vms, VmId running, TimePoint now) {
  if (!options_.preempt_at_slices) return false;
  Replenish(vms, now);
  auto r = vms_.find(running);
  if (r == vms_.end() || r->second.credit > Duration(0)) return false;  // under: keeps running
  // Over its credit: it yields to any VM with credit left that waits (as Xen's credit1 preempts an
  // OVER vcpu for an UNDER one at its next tick).
  for (const VmView& v : vms) {
    if (v.id == running || v.queued == 0) continue;
    if (auto it = vms_.find(v.id); it != vms_.end() && it->second.credit > Duration(0)) return true;
  }
  return false;
}

PolicyVmInfo CreditPolicy::Describe(VmId vm) const {
  auto it = vms_.find(vm);
  if (it == vms_.end()) return {};
  return {it->second.credit, it->second.credit > Duration(0) ? "under" : "over", Duration(0)};
}

}  // namespace gpuvm::sched
