#include "scheduler/sim/fairness.h"

#include <algorithm>
#include <cmath>

namespace gpuvm::sched::sim {

std::vector<Window> Windows(const SimResult& result, size_t vm_count, Duration window,
                            Duration from, Duration to, Duration step) {
  std::vector<Window> windows;
  if (window <= Duration(0) || step <= Duration(0) || window % step != Duration(0) || to <= from) {
    return windows;
  }
  // Exact GPU time per VM in each step-long bucket; a window is a run of consecutive buckets.
  const size_t buckets = static_cast<size_t>((to - from + step - Duration(1)) / step);
  std::vector<std::vector<Duration>> used(buckets, std::vector<Duration>(vm_count, Duration(0)));
  for (const SimRun& run : result.runs) {
    if (run.vm_index >= vm_count) continue;
    Duration start = std::max(run.start, from);
    const Duration end = std::min(run.end, to);
    while (start < end) {
      const size_t b = static_cast<size_t>((start - from) / step);
      const Duration bucket_end = from + step * static_cast<int64_t>(b + 1);
      const Duration piece_end = std::min(end, bucket_end);
      used[b][run.vm_index] += piece_end - start;
      start = piece_end;
    }
  }
  const size_t per_window = static_cast<size_t>(window / step);
  for (size_t first = 0; from + step * static_cast<int64_t>(first) + window <= to; ++first) {
    Window w;
    w.start = from + step * static_cast<int64_t>(first);
    w.used.assign(vm_count, Duration(0));
    for (size_t b = first; b < first + per_window; ++b) {
      for (size_t v = 0; v < vm_count; ++v) w.used[v] += used[b][v];
    }
    for (Duration d : w.used) w.busy += d;
    w.share.assign(vm_count, 0.0);
    if (w.busy > Duration(0)) {
      for (size_t v = 0; v < vm_count; ++v) {
        w.share[v] = static_cast<double>(w.used[v].count()) / static_cast<double>(w.busy.count());
      }
    }
    windows.push_back(std::move(w));
  }
  return windows;
}

std::vector<double> TargetShares(const std::vector<SimVm>& vms) {
  double total = 0;
  for (const SimVm& vm : vms) total += vm.share_percent;
  std::vector<double> targets;
  for (const SimVm& vm : vms) {
    targets.push_back(total > 0 ? vm.share_percent / total : 1.0 / static_cast<double>(vms.size()));
  }
  return targets;
}

FairnessReport Evaluate(const SimResult& result, const std::vector<double>& targets,
                        Duration window, Duration from, Duration to, Duration step) {
  const size_t n = targets.size();
  FairnessReport report;
  report.window = window;
  report.target = targets;
  report.mean_share.assign(n, 0.0);
  report.max_deviation.assign(n, 0.0);
  const std::vector<Window> windows = Windows(result, n, window, from, to, step);
  report.windows = windows.size();
  for (const Window& w : windows) {
    double sum = 0, sum_squares = 0;
    size_t counted = 0;
    for (size_t v = 0; v < n; ++v) {
      report.mean_share[v] += w.share[v] / static_cast<double>(windows.size());
      report.max_deviation[v] =
          std::max(report.max_deviation[v], std::abs(w.share[v] - targets[v]));
      if (targets[v] > 0) {
        const double x = w.share[v] / targets[v];
        sum += x;
        sum_squares += x * x;
        ++counted;
      }
    }
    if (counted > 0 && sum_squares > 0) {
      report.jain_min =
          std::min(report.jain_min, sum * sum / (static_cast<double>(counted) * sum_squares));
    }
  }
  for (double d : report.max_deviation)
    report.worst_deviation = std::max(report.worst_deviation, d);
  Duration busy{0};
  for (const SimRun& run : result.runs) {
    const Duration start = std::max(run.start, from);
    const Duration end = std::min(run.end, to);
    if (end > start) busy += end - start;
  }
  if (to > from) {
    report.utilization =
        static_cast<double>(busy.count()) / static_cast<double>((to - from).count());
  }
  return report;
}

}  // namespace gpuvm::sched::sim
