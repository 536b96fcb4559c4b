// The benchmarks' deterministic input generator: SplitMix64, the same numbers on every platform and
// compiler (the standard library's distributions are not), so a case or problem of a given seed
// has the same inputs everywhere. Used by the kernel corpus's case makers (case_builder.h) and the
// suite's problems (bench/suite/problems.cc).
//
// Header-only, plain C++17 without project dependencies: nvcc compiles it into the suite's
// runtime-API programs (bench/suite/rt/).
//
// Threading: a value; one generator per thread.
#ifndef GPUVM_BENCH_KERNELS_RNG_H_
#define GPUVM_BENCH_KERNELS_RNG_H_

#include <cmath>
#include <cstdint>

namespace gpuvm::kernels {

class SplitMix64 {
 public:
  // `stream` separates users that number their seeds alike (the corpus's cases and the suite's
  // problems each have their own), so their inputs differ.
  SplitMix64(uint64_t seed, uint64_t stream) : state_(seed * 0x9e3779b97f4a7c15ull + stream) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint32_t U32() { return static_cast<uint32_t>(Next() >> 32); }
  // Uniform in [lo, hi] (inclusive), hi - lo < 2^32.
  int32_t Int(int32_t lo, int32_t hi) {
    const uint64_t span = static_cast<uint64_t>(static_cast<int64_t>(hi) - lo) + 1;
    return static_cast<int32_t>(lo + static_cast<int64_t>(Next() % span));
  }
  // A float in [lo, hi) on a grid of 2^-bits, so sums stay exact when the inputs are few.
  float Grid(float lo, float hi, int bits) {
    const double steps = std::ldexp(static_cast<double>(hi) - lo, bits);
    const double k = std::floor(static_cast<double>(Next() >> 11) * 0x1p-53 * steps);
    return static_cast<float>(lo + std::ldexp(k, -bits));
  }
  // [lo, hi)
  float Float(float lo, float hi) {
    return static_cast<float>(lo + (hi - lo) * (static_cast<double>(Next() >> 40) * 0x1p-24));
  }
  double Double(double lo, double hi) {
    return lo + (hi - lo) * (static_cast<double>(Next() >> 11) * 0x1p-53);
  }

 private:
  uint64_t state_;
};

}  // namespace gpuvm::kernels

#endif  // GPUVM_BENCH_KERNELS_RNG_H_
