// A deterministic discrete-event simulation of VMs sharing one GPU through the Scheduler: the
// simulated GPU runs one submission at a time for a given duration (optionally in bounded slices,
// at whose boundaries the scheduler may stop it, the seam the software GPU's compute engine
// offers), VMs loop submitting work of a given length ("madd", and "long-madd" at 15x), and a
// ManualClock stands in for time. Tests and the fairness benchmark drive the policies with it
// without real time; the same configuration always produces the same run.
//
// What it models and what it does not:
//  - A VM keeps `depth` submissions outstanding; after each completion it thinks (CPU time between
//    launches: the runtime, the guest driver, the trap path) before submitting the next one.
//  - Work and think times vary by +/- jitter, drawn from a seeded generator.
//  - The scheduler's own CPU time is the ManualClock's read cost (see clock.h); the GPU waits for
//  it.
//  - Stopping and resuming a sliced job costs `switch_cost` of GPU idle time. Context switches
//  between VMs
//    cost nothing else (the real GPU's channel switch is not modelled).
//
// Threading: Simulate is a pure function of its config; call it from any thread.
#ifndef GPUVM_SCHEDULER_SIM_SIMULATOR_H_
#define GPUVM_SCHEDULER_SIM_SIMULATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "scheduler/clock.h"
#include "scheduler/scheduler.h"
#include "scheduler/types.h"

namespace gpuvm::sched::sim {

// One VM's workload.
struct SimVm {
  std::string name;              // for reports, e.g. "madd", "long-madd"
  double share_percent = 0;      // its share of the GPU
  Duration job = 1ms;            // GPU time of each submission
  Duration think = 50us;         // CPU time between a completion and the next submission
  double jitter = 0.1;           // job and think vary uniformly within +/- this fraction
  uint32_t depth = 1;            // submissions kept outstanding (1: launch, wait, launch, ...)
  Duration start = Duration(0);  // when it starts submitting
  uint64_t max_jobs = 0;         // stop after this many completions (0: never; for makespan runs)
};

// An operator action at a point of the run.
struct SimControl {
  enum class Kind : uint8_t { kSetShare, kSetPolicy };
  Duration at = Duration(0);
  Kind kind = Kind::kSetShare;
  size_t vm_index = 0;                    // kSetShare: index into SimConfig::vms
  double share_percent = 0;               // kSetShare
  PolicyKind policy = PolicyKind::kBand;  // kSetPolicy
};

struct SimConfig {
  std::vector<SimVm> vms;  // VM ids are index + 1
  SchedulerOptions scheduler;
  Duration duration = 10s;       // simulated time; the run also ends when every VM reached max_jobs
  Duration slice = Duration(0);  // > 0: the GPU reports a slice boundary after this much GPU time
  Duration switch_cost = Duration(0);     // GPU idle time to stop and later resume a sliced job
  Duration scheduler_cost = Duration(0);  // ManualClock read cost while the scheduler runs
  uint64_t seed = 1;
  std::vector<SimControl> control;  // applied in time order
};

// One stretch of GPU time used by one VM.
struct SimRun {
  Duration start{0};  // from the start of the simulation
  Duration end{0};
  size_t vm_index = 0;
};

struct SimResult {
  Duration end{0};                    // when the simulation stopped
  std::vector<SimRun> runs;           // in time order; adjacent slices of one job stay separate
  std::vector<uint64_t> completed;    // per VM
  std::vector<Duration> finished_at;  // per VM: when it completed max_jobs (end if it never did)
  uint64_t holds = 0;                 // hold decisions acted on
  uint64_t preemptions = 0;
  Duration scheduler_time{0};  // as the scheduler measured it
  SchedulerStats final_stats;
  std::vector<Status> control_errors;  // operator actions the scheduler rejected
};

// Runs the simulation. Fails for an invalid config (no VMs, shares the scheduler rejects,
// non-positive job length) or if the scheduler misbehaves (an error from an event the simulator
// sends correctly).
Result<SimResult> Simulate(const SimConfig& config);

// The fairness experiment's workloads: n VMs with equal shares, even indices loop madd (`job`), odd
// ones long-madd (15 x `job`) — GPUvm's Fig 4.11 set-up.
std::vector<SimVm> MaddMix(size_t n, Duration job = 1ms, Duration think = 50us);

}  // namespace gpuvm::sched::sim

#endif  // GPUVM_SCHEDULER_SIM_SIMULATOR_H_
