#include "bench/kernels/kernel_corpus.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <map>

#include "bench/kernels/reference.h"

namespace gpuvm::kernels {
namespace internal {
struct EmbeddedPtx {
  const char* name;
  const char* text;
};
extern const EmbeddedPtx kEmbeddedPtx[];
extern const size_t kEmbeddedPtxCount;
}  // namespace internal

// ------------------------------------------------------------------------------------------------
// Arg

Arg Arg::Pointer(uint32_t buffer, int64_t offset) {
  Arg a;
  a.kind = Kind::kPointer;
  a.buffer = buffer;
  a.offset = offset;
  return a;
}
Arg Arg::PointerLow32(uint32_t buffer, int64_t offset) {
  Arg a = Pointer(buffer, offset);
  a.kind = Kind::kPointerLow32;
  return a;
}
Arg Arg::PointerHigh32(uint32_t buffer, int64_t offset) {
  Arg a = Pointer(buffer, offset);
  a.kind = Kind::kPointerHigh32;
  return a;
}
namespace {
template <typename T>
std::vector<uint8_t> RawBytes(const T& v) {
  std::vector<uint8_t> out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}
}  // namespace
Arg Arg::U32(uint32_t v) { return Bytes(RawBytes(v), 4); }
Arg Arg::S32(int32_t v) { return Bytes(RawBytes(v), 4); }
Arg Arg::F32(float v) { return Bytes(RawBytes(v), 4); }
Arg Arg::U64(uint64_t v) { return Bytes(RawBytes(v), 8); }
Arg Arg::Bytes(std::vector<uint8_t> bytes, uint32_t align) {
  Arg a;
  a.kind = Kind::kValue;
  a.bytes = std::move(bytes);
  a.align = align;
  return a;
}

uint32_t Arg::Size() const {
  switch (kind) {
    case Kind::kPointer:
      return 8;
    case Kind::kPointerLow32:
    case Kind::kPointerHigh32:
      return 4;
    case Kind::kValue:
      return static_cast<uint32_t>(bytes.size());
  }
  return 0;
}

uint32_t Arg::Align() const {
  if (kind != Kind::kValue) return Size();
  return align != 0 ? align : static_cast<uint32_t>(bytes.size());
}

// ------------------------------------------------------------------------------------------------
// Verification

namespace {

template <typename T>
T Load(const std::vector<uint8_t>& bytes, size_t index) {
  T v;
  std::memcpy(&v, bytes.data() + index * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
std::string CompareFloats(const Buffer& b, const std::vector<uint8_t>& got) {
  const size_t n = b.expected.size() / sizeof(T);
  for (size_t i = 0; i < n; ++i) {
    const T g = Load<T>(got, i), w = Load<T>(b.expected, i);
    const Tolerance t = b.tolerances.empty() ? Tolerance{} : b.tolerances[i % b.tolerances.size()];
    bool ok;
    if (std::isnan(w)) {
      ok = std::isnan(g);
    } else if (t.abs == 0 && t.rel == 0) {
      ok = std::memcmp(&g, &w, sizeof(T)) == 0;
    } else {
      ok = std::fabs(static_cast<double>(g) - static_cast<double>(w)) <=
           t.abs + t.rel * std::fabs(static_cast<double>(w));
    }
    if (!ok) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "element %zu: got %.17g, want %.17g (abs %.3g rel %.3g)", i,
                    static_cast<double>(g), static_cast<double>(w), t.abs, t.rel);
      return buf;
    }
  }
  return "";
}

std::string CompareExact(const Buffer& b, const std::vector<uint8_t>& got) {
  for (size_t i = 0; i + 4 <= b.expected.size(); i += 4) {
    uint32_t g, w;
    std::memcpy(&g, got.data() + i, 4);
    std::memcpy(&w, b.expected.data() + i, 4);
    if (g != w) {
      char buf[120];
      std::snprintf(buf, sizeof buf, "word %zu: got 0x%08x (%d), want 0x%08x (%d)", i / 4, g,
                    static_cast<int>(g), w, static_cast<int>(w));
      return buf;
    }
  }
  for (size_t i = b.expected.size() & ~size_t{3}; i < b.expected.size(); ++i) {
    if (got[i] != b.expected[i]) {
      return "byte " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", want " +
             std::to_string(b.expected[i]);
    }
  }
  return "";
}

}  // namespace

Status Case::Verify(const std::vector<std::vector<uint8_t>>& final_contents) const {
  if (final_contents.size() != buffers.size()) {
    return Status::InvalidArgument(name + ": expected " + std::to_string(buffers.size()) +
                                   " buffers, got " + std::to_string(final_contents.size()));
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    const Buffer& b = buffers[i];
    const std::vector<uint8_t>& got = final_contents[i];
    if (got.size() != b.initial.size()) {
      return Status::InvalidArgument(name + ": buffer '" + b.name + "' has " +
                                     std::to_string(got.size()) + " bytes, expected " +
                                     std::to_string(b.initial.size()));
    }
    std::string problem;
    switch (b.check) {
      case Check::kNone:
        break;
      case Check::kExact:
        problem = CompareExact(b, got);
        break;
      case Check::kF32:
        problem = CompareFloats<float>(b, got);
        break;
      case Check::kF64:
        problem = CompareFloats<double>(b, got);
        break;
      case Check::kCustom:
        problem = b.custom(got);
        break;
    }
    if (!problem.empty()) {
      return Status::DataLoss(name + ": buffer '" + b.name + "' " + problem);
    }
  }
  return Status::Ok();
}

// ------------------------------------------------------------------------------------------------
// Building cases

namespace {

// SplitMix64: deterministic on every platform (the standard distributions are not).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed * 0x9e3779b97f4a7c15ull + 0x1234567ull) {}
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
  float Float(float lo, float hi) {
    return static_cast<float>(lo + (hi - lo) * (static_cast<double>(Next() >> 40) * 0x1p-24));
  }
  double Double(double lo, double hi) {
    return lo + (hi - lo) * (static_cast<double>(Next() >> 11) * 0x1p-53);
  }

