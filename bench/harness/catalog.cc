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
  constexpr std::string_view kNoFv =
      "full virtualization is not in the aggregator yet (issue 6: shadow page tables and channels)";
  constexpr std::string_view kNoPv = "para-virtualization is not in the aggregator yet";
  static const auto* modes = new std::vector<ModeSpec>{
      {"native", false, "", {}, 64, ""},           {"pt", true, "pt", {}, 1, ""},
      {"fv-naive", true, "fv", {}, 64, kNoFv},     {"fv-lazy", true, "fv", {}, 64, kNoFv},
      {"fv-bar-remap", true, "fv", {}, 64, kNoFv}, {"fv-optimized", true, "fv", {}, 64, kNoFv},
      {"pv-naive", true, "pv", {}, 64, kNoPv},     {"pv-multicall", true, "pv", {}, 64, kNoPv},
      {"pvdrm", true, "pv", {}, 64, kNoPv},        {"pvdrm-pool", true, "pv", {}, 64, kNoPv},
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
