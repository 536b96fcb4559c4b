#include "scheduler/band_policy.h"

#include <algorithm>
#include <cmath>

namespace gpuvm::sched {
namespace {

Duration Scale(Duration d, double factor) {
  return Duration(static_cast<int64_t>(std::llround(static_cast<double>(d.count()) * factor)));
}

// How long after its last completion a looping VM is expected back: twice its measured gap, or its
// gap plus four times its deviation if its rhythm is irregular (as TCP sizes its retransmission
// timeout from the RTT and its variance: a VM whose thread is sometimes descheduled for a
// millisecond on a busy host is still worth waiting for), plus a little for jitter; without a
// measurement, the whole hold_max.
constexpr Duration kGapSlack = 20us;

}  // namespace

void BandPolicy::OnVmAdded(VmId vm, TimePoint now) {
  Vm& v = vms_[vm];
  v.inactive_since = now;
}

void BandPolicy::OnVmRemoved(VmId vm) {
  vms_.erase(vm);
  if (hold_for_ == vm) hold_for_.reset();
  if (awaited_ == vm) awaited_.reset();
}

bool BandPolicy::WorkConserving() const {
  return options_.work_conserving && arrival_preemption_ && options_.preempt_at_slices;
}

void BandPolicy::OnArrival(VmViews vms, VmId vm, bool was_idle, TimePoint now) {
  Vm& v = vms_[vm];
  if (was_idle) {
    const VmView* view = FindView(vms, vm);
    const Duration gap = view != nullptr && view->last_completion ? now - *view->last_completion
                                                                  : options_.idle_after;
    // Only a VM that loops (comes back within idle_after) has a resubmission rhythm worth learning.
    if (gap < options_.idle_after) {
      // EWMA with weight 1/4 on the new sample: follows a change of rhythm within a few
      // submissions.
      if (v.has_gap) {
        const Duration error = gap > v.gap_ewma ? gap - v.gap_ewma : v.gap_ewma - gap;
        v.gap_dev = (3 * v.gap_dev + error) / 4;
        v.gap_ewma = (3 * v.gap_ewma + gap) / 4;
      } else {
        v.gap_ewma = gap;
        v.gap_dev = gap / 2;
      }
      v.has_gap = true;
    }
  }
  v.expected = true;
  RefreshActivity(vms, now);
}

void BandPolicy::RefreshActivity(VmViews vms, TimePoint now) {
  bool any_share = false;
  for (const VmView& view : vms) {
    Vm& v = vms_[view.id];
    std::optional<TimePoint> last = view.last_completion;
    if (view.last_arrival && (!last || *view.last_arrival > *last)) last = view.last_arrival;
    const bool active =
        view.queued > 0 || view.running || (last && now - *last < options_.idle_after);
    if (v.active && !active) {
      // Leaving: a VM does not bank GPU time while it has nothing to do.
      v.credit = std::min(v.credit, Duration(0));
      v.inactive_since = last ? *last + options_.idle_after : now;
    } else if (!v.active && active) {
      if (now - v.inactive_since >= options_.forgive_after) v.credit = Duration(0);
      v.credit = std::min(v.credit, Duration(0));
    }
    v.active = active;
    if (active && view.share > 0) any_share = true;
  }
  for (const VmView& view : vms) vms_[view.id].best_effort = any_share && view.share <= 0;
}

void BandPolicy::Charge(VmViews vms, VmId vm, Duration gpu_time, Duration scheduler_time,
                        TimePoint now) {
  RefreshActivity(vms, now);
  {
    Vm& charged = vms_[vm];
    charged.run_ewma =
        charged.run_ewma == Duration(0) ? gpu_time : (3 * charged.run_ewma + gpu_time) / 4;
  }
  active_scratch_.assign(vms.size(), false);
  size_t active_count = 0;
  for (size_t i = 0; i < vms.size(); ++i) {
    // The charged VM counts as active even if the owner reports a run long after the fact.
    active_scratch_[i] = vms_[vms[i].id].active || vms[i].id == vm;
    if (active_scratch_[i]) ++active_count;
  }
  if (active_count == 0) return;
  ActiveWeights(vms, active_scratch_, &weights_scratch_);

  const Duration overhead = options_.charge_scheduler_time ? scheduler_time : Duration(0);
  const Duration overhead_each = overhead / static_cast<int64_t>(active_count);
  const Duration handed_out = gpu_time + overhead;
  for (size_t i = 0; i < vms.size(); ++i) {
    if (!active_scratch_[i]) continue;
    Vm& v = vms_[vms[i].id];
    v.credit += Scale(handed_out, weights_scratch_[i]) - overhead_each;
    v.scheduler_time_charged += overhead_each;
    if (vms[i].id == vm) v.credit -= gpu_time;
    v.credit = std::clamp(v.credit, -options_.threshold, options_.threshold);
  }
}

BandPolicy::Standing BandPolicy::StandingOf(const Vm& v) const {
  if (v.best_effort) return Standing::kBestEffort;
  if (v.credit > options_.at_band) return Standing::kUnder;
  if (v.credit < -options_.at_band) return Standing::kOver;
  return Standing::kAt;
}

bool BandPolicy::Before(const VmView& a, const VmView& b) const {
  const Vm& va = vms_.at(a.id);
  const Vm& vb = vms_.at(b.id);
  const Standing sa = StandingOf(va);
  const Standing sb = StandingOf(vb);
  if (sa != sb) return sa < sb;
  if (sa != Standing::kAt && va.credit != vb.credit) return va.credit > vb.credit;
  return a.head_seq < b.head_seq;
}

std::optional<VmId> BandPolicy::HoldTarget(VmViews vms, const VmView& candidate, TimePoint now,
                                           TimePoint* until) {
  const Vm& c = vms_.at(candidate.id);
  std::optional<VmId> best;
  Duration best_credit{0};
  for (const VmView& view : vms) {
    Vm& v = vms_.at(view.id);
    if (view.queued > 0 || view.running || !v.active || !v.expected || !view.last_completion)
      continue;
    if (StandingOf(v) != Standing::kUnder) continue;            // only for under-served VMs
    if (v.credit <= c.credit + options_.at_band) continue;      // and only if owed clearly more
    if (v.has_gap && v.gap_ewma > options_.hold_max) continue;  // it does not come back quickly
    Duration expected_in = v.has_gap
                               ? std::max(2 * v.gap_ewma, v.gap_ewma + 4 * v.gap_dev) + kGapSlack
                               : options_.hold_max;
    // What the hold is worth: a candidate over its share whose runs are long would take that long
    // from the VM we wait for, so waiting up to half a run of it (within hold_max) is the cheaper
    // mistake when the waited-for VM is late (a descheduled guest thread on a busy host).
    if (StandingOf(c) == Standing::kOver) expected_in = std::max(expected_in, c.run_ewma / 2);
    const TimePoint deadline = *view.last_completion + expected_in;
    if (deadline <= now) {
      v.expected = false;  // late already: do not wait for it until it shows up again
      continue;
    }
    if (!best || v.credit > best_credit) {
      best = view.id;
      best_credit = v.credit;
      *until = std::min(deadline, now + options_.hold_max);
    }
  }
  // An ongoing hold for the same VM keeps its deadline: holds never extend themselves.
  if (best && hold_for_ == best) *until = std::min(*until, hold_until_);
  return best;
}

Choice BandPolicy::Choose(VmViews vms, Trigger trigger, TimePoint now) {
  RefreshActivity(vms, now);
  if (trigger == Trigger::kHoldExpired && hold_for_) {
    auto it = vms_.find(*hold_for_);
    if (it != vms_.end()) it->second.expected = false;
    hold_for_.reset();
  }
  const VmView* candidate = nullptr;
  for (const VmView& view : vms) {
    if (view.queued == 0) continue;
    if (candidate == nullptr || Before(view, *candidate)) candidate = &view;
  }
  if (candidate == nullptr) {
    hold_for_.reset();
    return Choice::Idle();
  }
  if (options_.hold_max > Duration(0)) {
    TimePoint until{};
    if (std::optional<VmId> target = HoldTarget(vms, *candidate, now, &until);
        target && until > now) {
      if (WorkConserving()) {
        // Run the candidate; the awaited VM's arrival stops it (ShouldPreempt).
        hold_for_.reset();
        awaited_ = target;
        awaited_until_ = until;
        return Choice::Dispatch(candidate->id);
      }
      hold_for_ = target;
      hold_until_ = until;
      return Choice::Hold(until);
    }
  }
  hold_for_.reset();
  return Choice::Dispatch(candidate->id);
}

bool BandPolicy::ShouldPreempt(VmViews vms, VmId running, TimePoint now) {
  if (!options_.preempt_at_slices) return false;
  RefreshActivity(vms, now);
  const Vm& r = vms_.at(running);
  if (awaited_) {
    // The VM the GPU was not held for: once it is back (queued), it takes the GPU from a run it is
    // owed clearly more than — the comparison a hold made — and the wait is over either way.
    const VmId awaited = *awaited_;
    auto it = vms_.find(awaited);
    const VmView* view = FindView(vms, awaited);
    if (it == vms_.end() || view == nullptr || now >= awaited_until_) {
      if (it != vms_.end() && view != nullptr && view->queued == 0) it->second.expected = false;
      awaited_.reset();
    } else if (view->queued > 0) {
      awaited_.reset();
      if (awaited != running && StandingOf(it->second) == Standing::kUnder &&
          it->second.credit > r.credit + options_.at_band) {
        return true;
      }
    }
  }
  const bool running_best_effort = StandingOf(r) == Standing::kBestEffort;
  if (!running_best_effort && r.credit >= -options_.preempt_lag) return false;
  for (const VmView& view : vms) {
    if (view.id == running || view.queued == 0) continue;
    const Vm& v = vms_.at(view.id);
    if (StandingOf(v) == Standing::kBestEffort) continue;  // best-effort work never stops anyone
    // A VM with a share stops best-effort work at once; otherwise only a clear difference in what
    // is owed stops a run (hysteresis: a smaller margin would ping-pong between two VMs every
    // slice).
    if (running_best_effort || v.credit > r.credit + 2 * options_.preempt_lag) return true;
  }
  return false;
}

PolicyVmInfo BandPolicy::Describe(VmId vm) const {
  auto it = vms_.find(vm);
  if (it == vms_.end()) return {};
  static constexpr std::string_view kNames[] = {"under", "at", "over", "best-effort"};
  return {it->second.credit, kNames[static_cast<int>(StandingOf(it->second))],
          it->second.scheduler_time_charged};
}

}  // namespace gpuvm::sched
