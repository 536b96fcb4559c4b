// The scale run's table (gpuvm-bench --scale, GPUvm's Fig 4.10): for each benchmark, a row per VM
// count and a column per mode with the median seconds per VM over every VM and run at that count,
// its ratio to the same mode at the first count, and (for modes other than native) its ratio to
// native at the same count.
//
// Threading: values.
#ifndef GPUVM_BENCH_HARNESS_SCALE_H_
#define GPUVM_BENCH_HARNESS_SCALE_H_

#include <string>
#include <vector>

#include "bench/harness/results.h"

namespace gpuvm::bench {

// `records` of every count (RunRecord::vms says which); failed runs are counted, not timed.
std::string RenderScale(const std::vector<RunRecord>& records,
                        const std::vector<std::string>& benchmarks,
                        const std::vector<std::string>& modes, const std::vector<int>& counts);

}  // namespace gpuvm::bench

#endif  // GPUVM_BENCH_HARNESS_SCALE_H_
