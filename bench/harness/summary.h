// gpuvm-bench's tables: per benchmark and mode the median of the runs (all VMs' records count),
// the ratio to native measured in the same harness run, the median phase breakdown, the median
// counters per run (traps per BAR), and which runs failed. Fig 4.8 of the paper is the first
// table once the fv/pv modes exist. The phase tables end with each run's wall time, process start
// to exit: in a VM mode what the VM's start and teardown add around the program.
//
// Threading: a value; one thread.
#ifndef GPUVM_BENCH_HARNESS_SUMMARY_H_
#define GPUVM_BENCH_HARNESS_SUMMARY_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench/harness/results.h"

namespace gpuvm::bench {

// The median (the mean of the middle two for an even count); 0 for none.
double Median(std::vector<double> values);

class Summary {
 public:
  void Add(const RunRecord& record);

  // Everything below, for these benchmarks and modes in this order. `header` goes on top.
  std::string Render(const std::string& header, const std::vector<std::string>& benchmarks,
                     const std::vector<std::string>& modes) const;

  // Total failed or wrong runs.
  int failures() const { return failures_; }

 private:
  struct Cell {
    std::string api, problem;
    std::vector<double> seconds;
    // The process's whole life (gpuvm-vm: the VM's start and teardown around the program).
    std::vector<double> wall;
    std::array<std::vector<double>, kPhaseCount> phases;
    std::map<std::string, std::vector<double>> counters;
    // Programs that report iterations (churn): each counter of a run divided by them, and
    // "traps" (every BAR access summed) per iteration.
    std::map<std::string, std::vector<double>> per_iteration;
    int runs = 0, failed = 0;
    std::string first_error;
  };
  const Cell* Find(const std::string& bench, const std::string& mode) const;

  std::map<std::pair<std::string, std::string>, Cell> cells_;
  int failures_ = 0;
};

}  // namespace gpuvm::bench

#endif  // GPUVM_BENCH_HARNESS_SUMMARY_H_
