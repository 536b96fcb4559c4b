#include "bench/suite/problems.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "bench/kernels/reference.h"
#include "bench/kernels/rng.h"

namespace gpuvm::suite {

// ------------------------------------------------------------------------------------------------
// Scales (docs/BENCHMARKS.md puts them next to the paper's). Test sizes keep every program well
// under a second natively (and a few seconds under AddressSanitizer); bench sizes take 0.05-2 s
// natively on the 2-core development machine.

namespace {

bool IsTest(Size size) { return size == Size::kTest; }

// The suite's own stream of the benchmarks' generator (bench/kernels/rng.h).
class Rng : public kernels::SplitMix64 {
 public:
  explicit Rng(uint64_t seed) : kernels::SplitMix64(seed, 0x5eed5eedull) {}
};

std::string Format(const char* fmt, double a, double b) {
  char buf[160];
  std::snprintf(buf, sizeof buf, fmt, a, b);
  return buf;
}

}  // namespace

std::string CompareFloats(const std::string& what, const std::vector<float>& got,
                          const std::vector<float>& want, double tol_abs, double tol_rel) {
  if (got.size() != want.size()) {
    return what + ": " + std::to_string(got.size()) + " elements, want " +
           std::to_string(want.size());
  }
  for (size_t i = 0; i < want.size(); ++i) {
    const float g = got[i], w = want[i];
    bool ok;
    if (std::isnan(w)) {
      ok = std::isnan(g);
    } else if (tol_abs == 0 && tol_rel == 0) {
      ok = std::memcmp(&g, &w, sizeof g) == 0;
    } else {
      ok = std::fabs(static_cast<double>(g) - w) <= tol_abs + tol_rel * std::fabs(w);
    }
    if (!ok) {
      return what + " element " + std::to_string(i) + Format(": got %.9g, want %.9g", g, w);
    }
  }
  return "";
}

template <typename T>
std::string CompareExact(const std::string& what, const std::vector<T>& got,
                         const std::vector<T>& want) {
  if (got.size() != want.size()) {
    return what + ": " + std::to_string(got.size()) + " elements, want " +
           std::to_string(want.size());
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      return what + " element " + std::to_string(i) + ": got " +
             std::to_string(static_cast<long long>(got[i])) + ", want " +
             std::to_string(static_cast<long long>(want[i]));
    }
  }
  return "";
}
template std::string CompareExact(const std::string&, const std::vector<int32_t>&,
                                  const std::vector<int32_t>&);
template std::string CompareExact(const std::string&, const std::vector<uint32_t>&,
                                  const std::vector<uint32_t>&);

// ------------------------------------------------------------------------------------------------
// loop

LoopProblem MakeLoop(Size size) {
  LoopProblem p;
  p.threads = 1024;  // 4 KB of results
  p.iterations = IsTest(size) ? 200 : 20000;
  p.initial.assign(p.threads, 0);
  p.expected.resize(p.threads);
  kernels::ref::Loop(p.expected.data(), p.threads, p.iterations);
  return p;
}

std::string LoopProblem::Describe() const {
  return std::to_string(threads) + " threads x " + std::to_string(iterations) + " iterations";
}

std::string LoopProblem::Check(const std::vector<uint32_t>& out) const {
  return CompareExact("out", out, expected);
}

// ------------------------------------------------------------------------------------------------
// Matrices

namespace {

// An n x n problem with inputs uniform in [lo, hi] and the `reference`'s answer for `operation`.
template <typename T>
MatrixProblem<T> MakeMatrix(int n, uint64_t seed, T lo, T hi,
                            void (*reference)(const T*, const T*, T*, int), const char* operation) {
  MatrixProblem<T> p;
  p.n = n;
  Rng rng(seed);
  p.a.resize(static_cast<size_t>(n) * n);
  p.b.resize(p.a.size());
  p.expected.resize(p.a.size());
  for (size_t i = 0; i < p.a.size(); ++i) {
    if constexpr (std::is_same_v<T, float>) {
      p.a[i] = rng.Float(lo, hi);
      p.b[i] = rng.Float(lo, hi);
    } else {
      p.a[i] = rng.Int(lo, hi);
      p.b[i] = rng.Int(lo, hi);
    }
  }
  reference(p.a.data(), p.b.data(), p.expected.data(), p.n);
  p.operation = operation;
  return p;
}

}  // namespace

