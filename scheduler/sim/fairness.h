// Fairness figures from a simulated run: each VM's share of the GPU time used in every window (500
// ms and 100 ms in GPUvm's experiment), set against its target, measured from the simulated GPU's
// exact run intervals (not from the scheduler's own accounting, which is what is being judged).
//
// A VM's share in a window is its GPU time over all VMs' GPU time in that window ("of the GPU time
// delivered"); time the GPU sat idle (held on purpose, or waiting on the scheduler) is reported
// separately as utilization, so a policy cannot look fair by idling.
//
// Threading: pure functions.
#ifndef GPUVM_SCHEDULER_SIM_FAIRNESS_H_
#define GPUVM_SCHEDULER_SIM_FAIRNESS_H_

#include <vector>

#include "scheduler/clock.h"
#include "scheduler/sim/simulator.h"

namespace gpuvm::sched::sim {

struct Window {
  Duration start{0};
  Duration busy{0};            // GPU time used by all VMs in the window
  std::vector<Duration> used;  // per VM
  std::vector<double> share;   // per VM: used / busy (all 0 when busy is 0)
};

// Windows of length `window` starting at from, from + step, ... while they end by `to`. `step` must
// divide `window` (step == window: back-to-back windows, as GPUvm sampled; smaller: sliding).
std::vector<Window> Windows(const SimResult& result, size_t vm_count, Duration window,
                            Duration from, Duration to, Duration step);

// Each VM's target: its share over the sum of shares (equal targets when every share is 0).
std::vector<double> TargetShares(const std::vector<SimVm>& vms);

struct FairnessReport {
  Duration window{0};
  size_t windows = 0;
  std::vector<double> target;         // per VM, fraction (0..1)
  std::vector<double> mean_share;     // per VM, over the windows
  std::vector<double> max_deviation;  // per VM: max |share - target| over the windows (fraction)
  double worst_deviation = 0;         // max over VMs
  double jain_min = 1;                // Jain's index of share/target over VMs, worst window
  double utilization = 0;             // GPU busy time / wall time over [from, to)
};

FairnessReport Evaluate(const SimResult& result, const std::vector<double>& targets,
                        Duration window, Duration from, Duration to, Duration step);

}  // namespace gpuvm::sched::sim

#endif  // GPUVM_SCHEDULER_SIM_FAIRNESS_H_
