// The kernel corpus's cases for the GPUvm and Rodinia benchmarks' kernels (vector add, matrix add
// and multiply, reductions, histograms, loop, backprop, hotspot, lud, nn, srad) and for divergent
// control flow: inputs, CPU-reference outputs and launches (kernel_corpus.h).
//
// Threading: each maker fills one Case on the calling thread.
#include <algorithm>
#include <array>
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "bench/kernels/case_builder.h"
#include "bench/kernels/reference.h"

namespace gpuvm::kernels::corpus_internal {

void VectorAddCase(Case* c, Size size, Rng& rng) {
  const int n = size == Size::kTest ? 10000 : 1 << 22;
  std::vector<float> a(n), b(n), out(n);
  for (int i = 0; i < n; ++i) {
    a[i] = rng.Float(-100, 100);
    b[i] = rng.Float(-100, 100);
  }
  ref::VectorAdd(a.data(), b.data(), out.data(), n);
  Builder k(c, "vector_add.ptx");
  uint32_t ia = k.Input("a", a), ib = k.Input("b", b);
  uint32_t ic = k.Output("c", std::vector<float>(n), out, Check::kF32, {kExactTol});
  k.Launch1D("vector_add", n, 256,
             {Arg::Pointer(ia), Arg::Pointer(ib), Arg::Pointer(ic), Arg::S32(n)});
}

// The operands of the n x n matrix kernels (a, b, c, n): inputs a and then b, each n * n values of
// `next()`, and output c checked against `reference`'s answer (exact: the float references mirror
// nvcc's fma chains in k order, exact for an engine with a fused fma).
template <typename T, typename Next>
std::vector<Arg> MatrixOperands(Builder& k, int n, Next next,
                                void (*reference)(const T*, const T*, T*, int)) {
  std::vector<T> a(n * n), b(n * n), out(n * n);
  for (auto& v : a) v = next();
  for (auto& v : b) v = next();
  reference(a.data(), b.data(), out.data(), n);
  const uint32_t ia = k.Input("a", a), ib = k.Input("b", b);
  uint32_t ic;
  if constexpr (std::is_same_v<T, float>) {
    ic = k.Output("c", std::vector<float>(n * n), out, Check::kF32, {kExactTol});
  } else {
    ic = k.Output("c", std::vector<int32_t>(n * n), out, Check::kExact);
  }
  return {Arg::Pointer(ia), Arg::Pointer(ib), Arg::Pointer(ic), Arg::S32(n)};
}

void MaddCase(Case* c, Size size, Rng& rng, bool is_float) {
  const int n = size == Size::kTest ? 70 : 2048;
  Builder k(c, is_float ? "fmadd.ptx" : "madd.ptx");
  std::vector<Arg> args =
      is_float ? MatrixOperands<float>(
                     k, n, [&] { return rng.Float(-1000, 1000); }, ref::Fmadd)
               : MatrixOperands<int32_t>(
                     k, n, [&] { return static_cast<int32_t>(rng.U32()); }, ref::Madd);
  k.Launch2D(is_float ? "fmadd" : "madd", n, n, 16, 16, std::move(args));
}

void MmulCase(Case* c, Size size, Rng& rng, bool is_float, bool tiled) {
  // Test sizes are not multiples of the 16-wide tile, so the edge handling runs.
  const int n = size == Size::kTest ? 40 : 512;
  Builder k(c, is_float ? "fmmul.ptx" : "mmul.ptx");
  std::vector<Arg> args = is_float ? MatrixOperands<float>(
                                         k, n, [&] { return rng.Float(-1, 1); }, ref::Fmmul)
                                   : MatrixOperands<int32_t>(
                                         k, n, [&] { return rng.Int(-50000, 50000); }, ref::Mmul);
  std::string kernel = is_float ? (tiled ? "_Z11fmmul_tiledILi16EEvPKfS1_Pfi" : "fmmul")
                                : (tiled ? "mmul_tiled" : "mmul");
  k.Launch2D(kernel, n, n, 16, 16, std::move(args));
}

void ReduceCase(Case* c, Size size, Rng& rng, bool is_float) {
  const int n = size == Size::kTest ? 5000 : 1 << 22;
  Builder k(c, "reduction.ptx");
  if (is_float) {
    const int block = 256;
    // Values on a 2^-8 grid in [-8, 8): every partial sum of 256 of them is exact in float.
    std::vector<float> in(n);
    for (auto& v : in) v = rng.Grid(-8, 8, 8);
    const int blocks = CeilDiv(n, block);
    std::vector<float> out(blocks);
    ref::ReduceSumF32(in.data(), out.data(), n, block);
    uint32_t ii = k.Input("in", in);
    uint32_t io = k.Output("out", std::vector<float>(blocks), out, Check::kF32, {kExactTol});
    k.Launch1D("reduce_sum_f32", n, block, {Arg::Pointer(ii), Arg::Pointer(io), Arg::S32(n)},
               block * 4);
  } else {
    std::vector<int32_t> in(n);
    for (auto& v : in) v = rng.Int(-1000000, 1000000);
    const int blocks = CeilDiv(n, 512);
    std::vector<int32_t> out(blocks);
    ref::ReduceSum(in.data(), out.data(), n);
    uint32_t ii = k.Input("in", in);
    uint32_t io = k.Output("out", std::vector<int32_t>(blocks), out, Check::kExact);
    Launch l;
    l.kernel = "reduce_sum";
    l.grid = {static_cast<uint32_t>(blocks), 1, 1};
    l.block = {256, 1, 1};
    l.args = {Arg::Pointer(ii), Arg::Pointer(io), Arg::S32(n)};
    k.Add(std::move(l));
  }
}

void HistogramCase(Case* c, Size size, Rng& rng, bool shared) {
  const int n = size == Size::kTest ? 20000 : 1 << 24;
  std::vector<uint8_t> data(n);
  // Skewed: half the bytes fall in 8 bins, so the atomics contend.
  for (auto& v : data)
    v = (rng.U32() & 1) ? static_cast<uint8_t>(rng.U32() & 7) : static_cast<uint8_t>(rng.U32());
  std::vector<uint32_t> bins(256, 0);
  ref::Histogram(data.data(), bins.data(), n);
  Builder k(c, "histogram.ptx");
  uint32_t id = k.Input("data", data);
  uint32_t ib = k.Output("bins", std::vector<uint32_t>(256, 0), bins, Check::kExact);
  Launch l;
  l.kernel = shared ? "histogram_shared" : "histogram_global";
  l.grid = {size == Size::kTest ? 8u : 64u, 1, 1};
  l.block = {256, 1, 1};
  l.args = {Arg::Pointer(id), Arg::Pointer(ib), Arg::S32(n)};
  k.Add(std::move(l));
}

void LoopCase(Case* c, Size size) {
  const int threads = size == Size::kTest ? 2048 : 1 << 16;
  const int iterations = size == Size::kTest ? 50 : 1000;
  std::vector<uint32_t> out(threads);
  ref::Loop(out.data(), threads, iterations);
  Builder k(c, "loop.ptx");
  uint32_t io = k.Output("out", std::vector<uint32_t>(threads), out, Check::kExact);
  k.Launch1D("loop", threads, 256, {Arg::Pointer(io), Arg::S32(iterations)});
}

void BackpropCase(Case* c, Size size, Rng& rng) {
  const int in = size == Size::kTest ? 40 : 65536;
  const int hid = 16;
  const int blocks = CeilDiv(in, 16);
  std::vector<float> input(in + 1), w((in + 1) * (hid + 1)), old_w((in + 1) * (hid + 1)),
      delta(hid + 1);
  for (auto& v : input) v = rng.Float(0, 1);
  input[0] = 1.0f;  // the bias unit
  for (auto& v : w) v = rng.Float(-0.5f, 0.5f);
  for (auto& v : old_w) v = rng.Float(-0.05f, 0.05f);
  for (auto& v : delta) v = rng.Float(-0.2f, 0.2f);
  std::vector<float> partial(blocks * hid), hidden(hid + 1, 0.0f), w_out = w, old_out = old_w;
  ref::BpLayerForward(input.data(), w.data(), partial.data(), in, hid);
  ref::BpLayerSquash(partial.data(), input.data(), w.data(), hidden.data(), blocks, hid);
  ref::BpAdjustWeights(delta.data(), input.data(), w_out.data(), old_out.data(), in, hid);
  Builder k(c, "backprop.ptx");
  uint32_t i_in = k.Input("input", input);
  // The sigmoid uses ex2.approx (__expf): relative error ~2^-21.
  uint32_t i_w = k.Output("w", w, w_out, Check::kF32, {kExactTol});
  uint32_t i_p =
      k.Output("partial", std::vector<float>(blocks * hid), partial, Check::kF32, {kExactTol});
  uint32_t i_h =
      k.Output("hidden", std::vector<float>(hid + 1, 0.0f), hidden, Check::kF32, {{1e-6, 1e-5}});
  uint32_t i_d = k.Input("delta", delta);
  uint32_t i_o = k.Output("old_w", old_w, old_out, Check::kF32, {kExactTol});
  k.Launch2D(
      "bp_layer_forward", hid, in, 16, 16,
      {Arg::Pointer(i_in), Arg::Pointer(i_w), Arg::Pointer(i_p), Arg::S32(in), Arg::S32(hid)});
  k.Launch1D("bp_layer_squash", hid, 256,
             {Arg::Pointer(i_p), Arg::Pointer(i_in), Arg::Pointer(i_w), Arg::Pointer(i_h),
              Arg::S32(blocks), Arg::S32(hid)});
  k.Launch2D("bp_adjust_weights", hid, in + 1, 16, 16,
             {Arg::Pointer(i_d), Arg::Pointer(i_in), Arg::Pointer(i_w), Arg::Pointer(i_o),
              Arg::S32(in), Arg::S32(hid)});
}

void HotspotCase(Case* c, Size size, Rng& rng) {
  const int rows = size == Size::kTest ? 40 : 1024, cols = rows;
  const int steps = size == Size::kTest ? 4 : 20;
  ref::HotspotParams p{0.1f, 0.2f, 0.2f, 0.05f, 80.0f};
  std::vector<float> power(rows * cols), temp(rows * cols);
  for (auto& v : power) v = rng.Float(0, 1);
  for (auto& v : temp) v = rng.Float(300, 340);
  std::vector<float> a = temp, b(rows * cols, 0.0f);
  for (int s = 0; s < steps; ++s) {
    if (s % 2 == 0) {
      ref::Hotspot(power.data(), a.data(), b.data(), rows, cols, p);
    } else {
      ref::Hotspot(power.data(), b.data(), a.data(), rows, cols, p);
    }
  }
  Builder k(c, "hotspot.ptx");
  uint32_t i_p = k.Input("power", power);
  uint32_t i_a = k.Output("temp_a", temp, a, Check::kF32, {kExactTol});
  uint32_t i_b =
      k.Output("temp_b", std::vector<float>(rows * cols, 0.0f), b, Check::kF32, {kExactTol});
  std::vector<uint8_t> params(20);
  std::memcpy(params.data(), &p, 20);
  for (int s = 0; s < steps; ++s) {
    const uint32_t from = s % 2 == 0 ? i_a : i_b, to = s % 2 == 0 ? i_b : i_a;
    k.Launch2D("hotspot", cols, rows, 16, 16,
               {Arg::Pointer(i_p), Arg::Pointer(from), Arg::Pointer(to), Arg::S32(rows),
                Arg::S32(cols), Arg::Bytes(params, 4)});
  }
}

void LudCase(Case* c, Size size, Rng& rng) {
  const int n = size == Size::kTest ? 33 : 256;
  std::vector<float> a(n * n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j)
      a[i * n + j] = i == j ? static_cast<float>(n) + rng.Float(1, 2) : rng.Float(-1, 1);
  }
  std::vector<float> out = a;
  Builder k(c, "lud.ptx");
  uint32_t ia = k.Output("a", a, out, Check::kF32, {kExactTol});
  for (int step = 0; step < n - 1; ++step) {
    ref::LudColumn(out.data(), n, step);
    ref::LudUpdate(out.data(), n, step);
    const int rest = n - step - 1;
    k.Launch1D("lud_column", rest, 64, {Arg::Pointer(ia), Arg::S32(n), Arg::S32(step)});
    k.Launch2D("lud_update", rest, rest, 16, 16, {Arg::Pointer(ia), Arg::S32(n), Arg::S32(step)});
  }
  c->buffers[ia].expected = ToBytes(out);
}

