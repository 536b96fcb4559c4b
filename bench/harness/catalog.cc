#include "bench/harness/catalog.h"

namespace gpuvm::bench {

const std::vector<BenchmarkSpec>& Benchmarks() {
  static const auto* benchmarks = new std::vector<BenchmarkSpec>{
      {"nop", "no GPU operation: context create + destroy"},
      {"loop", "long compute loop, 4 KB copied each way"},
      {"madd", "integer matrix addition"},
      {"mmul", "integer matrix multiplication"},
      {"fmadd", "float matrix addition"},
      {"fmmul", "float matrix multiplication"},
      {"cpy", "64 MiB to the GPU and back, pageable host memory"},
      {"pincpy", "64 MiB to the GPU and back, pinned host memory"},
      {"bp", "Rodinia backprop: one training step of a perceptron"},
      {"hs", "Rodinia hotspot: thermal simulation time steps"},
      {"lud", "Rodinia LU decomposition: many small launches"},
      {"nn", "Rodinia nearest neighbour: distances + argmin"},
      {"srad", "Rodinia SRAD on a structured image"},
      {"srad2", "SRAD with random inputs"},
      {"gdev", "compat: Gdev-style driver API (cuParamSet*, cuLaunchGrid), nvcc's PTX", true},
      {"rtapi", "compat: device query, events, async copies on a stream", true},
      {"shneg", "compat: nvcc -O3 shared addressing below the base (32-bit wrap)", true},
      {"warpsz", "compat: WARP_SZ in inline PTX, warpSize, warp shuffles", true},
      {"longk", "compat: one kernel running ~90 s (test size ~1.5 s)", true},
      {"churn", "compat: per iteration malloc, small copies, a kernel, free", true},
      {"thrust", "compat: Thrust and CUB sorts, scans, reductions (the toolkit's own kernels)",
       true},
      {"printf", "compat: device printf from many threads, checked output, a full FIFO", true},
      {"half", "compat: cuda_fp16 arithmetic and comparisons, bit-exact against the host", true},
      {"managed", "compat: cudaMallocManaged SAXPY filled and read on the host, hints", true},
      {"graphs", "compat: CUDA graphs captured (fork/join) and built, launched many times", true},
      {"pools", "compat: cudaMallocAsync/cudaFreeAsync per step, memory pools", true},
  };
  return *benchmarks;
}

const BenchmarkSpec* FindBenchmark(std::string_view name) {
  for (const BenchmarkSpec& b : Benchmarks()) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

const std::vector<ModeSpec>& Modes() {
  // The paper's configurations (docs/GPUVM-RESULTS.md). Each VM mode's name is what gpuvm-vm (and
  // through it gpuvm-dm and the aggregator) gets as --mode, so enabling one once the aggregator
  // implements it is deleting its `unavailable` reason. fv-*: shadow page tables and channels
  // (docs/FULL-VIRTUALIZATION.md; fv-bar-remap and fv-optimized are fv-naive and fv-lazy plus BAR
  // remap); pv-*: para-virtual page-table calls; pvdrm: the split DRM driver (docs/PVDRM.md).
  static const auto* modes = new std::vector<ModeSpec>{
      {"native", false, "", {}, kMaxVms, ""},
      // One VM owns the whole GPU: the aggregator refuses a second pt VM.
      {"pt", true, "pt", {}, 1, ""},
      {"fv-naive", true, "fv-naive", {}, kMaxVms, ""},
      {"fv-lazy", true, "fv-lazy", {}, kMaxVms, ""},
      {"fv-bar-remap", true, "fv-bar-remap", {}, kMaxVms, ""},
      {"fv-optimized", true, "fv-optimized", {}, kMaxVms, ""},
      // Page-table updates as para-virtual calls (docs/PARAVIRT.md): a doorbell per call, per
      // batch.
      {"pv-naive", true, "pv-naive", {}, kMaxVms, ""},
      {"pv-multicall", true, "pv-multicall", {}, kMaxVms, ""},
      {"pvdrm", true, "pvdrm", {}, kMaxVms, ""},
      {"pvdrm-pool", true, "pvdrm-pool", {}, kMaxVms, ""},
  };
  return *modes;
}

const ModeSpec* FindMode(std::string_view name) {
  for (const ModeSpec& m : Modes()) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

}  // namespace gpuvm::bench
