// The kernel corpus's cases that each exercise one PTX feature: atomics (global, shared, red),
// 64-bit addressing, calls, f64, warp shuffles and votes, special registers, f32 math, local
// arrays, conversions and bit operations: inputs, CPU-reference outputs and launches
// (kernel_corpus.h).
//
// Threading: each maker fills one Case on the calling thread.
#include <algorithm>
#include <array>
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "bench/kernels/case_builder.h"
#include "bench/kernels/reference.h"

namespace gpuvm::kernels::corpus_internal {

namespace {

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

}  // namespace

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
                           GPUVM_FIELD(max)
                           GPUVM_FIELD(inc)
                           GPUVM_FIELD(dec) GPUVM_FIELD(and_bits) GPUVM_FIELD(or_bits)
                               GPUVM_FIELD(xor_bits) GPUVM_FIELD(exch_seen) GPUVM_FIELD(cas_winners)
                                   GPUVM_FIELD(add64) GPUVM_FIELD(min64) GPUVM_FIELD(max64)
                                       GPUVM_FIELD(cas64) GPUVM_FIELD(addf) GPUVM_FIELD(addd)
                                           GPUVM_FIELD(red_add) GPUVM_FIELD(red_or)
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
  // What the word-sized atomics (add, min, max, and, or, xor) do to the words w[0..7] for value v
  // of thread i; w[3] and w[4] (inc, dec) are counted separately.
  auto apply = [](uint32_t* w, uint32_t v, int i) {
    w[0] += v & 0xff;
    w[1] = std::min(w[1], v);
    w[2] = std::max(w[2], v);
    w[5] &= ~(1u << (i % 32));
    w[6] |= 1u << (v & 31);
    w[7] ^= v;
  };
  uint64_t add64 = 0;
  for (int i = 0; i < n; ++i) {
    const uint32_t v = static_cast<uint32_t>(values[i]);
    apply(want.data(), v, i);
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
      apply(w, static_cast<uint32_t>(values[b * block + t]), t);
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

}  // namespace gpuvm::kernels::corpus_internal