void NnCase(Case* c, Size size, Rng& rng, bool argmin) {
  const int n = size == Size::kTest ? 5000 : 1 << 22;
  Builder k(c, "nn.ptx");
  if (!argmin) {
    std::vector<float> records(2 * n), dist(n);
    for (auto& v : records) v = rng.Float(-90, 90);
    const float lat = 30.5f, lng = -12.25f;
    ref::NnDistance(records.data(), dist.data(), n, lat, lng);
    uint32_t ir = k.Input("records", records);
    uint32_t id = k.Output("dist", std::vector<float>(n), dist, Check::kF32, {kExactTol});
    k.Launch1D("nn_distance", n, 256,
               {Arg::Pointer(ir), Arg::Pointer(id), Arg::S32(n), Arg::F32(lat), Arg::F32(lng)});
    return;
  }
  // Distances on a coarse grid, so equal values (and the tie rule) occur.
  std::vector<float> dist(n);
  for (auto& v : dist) v = rng.Grid(0, 64, 2);
  const int blocks = CeilDiv(n, 256);
  std::vector<float> best(blocks);
  std::vector<int32_t> where(blocks);
  ref::NnArgmin(dist.data(), best.data(), where.data(), n);
  uint32_t id = k.Input("dist", dist);
  uint32_t ib = k.Output("block_min", std::vector<float>(blocks), best, Check::kF32, {kExactTol});
  uint32_t iw = k.Output("block_index", std::vector<int32_t>(blocks), where, Check::kExact);
  k.Launch1D("nn_argmin", n, 256,
             {Arg::Pointer(id), Arg::Pointer(ib), Arg::Pointer(iw), Arg::S32(n)});
}

