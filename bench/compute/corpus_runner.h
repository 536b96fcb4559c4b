// Runs a kernel-corpus case (bench/kernels/kernel_corpus.h) on the compute engine the way a driver
// would: JIT the case's PTX (ptx/translator), put the kernel images, constant banks, global
// variables and buffers into a channel address space (a FakeChannelMemory: each buffer on its own
// pages with an unmapped guard page after it, so out-of-bounds accesses fault), launch every launch
// of the case with its parameters in constant bank 0, and check the buffers against the CPU
// reference. Used by the translator's corpus test and by gpuvm-compute-bench.
//
// Threading: RunCase drives the engine from the calling thread (the engine fans out to its
// workers).
#ifndef GPUVM_BENCH_COMPUTE_CORPUS_RUNNER_H_
#define GPUVM_BENCH_COMPUTE_CORPUS_RUNNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/kernels/kernel_corpus.h"
#include "gpu/isa/module.h"
#include "gpu/sim/compute_engine.h"

namespace gpuvm::compute_bench {

struct CaseResult {
  double jit_seconds = 0;  // PTX -> GVISA
  double kernel_seconds =
      0;                   // wall time from the first slice of the first launch to the last slice
  double cpu_seconds = 0;  // process CPU time over the same span (all workers)
  uint64_t thread_instructions = 0;
  uint32_t launches = 0;
  uint32_t slices = 0;
};

struct RunOptions {
  bool verify = true;
  int repeat = 1;  // run the launches this many times (the buffers are re-initialised in between)
  // When set, receives every buffer's final contents (in Case::buffers order).
  std::vector<std::vector<uint8_t>>* contents = nullptr;
};

// Translates and runs `c`. Errors: translation failures, a launch fault (the fault's message), or a
// verification failure (Case::Verify's message).
Result<CaseResult> RunCase(const kernels::Case& c, sim::ComputeEngine& engine,
                           const RunOptions& options = {});

// The same with an already translated module (benchmarks translate once).
Result<CaseResult> RunTranslatedCase(const kernels::Case& c, const isa::Module& module,
                                     sim::ComputeEngine& engine, const RunOptions& options = {});

}  // namespace gpuvm::compute_bench

#endif  // GPUVM_BENCH_COMPUTE_CORPUS_RUNNER_H_