template <typename T>
std::string MatrixProblem<T>::Describe(const char* op) const {
  return std::to_string(n) + " x " + std::to_string(n) + " " +
         (std::is_same_v<T, float> ? "float" : "int32") + " " + op;
}

template <typename T>
std::string MatrixProblem<T>::Check(const std::vector<T>& c) const {
  if constexpr (std::is_same_v<T, float>) {
    return CompareFloats("c", c, expected);  // the references mirror nvcc's fma chains: exact
  } else {
    return CompareExact("c", c, expected);
  }
}
template struct MatrixProblem<int32_t>;
template struct MatrixProblem<float>;

MatrixProblem<int32_t> MakeMadd(Size size) {
  return MakeMatrix<int32_t>(IsTest(size) ? 64 : 1024, 1, INT32_MIN, INT32_MAX, kernels::ref::Madd,
                             "add");
}

MatrixProblem<float> MakeFmadd(Size size) {
  return MakeMatrix<float>(IsTest(size) ? 64 : 1024, 2, -1000.0f, 1000.0f, kernels::ref::Fmadd,
                           "add");
}

MatrixProblem<int32_t> MakeMmul(Size size) {
  return MakeMatrix<int32_t>(IsTest(size) ? 40 : 256, 3, -50000, 50000, kernels::ref::Mmul,
                             "multiply");
}

MatrixProblem<float> MakeFmmul(Size size) {
  return MakeMatrix<float>(IsTest(size) ? 40 : 256, 4, -1.0f, 1.0f, kernels::ref::Fmmul,
                           "multiply");
}

// ------------------------------------------------------------------------------------------------
// cpy / pincpy

CopyProblem MakeCopy(Size size) {
  CopyProblem p;
  p.bytes = IsTest(size) ? (1u << 20) : (64u << 20);
  return p;
}

namespace {
// A pattern whose every 8-byte word differs from its neighbours and from a shifted copy.
uint64_t PatternWord(size_t index) { return (index + 1) * 0x9e3779b97f4a7c15ull ^ (index << 7); }
}  // namespace

void CopyProblem::Fill(uint8_t* data) const {
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t w = PatternWord(i / 8);
    std::memcpy(data + i, &w, 8);
  }
}

std::string CopyProblem::Describe() const {
  return std::to_string(bytes >> 20) + " MiB to the GPU and back";
}

std::string CopyProblem::Check(const uint8_t* back) const {
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    uint64_t got;
    std::memcpy(&got, back + i, 8);
    const uint64_t want = PatternWord(i / 8);
    if (got != want) {
      char buf[120];
      std::snprintf(buf, sizeof buf, "byte %zu: got 0x%016llx, want 0x%016llx", i,
                    static_cast<unsigned long long>(got), static_cast<unsigned long long>(want));
      return buf;
    }
  }
  return "";
}

// ------------------------------------------------------------------------------------------------
// bp

BackpropProblem MakeBackprop(Size size) {
  BackpropProblem p;
  p.in = IsTest(size) ? 256 : 65536;
  p.blocks = static_cast<int>(Blocks(p.in, 16));
  Rng rng(5);
  p.input.resize(p.in + 1);
  p.w.resize(static_cast<size_t>(p.in + 1) * (p.hid + 1));
  p.old_w.resize(p.w.size());
  p.delta.resize(p.hid + 1);
  for (auto& v : p.input) v = rng.Float(0, 1);
  p.input[0] = 1.0f;  // the bias unit
  for (auto& v : p.w) v = rng.Float(-0.5f, 0.5f);
  for (auto& v : p.old_w) v = rng.Float(-0.05f, 0.05f);
  for (auto& v : p.delta) v = rng.Float(-0.2f, 0.2f);
  p.want_partial.resize(static_cast<size_t>(p.blocks) * p.hid);
  p.want_hidden.assign(p.hid + 1, 0.0f);
  p.want_w = p.w;
  p.want_old_w = p.old_w;
  kernels::ref::BpLayerForward(p.input.data(), p.w.data(), p.want_partial.data(), p.in, p.hid);
  kernels::ref::BpLayerSquash(p.want_partial.data(), p.input.data(), p.w.data(),
                              p.want_hidden.data(), p.blocks, p.hid);
  kernels::ref::BpAdjustWeights(p.delta.data(), p.input.data(), p.want_w.data(),
                                p.want_old_w.data(), p.in, p.hid);
  return p;
}

std::string BackpropProblem::Describe() const {
  return std::to_string(in) + " inputs x " + std::to_string(hid) + " hidden units";
}

