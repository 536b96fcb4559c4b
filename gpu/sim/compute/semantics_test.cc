// Every arithmetic/logic handler against an independent host reference, on interesting values
// (zero, extremes, NaN, infinities, denormals, shift amounts past the width), on both interpreter
// variants.
#include <gtest/gtest.h>

#include <bit>
#include <cfenv>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "gpu/isa/assembler.h"
#include "gpu/sim/compute/simt_engine.h"
#include "gpu/sim/compute/test_support.h"

namespace gpuvm::sim::compute {
namespace {

// Operand widths: 32, 64, or 1 for a predicate result.
struct OpCase {
  std::string name;
  std::string inst;  // d = r20 (or p1), a = r10, b = r12, c = r14
  int aw, bw, cw, dw;
  std::function<uint64_t(uint64_t, uint64_t, uint64_t)> ref;
  bool floats = false;  // values drawn from the float sets; results compared NaN-tolerantly
  int fw = 32;          // float width of the result when floats (for NaN comparison)
};

uint64_t F(float f) { return std::bit_cast<uint32_t>(f); }
uint64_t D(double d) { return std::bit_cast<uint64_t>(d); }
float AsF(uint64_t v) { return std::bit_cast<float>(static_cast<uint32_t>(v)); }
double AsD(uint64_t v) { return std::bit_cast<double>(v); }
int32_t S32(uint64_t v) { return static_cast<int32_t>(v); }
uint32_t U32(uint64_t v) { return static_cast<uint32_t>(v); }
int64_t S64(uint64_t v) { return static_cast<int64_t>(v); }
uint64_t W(int32_t v) { return static_cast<uint32_t>(v); }  // s32 result as stored bits
uint64_t W(uint32_t v) { return v; }
uint64_t W64(int64_t v) { return static_cast<uint64_t>(v); }

const std::vector<uint64_t> kInt32 = {
    0,   1,          2,          3,          7,          31,         32,         33,
    255, 0x7fffffff, 0x80000000, 0xffffffff, 0xfffffffe, 0x12345678, 0xdeadbeef, 0xffffff9c};
const std::vector<uint64_t> kInt64 = {0,
                                      1,
                                      63,
                                      64,
                                      65,
                                      0x7fffffffffffffffull,
                                      0x8000000000000000ull,
                                      0xffffffffffffffffull,
                                      0x123456789abcdef0ull,
                                      0xffffffff00000000ull,
                                      0x00000000ffffffffull,
                                      0xfffffffffffffff6ull,
                                      7,
                                      0x100000000ull,
                                      3,
                                      0xdeadbeefcafef00dull};
const std::vector<uint64_t> kFloat32 = {F(0.0f),           F(-0.0f), F(1.0f),    F(-1.5f),
                                        F(3.25f),          F(1e30f), F(-1e-30f), F(INFINITY),
                                        F(-INFINITY),      F(NAN),   F(1e-40f),  F(2147483648.0f),
                                        F(-2147483904.0f), F(0.5f),  F(2.5f),    F(16777217.0f)};
const std::vector<uint64_t> kFloat64 = {
    D(0.0),       D(-0.0), D(1.0),    D(-1.5),   D(3.25),    D(1e300), D(-1e-300), D(INFINITY),
    D(-INFINITY), D(NAN),  D(5e-324), D(9.3e18), D(-9.3e18), D(0.5),   D(2.5),     D(4294967296.5)};

class Semantics : public ::testing::TestWithParam<InterpreterVariant> {
 protected:
  void Check(const OpCase& c) {
    SCOPED_TRACE(c.name + ": " + c.inst);
    const std::vector<uint64_t>& av =
        c.floats ? (c.aw == 64 ? kFloat64 : kFloat32) : (c.aw == 64 ? kInt64 : kInt32);
    const std::vector<uint64_t>& bv =
        c.floats ? (c.bw == 64 ? kFloat64 : kFloat32) : (c.bw == 64 ? kInt64 : kInt32);
    const std::vector<uint64_t>& cv =
        c.floats ? (c.cw == 64 ? kFloat64 : kFloat32) : (c.cw == 64 ? kInt64 : kInt32);
    const size_t n = av.size();
    const size_t threads = c.cw ? n * n * n : n * n;
    std::vector<uint64_t> a(threads), b(threads), cc(threads);
    for (size_t t = 0; t < threads; ++t) {
      a[t] = av[t % n];
      b[t] = bv[(t / n) % n];
      cc[t] = cv[(t / n / n) % n];
    }
    auto width = [](int w) { return w == 64 ? "u64" : "u32"; };
    std::string text = R"(
      s2r.u32 r0, %tid.x
      s2r.u32 r1, %ctaid.x
      s2r.u32 r2, %ntid.x
      mad.u32 r0, r1, r2, r0
      mulwide.u32 r30, r0, 8
      ld.const.c0.u64 r2, [rz+0]
      ld.const.c0.u64 r4, [rz+8]
      ld.const.c0.u64 r6, [rz+16]
      ld.const.c0.u64 r8, [rz+24]
      add.u64 r2, r2, r30
      add.u64 r4, r4, r30
      add.u64 r6, r6, r30
      add.u64 r8, r8, r30
    )";
    if (c.aw) text += std::string("ld.global.a64.") + width(c.aw) + " r10, [r2]\n";
    if (c.bw) text += std::string("ld.global.a64.") + width(c.bw) + " r12, [r4]\n";
    if (c.cw) text += std::string("ld.global.a64.") + width(c.cw) + " r14, [r6]\n";
    text += "mov.u64 r20, 0\n" + c.inst + "\n";
    if (c.dw == 1) {
      text += "mov.u32 r21, 1\nsel.u32 r20, r21, 0, p1\nst.global.a64.u32 [r8], r20\n";
    } else {
      text += std::string("st.global.a64.") + width(c.dw) + " [r8], r20\n";
    }
    text += "exit\n";
    Result<std::vector<uint8_t>> image = isa::Assemble(text);
    ASSERT_TRUE(image.ok()) << image.status().ToString() << "\n" << text;