void SradCase(Case* c, Size size, Rng& rng) {
  const int rows = size == Size::kTest ? 40 : 1024, cols = size == Size::kTest ? 36 : 1024;
  const int iterations = 2;
  const float lambda = 0.5f;
  const size_t count = static_cast<size_t>(rows) * cols;
  std::vector<float> j(count);
  for (auto& v : j) v = std::exp(rng.Float(0, 1));  // positive, like Rodinia's exp(image / 255)
  std::vector<float> out = j, coeff(count), dn(count), ds(count), dw(count), de(count);
  std::vector<float> q0(iterations);
  for (int it = 0; it < iterations; ++it) {
    // The host computes q0sqr from the image before each iteration; here, from the reference image.
    q0[it] = ref::SradQ0sqr(out.data(), static_cast<int>(count));
    ref::SradCoeff(out.data(), coeff.data(), dn.data(), ds.data(), dw.data(), de.data(), rows, cols,
                   q0[it]);
    ref::SradUpdate(out.data(), coeff.data(), dn.data(), ds.data(), dw.data(), de.data(), rows,
                    cols, lambda);
  }
  Builder k(c, "srad.ptx");
  // Division chains over two iterations: small differences in a non-mirrored operation order add
  // up.
  const std::vector<Tolerance> tol = {{1e-5, 1e-5}};
  std::vector<float> zero(count, 0.0f);
  uint32_t ij = k.Output("j", j, out, Check::kF32, tol);
  uint32_t ic = k.Output("c", zero, coeff, Check::kF32, tol);
  uint32_t in_ = k.Output("dn", zero, dn, Check::kF32, tol);
  uint32_t is = k.Output("ds", zero, ds, Check::kF32, tol);
  uint32_t iw = k.Output("dw", zero, dw, Check::kF32, tol);
  uint32_t ie = k.Output("de", zero, de, Check::kF32, tol);
  for (int it = 0; it < iterations; ++it) {
    k.Launch2D(
        "srad_coeff", cols, rows, 16, 16,
        {Arg::Pointer(ij), Arg::Pointer(ic), Arg::Pointer(in_), Arg::Pointer(is), Arg::Pointer(iw),
         Arg::Pointer(ie), Arg::S32(rows), Arg::S32(cols), Arg::F32(q0[it])});
    k.Launch2D(
        "srad_update", cols, rows, 16, 16,
        {Arg::Pointer(ij), Arg::Pointer(ic), Arg::Pointer(in_), Arg::Pointer(is), Arg::Pointer(iw),
         Arg::Pointer(ie), Arg::S32(rows), Arg::S32(cols), Arg::F32(lambda)});
  }
}