std::string BackpropProblem::Check(const std::vector<float>& partial,
                                   const std::vector<float>& hidden,
                                   const std::vector<float>& w_out,
                                   const std::vector<float>& old_w_out) const {
  std::string problem = CompareFloats("partial", partial, want_partial);
  // The sigmoid uses ex2.approx (__expf): relative error ~2^-21; the long sum over blocks is exact.
  if (problem.empty()) problem = CompareFloats("hidden", hidden, want_hidden, 1e-6, 1e-5);
  if (problem.empty()) problem = CompareFloats("w", w_out, want_w);
  if (problem.empty()) problem = CompareFloats("old_w", old_w_out, want_old_w);
  return problem;
}

// ------------------------------------------------------------------------------------------------
// hs

HotspotProblem MakeHotspot(Size size) {
  HotspotProblem p;
  p.rows = p.cols = IsTest(size) ? 48 : 512;
  p.steps = IsTest(size) ? 4 : 30;
  const kernels::ref::HotspotParams params{0.1f, 0.2f, 0.2f, 0.05f, 80.0f};
  std::memcpy(p.params, &params, sizeof p.params);
  Rng rng(6);
  const size_t count = static_cast<size_t>(p.rows) * p.cols;
  p.power.resize(count);
  p.temp.resize(count);
  for (auto& v : p.power) v = rng.Float(0, 1);
  for (auto& v : p.temp) v = rng.Float(300, 340);
  p.want_a = p.temp;
  p.want_b.assign(count, 0.0f);
  for (int s = 0; s < p.steps; ++s) {
    const std::vector<float>& from = s % 2 == 0 ? p.want_a : p.want_b;
    std::vector<float>& to = s % 2 == 0 ? p.want_b : p.want_a;
    kernels::ref::Hotspot(p.power.data(), from.data(), to.data(), p.rows, p.cols, params);
  }
  return p;
}

std::string HotspotProblem::Describe() const {
  return std::to_string(rows) + " x " + std::to_string(cols) + " grid, " + std::to_string(steps) +
         " steps";
}

std::string HotspotProblem::Check(const std::vector<float>& a, const std::vector<float>& b) const {
  std::string problem = CompareFloats("temp_a", a, want_a);
  if (problem.empty()) problem = CompareFloats("temp_b", b, want_b);
  return problem;
}

// ------------------------------------------------------------------------------------------------
// lud

LudProblem MakeLud(Size size) {
  LudProblem p;
  p.n = IsTest(size) ? 33 : 256;
  Rng rng(7);
  p.a.resize(static_cast<size_t>(p.n) * p.n);
  for (int i = 0; i < p.n; ++i) {
    for (int j = 0; j < p.n; ++j) {
      p.a[i * p.n + j] = i == j ? static_cast<float>(p.n) + rng.Float(1, 2) : rng.Float(-1, 1);
    }
  }
  p.expected = p.a;
  for (int k = 0; k + 1 < p.n; ++k) {
    kernels::ref::LudColumn(p.expected.data(), p.n, k);
    kernels::ref::LudUpdate(p.expected.data(), p.n, k);
  }
  return p;
}

std::string LudProblem::Describe() const {
  return std::to_string(n) + " x " + std::to_string(n) + " float, " + std::to_string(2 * (n - 1)) +
         " launches";
}

std::string LudProblem::Check(const std::vector<float>& out) const {
  return CompareFloats("a", out, expected);
}

// ------------------------------------------------------------------------------------------------
// nn

int32_t NnPick(const std::vector<float>& block_min, const std::vector<int32_t>& block_index) {
  int32_t best_at = -1;
  float best = 0;
  for (size_t b = 0; b < block_min.size() && b < block_index.size(); ++b) {
    if (best_at < 0 || block_min[b] < best || (block_min[b] == best && block_index[b] < best_at)) {
      best = block_min[b];
      best_at = block_index[b];
    }
  }
  return best_at;
}

NnProblem MakeNn(Size size) {
  NnProblem p;
  p.n = IsTest(size) ? 5000 : (1 << 21);
  p.blocks = static_cast<int>(Blocks(p.n, 256));
  Rng rng(8);
  p.records.resize(2 * static_cast<size_t>(p.n));
  for (auto& v : p.records) v = rng.Float(-90, 90);
  p.want_dist.resize(p.n);
  kernels::ref::NnDistance(p.records.data(), p.want_dist.data(), p.n, p.lat, p.lng);
  p.want_block_min.resize(p.blocks);
  p.want_block_index.resize(p.blocks);
  kernels::ref::NnArgmin(p.want_dist.data(), p.want_block_min.data(), p.want_block_index.data(),
                         p.n);
  p.want_nearest = NnPick(p.want_block_min, p.want_block_index);
  return p;
}

