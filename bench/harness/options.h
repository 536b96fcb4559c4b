// gpuvm-bench's command line (Usage() is the reference). Parsing is separate from running so the
// checks — unknown benchmarks or modes, modes that cannot run yet, counts out of range — are unit
// tested and every bad input gets a sentence saying what is wrong.
//
// Threading: values.
#ifndef GPUVM_BENCH_HARNESS_OPTIONS_H_
#define GPUVM_BENCH_HARNESS_OPTIONS_H_

#include <string>
#include <vector>

#include "base/status.h"
#include "bench/harness/catalog.h"

namespace gpuvm::bench {

enum class Api { kAuto, kDriver, kRuntime };

struct Options {
  std::vector<std::string> benchmarks;  // catalog names, in the catalog's order
  std::vector<std::string> modes;       // in the order given
  int runs = 5;
  int warmup = 1;
  std::string size = "bench";  // "test" | "bench"
  int vms = 1;
  // --scale: VM counts run one after another, each as with --vms N (GPUvm's Fig 4.10 scale run);
  // empty: just --vms. Set, vms is the largest (what the modes are checked against).
  std::vector<int> scale;
  Api api = Api::kAuto;
  std::string out;         // empty: the directory gpuvm-bench lives in (<build>/bench)
  std::string programs;    // empty: the directory gpuvm-bench lives in
  double timeout_s = 300;  // per run
  bool list = false;       // print the benchmarks and modes, run nothing
  bool quiet = false;      // no per-run progress lines
};

inline constexpr int kMaxRuns = 1000;

std::string Usage();

// `args` without the program name. --help gives FailedPrecondition with the usage as its message
// (the caller prints it and exits 0).
Result<Options> ParseOptions(const std::vector<std::string>& args);

}  // namespace gpuvm::bench

#endif  // GPUVM_BENCH_HARNESS_OPTIONS_H_