 private:
  uint64_t state_;
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

uint32_t CeilDiv(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

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

constexpr Tolerance kExactTol{0, 0};

// --- the cases
// ------------------------------------------------------------------------------------------------

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

void MaddCase(Case* c, Size size, Rng& rng, bool is_float) {
  const int n = size == Size::kTest ? 70 : 2048;
  Builder k(c, is_float ? "fmadd.ptx" : "madd.ptx");
  std::vector<Arg> args;
  if (is_float) {
    std::vector<float> a(n * n), b(n * n), out(n * n);
    for (auto& v : a) v = rng.Float(-1000, 1000);
    for (auto& v : b) v = rng.Float(-1000, 1000);
    ref::Fmadd(a.data(), b.data(), out.data(), n);
    uint32_t ia = k.Input("a", a), ib = k.Input("b", b);
    uint32_t ic = k.Output("c", std::vector<float>(n * n), out, Check::kF32, {kExactTol});
    args = {Arg::Pointer(ia), Arg::Pointer(ib), Arg::Pointer(ic), Arg::S32(n)};
  } else {
    std::vector<int32_t> a(n * n), b(n * n), out(n * n);
    for (auto& v : a) v = static_cast<int32_t>(rng.U32());
    for (auto& v : b) v = static_cast<int32_t>(rng.U32());
    ref::Madd(a.data(), b.data(), out.data(), n);
    uint32_t ia = k.Input("a", a), ib = k.Input("b", b);
    uint32_t ic = k.Output("c", std::vector<int32_t>(n * n), out, Check::kExact);
    args = {Arg::Pointer(ia), Arg::Pointer(ib), Arg::Pointer(ic), Arg::S32(n)};
  }
  k.Launch2D(is_float ? "fmadd" : "madd", n, n, 16, 16, std::move(args));
}

void MmulCase(Case* c, Size size, Rng& rng, bool is_float, bool tiled) {
  // Test sizes are not multiples of the 16-wide tile, so the edge handling runs.
  const int n = size == Size::kTest ? 40 : 512;
  Builder k(c, is_float ? "fmmul.ptx" : "mmul.ptx");
  std::vector<Arg> args;
  if (is_float) {
    std::vector<float> a(n * n), b(n * n), out(n * n);
    for (auto& v : a) v = rng.Float(-1, 1);
    for (auto& v : b) v = rng.Float(-1, 1);
    ref::Fmmul(a.data(), b.data(), out.data(), n);
    uint32_t ia = k.Input("a", a), ib = k.Input("b", b);
    // fma chains in k order, mirrored by the reference: exact for an engine with a fused fma.
    uint32_t ic = k.Output("c", std::vector<float>(n * n), out, Check::kF32, {kExactTol});
    args = {Arg::Pointer(ia), Arg::Pointer(ib), Arg::Pointer(ic), Arg::S32(n)};
  } else {
    std::vector<int32_t> a(n * n), b(n * n), out(n * n);
    for (auto& v : a) v = rng.Int(-50000, 50000);
    for (auto& v : b) v = rng.Int(-50000, 50000);
    ref::Mmul(a.data(), b.data(), out.data(), n);
    uint32_t ia = k.Input("a", a), ib = k.Input("b", b);
    uint32_t ic = k.Output("c", std::vector<int32_t>(n * n), out, Check::kExact);
    args = {Arg::Pointer(ia), Arg::Pointer(ib), Arg::Pointer(ic), Arg::S32(n)};
  }
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

// The Counters struct of atomics.cu (104 bytes).
struct Counters {
  int32_t add;
  uint32_t sub;
  int32_t min, max;
  uint32_t inc, dec, and_bits, or_bits, xor_bits;
  int32_t exch_seen, cas_winners, cas_slot;
  uint64_t add64;
  int64_t min64;
  uint64_t max64, cas64;
  float addf;
  double addd;
  int32_t red_add;
  uint32_t red_or;
};
static_assert(sizeof(Counters) == 104);

std::string Field(const char* name, int64_t got, int64_t want) {
  return std::string(name) + ": got " + std::to_string(got) + ", want " + std::to_string(want);
}

void AtomicsGlobalCase(Case* c, Size size, Rng& rng) {
  const int n = size == Size::kTest ? 2000 : 1 << 18;
  const uint32_t wrap = 37;
  std::vector<int32_t> values(n);
  for (auto& v : values) v = rng.Int(-100000, 100000);
  Counters init{};
  init.sub = 1000000;
  init.min = INT32_MAX;
  init.max = INT32_MIN;
  init.and_bits = 0xffffffffu;
  init.min64 = INT64_MAX;
  Counters want = init;
  want.add = n;
  want.sub = init.sub - 2u * static_cast<uint32_t>(n);
  want.inc = ref::AtomicIncRepeat(0, wrap, n);
  want.dec = ref::AtomicDecRepeat(0, wrap, n);
  want.exch_seen = n;
  want.cas_winners = 1;
  want.cas64 = static_cast<uint64_t>(n);
  want.addf = static_cast<float>(n);
  want.addd = 0.5 * n;
  want.red_add = 3 * n;
  for (int i = 0; i < n; ++i) {
    const int32_t v = values[i];
    want.red_or |= 1u << (v & 31);
    want.min = std::min(want.min, v);
    want.max = std::max(want.max, v);
    want.and_bits &= ~(1u << (i % 32));
    want.or_bits |= 1u << (i % 32);
    want.xor_bits ^= static_cast<uint32_t>(v);
    want.add64 += static_cast<uint64_t>(v & 0xff) << 32;
    want.min64 = std::min(want.min64, static_cast<int64_t>(v) * int64_t{1000000007});
    want.max64 = std::max(want.max64, static_cast<uint64_t>(static_cast<uint32_t>(v)) << 20);
  }
  Builder k(c, "atomics.ptx");
  uint32_t iv = k.Input("values", values);
  uint32_t ic = k.Custom("counters", ToBytes(std::vector<Counters>{init}),
                         [want, n](const std::vector<uint8_t>& bytes) -> std::string {
                           Counters got;
                           std::memcpy(&got, bytes.data(), sizeof got);
#define GPUVM_FIELD(f) \
  if (got.f != want.f) return Field(#f, static_cast<int64_t>(got.f), static_cast<int64_t>(want.f));
                           GPUVM_FIELD(add)
                           GPUVM_FIELD(sub)
                           GPUVM_FIELD(min)
                           GPUVM_FIELD(max) GPUVM_FIELD(inc) GPUVM_FIELD(dec) GPUVM_FIELD(and_bits)
                               GPUVM_FIELD(or_bits) GPUVM_FIELD(xor_bits) GPUVM_FIELD(exch_seen)
                                   GPUVM_FIELD(cas_winners) GPUVM_FIELD(add64) GPUVM_FIELD(min64)
                                       GPUVM_FIELD(max64) GPUVM_FIELD(cas64) GPUVM_FIELD(addf)
                                           GPUVM_FIELD(addd) GPUVM_FIELD(red_add)
                                               GPUVM_FIELD(red_or)
#undef GPUVM_FIELD
                                                   if (got.cas_slot < 1 || got.cas_slot > n) {
                             return Field("cas_slot (1..n)", got.cas_slot, 1);
                           }
                           return "";
                         });
  uint32_t ie = k.Custom("exch_slot", std::vector<int32_t>{-1},
                         [n](const std::vector<uint8_t>& bytes) -> std::string {
                           int32_t v;
                           std::memcpy(&v, bytes.data(), 4);
                           if (v < 0 || v >= n) return Field("exch_slot (0..n-1)", v, 0);
                           return "";
                         });
  k.Launch1D("atomics_global", n, 128,
             {Arg::Pointer(iv), Arg::Pointer(ic), Arg::Pointer(ie), Arg::S32(n), Arg::U32(wrap)});
}

void AtomicsSharedCase(Case* c, Size size, Rng& rng) {
  const int n = size == Size::kTest ? 1000 : 1 << 18;
  const int block = 128;
  const uint32_t wrap = 11;
  const int blocks = CeilDiv(n, block);
  const int per_block = 12;
  std::vector<int32_t> values(n);
  for (auto& v : values) v = rng.Int(-5000, 5000);
  std::vector<int32_t> want(blocks * per_block, 0);
  for (int b = 0; b < blocks; ++b) {
    int32_t* w = want.data() + b * per_block;
    w[2] = INT32_MAX;
    w[3] = INT32_MIN;
    w[6] = -1;
    int count = 0;
    for (int t = 0; t < block && b * block + t < n; ++t, ++count) {
      const int32_t v = values[b * block + t];
      w[0] += v & 0xff;
      w[1] -= 1;
      w[2] = std::min(w[2], v);
      w[3] = std::max(w[3], v);
      w[6] &= ~(1 << (t % 32));
      w[7] |= static_cast<int32_t>(1u << (v & 31));
      w[8] ^= v;
    }
    w[4] = static_cast<int32_t>(ref::AtomicIncRepeat(0, wrap, count));
    w[5] = static_cast<int32_t>(ref::AtomicDecRepeat(0, wrap, count));
    w[9] = count;   // exch slot: some tid + 1 in [1, count]
    w[10] = count;  // CAS owner: likewise
    w[11] = 1;      // CAS winners
  }
  Builder k(c, "atomics.ptx");
  uint32_t iv = k.Input("values", values);
  uint32_t io = k.Custom("out", std::vector<int32_t>(blocks * per_block, 0),
                         [want, blocks](const std::vector<uint8_t>& bytes) -> std::string {
                           const auto got = FromBytes<int32_t>(bytes);
                           for (int b = 0; b < blocks; ++b) {
                             for (int s = 0; s < 12; ++s) {
                               const int32_t g = got[b * 12 + s], w = want[b * 12 + s];
                               const bool ok = (s == 9 || s == 10) ? (g >= 1 && g <= w) : g == w;
                               if (!ok) {
                                 return "block " + std::to_string(b) + " " +
                                        Field(("slot " + std::to_string(s)).c_str(), g, w);
                               }
                             }
                           }
                           return "";
                         });
  k.Launch1D("atomics_shared", n, block,
             {Arg::Pointer(iv), Arg::Pointer(io), Arg::S32(n), Arg::U32(wrap)});
}

void AtomicsRedCase(Case* c, Size size, Rng& rng) {
  const int n = size == Size::kTest ? 1000 : 1 << 18;
  const int block = 128;
  const uint32_t wrap = 23;
  const int blocks = CeilDiv(n, block);
  std::vector<int32_t> values(n);
  for (auto& v : values) v = rng.Int(-5000, 5000);
  std::vector<uint32_t> init(12 + blocks * 8, 0);
  init[1] = 0xffffffffu;
  init[5] = 0xffffffffu;
  std::vector<uint32_t> want = init;
  uint64_t add64 = 0;
  for (int i = 0; i < n; ++i) {
    const uint32_t v = static_cast<uint32_t>(values[i]);
    want[0] += v & 0xff;
    want[1] = std::min(want[1], v);
    want[2] = std::max(want[2], v);
    want[5] &= ~(1u << (i % 32));
    want[6] |= 1u << (v & 31);
    want[7] ^= v;
    add64 += static_cast<uint64_t>(v) << 8;
  }
  want[3] = ref::AtomicIncRepeat(0, wrap, n);
  want[4] = ref::AtomicDecRepeat(0, wrap, n);
  want[8] = static_cast<uint32_t>(add64);
  want[9] = static_cast<uint32_t>(add64 >> 32);
  want[10] = std::bit_cast<uint32_t>(0.25f * static_cast<float>(n));
  for (int b = 0; b < blocks; ++b) {
    uint32_t* w = want.data() + 12 + b * 8;
    w[1] = 0xffffffffu;
    w[5] = 0xffffffffu;
    int count = 0;
    for (int t = 0; t < block && b * block + t < n; ++t, ++count) {
      const uint32_t v = static_cast<uint32_t>(values[b * block + t]);
      w[0] += v & 0xff;
      w[1] = std::min(w[1], v);
      w[2] = std::max(w[2], v);
      w[5] &= ~(1u << (t % 32));
      w[6] |= 1u << (v & 31);
      w[7] ^= v;
    }
    w[3] = ref::AtomicIncRepeat(0, wrap, count);
    w[4] = ref::AtomicDecRepeat(0, wrap, count);
  }
  Builder k(c, "atomics.ptx");
  uint32_t iv = k.Input("values", values);
  uint32_t io = k.Output("red_out", init, want, Check::kExact);
  k.Launch1D("atomics_red", n, block,
             {Arg::Pointer(iv), Arg::Pointer(io), Arg::S32(n), Arg::U32(wrap)});
}

void Addr64Case(Case* c, Size size, Rng& rng, bool split) {
  const int n = size == Size::kTest ? 1000 : 1 << 20;
  Builder k(c, "addr64.ptx");
  if (split) {
    std::vector<int32_t> p(n), want(n);
    for (int i = 0; i < n; ++i) {
      p[i] = rng.Int(-100000, 100000);
      want[i] = static_cast<int32_t>(static_cast<uint32_t>(p[i]) * 2u + static_cast<uint32_t>(i));
    }
    uint32_t ip = k.Output("p", p, want, Check::kExact);
    k.Launch1D("addr64_split", n, 128,
               {Arg::PointerLow32(ip), Arg::PointerHigh32(ip), Arg::S32(n)});
    return;
  }
  const int table = 4096;
  const uint64_t bias = 0x140000000ull;  // 5 GiB: the biased pointer is far outside the buffer
  std::vector<int32_t> base(table), out(n);
  std::vector<int64_t> idx(n);
  for (auto& v : base) v = static_cast<int32_t>(rng.U32());
  for (int i = 0; i < n; ++i) {
    idx[i] = rng.Int(0, table - 1);
    out[i] = base[idx[i]];
  }
  uint32_t ii = k.Input("idx", idx);
  uint32_t ib = k.Input("base", base);
  uint32_t io = k.Output("out", std::vector<int32_t>(n), out, Check::kExact);
  k.Launch1D("addr64_gather", n, 128,
             {Arg::Pointer(ii), Arg::Pointer(ib, -static_cast<int64_t>(bias)), Arg::U64(bias),
              Arg::Pointer(io), Arg::S32(n)});
}

void CallsCase(Case* c, Size size, Rng& rng, bool recursive) {
  Builder k(c, "calls.ptx");
  if (recursive) {
    const int n = size == Size::kTest ? 64 : 4096;
    std::vector<uint32_t> want(n);
    for (int i = 0; i < n; ++i) want[i] = ref::Fib(static_cast<uint32_t>(i % 12));
    uint32_t io = k.Output("out", std::vector<uint32_t>(n), want, Check::kExact);
    k.Launch1D("calls_recursive", n, 64, {Arg::Pointer(io), Arg::S32(n)});
    return;
  }
  const int n = size == Size::kTest ? 500 : 1 << 18;
  std::vector<int32_t> in(n), oi(5 * n);
  std::vector<float> of(n);
  std::vector<double> od(n);
  for (auto& v : in) v = rng.Int(-1000, 1000);
  ref::NestedCalls(in.data(), oi.data(), of.data(), od.data(), n);
  uint32_t ii = k.Input("in", in);
  uint32_t i_i = k.Output("out_i", std::vector<int32_t>(5 * n), oi, Check::kExact);
  uint32_t i_f = k.Output("out_f", std::vector<float>(n), of, Check::kF32, {kExactTol});
  uint32_t i_d = k.Output("out_d", std::vector<double>(n), od, Check::kF64, {kExactTol});
  k.Launch1D(
      "calls", n, 128,
      {Arg::Pointer(ii), Arg::Pointer(i_i), Arg::Pointer(i_f), Arg::Pointer(i_d), Arg::S32(n)});
}

void F64Case(Case* c, Size size, Rng& rng) {
  const int n = size == Size::kTest ? 256 : 1 << 18;
  std::vector<double> a(n), b(n), cc(n), out(12 * n);
  for (int i = 0; i < n; ++i) {
    a[i] = rng.Double(-20, 20);
    b[i] = rng.Double(0.5, 4) * ((rng.U32() & 1) ? 1 : -1);
    cc[i] = rng.Double(-1, 1);
  }
  ref::F64Math(a.data(), b.data(), cc.data(), out.data(), n);
  // Columns 0-9 are single IEEE operations: exact. exp and sin are nvcc's own polynomial code (CUDA
  // documents 1 and 2 ulp): relative 1e-14, and 1e-15 absolute near sin's zeros.
  std::vector<Tolerance> tol(12, kExactTol);
  tol[10] = {0, 1e-14};
  tol[11] = {1e-15, 1e-14};
  Builder k(c, "f64.ptx");
  uint32_t ia = k.Input("a", a), ib = k.Input("b", b), ic = k.Input("c", cc);
  uint32_t io = k.Output("out", std::vector<double>(12 * n), out, Check::kF64, tol);
  k.Launch1D("f64_math", n, 128,
             {Arg::Pointer(ia), Arg::Pointer(ib), Arg::Pointer(ic), Arg::Pointer(io), Arg::S32(n)});
}

void WarpCase(Case* c, Size size, Rng& rng, int which) {
  const int threads = size == Size::kTest ? 512 : 1 << 20;
  std::vector<int32_t> in(threads);
  for (auto& v : in) v = rng.Int(-1200, 1200);
  for (int i = 0; i < threads; i += 97) in[i] = 7;
  Builder k(c, "warp.ptx");
  uint32_t ii = k.Input("in", in);
  if (which == 0) {
    std::vector<int32_t> out(threads / 32);
    ref::WarpReduce(in.data(), out.data(), threads);
    uint32_t io = k.Output("out", std::vector<int32_t>(threads / 32), out, Check::kExact);
    k.Launch1D("warp_reduce", threads, 128, {Arg::Pointer(ii), Arg::Pointer(io)});
  } else if (which == 1) {
    std::vector<int32_t> out(4 * threads);
    ref::WarpShuffle(in.data(), out.data(), threads);
    uint32_t io = k.Output("out", std::vector<int32_t>(4 * threads), out, Check::kExact);
    k.Launch1D("warp_shuffle", threads, 128, {Arg::Pointer(ii), Arg::Pointer(io)});
  } else {
    // Every fourth warp all-positive, so `all` is true somewhere.
    for (int w = 0; w < threads / 32; w += 4) {
      for (int l = 0; l < 32; ++l) in[w * 32 + l] = std::abs(in[w * 32 + l]) % 900;
    }
    c->buffers[ii].initial = ToBytes(in);
    std::vector<uint32_t> out(4 * threads);
    ref::WarpVote(in.data(), out.data(), threads);
    uint32_t io = k.Output("out", std::vector<uint32_t>(4 * threads), out, Check::kExact);
    k.Launch1D("warp_vote", threads, 128, {Arg::Pointer(ii), Arg::Pointer(io)});
  }
}

void SregCase(Case* c, Size size) {
  const std::array<uint32_t, 3> grid =
      size == Size::kTest ? std::array<uint32_t, 3>{2, 3, 2} : std::array<uint32_t, 3>{16, 16, 4};
  const std::array<uint32_t, 3> block{8, 4, 2};
  const uint32_t per_block = block[0] * block[1] * block[2];
  const uint32_t total = grid[0] * grid[1] * grid[2] * per_block;
  constexpr uint32_t kWords = 20;
  Builder k(c, "sreg.ptx");
  uint32_t io = k.Custom(
      "out", std::vector<uint32_t>(kWords * total, 0xdeadbeefu),
      [grid, block, per_block](const std::vector<uint8_t>& bytes) -> std::string {
        const auto got = FromBytes<uint32_t>(bytes);
        for (uint32_t bz = 0; bz < grid[2]; ++bz)
          for (uint32_t by = 0; by < grid[1]; ++by)
            for (uint32_t bx = 0; bx < grid[0]; ++bx)
              for (uint32_t tz = 0; tz < block[2]; ++tz)
                for (uint32_t ty = 0; ty < block[1]; ++ty)
                  for (uint32_t tx = 0; tx < block[0]; ++tx) {
                    const uint32_t b = bx + grid[0] * (by + grid[1] * bz);
                    const uint32_t t = tx + block[0] * (ty + block[1] * tz);
                    const uint32_t linear = b * per_block + t;
                    const uint32_t want[13] = {tx, ty, tz,      block[0], block[1], block[2], bx,
                                               by, bz, grid[0], grid[1],  grid[2],  t % 32};
                    const uint32_t* o = got.data() + kWords * linear;
                    for (int f = 0; f < 13; ++f) {
                      if (o[f] != want[f]) {
                        return "thread " + std::to_string(linear) + " " +
                               Field(("word " + std::to_string(f)).c_str(), o[f], want[f]);
                      }
                    }
                    const std::string who = "thread " + std::to_string(linear) + " ";
                    if (o[13] >= 32 * 1024) return who + Field("%warpid (< 32768)", o[13], 0);
                    if (o[14] != 1) return who + Field("clock64 went backwards", o[14], 1);
                    if (o[15] != 1) return who + Field("clock went backwards", o[15], 1);
                    if (o[16] != per_block / 2) {
                      return who + Field("__syncthreads_count", o[16], per_block / 2);
                    }
                    if (o[17] != 1) return who + Field("__syncthreads_or", o[17], 1);
                    if (o[18] != 1) return who + Field("__syncthreads_and", o[18], 1);
                    if (o[19] != 1) return who + Field("after membar/nanosleep", o[19], 1);
                  }
        return "";
      });
  Launch l;
  l.kernel = "sreg";
  l.grid = grid;
  l.block = block;
  l.args = {Arg::Pointer(io)};
  k.Add(std::move(l));
}

void MathF32Case(Case* c, Size size, Rng& rng) {
  const int n = size == Size::kTest ? 512 : 1 << 20;
  const int32_t divisor = 7;
  std::vector<float> xs(n), out(8 * n);
  std::vector<int32_t> ks(n), rem(n);
  for (auto& v : xs) v = rng.Float(-3.14159f, 3.14159f);
  for (auto& v : ks) v = static_cast<int32_t>(rng.U32());
  ref::MathF32(xs.data(), ks.data(), out.data(), rem.data(), divisor, n);
  // The .approx instructions: PTX documents sin/cos to 2^-20.9 absolute on [-pi, pi], lg2 to 2^-22
  // absolute, ex2 and rsqrt to about 2 ulp, div.approx to 2 ulp. Columns 5 and 7 are exact.
  const std::vector<Tolerance> tol = {{2e-6, 0}, {2e-6, 0}, {1e-6, 1e-6}, {0, 1e-6},
                                      {0, 2e-6}, kExactTol, {0, 1e-6},    kExactTol};
  Builder k(c, "math_f32.ptx");
  uint32_t ix = k.Input("xs", xs), ik = k.Input("ks", ks);
  uint32_t io = k.Output("out", std::vector<float>(8 * n), out, Check::kF32, tol);
  uint32_t ir = k.Output("rem", std::vector<int32_t>(n), rem, Check::kExact);
  k.Launch1D("math_f32", n, 128,
             {Arg::Pointer(ix), Arg::Pointer(ik), Arg::Pointer(io), Arg::Pointer(ir),
              Arg::S32(divisor), Arg::S32(n)});
}

void LocalArrayCase(Case* c, Size size, Rng& rng) {
  const int n = size == Size::kTest ? 256 : 1 << 16;
  std::vector<int32_t> in(n), out(n);
  for (auto& v : in) v = rng.Int(-100000, 100000);
  ref::LocalArray(in.data(), out.data(), n);
  Builder k(c, "local_array.ptx");
  uint32_t ii = k.Input("in", in);
  uint32_t io = k.Output("out", std::vector<int32_t>(n), out, Check::kExact);
  k.Launch1D("local_array", n, 128, {Arg::Pointer(ii), Arg::Pointer(io), Arg::S32(n)});
}

void CvtCase(Case* c, Size size, Rng& rng) {
  const int n = size == Size::kTest ? 256 : 1 << 18;
  std::vector<float> xs(n);
  std::vector<int32_t> ks(n);
  std::vector<double> ds(n);
  for (int i = 0; i < n; ++i) {
    // Halves and quarters (ties for the nearest-even roundings), and values with long mantissas.
    xs[i] = (i % 3 == 0) ? rng.Grid(-1000, 1000, 2) : rng.Float(-1000, 1000);
    ks[i] = (i % 4 == 0) ? rng.Int(-300, 300) : static_cast<int32_t>(rng.U32());
    ds[i] = rng.Double(-1000, 1000);
  }
  xs[0] = 0.5f;
  xs[1] = -2.5f;
  xs[2] = 0.0f;
  ks[1] = INT32_MIN;
  ks[2] = INT32_MAX;
  std::vector<uint32_t> out(32 * n);
  ref::CvtKernel(xs.data(), ks.data(), ds.data(), out.data(), n);
  Builder k(c, "cvt.ptx");
  uint32_t ix = k.Input("xs", xs), ik = k.Input("ks", ks), id = k.Input("ds", ds);
  uint32_t io = k.Output("out", std::vector<uint32_t>(32 * n), out, Check::kExact);
  k.Launch1D("cvt_kernel", n, 128,
             {Arg::Pointer(ix), Arg::Pointer(ik), Arg::Pointer(id), Arg::Pointer(io), Arg::S32(n)});
}

void BitopsCase(Case* c, Size size, Rng& rng) {
  const int n = size == Size::kTest ? 256 : 1 << 18;
  std::vector<uint32_t> as(n), bs(n);
  for (auto& v : as) v = rng.U32();
  for (auto& v : bs) v = rng.U32();
  const uint32_t specials[] = {0,           1,           0xffffffffu, 0x80000000u,
                               0x7fffffffu, 0x7f800000u, 0x7fc00000u};
  for (size_t i = 0; i < std::size(specials); ++i) {
    as[i] = specials[i];
    bs[std::size(specials) - 1 - i] = specials[i];
  }
  std::vector<uint32_t> out(30 * n);
  ref::Bitops(as.data(), bs.data(), out.data(), n);
  Builder k(c, "bitops.ptx");
  uint32_t ia = k.Input("a", as), ib = k.Input("b", bs);
  uint32_t io = k.Output("out", std::vector<uint32_t>(30 * n), out, Check::kExact);
  k.Launch1D("bitops", n, 128, {Arg::Pointer(ia), Arg::Pointer(ib), Arg::Pointer(io), Arg::S32(n)});
}

using Maker = void (*)(Case*, Size, Rng&);

const std::vector<std::pair<std::string, Maker>>& Makers() {
  static const auto* makers = new std::vector<std::pair<std::string, Maker>>{
      {"vector_add", [](Case* c, Size s, Rng& r) { VectorAddCase(c, s, r); }},
      {"madd", [](Case* c, Size s, Rng& r) { MaddCase(c, s, r, false); }},
      {"fmadd", [](Case* c, Size s, Rng& r) { MaddCase(c, s, r, true); }},
      {"mmul", [](Case* c, Size s, Rng& r) { MmulCase(c, s, r, false, false); }},
      {"mmul_tiled", [](Case* c, Size s, Rng& r) { MmulCase(c, s, r, false, true); }},
      {"fmmul", [](Case* c, Size s, Rng& r) { MmulCase(c, s, r, true, false); }},
      {"fmmul_tiled", [](Case* c, Size s, Rng& r) { MmulCase(c, s, r, true, true); }},
      {"reduce_sum", [](Case* c, Size s, Rng& r) { ReduceCase(c, s, r, false); }},
      {"reduce_sum_f32", [](Case* c, Size s, Rng& r) { ReduceCase(c, s, r, true); }},
      {"histogram_shared", [](Case* c, Size s, Rng& r) { HistogramCase(c, s, r, true); }},
      {"histogram_global", [](Case* c, Size s, Rng& r) { HistogramCase(c, s, r, false); }},
      {"loop", [](Case* c, Size s, Rng&) { LoopCase(c, s); }},
      {"backprop", [](Case* c, Size s, Rng& r) { BackpropCase(c, s, r); }},
      {"hotspot", [](Case* c, Size s, Rng& r) { HotspotCase(c, s, r); }},
      {"lud", [](Case* c, Size s, Rng& r) { LudCase(c, s, r); }},
      {"nn_distance", [](Case* c, Size s, Rng& r) { NnCase(c, s, r, false); }},
      {"nn_argmin", [](Case* c, Size s, Rng& r) { NnCase(c, s, r, true); }},
      {"srad", [](Case* c, Size s, Rng& r) { SradCase(c, s, r); }},
      {"nested_divergence", [](Case* c, Size s, Rng& r) { DivergenceCase(c, s, r, 0); }},
      {"early_exit", [](Case* c, Size s, Rng& r) { DivergenceCase(c, s, r, 1); }},
      {"barrier_loop", [](Case* c, Size s, Rng& r) { DivergenceCase(c, s, r, 2); }},
      {"atomics_global", [](Case* c, Size s, Rng& r) { AtomicsGlobalCase(c, s, r); }},
      {"atomics_shared", [](Case* c, Size s, Rng& r) { AtomicsSharedCase(c, s, r); }},
      {"atomics_red", [](Case* c, Size s, Rng& r) { AtomicsRedCase(c, s, r); }},
      {"addr64_gather", [](Case* c, Size s, Rng& r) { Addr64Case(c, s, r, false); }},
      {"addr64_split", [](Case* c, Size s, Rng& r) { Addr64Case(c, s, r, true); }},
      {"calls", [](Case* c, Size s, Rng& r) { CallsCase(c, s, r, false); }},
      {"calls_recursive", [](Case* c, Size s, Rng& r) { CallsCase(c, s, r, true); }},
      {"f64_math", [](Case* c, Size s, Rng& r) { F64Case(c, s, r); }},
      {"warp_reduce", [](Case* c, Size s, Rng& r) { WarpCase(c, s, r, 0); }},
      {"warp_shuffle", [](Case* c, Size s, Rng& r) { WarpCase(c, s, r, 1); }},
      {"warp_vote", [](Case* c, Size s, Rng& r) { WarpCase(c, s, r, 2); }},
      {"sreg", [](Case* c, Size s, Rng&) { SregCase(c, s); }},
      {"local_array", [](Case* c, Size s, Rng& r) { LocalArrayCase(c, s, r); }},
      {"math_f32", [](Case* c, Size s, Rng& r) { MathF32Case(c, s, r); }},
      {"cvt", [](Case* c, Size s, Rng& r) { CvtCase(c, s, r); }},
      {"bitops", [](Case* c, Size s, Rng& r) { BitopsCase(c, s, r); }},
  };
  return *makers;
}

}  // namespace

const std::vector<std::string>& CaseNames() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>();
    for (const auto& [name, maker] : Makers()) v->push_back(name);
    return v;
  }();
  return *names;
}

Result<Case> MakeCase(std::string_view name, Size size, uint64_t seed) {
  for (const auto& [case_name, maker] : Makers()) {
    if (case_name != name) continue;
    Case c;
    c.name = case_name;
    Rng rng(seed);
    maker(&c, size, rng);
    if (c.ptx.empty())
      return Status::Internal("case " + c.name + ": " + c.ptx_file + " is not embedded");
    return c;
  }
  return Status::NotFound("no kernel corpus case named '" + std::string(name) + "'");
}

const std::vector<std::string>& PtxFiles() {
  static const auto* files = [] {
    auto* v = new std::vector<std::string>();
    for (size_t i = 0; i < internal::kEmbeddedPtxCount; ++i)
      v->push_back(internal::kEmbeddedPtx[i].name);
    return v;
  }();
  return *files;
}

std::string_view PtxSource(std::string_view file) {
  for (size_t i = 0; i < internal::kEmbeddedPtxCount; ++i) {
    if (file == internal::kEmbeddedPtx[i].name) return internal::kEmbeddedPtx[i].text;
  }
  return {};
}

}  // namespace gpuvm::kernels