    FakeChannelMemory mem;
    const uint64_t in_a = kTestDataAddress, in_b = in_a + 0x100000, in_c = in_b + 0x100000,
                   out = in_c + 0x100000;
    mem.Map(in_a, 0x400000);
    mem.WriteArray(in_a, a);
    mem.WriteArray(in_b, b);
    mem.WriteArray(in_c, cc);
    ParamBuffer params;
    params.Add(in_a).Add(in_b).Add(in_c).Add(out);
    auto engine = SimtEngine::Create({.workers = 1, .interpreter = GetParam()});
    const uint32_t block = 64;
    TestLaunchResult r =
        RunTestKernel(*engine, mem, *image, params,
                      {static_cast<uint32_t>((threads + block - 1) / block), 1, 1}, {block, 1, 1});
    ASSERT_EQ(r.outcome, SliceOutcome::kDone) << r.fault.message;
    std::vector<uint64_t> got = mem.ReadArray<uint64_t>(out, threads);
    int failures = 0;
    for (size_t t = 0; t < threads && failures < 5; ++t) {
      uint64_t expected = c.ref(a[t], b[t], cc[t]);
      uint64_t value = got[t];
      if (c.dw == 32) {
        value &= 0xffffffffu;
        expected &= 0xffffffffu;
      }
      if (c.floats && c.dw != 1) {
        bool got_nan = c.fw == 64 ? std::isnan(AsD(value)) : std::isnan(AsF(value));
        bool want_nan = c.fw == 64 ? std::isnan(AsD(expected)) : std::isnan(AsF(expected));
        if (got_nan && want_nan) continue;
      }
      if (value != expected) {
        ++failures;
        ADD_FAILURE() << "a=" << std::hex << a[t] << " b=" << b[t] << " c=" << cc[t] << " got "
                      << value << " want " << expected;
      }
    }
  }
};

TEST_P(Semantics, IntegerArithmetic) {
  Check({"add", "add.u32 r20, r10, r12", 32, 32, 0, 32,
         [](auto a, auto b, auto) { return W(U32(a) + U32(b)); }});
  Check({"add64", "add.s64 r20, r10, r12", 64, 64, 0, 64,
         [](auto a, auto b, auto) { return a + b; }});
  Check({"sub", "sub.s32 r20, r10, r12", 32, 32, 0, 32,
         [](auto a, auto b, auto) { return W(U32(a) - U32(b)); }});
  Check({"addsat", "add.sat.s32 r20, r10, r12", 32, 32, 0, 32, [](auto a, auto b, auto) {
           int64_t s = int64_t{S32(a)} + S32(b);
           return W(static_cast<int32_t>(std::clamp<int64_t>(s, INT32_MIN, INT32_MAX)));
         }});
  Check({"subsat", "sub.sat.s32 r20, r10, r12", 32, 32, 0, 32, [](auto a, auto b, auto) {
           int64_t s = int64_t{S32(a)} - S32(b);
           return W(static_cast<int32_t>(std::clamp<int64_t>(s, INT32_MIN, INT32_MAX)));
         }});
  Check({"mul", "mul.u32 r20, r10, r12", 32, 32, 0, 32,
         [](auto a, auto b, auto) { return W(U32(a) * U32(b)); }});
  Check({"mul64", "mul.u64 r20, r10, r12", 64, 64, 0, 64,
         [](auto a, auto b, auto) { return a * b; }});
  Check({"mulhi.u32", "mulhi.u32 r20, r10, r12", 32, 32, 0, 32,
         [](auto a, auto b, auto) { return (uint64_t{U32(a)} * U32(b)) >> 32; }});
  Check({"mulhi.s32", "mulhi.s32 r20, r10, r12", 32, 32, 0, 32, [](auto a, auto b, auto) {
           return W(static_cast<int32_t>((int64_t{S32(a)} * S32(b)) >> 32));
         }});
  Check({"mulhi.u64", "mulhi.u64 r20, r10, r12", 64, 64, 0, 64, [](auto a, auto b, auto) {
           return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
         }});
  Check({"mulhi.s64", "mulhi.s64 r20, r10, r12", 64, 64, 0, 64, [](auto a, auto b, auto) {
           return static_cast<uint64_t>((static_cast<__int128>(S64(a)) * S64(b)) >> 64);
         }});
  Check({"mulwide.u32", "mulwide.u32 r20, r10, r12", 32, 32, 0, 64,
         [](auto a, auto b, auto) { return uint64_t{U32(a)} * U32(b); }});
  Check({"mulwide.s32", "mulwide.s32 r20, r10, r12", 32, 32, 0, 64,
         [](auto a, auto b, auto) { return W64(int64_t{S32(a)} * S32(b)); }});
  Check({"mad", "mad.u32 r20, r10, r12, r14", 32, 32, 32, 32,
         [](auto a, auto b, auto c) { return W(U32(a) * U32(b) + U32(c)); }});
  Check({"mad64", "mad.u64 r20, r10, r12, r14", 64, 64, 64, 64,
         [](auto a, auto b, auto c) { return a * b + c; }});
  Check({"madwide.s32", "madwide.s32 r20, r10, r12, r14", 32, 32, 64, 64,
         [](auto a, auto b, auto c) { return W64(int64_t{S32(a)} * S32(b)) + c; }});
  Check({"madwide.u32 imm", "madwide.u32 r20, r10, 4, r14", 32, 0, 64, 64,
         [](auto a, auto, auto c) { return uint64_t{U32(a)} * 4 + c; }});
  Check({"div.u32", "div.u32 r20, r10, r12", 32, 32, 0, 32,
         [](auto a, auto b, auto) { return U32(b) ? W(U32(a) / U32(b)) : 0xffffffffull; }});
  Check({"div.s32", "div.s32 r20, r10, r12", 32, 32, 0, 32, [](auto a, auto b, auto) {
           if (S32(b) == 0) return W(-1);
           if (S32(b) == -1) return W(0u - U32(a));
           return W(S32(a) / S32(b));
         }});
  Check({"rem.s32", "rem.s32 r20, r10, r12", 32, 32, 0, 32, [](auto a, auto b, auto) {
           if (S32(b) == 0) return W(S32(a));
           if (S32(b) == -1) return W(0);
           return W(S32(a) % S32(b));
         }});
  Check({"rem.u64", "rem.u64 r20, r10, r12", 64, 64, 0, 64,
         [](auto a, auto b, auto) { return b ? a % b : a; }});
  Check({"div.s64", "div.s64 r20, r10, r12", 64, 64, 0, 64, [](auto a, auto b, auto) {
           if (S64(b) == 0) return ~uint64_t{0};
           if (S64(b) == -1) return uint64_t{0} - a;
           return W64(S64(a) / S64(b));
         }});
  Check({"min.s32", "min.s32 r20, r10, r12", 32, 32, 0, 32,
         [](auto a, auto b, auto) { return W(std::min(S32(a), S32(b))); }});
  Check({"max.u32", "max.u32 r20, r10, r12", 32, 32, 0, 32,
         [](auto a, auto b, auto) { return W(std::max(U32(a), U32(b))); }});
  Check({"min.s64", "min.s64 r20, r10, r12", 64, 64, 0, 64,
         [](auto a, auto b, auto) { return W64(std::min(S64(a), S64(b))); }});
  Check({"abs", "abs.s32 r20, r10", 32, 0, 0, 32,
         [](auto a, auto, auto) { return S32(a) < 0 ? W(0u - U32(a)) : W(S32(a)); }});
  Check({"neg64", "neg.s64 r20, r10", 64, 0, 0, 64,
         [](auto a, auto, auto) { return uint64_t{0} - a; }});
  Check({"hi32", "hi32.u32 r20, r10", 64, 0, 0, 32, [](auto a, auto, auto) { return a >> 32; }});
  Check({"pack", "pack.u64 r20, r10, r12", 32, 32, 0, 64,
         [](auto a, auto b, auto) { return uint64_t{U32(a)} | uint64_t{U32(b)} << 32; }});
}

TEST_P(Semantics, BitOperations) {
  Check(
      {"and", "and.u32 r20, r10, r12", 32, 32, 0, 32, [](auto a, auto b, auto) { return a & b; }});
  Check(
      {"or64", "or.u64 r20, r10, r12", 64, 64, 0, 64, [](auto a, auto b, auto) { return a | b; }});
  Check({"xor imm", "xor.u32 r20, r10, 0xf0f0f0f0", 32, 0, 0, 32,
         [](auto a, auto, auto) { return a ^ 0xf0f0f0f0u; }});
  Check({"not", "not.u32 r20, r10", 32, 0, 0, 32, [](auto a, auto, auto) { return W(~U32(a)); }});
  Check({"shl", "shl.u32 r20, r10, r12", 32, 32, 0, 32,
         [](auto a, auto b, auto) { return U32(b) >= 32 ? 0 : W(U32(a) << U32(b)); }});
  Check({"shr.u32", "shr.u32 r20, r10, r12", 32, 32, 0, 32,
         [](auto a, auto b, auto) { return U32(b) >= 32 ? 0 : W(U32(a) >> U32(b)); }});
  Check({"shr.s32", "shr.s32 r20, r10, r12", 32, 32, 0, 32,
         [](auto a, auto b, auto) { return W(S32(a) >> std::min(U32(b), 31u)); }});
  Check({"shl64", "shl.u64 r20, r10, r12", 64, 32, 0, 64,
         [](auto a, auto b, auto) { return U32(b) >= 64 ? 0 : a << U32(b); }});
  Check({"shr.s64", "shr.s64 r20, r10, r12", 64, 32, 0, 64,
         [](auto a, auto b, auto) { return W64(S64(a) >> std::min(U32(b), 63u)); }});
  Check({"popc", "popc.u32 r20, r10", 32, 0, 0, 32,
         [](auto a, auto, auto) { return static_cast<uint64_t>(std::popcount(U32(a))); }});
  Check({"popc64", "popc.u64 r20, r10", 64, 0, 0, 32,
         [](auto a, auto, auto) { return static_cast<uint64_t>(std::popcount(a)); }});
  Check({"clz", "clz.u32 r20, r10", 32, 0, 0, 32,
         [](auto a, auto, auto) { return static_cast<uint64_t>(std::countl_zero(U32(a))); }});
  Check({"clz64", "clz.u64 r20, r10", 64, 0, 0, 32,
         [](auto a, auto, auto) { return static_cast<uint64_t>(std::countl_zero(a)); }});
  Check({"brev", "brev.u32 r20, r10", 32, 0, 0, 32, [](auto a, auto, auto) {
           uint32_t v = U32(a), r = 0;
           for (int i = 0; i < 32; ++i) r |= ((v >> i) & 1) << (31 - i);
           return W(r);
         }});
  // bfe/bfi: reference straight from the PTX ISA pseudo-code, bit by bit.
  auto bfe_ref = [](uint64_t a, uint64_t pos_raw, uint64_t len_raw, int bits, bool is_signed) {
    uint32_t pos = U32(pos_raw) & 0xff, len = U32(len_raw) & 0xff;
    int msb = bits - 1;
    uint64_t sbit = 0;
    if (is_signed && len != 0) sbit = (a >> std::min<uint32_t>(pos + len - 1, msb)) & 1;
    uint64_t d = 0;
    for (int i = 0; i <= msb; ++i) {
      uint64_t bit = (static_cast<uint32_t>(i) < len && pos + i <= static_cast<uint32_t>(msb))
                         ? (a >> (pos + i)) & 1
                         : sbit;
      d |= bit << i;
    }
    return bits == 32 ? (d & 0xffffffffull) : d;
  };
  Check({"bfe.u32", "bfe.u32 r20, r10, r12, r14", 32, 32, 32, 32,
         [&](auto a, auto b, auto c) { return bfe_ref(U32(a), b, c, 32, false); }});
  Check({"bfe.s32", "bfe.s32 r20, r10, r12, r14", 32, 32, 32, 32,
         [&](auto a, auto b, auto c) { return bfe_ref(U32(a), b, c, 32, true); }});
  Check({"bfe.s64", "bfe.s64 r20, r10, r12, r14", 64, 32, 32, 64,
         [&](auto a, auto b, auto c) { return bfe_ref(a, b, c, 64, true); }});
  Check({"bfi.u32", "mov.u32 r16, 8\nbfi.u32 r20, r10, r12, r14, r16", 32, 32, 32, 32,
         [](auto a, auto b, auto c) {
           uint32_t pos = U32(c) & 0xff, len = 8, d = U32(b);
           for (uint32_t i = 0; i < len && pos + i <= 31; ++i)
             d = (d & ~(1u << (pos + i))) | (((U32(a) >> i) & 1) << (pos + i));
           return W(d);
         }});
  Check({"prmt", "prmt r20, r10, r12, r14", 32, 32, 32, 32, [](auto a, auto b, auto c) {
           uint64_t src = uint64_t{U32(a)} | uint64_t{U32(b)} << 32;
           uint32_t d = 0;
           for (int i = 0; i < 4; ++i) {
             uint32_t nib = (U32(c) >> (4 * i)) & 0xf;
             uint32_t byte = (src >> (8 * (nib & 7))) & 0xff;
             if (nib & 8) byte = (byte & 0x80) ? 0xff : 0;
             d |= byte << (8 * i);
           }
           return W(d);
         }});
  Check({"prmt.b4e", "prmt.b4e r20, r10, r12, r14", 32, 32, 32, 32, [](auto a, auto b, auto c) {
           uint64_t src = uint64_t{U32(a)} | uint64_t{U32(b)} << 32;
           uint32_t s = U32(c) & 3, d = 0;
           for (uint32_t i = 0; i < 4; ++i) d |= ((src >> (8 * ((s - i) & 7))) & 0xff) << (8 * i);
           return W(d);
         }});
  Check({"shf.l.wrap", "shf.l.wrap r20, r10, r12, r14", 32, 32, 32, 32, [](auto a, auto b, auto c) {
           uint32_t n = U32(c) & 31;
           return W(n == 0 ? U32(b) : (U32(b) << n) | (U32(a) >> (32 - n)));
         }});
  Check(
      {"shf.r.clamp", "shf.r.clamp r20, r10, r12, r14", 32, 32, 32, 32, [](auto a, auto b, auto c) {
         uint32_t n = std::min(U32(c), 32u);
         return W(n == 0 ? U32(a) : n == 32 ? U32(b) : (U32(a) >> n) | (U32(b) << (32 - n)));
       }});
}

TEST_P(Semantics, Comparisons) {
  const char* cmps[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  for (int i = 0; i < 6; ++i) {
    auto cmp_s = [i](auto a, auto b, auto) -> uint64_t {
      int32_t x = S32(a), y = S32(b);
      bool r[] = {x == y, x != y, x<y, x <= y, x> y, x >= y};
      return r[i];
    };
    auto cmp_u64 = [i](auto x, auto y, auto) -> uint64_t {
      bool r[] = {x == y, x != y, x<y, x <= y, x> y, x >= y};
      return r[i];
    };
    Check({std::string("setp.s32.") + cmps[i], std::string("setp.") + cmps[i] + ".s32 p1, r10, r12",
           32, 32, 0, 1, cmp_s});
    Check({std::string("setp.u64.") + cmps[i], std::string("setp.") + cmps[i] + ".u64 p1, r10, r12",
           64, 64, 0, 1, cmp_u64});
  }
  const char* fcmps[] = {"eq",  "ne",  "lt",  "le",  "gt",  "ge",  "equ",
                         "neu", "ltu", "leu", "gtu", "geu", "num", "nan"};
  for (int i = 0; i < 14; ++i) {
    auto cmp_f = [i](auto av, auto bv, auto) -> uint64_t {
      float a = AsF(av), b = AsF(bv);
      bool un = std::isnan(a) || std::isnan(b);
      bool r[] = {!un && a == b, !un && a != b,
                  !un && a < b,  !un && a <= b,
                  !un && a > b,  !un && a >= b,
                  un || a == b,  un || a != b,
                  un || a < b,   un || a <= b,
                  un || a > b,   un || a >= b,
                  !un,           un};
      return r[i];
    };
    OpCase c{std::string("setp.f32.") + fcmps[i],
             std::string("setp.") + fcmps[i] + ".f32 p1, r10, r12",
             32,
             32,
             0,
             1,
             cmp_f};
    c.floats = true;
    Check(c);
  }
  Check({"plop", "setp.lt.u32 p1, r10, r12\nsetp.eq.u32 p2, r10, 0\nplop.or p1, !p1, p2", 32, 32, 0,
         1, [](auto a, auto b, auto) -> uint64_t { return !(U32(a) < U32(b)) || U32(a) == 0; }});
  Check({"sel", "setp.gt.s32 p1, r10, r12\nsel.u32 r20, r10, r12, !p1", 32, 32, 0, 32,
         [](auto a, auto b, auto) { return S32(a) > S32(b) ? b : a; }});
}

TEST_P(Semantics, FloatArithmetic) {
  auto fcase = [&](std::string name, std::string inst, int aw, int bw, int cw, int dw,
                   std::function<uint64_t(uint64_t, uint64_t, uint64_t)> ref) {
    OpCase c{name, inst, aw, bw, cw, dw, ref};
    c.floats = true;
    c.fw = dw;
    Check(c);
  };
  fcase("add.f32", "add.f32 r20, r10, r12", 32, 32, 0, 32,
        [](auto a, auto b, auto) { return F(AsF(a) + AsF(b)); });
  fcase("add.rz.f32", "add.rz.f32 r20, r10, r12", 32, 32, 0, 32, [](auto a, auto b, auto) {
    fesetround(FE_TOWARDZERO);
    volatile float x = AsF(a), y = AsF(b);
    float r = x + y;
    asm volatile("" : "+x"(r));  // keep the add inside the rounding mode
    fesetround(FE_TONEAREST);
    return F(r);
  });
  fcase("mul.f64", "mul.f64 r20, r10, r12", 64, 64, 0, 64,
        [](auto a, auto b, auto) { return D(AsD(a) * AsD(b)); });
  fcase("div.f32", "div.f32 r20, r10, r12", 32, 32, 0, 32,
        [](auto a, auto b, auto) { return F(AsF(a) / AsF(b)); });
  fcase("fma.f32", "fma.f32 r20, r10, r12, r14", 32, 32, 32, 32,
        [](auto a, auto b, auto c) { return F(std::fma(AsF(a), AsF(b), AsF(c))); });
  fcase("fma.f64", "fma.f64 r20, r10, r12, r14", 64, 64, 64, 64,
        [](auto a, auto b, auto c) { return D(std::fma(AsD(a), AsD(b), AsD(c))); });
  fcase("fma.rm.f32", "fma.rm.f32 r20, r10, r12, r14", 32, 32, 32, 32, [](auto a, auto b, auto c) {
    fesetround(FE_DOWNWARD);
    volatile float x = AsF(a), y = AsF(b), z = AsF(c);
    float r = std::fma(static_cast<float>(x), static_cast<float>(y), static_cast<float>(z));
    asm volatile("" : "+x"(r));
    fesetround(FE_TONEAREST);
    return F(r);
  });
  fcase("add.sat.f32", "add.sat.f32 r20, r10, r12", 32, 32, 0, 32, [](auto a, auto b, auto) {
    float r = AsF(a) + AsF(b);
    return F(std::isnan(r) ? 0.0f : std::clamp(r, 0.0f, 1.0f));
  });
  fcase("min.f32", "min.f32 r20, r10, r12", 32, 32, 0, 32, [](auto a, auto b, auto) {
    float x = AsF(a), y = AsF(b);
    if (std::isnan(x)) return F(y);
    if (std::isnan(y)) return F(x);
    return F(x < y ? x : y);
  });
  fcase("max.f64", "max.f64 r20, r10, r12", 64, 64, 0, 64, [](auto a, auto b, auto) {
    double x = AsD(a), y = AsD(b);
    if (std::isnan(x)) return D(y);
    if (std::isnan(y)) return D(x);
    return D(x > y ? x : y);
  });
  fcase("abs.f32", "abs.f32 r20, r10", 32, 0, 0, 32,
        [](auto a, auto, auto) { return F(std::fabs(AsF(a))); });
  fcase("neg.f64", "neg.f64 r20, r10", 64, 0, 0, 64, [](auto a, auto, auto) { return D(-AsD(a)); });
  fcase("sqrt.f32", "sqrt.f32 r20, r10", 32, 0, 0, 32,
        [](auto a, auto, auto) { return F(std::sqrt(AsF(a))); });
  fcase("sqrt.f64", "sqrt.f64 r20, r10", 64, 0, 0, 64,
        [](auto a, auto, auto) { return D(std::sqrt(AsD(a))); });
  fcase("rcp.f32", "rcp.f32 r20, r10", 32, 0, 0, 32,
        [](auto a, auto, auto) { return F(1.0f / AsF(a)); });
  fcase("copysign", "copysign.f32 r20, r10, r12", 32, 32, 0, 32,
        [](auto a, auto b, auto) { return F(std::copysign(AsF(b), AsF(a))); });
  fcase("imm", "mul.f32 r20, r10, 0.5", 32, 0, 0, 32,
        [](auto a, auto, auto) { return F(AsF(a) * 0.5f); });
  OpCase testp{
      "testp.finite", "testp.finite.f32 p1, r10", 32, 0, 0, 1, [](auto a, auto, auto) -> uint64_t {
        return std::isfinite(AsF(a));
      }};
  testp.floats = true;
  Check(testp);
  OpCase sub{
      "testp.subnormal",
      "testp.subnormal.f64 p1, r10",
      64,
      0,
      0,
      1,
      [](auto a, auto, auto) -> uint64_t { return std::fpclassify(AsD(a)) == FP_SUBNORMAL; }};
  sub.floats = true;
  Check(sub);
}

TEST_P(Semantics, Conversions) {
  auto clampf_to = [](double v, double lo, double hi) -> double {
    if (std::isnan(v)) return 0;
    return std::clamp(v, lo, hi);
  };
  auto fcase = [&](std::string inst, int aw, int dw,
                   std::function<uint64_t(uint64_t, uint64_t, uint64_t)> ref, int fw = 32) {
    OpCase c{inst, inst + " r20, r10", aw, 0, 0, dw, ref};
    c.floats = true;
    c.fw = fw;
    Check(c);
  };
  Check({"u64.u32", "cvt.u64.u32 r20, r10", 32, 0, 0, 64,
         [](auto a, auto, auto) { return uint64_t{U32(a)}; }});
  Check({"s64.s32", "cvt.s64.s32 r20, r10", 32, 0, 0, 64,
         [](auto a, auto, auto) { return W64(S32(a)); }});
  Check({"u32.u64", "cvt.u32.u64 r20, r10", 64, 0, 0, 32,
         [](auto a, auto, auto) { return a & 0xffffffffu; }});
  Check({"s32.s64.sat", "cvt.sat.s32.s64 r20, r10", 64, 0, 0, 32, [](auto a, auto, auto) {
           return W(static_cast<int32_t>(std::clamp<int64_t>(S64(a), INT32_MIN, INT32_MAX)));
         }});
  Check({"u16.u32", "cvt.u16.u32 r20, r10", 32, 0, 0, 32,
         [](auto a, auto, auto) { return a & 0xffff; }});
  Check({"s16.u32", "cvt.s16.u32 r20, r10", 32, 0, 0, 32,
         [](auto a, auto, auto) { return W(static_cast<int32_t>(static_cast<int16_t>(U32(a)))); }});
  Check({"u8.s32.sat", "cvt.sat.u8.s32 r20, r10", 32, 0, 0, 32, [](auto a, auto, auto) {
           return static_cast<uint64_t>(std::clamp<int32_t>(S32(a), 0, 255));
         }});
  Check({"s32.s8", "cvt.s32.s8 r20, r10", 32, 0, 0, 32,
         [](auto a, auto, auto) { return W(static_cast<int32_t>(static_cast<int8_t>(U32(a)))); }});
  Check({"f32.s32", "cvt.rn.f32.s32 r20, r10", 32, 0, 0, 32,
         [](auto a, auto, auto) { return F(static_cast<float>(S32(a))); }});
  Check({"f32.u32.rz", "cvt.rz.f32.u32 r20, r10", 32, 0, 0, 32, [](auto a, auto, auto) {
           // Truncate the exact value to 24 significant bits.
           uint32_t v = U32(a);
           int shift = v ? std::max(0, 32 - std::countl_zero(v) - 24) : 0;
           return F(static_cast<float>((v >> shift) << shift));
         }});
  Check({"f64.u64", "cvt.rn.f64.u64 r20, r10", 64, 0, 0, 64,
         [](auto a, auto, auto) { return D(static_cast<double>(a)); }});
  fcase("cvt.rzi.s32.f32", 32, 32, [&](auto a, auto, auto) {
    return W(static_cast<int32_t>(clampf_to(std::trunc(AsF(a)), INT32_MIN, INT32_MAX)));
  });
  fcase("cvt.rni.s32.f32", 32, 32, [&](auto a, auto, auto) {
    return W(static_cast<int32_t>(clampf_to(std::nearbyint(AsF(a)), INT32_MIN, INT32_MAX)));
  });
  fcase("cvt.rmi.u32.f32", 32, 32, [&](auto a, auto, auto) {
    return W(static_cast<uint32_t>(clampf_to(std::floor(AsF(a)), 0, 4294967295.0)));
  });
  fcase("cvt.rpi.s64.f64", 64, 64, [&](auto a, auto, auto) -> uint64_t {
    double v = std::ceil(AsD(a));
    if (std::isnan(v)) return 0;
    if (v >= 9223372036854775808.0) return W64(INT64_MAX);
    if (v <= -9223372036854775808.0) return W64(INT64_MIN);
    return W64(static_cast<int64_t>(v));
  });
  fcase("cvt.rzi.u64.f64", 64, 64, [&](auto a, auto, auto) -> uint64_t {
    double v = std::trunc(AsD(a));
    if (std::isnan(v) || v <= 0) return 0;
    if (v >= 18446744073709551616.0) return ~uint64_t{0};
    return static_cast<uint64_t>(v);
  });
  fcase(
      "cvt.f64.f32", 32, 64, [](auto a, auto, auto) { return D(static_cast<double>(AsF(a))); }, 64);
  fcase("cvt.rn.f32.f64", 64, 32, [](auto a, auto, auto) { return F(static_cast<float>(AsD(a))); });
  fcase("cvt.rz.f32.f64", 64, 32, [](auto a, auto, auto) {
    fesetround(FE_TOWARDZERO);
    volatile double v = AsD(a);
    float r = static_cast<float>(v);
    asm volatile("" : "+x"(r));
    fesetround(FE_TONEAREST);
    return F(r);
  });
  fcase("cvt.rni.f32.f32", 32, 32, [](auto a, auto, auto) { return F(std::nearbyint(AsF(a))); });
  fcase("cvt.sat.f32.f32", 32, 32, [](auto a, auto, auto) {
    float v = AsF(a);
    return F(std::isnan(v) ? 0.0f : std::clamp(v, 0.0f, 1.0f));
  });
}

INSTANTIATE_TEST_SUITE_P(Compute, Semantics,
                         ::testing::Values(InterpreterVariant::kGeneric, InterpreterVariant::kBest),
                         [](const auto& info) {
                           return info.param == InterpreterVariant::kGeneric ? "Generic" : "Best";
                         });

}  // namespace
}  // namespace gpuvm::sim::compute