void DivergenceCase(Case* c, Size size, Rng& rng, int which) {
  Builder k(c, "divergence.ptx");
  if (which == 2) {
    const int blocks = size == Size::kTest ? 4 : 256, rounds = size == Size::kTest ? 10 : 100;
    std::vector<int32_t> in(blocks * 128), out(blocks * 128);
    for (auto& v : in) v = rng.Int(-1000, 1000);
    ref::BarrierLoop(in.data(), out.data(), blocks, rounds);
    uint32_t ii = k.Input("in", in);
    uint32_t io = k.Output("out", std::vector<int32_t>(blocks * 128), out, Check::kExact);
    k.Launch1D("barrier_loop", blocks * 128, 128,
               {Arg::Pointer(ii), Arg::Pointer(io), Arg::S32(rounds)});
    return;
  }
  const int n = size == Size::kTest ? 1000 : 1 << 20;
  std::vector<int32_t> in(n), out(n);
  for (auto& v : in) v = rng.Int(-200, 200);
  if (which == 0) {
    ref::NestedDivergence(in.data(), out.data(), n);
  } else {
    ref::EarlyExit(in.data(), out.data(), n);
  }
  uint32_t ii = k.Input("in", in);
  uint32_t io = k.Output("out", std::vector<int32_t>(n), out, Check::kExact);
  k.Launch1D(which == 0 ? "nested_divergence" : "early_exit", n, 128,
             {Arg::Pointer(ii), Arg::Pointer(io), Arg::S32(n)});
}

}  // namespace gpuvm::kernels::corpus_internal
