// What the kernel corpus's case makers share (kernel_corpus_cases.cc,
// kernel_corpus_feature_cases.cc) and the registry in kernel_corpus.cc: the deterministic input
// generator, byte conversions, the Builder that fills a Case (buffers with their expected contents
// and checks, launches), and the makers themselves. Internal to the kernel_corpus library.
//
// Threading: values and pure functions; a Builder fills one Case on one thread.
#ifndef GPUVM_BENCH_KERNELS_CASE_BUILDER_H_
#define GPUVM_BENCH_KERNELS_CASE_BUILDER_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bench/kernels/kernel_corpus.h"
#include "bench/kernels/rng.h"

namespace gpuvm::kernels::corpus_internal {

// The corpus's own stream of the benchmarks' generator (rng.h).
class Rng : public kernels::SplitMix64 {
 public:
  explicit Rng(uint64_t seed) : kernels::SplitMix64(seed, 0x1234567ull) {}
};

template <typename T>
std::vector<uint8_t> ToBytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

template <typename T>
std::vector<T> FromBytes(const std::vector<uint8_t>& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

inline uint32_t CeilDiv(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

class Builder {
 public:
  Builder(Case* c, std::string ptx_file) : case_(c) {
    c->ptx_file = std::move(ptx_file);
    c->ptx = PtxSource(c->ptx_file);
  }

  template <typename T>
  uint32_t Input(std::string name, const std::vector<T>& data) {
    Buffer b;
    b.name = std::move(name);
    b.initial = ToBytes(data);
    case_->buffers.push_back(std::move(b));
    return static_cast<uint32_t>(case_->buffers.size() - 1);
  }
  template <typename T>
  uint32_t Output(std::string name, const std::vector<T>& initial, const std::vector<T>& expected,
                  Check check, std::vector<Tolerance> tolerances = {}) {
    uint32_t index = Input(std::move(name), initial);
    Buffer& b = case_->buffers[index];
    b.expected = ToBytes(expected);
    b.check = check;
    b.tolerances = std::move(tolerances);
    return index;
  }
  template <typename T>
  uint32_t Custom(std::string name, const std::vector<T>& initial,
                  std::function<std::string(const std::vector<uint8_t>&)> check) {
    uint32_t index = Input(std::move(name), initial);
    case_->buffers[index].check = Check::kCustom;
    case_->buffers[index].custom = std::move(check);
    return index;
  }
  void Launch1D(std::string kernel, uint64_t threads, uint32_t block, std::vector<Arg> args,
                uint32_t dynamic_shared = 0) {
    Launch l;
    l.kernel = std::move(kernel);
    l.grid = {CeilDiv(threads, block), 1, 1};
    l.block = {block, 1, 1};
    l.dynamic_shared = dynamic_shared;
    l.args = std::move(args);
    Add(std::move(l));
  }
  void Launch2D(std::string kernel, uint32_t width, uint32_t height, uint32_t bx, uint32_t by,
                std::vector<Arg> args) {
    Launch l;
    l.kernel = std::move(kernel);
    l.grid = {CeilDiv(width, bx), CeilDiv(height, by), 1};
    l.block = {bx, by, 1};
    l.args = std::move(args);
    Add(std::move(l));
  }
  void Add(Launch l) {
    case_->threads +=
        uint64_t{l.grid[0]} * l.grid[1] * l.grid[2] * l.block[0] * l.block[1] * l.block[2];
    case_->launches.push_back(std::move(l));
  }

 private:
  Case* case_;
};

inline constexpr Tolerance kExactTol{0, 0};

// The case makers: each fills `c` for its kernel at `size` with inputs drawn from `rng`.
// kernel_corpus_cases.cc: the GPUvm and Rodinia benchmarks' kernels and control flow.
void VectorAddCase(Case* c, Size size, Rng& rng);
void MaddCase(Case* c, Size size, Rng& rng, bool is_float);
void MmulCase(Case* c, Size size, Rng& rng, bool is_float, bool tiled);
void ReduceCase(Case* c, Size size, Rng& rng, bool is_float);
void HistogramCase(Case* c, Size size, Rng& rng, bool shared);
void LoopCase(Case* c, Size size);
void BackpropCase(Case* c, Size size, Rng& rng);
void HotspotCase(Case* c, Size size, Rng& rng);
void LudCase(Case* c, Size size, Rng& rng);
void NnCase(Case* c, Size size, Rng& rng, bool argmin);
void SradCase(Case* c, Size size, Rng& rng);
void DivergenceCase(Case* c, Size size, Rng& rng, int which);
// kernel_corpus_feature_cases.cc: one PTX feature each (atomics, 64-bit addressing, calls, f64,
// warp operations, special registers, math, local memory, conversions, bit operations).
void AtomicsGlobalCase(Case* c, Size size, Rng& rng);
void AtomicsSharedCase(Case* c, Size size, Rng& rng);
void AtomicsRedCase(Case* c, Size size, Rng& rng);
void Addr64Case(Case* c, Size size, Rng& rng, bool split);
void CallsCase(Case* c, Size size, Rng& rng, bool recursive);
void F64Case(Case* c, Size size, Rng& rng);
void WarpCase(Case* c, Size size, Rng& rng, int which);
void SregCase(Case* c, Size size);
void MathF32Case(Case* c, Size size, Rng& rng);
void LocalArrayCase(Case* c, Size size, Rng& rng);
void CvtCase(Case* c, Size size, Rng& rng);
void BitopsCase(Case* c, Size size, Rng& rng);

}  // namespace gpuvm::kernels::corpus_internal

#endif  // GPUVM_BENCH_KERNELS_CASE_BUILDER_H_
