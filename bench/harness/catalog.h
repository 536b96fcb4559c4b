// What gpuvm-bench can run: the benchmarks of the GPUvm suite (bench/suite/, docs/BENCHMARKS.md)
// and the modes a benchmark can run in (docs/BENCHMARKS.md, "Modes").
//
// A mode is a row of Modes(). `native` runs the program directly on the in-process software GPU;
// every other mode runs it inside local VMs (gpuvm-vm) whose virtual GPUs gpuvm-aggregator serves,
// with `vm_mode` (the mode's own name) handed to gpuvm-vm --mode, which gives it to gpuvm-dm and
// the aggregator (a mode per VM), and `vm_args` appended. Modes of later issues are listed with the
// reason they cannot run yet; enabling one is clearing `unavailable` (one line).
//
// Threading: constant data.
#ifndef GPUVM_BENCH_HARNESS_CATALOG_H_
#define GPUVM_BENCH_HARNESS_CATALOG_H_

#include <string>
#include <string_view>
#include <vector>

namespace gpuvm::bench {

struct BenchmarkSpec {
  std::string_view name;  // "madd"; the programs are gpuvm-suite-<name>[-rt]
  std::string_view what;  // one line for --list
  // A program of the CUDA compatibility corpus (bench/compat/): run when named or by `--bench
  // compat`, not by `--bench all` (the GPUvm suite; longk alone runs 90 s per mode).
  bool compat = false;
};

// The suite in the paper's order (docs/GPUVM-RESULTS.md, Table 4.2), then the compatibility
// corpus.
const std::vector<BenchmarkSpec>& Benchmarks();
const BenchmarkSpec* FindBenchmark(std::string_view name);

// The most VMs (native: programs) one run may put on the GPU at once (--vms).
inline constexpr int kMaxVms = 64;

struct ModeSpec {
  std::string_view name;             // "pt"
  bool in_vm = false;                // false: native
  std::string_view vm_mode;          // gpuvm-vm --mode
  std::vector<std::string> vm_args;  // more gpuvm-vm arguments for this mode
  int max_vms = 1;                   // how many VMs of this mode may share the GPU at once
  std::string_view unavailable;      // empty when the mode runs; else why it cannot yet
};

const std::vector<ModeSpec>& Modes();
const ModeSpec* FindMode(std::string_view name);

}  // namespace gpuvm::bench

#endif  // GPUVM_BENCH_HARNESS_CATALOG_H_