std::string NnProblem::Describe() const { return std::to_string(n) + " records"; }

std::string NnProblem::Check(const std::vector<float>& dist, const std::vector<float>& block_min,
                             const std::vector<int32_t>& block_index, int32_t nearest) const {
  std::string problem = CompareFloats("dist", dist, want_dist);
  if (problem.empty()) problem = CompareFloats("block_min", block_min, want_block_min);
  if (problem.empty()) problem = CompareExact("block_index", block_index, want_block_index);
  if (problem.empty() && nearest != want_nearest) {
    problem =
        "nearest record: got " + std::to_string(nearest) + ", want " + std::to_string(want_nearest);
  }
  return problem;
}

// ------------------------------------------------------------------------------------------------
// srad / srad2

SradProblem MakeSrad(Size size, bool random_inputs) {
  SradProblem p;
  Rng rng(random_inputs ? 10 : 9);
  if (random_inputs) {
    p.rows = p.cols = IsTest(size) ? 48 : 1024;
    p.iterations = 2;
  } else {
    p.rows = IsTest(size) ? 40 : 512;
    p.cols = IsTest(size) ? 36 : 512;
    p.iterations = IsTest(size) ? 3 : 8;
  }
  const size_t count = static_cast<size_t>(p.rows) * p.cols;
  p.image.resize(count);
  for (int y = 0; y < p.rows; ++y) {
    for (int x = 0; x < p.cols; ++x) {
      float intensity;
      if (random_inputs) {
        intensity = rng.Float(0, 1);
      } else {
        // A phantom: bright rings around the centre under multiplicative speckle, in [0, 1].
        const double dy = (y - p.rows / 2.0) / p.rows, dx = (x - p.cols / 2.0) / p.cols;
        const double ring = 0.5 + 0.4 * std::cos(40.0 * std::sqrt(dx * dx + dy * dy));
        intensity = static_cast<float>(ring * rng.Float(0.6f, 1.0f));
      }
      // Rodinia's srad works on exp(image / 255) of an 8-bit image; intensity plays image / 255.
      p.image[static_cast<size_t>(y) * p.cols + x] = std::exp(intensity);
    }
  }
  // q0sqr from a region of interest (Rodinia: the top-left corner); the whole image for srad2.
  const int roi_rows = random_inputs ? p.rows : p.rows / 4,
            roi_cols = random_inputs ? p.cols : p.cols / 4;
  std::vector<float> roi;
  roi.reserve(static_cast<size_t>(roi_rows) * roi_cols);
  for (int y = 0; y < roi_rows; ++y) {
    for (int x = 0; x < roi_cols; ++x) roi.push_back(p.image[static_cast<size_t>(y) * p.cols + x]);
  }
  p.q0sqr = kernels::ref::SradQ0sqr(roi.data(), static_cast<int>(roi.size()));
  p.want_j = p.image;
  p.want_c.assign(count, 0.0f);
  std::vector<float> dn(count), ds(count), dw(count), de(count);
  for (int it = 0; it < p.iterations; ++it) {
    kernels::ref::SradCoeff(p.want_j.data(), p.want_c.data(), dn.data(), ds.data(), dw.data(),
                            de.data(), p.rows, p.cols, p.q0sqr);
    kernels::ref::SradUpdate(p.want_j.data(), p.want_c.data(), dn.data(), ds.data(), dw.data(),
                             de.data(), p.rows, p.cols, p.lambda);
  }
  return p;
}

std::string SradProblem::Describe() const {
  return std::to_string(rows) + " x " + std::to_string(cols) + " image, " +
         std::to_string(iterations) + " iterations";
}

std::string SradProblem::Check(const std::vector<float>& j, const std::vector<float>& c) const {
  // Division chains whose operation order the reference mirrors only up to reassociation: small
  // differences that grow with the iterations (the kernel corpus allows 1e-5 for two).
  std::string problem = CompareFloats("j", j, want_j, 1e-4, 1e-4);
  if (problem.empty()) problem = CompareFloats("c", c, want_c, 1e-4, 1e-4);
  return problem;
}

}  // namespace gpuvm::suite
