// gpuvm-sched-sim: runs the scheduler's deterministic simulation over GPUvm's fairness cases (2, 4
// and 8 VMs, half looping madd and half long-madd at 15x the work; unequal shares 10/90 and
// 20/30/50) under each policy and prints, per case and policy, the worst deviation of any VM from
// its target share over 500 ms and 100 ms windows, Jain's index, GPU utilization and the time to
// finish a fixed amount of work against FIFO (GPUvm Figs 4.11-4.13). This grows into `gpuvm-bench
// --fairness`.
//
//   gpuvm-sched-sim [--duration-s 10] [--job-us 1000] [--think-us 50] [--slice-us 1000] [--cost-us
//   1]
//                   [--seed 1] [--case NAME] [--policy NAME] [--verbose] [--out DIR]
// --out writes one CSV per case, policy and window size: the share of every VM in every window.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "scheduler/sim/fairness.h"
#include "scheduler/sim/simulator.h"

namespace gpuvm::sched::sim {
namespace {

struct Args {
  double duration_s = 10;
  int64_t job_us = 1000;
  int64_t think_us = 50;
  int64_t slice_us = 1000;
  int64_t cost_us = 1;
  uint64_t seed = 1;
  std::string only_case;
  std::string only_policy;
  bool verbose = false;
  std::string out;
};

struct Case {
  std::string name;
  std::vector<SimVm> vms;
};

// A policy as the table names it: the scheduler policy plus whether the device runs work in slices.
struct Variant {
  std::string name;
  PolicyKind policy;
  bool sliced;
};

SimVm Vm(const char* name, double share, Duration job, Duration think) {
  SimVm vm;
  vm.name = name;
  vm.share_percent = share;
  vm.job = job;
  vm.think = think;
  return vm;
}

std::vector<Case> Cases(const Args& args) {
  const Duration job = std::chrono::microseconds(args.job_us);
  const Duration think = std::chrono::microseconds(args.think_us);
  const Duration longer = job * 15;
  std::vector<Case> cases;
  cases.push_back({"2vm", MaddMix(2, job, think)});
  cases.push_back({"4vm", MaddMix(4, job, think)});
  cases.push_back({"8vm", MaddMix(8, job, think)});
  cases.push_back(
      {"10/90-long10", {Vm("long-madd", 10, longer, think), Vm("madd", 90, job, think)}});
  cases.push_back(
      {"10/90-long90", {Vm("madd", 10, job, think), Vm("long-madd", 90, longer, think)}});
  cases.push_back({"20/30/50",
                   {Vm("long-madd", 20, longer, think), Vm("madd", 30, job, think),
                    Vm("long-madd", 50, longer, think)}});
  return cases;
}

SimConfig Config(const Args& args, const Case& c, const Variant& v) {
  SimConfig config;
  config.vms = c.vms;
  config.scheduler.policy = v.policy;
  config.duration =
      std::chrono::duration_cast<Duration>(std::chrono::duration<double>(args.duration_s));
  config.slice = v.sliced ? std::chrono::microseconds(args.slice_us) : Duration(0);
  config.scheduler_cost = std::chrono::microseconds(args.cost_us);
  config.seed = args.seed;
  return config;
}

// Time for every VM to finish the same amount of GPU work (2 s each), as GPUvm's Fig 4.13 compares.
Result<Duration> Makespan(const Args& args, const Case& c, const Variant& v) {
  SimConfig config = Config(args, c, v);
  config.duration = std::chrono::hours(1);
  for (SimVm& vm : config.vms) vm.max_jobs = static_cast<uint64_t>(2s / vm.job);
  GPUVM_ASSIGN_OR_RETURN(SimResult result, Simulate(config));
  return result.end;
}

void WriteCsv(const std::string& path, const std::vector<SimVm>& vms,
              const std::vector<Window>& windows, const std::vector<double>& targets) {
  std::ofstream out(path);
  out << "window_start_ms";
  for (size_t i = 0; i < vms.size(); ++i) out << ",vm" << i + 1 << "_" << vms[i].name << "_share";
  for (size_t i = 0; i < vms.size(); ++i) out << ",vm" << i + 1 << "_target";
  out << ",busy_ms\n";
  for (const Window& w : windows) {
    out << std::chrono::duration<double, std::milli>(w.start).count();
    for (double s : w.share) out << "," << s;
    for (double t : targets) out << "," << t;
    out << "," << std::chrono::duration<double, std::milli>(w.busy).count() << "\n";
  }
}

std::string FileSafe(std::string s) {
  for (char& ch : s) {
    if (ch == '/') ch = '-';
  }
  return s;
}

int Run(const Args& args) {
  const std::vector<Variant> variants = {{"fifo", PolicyKind::kFifo, false},
                                         {"credit", PolicyKind::kCredit, false},
                                         {"band", PolicyKind::kBand, false},
                                         {"band-sliced", PolicyKind::kBand, true}};
  std::printf(
      "# simulated %.1f s per run; madd %lld us, long-madd 15x; think %lld us; slices %lld us "
      "(band-sliced only); scheduler cost %lld us per clock read; seed %llu\n",
      args.duration_s, static_cast<long long>(args.job_us), static_cast<long long>(args.think_us),
      static_cast<long long>(args.slice_us), static_cast<long long>(args.cost_us),
      static_cast<unsigned long long>(args.seed));
  std::printf(
      "# dev = max |share - target| over back-to-back windows, in percentage points of GPU time\n");
  std::printf("%-14s %-12s %8s %8s %8s %7s %7s %9s  %s\n", "case", "policy", "dev500", "dev100",
              "jain500", "util", "holds", "vs-fifo", "mean share per VM (target)");
  bool all_ok = true;
  for (const Case& c : Cases(args)) {
    if (!args.only_case.empty() && args.only_case != c.name) continue;
    Result<Duration> fifo_makespan = Makespan(args, c, variants[0]);
    for (const Variant& v : variants) {
      if (!args.only_policy.empty() && args.only_policy != v.name) continue;
      const SimConfig config = Config(args, c, v);
      Result<SimResult> result = Simulate(config);
      if (!result.ok()) {
        std::fprintf(stderr, "%s/%s: %s\n", c.name.c_str(), v.name.c_str(),
                     result.status().ToString().c_str());
        all_ok = false;
        continue;
      }
      const std::vector<double> targets = TargetShares(c.vms);
      const FairnessReport r500 =
          Evaluate(*result, targets, 500ms, Duration(0), result->end, 500ms);
      const FairnessReport r100 =
          Evaluate(*result, targets, 100ms, Duration(0), result->end, 100ms);
      Result<Duration> makespan = Makespan(args, c, v);
      double versus_fifo = 0;
      if (makespan.ok() && fifo_makespan.ok()) {
        versus_fifo =
            static_cast<double>(makespan->count()) / static_cast<double>(fifo_makespan->count());
      }
      std::string shares;
      for (size_t i = 0; i < c.vms.size(); ++i) {
        char buffer[64];
        std::snprintf(buffer, sizeof buffer, "%s%.1f(%.1f)", i ? " " : "", 100 * r500.mean_share[i],
                      100 * targets[i]);
        shares += buffer;
      }
      std::printf("%-14s %-12s %8.2f %8.2f %8.3f %6.1f%% %7llu %8.3fx  %s\n", c.name.c_str(),
                  v.name.c_str(), 100 * r500.worst_deviation, 100 * r100.worst_deviation,
                  r500.jain_min, 100 * r500.utilization,
                  static_cast<unsigned long long>(result->holds), versus_fifo, shares.c_str());
      if (args.verbose) {
        for (size_t i = 0; i < c.vms.size(); ++i) {
          std::printf("    vm%zu %-9s target %5.1f%%  mean %5.1f%%  dev500 %5.2f  dev100 %5.2f\n",
                      i + 1, c.vms[i].name.c_str(), 100 * targets[i], 100 * r500.mean_share[i],
                      100 * r500.max_deviation[i], 100 * r100.max_deviation[i]);
        }
      }
      if (!args.out.empty()) {
        for (Duration window : {500ms, 100ms}) {
          const std::string path = args.out + "/fairness-" + FileSafe(c.name) + "-" + v.name + "-" +
                                   std::to_string(window / 1ms) + "ms.csv";
          WriteCsv(path, c.vms,
                   Windows(*result, c.vms.size(), window, Duration(0), result->end, window),
                   targets);
        }
      }
    }
  }
  return all_ok ? 0 : 1;
}

bool ParseArgs(int argc, char** argv, Args* args) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (flag == "--verbose") {
      args->verbose = true;
      continue;
    }
    if ((v = value()) == nullptr) return false;
    char* end = nullptr;
    if (flag == "--duration-s") {
      args->duration_s = std::strtod(v, &end);
    } else if (flag == "--job-us") {
      args->job_us = std::strtoll(v, &end, 10);
    } else if (flag == "--think-us") {
      args->think_us = std::strtoll(v, &end, 10);
    } else if (flag == "--slice-us") {
      args->slice_us = std::strtoll(v, &end, 10);
    } else if (flag == "--cost-us") {
      args->cost_us = std::strtoll(v, &end, 10);
    } else if (flag == "--seed") {
      args->seed = std::strtoull(v, &end, 10);
    } else if (flag == "--case") {
      args->only_case = v;
      continue;
    } else if (flag == "--policy") {
      args->only_policy = v;
      continue;
    } else if (flag == "--out") {
      args->out = v;
      continue;
    } else {
      return false;
    }
    if (end == v || *end != '\0') return false;
  }
  return args->duration_s > 0 && args->duration_s <= 3600 && args->job_us > 0 &&
         args->think_us >= 0 && args->slice_us > 0 && args->cost_us >= 0;
}

}  // namespace
}  // namespace gpuvm::sched::sim

int main(int argc, char** argv) {
  gpuvm::sched::sim::Args args;
  if (!gpuvm::sched::sim::ParseArgs(argc, argv, &args)) {
    std::fprintf(
        stderr,
        "usage: %s [--duration-s S] [--job-us US] [--think-us US] [--slice-us US] [--cost-us US] "
        "[--seed N] [--case NAME] [--policy fifo|credit|band|band-sliced] [--verbose] "
        "[--out DIR]\n",
        argv[0]);
    return 2;
  }
  return gpuvm::sched::sim::Run(args);
}
