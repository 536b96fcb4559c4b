// The problems of the GPUvm benchmark suite (docs/BENCHMARKS.md): for each benchmark its scale at
// the two sizes, its deterministic inputs, and the check of its outputs against the CPU references
// of the kernel corpus (bench/kernels/reference.h). The programs — driver-API ones
// (bench/suite/*.cc) and runtime-API ones built by nvcc (bench/suite/rt/*.cu) — differ only in how
// they drive the GPU; the data and the verdict come from here, so both kinds check the same thing.
//
// Each Make*() builds inputs and the expected outputs before the program's timed phases start.
// Check*() return "" when the outputs are right, else a sentence naming the first wrong element.
//
// Like report.h this is plain C++17 without project dependencies (nvcc compiles it too).
//
// Threading: pure functions and values.
#ifndef GPUVM_BENCH_SUITE_PROBLEMS_H_
#define GPUVM_BENCH_SUITE_PROBLEMS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bench/suite/report.h"

namespace gpuvm::suite {

// Compares `got` with `want` element by element: bit-exact when tol_abs and tol_rel are 0, else
// |got - want| <= tol_abs + tol_rel * |want|. "" or "<what> element <i>: got .., want ..".
std::string CompareFloats(const std::string& what, const std::vector<float>& got,
                          const std::vector<float>& want, double tol_abs = 0, double tol_rel = 0);
template <typename T>
std::string CompareExact(const std::string& what, const std::vector<T>& got,
                         const std::vector<T>& want);

// loop: a long integer recurrence per thread (bench/kernels/loop.cu); 1024 threads, so 4 KB goes
// to the GPU and back, as in GPUvm's loop.
struct LoopProblem {
  int threads = 0, iterations = 0;
  std::vector<uint32_t> initial;   // what is copied to the GPU (zeros)
  std::vector<uint32_t> expected;  // ref::Loop
  using Outputs = std::vector<uint32_t>;
  std::string Describe() const;
  std::string Check(const std::vector<uint32_t>& out) const;
};
LoopProblem MakeLoop(Size size);

// madd / fmadd / mmul / fmmul: n x n row-major matrices, C = A + B or A * B.
template <typename T>
struct MatrixProblem {
  int n = 0;
  const char* operation = "";  // "add" or "multiply"
  std::vector<T> a, b, expected;
  using Outputs = std::vector<T>;
  std::string Describe() const { return Describe(operation); }
  std::string Describe(const char* op) const;
  std::string Check(const std::vector<T>& c) const;
};
MatrixProblem<int32_t> MakeMadd(Size size);
MatrixProblem<float> MakeFmadd(Size size);
MatrixProblem<int32_t> MakeMmul(Size size);
MatrixProblem<float> MakeFmmul(Size size);

// cpy / pincpy: `bytes` to the GPU and back (64 MiB at bench size, the paper's).
struct CopyProblem {
  size_t bytes = 0;
  void Fill(uint8_t* data) const;  // the pattern written before the copy to the GPU
  std::string Describe() const;
  std::string Check(const uint8_t* back) const;  // `bytes` read back
};
CopyProblem MakeCopy(Size size);

// bp: one training step of a two-layer perceptron, Rodinia's backprop in the corpus's form
// (bench/kernels/backprop.cu): forward with per-block partial sums, squash, weight adjustment.
struct BackpropProblem {
  int in = 0, hid = 16, blocks = 0;
  std::vector<float> input, w, old_w, delta;
  std::vector<float> want_partial, want_hidden, want_w, want_old_w;
  struct Outputs {
    std::vector<float> partial, hidden, w, old_w;
  };
  std::string Describe() const;
  // The device buffers' sizes (both builds of bp allocate and copy these).
  struct Bytes {
    size_t input, w, partial, hidden;
  };
  Bytes BufferBytes() const {
    return {input.size() * sizeof(float), w.size() * sizeof(float),
            want_partial.size() * sizeof(float), (hid + 1) * sizeof(float)};
  }
  // Sizes `out` for the copies back from the GPU.
  void SizeOutputs(Outputs* out) const {
    out->partial.resize(want_partial.size());
    out->hidden.resize(hid + 1);
    out->w.resize(w.size());
    out->old_w.resize(w.size());
  }
  std::string Check(const std::vector<float>& partial, const std::vector<float>& hidden,
                    const std::vector<float>& w_out, const std::vector<float>& old_w_out) const;
  std::string Check(const Outputs& out) const {
    return Check(out.partial, out.hidden, out.w, out.old_w);
  }
};
BackpropProblem MakeBackprop(Size size);

// hs: Rodinia's hotspot, `steps` explicit time steps ping-ponging between two grids.
struct HotspotProblem {
  int rows = 0, cols = 0, steps = 0;
  float params[5] = {};  // HotspotParams: step_div_cap, rx_1, ry_1, rz_1, ambient (20 bytes)
  std::vector<float> power, temp;
  std::vector<float> want_a, want_b;  // the two grids after the last step (a = temp's buffer)
  struct Outputs {
    std::vector<float> a, b;
  };
  std::string Describe() const;
  void SizeOutputs(Outputs* out) const {
    out->a.resize(temp.size());
    out->b.resize(temp.size());
  }
  std::string Check(const std::vector<float>& a, const std::vector<float>& b) const;
  std::string Check(const Outputs& out) const { return Check(out.a, out.b); }
};
HotspotProblem MakeHotspot(Size size);

// lud: LU decomposition without pivoting of a diagonally dominant n x n matrix; 2 (n - 1) launches.
struct LudProblem {
  int n = 0;
  std::vector<float> a, expected;
  using Outputs = std::vector<float>;
  std::string Describe() const;
  std::string Check(const std::vector<float>& out) const;
};
LudProblem MakeLud(Size size);

// nn: nearest neighbour among `n` (latitude, longitude) records: distances, per-block argmin on the
// GPU, the final pick over the blocks on the host (Rodinia's nn keeps the selection on the host).
struct NnProblem {
  int n = 0, blocks = 0;
  float lat = 30.5f, lng = -12.25f;
  std::vector<float> records;  // 2 per record
  std::vector<float> want_dist, want_block_min;
  std::vector<int32_t> want_block_index;
  int32_t want_nearest = -1;
  struct Outputs {
    std::vector<float> dist, block_min;
    std::vector<int32_t> block_index;
    int32_t nearest = -1;  // the host's pick from the block results
  };
  std::string Describe() const;
  // The device buffers' sizes (both builds of nn allocate and copy these).
  struct Bytes {
    size_t records, dist, block;
  };
  Bytes BufferBytes() const {
    return {records.size() * sizeof(float), static_cast<size_t>(n) * sizeof(float),
            static_cast<size_t>(blocks) * sizeof(float)};
  }
  void SizeOutputs(Outputs* out) const {
    out->dist.resize(n);
    out->block_min.resize(blocks);
    out->block_index.resize(blocks);
  }
  // `nearest` is the host's pick from the block results.
  std::string Check(const std::vector<float>& dist, const std::vector<float>& block_min,
                    const std::vector<int32_t>& block_index, int32_t nearest) const;
  std::string Check(const Outputs& out) const {
    return Check(out.dist, out.block_min, out.block_index, out.nearest);
  }
};
NnProblem MakeNn(Size size);
// The host's final step of nn: the smallest block minimum (ties: the smaller index).
int32_t NnPick(const std::vector<float>& block_min, const std::vector<int32_t>& block_index);

// srad / srad2: speckle-reducing anisotropic diffusion (bench/kernels/srad.cu), `iterations` x
// (coefficients, update). srad: a structured image (an ultrasound-like phantom) with q0sqr from a
// region of interest, as Rodinia's srad; srad2: uniformly random inputs (GPUvm's "srad2"). q0sqr is
// computed once on the host, as Rodinia's srad_v2 effectively does.
struct SradProblem {
  int rows = 0, cols = 0, iterations = 0;
  float lambda = 0.5f, q0sqr = 0;
  std::vector<float> image;
  std::vector<float> want_j, want_c;  // the image and the coefficients after the last iteration
  struct Outputs {
    std::vector<float> j, c;
  };
  std::string Describe() const;
  void SizeOutputs(Outputs* out) const {
    out->j.resize(image.size());
    out->c.resize(image.size());
  }
  std::string Check(const std::vector<float>& j, const std::vector<float>& c) const;
  std::string Check(const Outputs& out) const { return Check(out.j, out.c); }
};
SradProblem MakeSrad(Size size, bool random_inputs);

// The main() of a suite program that runs one of the problems above: parses the command line,
// makes the problem (before any phase is timed), runs it with `run(problem, report, &outputs)`,
// checks the outputs unless the run failed, and prints the result line (report.h). Returns the
// process's exit status. `make` is Problem(Size).
template <typename Problem, typename Make, typename Run>
int ProgramMain(int argc, char** argv, const std::string& bench, const char* api, Make make,
                Run run) {
  const Size size = ParseCommandLine(argc, argv, bench.c_str());
  const Problem problem = make(size);
  Report report(bench, api, size, problem.Describe());
  typename Problem::Outputs out;
  run(problem, report, &out);
  if (!report.failed()) report.Verify(problem.Check(out));
  return report.Finish();
}

// How many blocks of `per_block` cover `count` items (grid dimensions).
inline unsigned Blocks(long long count, int per_block) {
  return static_cast<unsigned>((count + per_block - 1) / per_block);
}

}  // namespace gpuvm::suite

#endif  // GPUVM_BENCH_SUITE_PROBLEMS_H_
