// The translator on small hand-written PTX kernels: the expansions the corpus does not exercise
// (set, slct, cnot, mul24/mad24, sad, bmsk, 16-bit arithmetic, 64-bit borrow chains, lop3 tables,
// bar.red.and/or, isspacep, guarded calls, divergent recursion), and the errors for what it refuses
// (naming the instruction, the line and the kernel).
#include "ptx/translator/translator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "bench/compute/corpus_runner.h"
#include "gpu/isa/device_printf.h"
#include "gpu/isa/disassembler.h"
#include "gpu/isa/encoding.h"
#include "gpu/sim/compute/simt_engine.h"
#include "gpu/sim/compute/test_support.h"

namespace gpuvm::ptx {
namespace {

constexpr const char* kHeader = R"(
.version 9.0
.target sm_75
.address_size 64
)";

// A kernel k(in, out) whose `body` computes %r3 from %r2 = in[tid] (and %r1 = tid); out[tid] = %r3.
std::string Kernel(const std::string& body, const std::string& before = "") {
  return std::string(kHeader) + before + R"(
.visible .entry k(.param .u64 k_in, .param .u64 k_out)
{
  .reg .pred %p<8>;
  .reg .b16 %rs<8>;
  .reg .b32 %r<40>;
  .reg .b64 %rd<24>;
  .reg .f32 %f<8>;
  ld.param.u64 %rd1, [k_in];
  ld.param.u64 %rd2, [k_out];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd1, %rd3;
  add.s64 %rd5, %rd2, %rd3;
  ld.global.u32 %r2, [%rd4];
)" + body +
         R"(
  st.global.u32 [%rd5], %r3;
  ret;
}
)";
}

// Runs Kernel(body) over `in` (one thread per element) and returns out.
std::vector<uint32_t> Run(const std::string& ptx, const std::vector<uint32_t>& in) {
  kernels::Case c;
  c.name = "snippet";
  c.ptx_file = "snippet.ptx";
  c.ptx = ptx;
  kernels::Buffer input;
  input.name = "in";
  input.initial.resize(in.size() * 4);
  memcpy(input.initial.data(), in.data(), input.initial.size());
  kernels::Buffer output;
  output.name = "out";
  output.initial.assign(in.size() * 4, 0);
  c.buffers = {input, output};
  kernels::Launch launch;
  launch.kernel = "k";
  launch.block = {static_cast<uint32_t>(in.size()), 1, 1};
  launch.args = {kernels::Arg::Pointer(0), kernels::Arg::Pointer(1)};
  c.launches = {launch};
  static auto engine = sim::compute::SimtEngine::Create({.workers = 1});
  std::vector<std::vector<uint8_t>> contents;
  compute_bench::RunOptions options;
  options.verify = false;
  options.contents = &contents;
  Result<compute_bench::CaseResult> r = compute_bench::RunCase(c, *engine, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  std::vector<uint32_t> out(in.size());
  memcpy(out.data(), contents[1].data(), out.size() * 4);
  return out;
}

std::vector<uint32_t> Inputs() {
  std::vector<uint32_t> v = {0,          1,          2,          7,          100,        0x7fffffff,
                             0x80000000, 0xffffffff, 0xfffffff9, 0x12345678, 0xdeadbeef, 65535,
                             65536,      0x00800000, 0x00ffffff, 0xff800001};
  while (v.size() < 64) v.push_back(static_cast<uint32_t>(v.size() * 2654435761u));
  return v;
}

void Expect(const std::string& body, std::function<uint32_t(uint32_t in, uint32_t tid)> ref,
            const std::string& before = "") {
  std::vector<uint32_t> in = Inputs();
  std::vector<uint32_t> out = Run(Kernel(body, before), in);
  ASSERT_EQ(out.size(), in.size()) << body;
  for (uint32_t t = 0; t < in.size(); ++t) {
    ASSERT_EQ(out[t], ref(in[t], t)) << body << "\nthread " << t << " in " << std::hex << in[t];
  }
}

TEST(JitTranslator, SetSlctCnot) {
  Expect("set.lt.u32.s32 %r3, %r2, 5;",
         [](uint32_t in, uint32_t) { return static_cast<int32_t>(in) < 5 ? 0xffffffffu : 0u; });
  Expect("set.gt.f32.u32 %f1, %r2, 100;\nmov.b32 %r3, %f1;",
         [](uint32_t in, uint32_t) { return in > 100 ? 0x3f800000u : 0u; });
  Expect("slct.u32.s32 %r3, 111, 222, %r2;",
         [](uint32_t in, uint32_t) { return static_cast<int32_t>(in) >= 0 ? 111u : 222u; });
  Expect("cnot.b32 %r3, %r2;", [](uint32_t in, uint32_t) { return in == 0 ? 1u : 0u; });
}

TEST(JitTranslator, Mul24Mad24Sad) {
  auto s24 = [](uint32_t v) { return static_cast<int64_t>(static_cast<int32_t>(v << 8) >> 8); };
  Expect("mul24.hi.s32 %r3, %r2, %r1;", [&](uint32_t in, uint32_t t) {
    return static_cast<uint32_t>(static_cast<uint64_t>(s24(in) * s24(t)) >> 16);
  });
  Expect("mad24.lo.u32 %r3, %r2, 1000, %r1;",
         [](uint32_t in, uint32_t t) { return (in & 0xffffff) * 1000 + t; });
  Expect("sad.s32 %r3, %r2, 7, %r1;", [](uint32_t in, uint32_t t) {
    int64_t d = static_cast<int64_t>(static_cast<int32_t>(in)) - 7;
    return static_cast<uint32_t>(d < 0 ? -d : d) + t;
  });
}

TEST(JitTranslator, SixteenBitArithmetic) {
  Expect(R"(
    cvt.u16.u32 %rs1, %r2;
    shr.s16 %rs2, %rs1, 3;
    min.s16 %rs3, %rs2, 100;
    mul.wide.s16 %r4, %rs3, %rs1;
    cvt.s32.s16 %r5, %rs3;
    add.s32 %r3, %r5, %r4;
  )",
         [](uint32_t in, uint32_t) {
           int16_t a = static_cast<int16_t>(in);
           int16_t b = static_cast<int16_t>(a >> 3);
           int16_t m = b < 100 ? b : 100;
           int32_t wide = static_cast<int32_t>(m) * static_cast<int32_t>(a);
           return static_cast<uint32_t>(static_cast<int32_t>(m) + wide);
         });
  Expect("cvt.u16.u32 %rs1, %r2;\nsetp.lt.u16 %p1, %rs1, 200;\nselp.u32 %r3, 1, 2, %p1;",
         [](uint32_t in, uint32_t) { return static_cast<uint16_t>(in) < 200 ? 1u : 2u; });
}

TEST(JitTranslator, BorrowChain64) {
  // (5:in) - (1:tid * 2^32 + 7) as 128-bit numbers; out = low word of the high half.
  Expect(R"(
    cvt.u64.u32 %rd6, %r2;
    mov.u64 %rd7, 5;
    cvt.u64.u32 %rd8, %r1;
    shl.b64 %rd8, %rd8, 32;
    add.s64 %rd8, %rd8, 7;
    mov.u64 %rd9, 1;
    sub.cc.u64 %rd10, %rd6, %rd8;
    subc.u64 %rd11, %rd7, %rd9;
    cvt.u32.u64 %r3, %rd11;
  )",
         [](uint32_t in, uint32_t t) {
           uint64_t lo_a = in, lo_b = (uint64_t{t} << 32) + 7;
           uint64_t borrow = lo_a < lo_b ? 1 : 0;
           return static_cast<uint32_t>(5 - 1 - borrow);
         });
  Expect(R"(
    add.cc.u32 %r4, %r2, %r2;
    addc.u32 %r3, %r1, 0;
  )",
         [](uint32_t in, uint32_t t) { return t + ((uint64_t{in} + in) >> 32 ? 1u : 0u); });
}

TEST(JitTranslator, Lop3Tables) {
  for (uint32_t lut : {0x96u, 0xe8u, 0x01u, 0xf0u, 0x3cu, 0x80u, 0xfeu}) {
    Expect(
        "xor.b32 %r4, %r2, 0x55aa33cc;\nmul.lo.u32 %r5, %r1, 0x9e3779b9;\nlop3.b32 %r3, %r2, %r4, "
        "%r5, " +
            std::to_string(lut) + ";",
        [lut](uint32_t a, uint32_t t) {
          uint32_t b = a ^ 0x55aa33cc, c = t * 0x9e3779b9u, d = 0;
          for (int i = 0; i < 32; ++i) {
            uint32_t k = (((a >> i) & 1) << 2) | (((b >> i) & 1) << 1) | ((c >> i) & 1);
            d |= ((lut >> k) & 1) << i;
          }
          return d;
        });
  }
}

TEST(JitTranslator, BarRedAndOr) {
  // Every input except a zero: .and is false, .or is true; popc counts the non-zero inputs.
  int nonzero = 0;
  for (uint32_t v : Inputs()) nonzero += v != 0;
  Expect(R"(
    setp.ne.u32 %p1, %r2, 0;
    bar.red.and.pred %p2, 0, %p1;
    bar.red.or.pred %p3, 0, %p1;
    bar.red.popc.u32 %r4, 0, %p1;
    selp.u32 %r5, 1, 0, %p2;
    selp.u32 %r6, 2, 0, %p3;
    add.s32 %r3, %r5, %r6;
    shl.b32 %r4, %r4, 8;
    add.s32 %r3, %r3, %r4;
  )",
         [&](uint32_t, uint32_t) { return 2u + (static_cast<uint32_t>(nonzero) << 8); });
}

// bmsk's semantics as the PTX ISA writes them out, for reference.
uint32_t BitMaskReference(uint32_t a, uint32_t b, bool clamp) {
  const uint32_t a1 = a & 31, b1 = b & 31, sum = a1 + b1;
  uint32_t mask0 = ~0u << a1;
  uint32_t mask1 = sum >= 32 ? 0 : ~0u << sum;
  bool overflow = sum >= 32;
  if (clamp && a >= 32) {
    overflow = true;
    mask0 = 0;
  }
  if (clamp && b >= 32) overflow = true;
  if (overflow) {
    mask1 = 0;
  } else if (b1 == 0) {
    mask1 = ~0u;
  }
  return mask0 & ~mask1;
}

TEST(JitTranslator, BitMask) {
  for (bool clamp : {true, false}) {
    const std::string mode = clamp ? "clamp" : "wrap";
    // Positions 0..63 (the thread), widths 0..63, then both taken from large values.
    Expect("and.b32 %r4, %r2, 63;\nbmsk." + mode + ".b32 %r3, %r1, %r4;",
           [&](uint32_t in, uint32_t t) { return BitMaskReference(t, in & 63, clamp); });
    Expect("bmsk." + mode + ".b32 %r3, %r2, %r1;",
           [&](uint32_t in, uint32_t t) { return BitMaskReference(in, t, clamp); });
    Expect("bmsk." + mode + ".b32 %r3, %r1, %r2;",
           [&](uint32_t in, uint32_t t) { return BitMaskReference(t, in, clamp); });
  }
  Expect("bmsk.wrap.b32 %r3, 1, 2;", [](uint32_t, uint32_t) { return 6u; });  // the ISA's example
  Status s = CompilePtx(Kernel("bmsk.b32 %r3, %r1, %r2;")).status();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(".clamp or .wrap"), std::string::npos) << s.ToString();
}

// CUB passes structs as kernel parameters and reads them through a register holding the
// parameter's .param address (`mov.b64 %rd, param; ld.param [%rd+8]`).
TEST(JitTranslator, KernelParameterThroughARegister) {
  Expect(R"(
    mov.b64 %rd10, k_in;
    ld.param.u64 %rd11, [%rd10+8];
    ld.param.u64 %rd12, [k_out];
    setp.eq.u64 %p1, %rd11, %rd12;
    ld.param.u32 %r5, [%rd10+12];
    ld.param.u32 %r6, [k_out+4];
    setp.eq.and.u32 %p1, %r5, %r6, %p1;
    add.u32 %r4, %r2, 1;
    selp.u32 %r3, %r4, 0, %p1;
  )",
         [](uint32_t in, uint32_t) { return in + 1; });
  // A function's parameters have no such address.
  Status s = CompilePtx(Kernel(R"(
    {
      .param .b64 p0;
      st.param.b64 [p0], %rd1;
      call f, (p0);
    }
    mov.u32 %r3, 0;
  )",
                               R"(
.func f(.param .b64 x)
{
  .reg .b64 %rd<3>;
  mov.b64 %rd1, x;
  ld.param.u64 %rd2, [%rd1];
  ret;
}
)"))
                 .status();
  EXPECT_FALSE(s.ok());
}

// Vector accesses to global memory: pairs of 32-bit elements go as one 64-bit access; the values,
// their order, sinks and immediates must come out as element-wise accesses would make them.
TEST(JitTranslator, VectorAccessesToGlobalMemory) {
  const std::string pair_base = R"(
    and.b32 %r6, %r1, -2;
    mul.wide.u32 %rd6, %r6, 4;
    add.s64 %rd7, %rd1, %rd6;
    and.b32 %r8, %r1, 1;
    setp.eq.u32 %p1, %r8, 0;
  )";
  Expect(pair_base + R"(
    ld.global.v2.u32 {%r4, %r5}, [%rd7];
    selp.b32 %r3, %r4, %r5, %p1;
  )",
         [](uint32_t, uint32_t t) { return Inputs()[t]; });
  Expect(pair_base + "ld.global.v2.u32 {_, %r5}, [%rd7];\nmov.u32 %r3, %r5;",
         [](uint32_t, uint32_t t) { return Inputs()[(t & ~1u) + 1]; });
  Expect(R"(
    and.b32 %r6, %r1, -4;
    mul.wide.u32 %rd6, %r6, 4;
    add.s64 %rd7, %rd1, %rd6;
    ld.global.v4.u32 {%r4, %r5, %r9, %r10}, [%rd7];
    and.b32 %r8, %r1, 3;
    setp.eq.u32 %p1, %r8, 0;
    setp.eq.u32 %p2, %r8, 1;
    setp.eq.u32 %p3, %r8, 2;
    selp.b32 %r3, %r9, %r10, %p3;
    selp.b32 %r3, %r5, %r3, %p2;
    selp.b32 %r3, %r4, %r3, %p1;
  )",
         [](uint32_t, uint32_t t) { return Inputs()[t]; });
  // Even threads store {in ^ 1, tid + 1000} over their pair; after a barrier each thread reads
  // its own element back. An immediate element too.
  Expect(R"(
    and.b32 %r6, %r1, 1;
    setp.eq.u32 %p1, %r6, 0;
    xor.b32 %r4, %r2, 1;
    add.u32 %r5, %r1, 1000;
    @%p1 st.global.v2.u32 [%rd4], {%r4, %r5};
    bar.sync 0;
    ld.global.u32 %r3, [%rd4];
  )",
         [](uint32_t in, uint32_t t) { return t % 2 == 0 ? in ^ 1 : t - 1 + 1000; });
  Expect(R"(
    and.b32 %r6, %r1, 3;
    setp.eq.u32 %p1, %r6, 0;
    @%p1 st.global.v4.u32 [%rd4], {%r1, 7, %r2, 9};
    bar.sync 0;
    ld.global.u32 %r3, [%rd4];
  )",
         [](uint32_t, uint32_t t) {
           const uint32_t first = t & ~3u, values[4] = {first, 7, Inputs()[first], 9};
           return values[t & 3];
         });
}

// One block writes {i, i} pairs with st.v2 while another polls them with ld.v2 (CUB's decoupled
// look-back does this with a tile's status and value): the reader must never see half a write.
// `type` u32 (one 64-bit access) or u64 (a 16-byte pair access).
uint32_t TornVectorReads(const std::string& type) {
  const std::string reg = type == "u64" ? "%rd" : "%r";
  const std::string ptx = std::string(kHeader) + R"(
.visible .entry k(.param .u64 k_word, .param .u64 k_out)
{
  .reg .pred %p<4>;
  .reg .b32 %r<12>;
  .reg .b64 %rd<12>;
  ld.param.u64 %rd1, [k_word];
  ld.param.u64 %rd2, [k_out];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, 0;
  mov.u32 %r3, 0;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra READER;
WRITE:
  add.u32 %r2, %r2, 1;
  cvt.u64.u32 %rd8, %r2;
  st.relaxed.gpu.global.v2.)" +
                          type + " [%rd1], {" + reg + "8, " + reg + R"(8};
  setp.lt.u32 %p2, %r2, 200000;
  @%p2 bra WRITE;
  ret;
READER:
  ld.relaxed.gpu.global.v2.)" +
                          type + " {" + reg + "4, " + reg + R"(5}, [%rd1];
  setp.ne.)" + type + " %p3, " +
                          reg + "4, " + reg + R"(5;
  selp.u32 %r6, 1, 0, %p3;
  add.u32 %r3, %r3, %r6;
  add.u32 %r2, %r2, 1;
  setp.lt.u32 %p2, %r2, 200000;
  @%p2 bra READER;
  st.global.u32 [%rd2], %r3;
  ret;
}
)";
  kernels::Case c;
  c.name = "pairs";
  c.ptx_file = "pairs.ptx";
  c.ptx = ptx;
  kernels::Buffer word;
  word.name = "word";
  word.initial.assign(16, 0);
  kernels::Buffer out;
  out.name = "out";
  out.initial.assign(4, 0xff);
  c.buffers = {word, out};
  kernels::Launch launch;
  launch.kernel = "k";
  launch.grid = {2, 1, 1};
  launch.block = {1, 1, 1};
  launch.args = {kernels::Arg::Pointer(0), kernels::Arg::Pointer(1)};
  c.launches = {launch};
  auto engine = sim::compute::SimtEngine::Create({.workers = 2});
  std::vector<std::vector<uint8_t>> contents;
  compute_bench::RunOptions options;
  options.verify = false;
  options.contents = &contents;
  Result<compute_bench::CaseResult> r = compute_bench::RunCase(c, *engine, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return ~0u;
  uint32_t torn = 0;
  memcpy(&torn, contents[1].data(), 4);
  return torn;
}

TEST(JitTranslator, VectorPairsAreSingleCopyAtomicAcrossBlocks) {
  EXPECT_EQ(TornVectorReads("u32"), 0u) << "reads that saw half of a .v2.u32 store";
  EXPECT_EQ(TornVectorReads("u64"), 0u) << "reads that saw half of a .v2.u64 store";
}

// .v2 of 64-bit elements: one 16-byte access; values, order, sinks and immediates as element-wise.
TEST(JitTranslator, SixteenByteVectorAccesses) {
  // Thread t reads the 16 bytes at in + 16 * (t / 4) as two u64 and returns its 32-bit word.
  Expect(R"(
    shr.u32 %r6, %r1, 2;
    mul.wide.u32 %rd6, %r6, 16;
    add.s64 %rd7, %rd1, %rd6;
    ld.global.v2.u64 {%rd8, %rd9}, [%rd7];
    and.b32 %r8, %r1, 3;
    setp.lt.u32 %p1, %r8, 2;
    selp.b64 %rd10, %rd8, %rd9, %p1;
    and.b32 %r9, %r1, 1;
    shl.b32 %r9, %r9, 5;
    shr.u64 %rd10, %rd10, %r9;
    cvt.u32.u64 %r3, %rd10;
  )",
         [](uint32_t, uint32_t t) { return Inputs()[t]; });
  Expect(R"(
    shr.u32 %r6, %r1, 2;
    mul.wide.u32 %rd6, %r6, 16;
    add.s64 %rd7, %rd1, %rd6;
    ld.global.v2.u64 {_, %rd9}, [%rd7];
    cvt.u32.u64 %r3, %rd9;
  )",
         [](uint32_t, uint32_t t) { return Inputs()[(t & ~3u) + 2]; });
  // Every fourth thread stores {tid | in << 32, 5} over its 16 bytes; after a barrier each thread
  // reads its own word back.
  Expect(R"(
    and.b32 %r6, %r1, 3;
    setp.eq.u32 %p1, %r6, 0;
    cvt.u64.u32 %rd8, %r1;
    cvt.u64.u32 %rd9, %r2;
    shl.b64 %rd9, %rd9, 32;
    or.b64 %rd8, %rd8, %rd9;
    @%p1 st.global.v2.u64 [%rd4], {%rd8, 5};
    bar.sync 0;
    ld.global.u32 %r3, [%rd4];
  )",
         [](uint32_t, uint32_t t) {
           const uint32_t first = t & ~3u, values[4] = {first, Inputs()[first], 5, 0};
           return values[t & 3];
         });
}

TEST(JitTranslator, SharedGenericAddressesAndIsspacep) {
  Expect(R"(
    mov.u64 %rd6, sm;
    cvta.shared.u64 %rd7, %rd6;
    isspacep.shared %p1, %rd7;
    isspacep.global %p2, %rd7;
    isspacep.global %p3, %rd5;
    add.s64 %rd8, %rd7, %rd3;
    st.u32 [%rd8], %r2;
    bar.sync 0;
    xor.b32 %r4, %r1, 1;
    shl.b32 %r4, %r4, 2;
    mov.u32 %r5, sm;
    add.s32 %r5, %r5, %r4;
    ld.shared.u32 %r6, [%r5];
    selp.u32 %r7, 1, 0, %p1;
    selp.u32 %r8, 2, 0, %p2;
    selp.u32 %r9, 4, 0, %p3;
    add.s32 %r3, %r7, %r8;
    add.s32 %r3, %r3, %r9;
    xor.b32 %r3, %r3, %r6;
  )",
         [](uint32_t, uint32_t t) {
           std::vector<uint32_t> in = Inputs();
           return (1u + 4u) ^ in[t ^ 1];
         },
         ".shared .align 4 .b8 sm[256];\n");
}

// A 32-bit shared address wraps at 2^32, as nvcc -O3 relies on: it forms `base - k` in a 32-bit
// register (below zero when the window starts at 0) and adds k back in the instruction's offset.
// Local, constant and atomic accesses compute their addresses the same way (LaneAddress).
TEST(JitTranslator, ThirtyTwoBitAddressesWrapAtFourGiB) {
  Expect(R"(
    mov.u32 %r5, sm;
    shl.b32 %r4, %r1, 2;
    add.s32 %r6, %r5, %r4;
    st.shared.u32 [%r6], %r2;
    bar.sync 0;
    xor.b32 %r7, %r1, 1;
    shl.b32 %r7, %r7, 2;
    add.s32 %r8, %r5, %r7;
    sub.s32 %r8, %r8, 1088;
    ld.shared.u32 %r9, [%r8+1088];
    add.s32 %r10, %r8, 2112;
    ld.shared.u32 %r11, [%r10+-1024];
    xor.b32 %r3, %r9, %r11;
    add.s32 %r3, %r3, %r9;
  )",
         [](uint32_t, uint32_t t) {
           std::vector<uint32_t> in = Inputs();
           return (in[t ^ 1] ^ in[t ^ 1]) + in[t ^ 1];
         },
         ".shared .align 4 .b8 sm[256];\n");
}

// WARP_SZ and the special registers without an ISA register of their own (lower_operands.cc):
// the clock halves agree with the 64-bit clocks (read just before: a low half may have moved on by
// less than 2^28 ns, a high half by at most 1), %aggr_smem_size is %total_smem_size, and the rest
// read 0.
TEST(JitTranslator, WarpSizeAndDerivedSpecialRegisters) {
  // Adds `penalty` to %r3 unless `half` (read after `wide`) is within `slack` above its half of it.
  const auto half_check = [](const std::string& wide, const std::string& half, bool high,
                             uint32_t slack, uint32_t penalty) {
    return "mov.u64 %rd6, " + wide + ";\nmov.u32 %r6, " + half + ";\n" +
           (high ? "shr.u64 %rd6, %rd6, 32;\n" : "") +
           "cvt.u32.u64 %r7, %rd6;\nsub.s32 %r6, %r6, %r7;\nsetp.gt.u32 %p1, %r6, " +
           std::to_string(slack) + ";\nselp.u32 %r4, " + std::to_string(penalty) +
           ", 0, %p1;\nadd.s32 %r3, %r3, %r4;\n";
  };
  Expect(R"(
    mov.u32 %r3, WARP_SZ;
    add.s32 %r3, %r3, %r2;
    add.s32 %r3, %r3, WARP_SZ;
    mov.u32 %r4, %envreg3;
    add.s32 %r3, %r3, %r4;
    mov.u32 %r4, %pm0;
    add.s32 %r3, %r3, %r4;
    mov.u64 %rd6, %pm7_64;
    cvt.u32.u64 %r4, %rd6;
    add.s32 %r3, %r3, %r4;
    mov.u64 %rd6, %current_graph_exec;
    cvt.u32.u64 %r4, %rd6;
    add.s32 %r3, %r3, %r4;
    mov.u32 %r4, %reserved_smem_offset_end;
    add.s32 %r3, %r3, %r4;
    mov.u32 %r4, %aggr_smem_size;
    mov.u32 %r5, %total_smem_size;
    sub.s32 %r4, %r4, %r5;
    add.s32 %r3, %r3, %r4;
  )" + half_check("%globaltimer", "%globaltimer_hi", true, 1, 1000) +
             half_check("%globaltimer", "%globaltimer_lo", false, 1u << 28, 2000) +
             half_check("%clock64", "%clock_hi", true, 1, 4000),
         [](uint32_t in, uint32_t) { return in + 64; });
}

// The sequence nvcc emits for `ret = callee(arg)` with one .b32 parameter and a .b32 result;
// `guard` (say "@%p1 ") predicates the call and the read of the result.
std::string Call32(const std::string& callee, const std::string& arg, const std::string& ret,
                   const std::string& guard = "") {
  return "{\n.param .b32 param0;\nst.param.b32 [param0], " + arg + ";\n.param .b32 retval0;\n" +
         guard + "call.uni (retval0), " + callee + ", (param0);\n" + guard + "ld.param.b32 " + ret +
         ", [retval0];\n}\n";
}

TEST(JitTranslator, GuardedCallAndDivergentRecursion) {
  const std::string funcs = R"(
.func (.param .b32 f_ret) f(.param .b32 f_p)
{
  .reg .b32 %r<3>;
  ld.param.b32 %r1, [f_p];
  add.s32 %r2, %r1, 1000;
  st.param.b32 [f_ret], %r2;
  ret;
}
.func (.param .b32 rsum_ret) rsum(.param .b32 rsum_n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  ld.param.b32 %r1, [rsum_n];
  setp.eq.s32 %p1, %r1, 0;
  mov.u32 %r5, 0;
  @%p1 bra DONE;
  add.s32 %r2, %r1, -1;
)" + Call32("rsum", "%r2", "%r3") +
                            R"(
  add.s32 %r5, %r3, %r1;
DONE:
  st.param.b32 [rsum_ret], %r5;
  ret;
}
)";
  Expect(R"(
    mov.u32 %r3, 7;
    setp.lt.u32 %p1, %r1, 16;
  )" + Call32("f", "%r2", "%r3", "@%p1 "),
         [](uint32_t in, uint32_t t) { return t < 16 ? in + 1000 : 7u; }, funcs);
  // Each lane recurses to its own depth (tid % 23): returns diverge and the saved registers must be
  // the lane's own.
  Expect(R"(
    rem.u32 %r10, %r1, 23;
    mul.lo.u32 %r11, %r2, 3;
  )" + Call32("rsum", "%r10", "%r12") +
             R"(
    add.s32 %r3, %r12, %r11;
  )",
         [](uint32_t in, uint32_t t) {
           uint32_t n = t % 23;
           return n * (n + 1) / 2 + in * 3;
         },
         funcs);
}

// ---- what the translator refuses
// -----------------------------------------------------------------

Status Translate(const std::string& ptx) { return CompilePtx(ptx).status(); }

TEST(JitTranslator, UnsupportedInstructionsNameLineAndKernel) {
  Status s = Translate(Kernel("bar.arrive 0, 64;\nmov.u32 %r3, 0;"));
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("kernel 'k'"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("bar.arrive"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("line 22"), std::string::npos) << s.ToString();

  s = Translate(Kernel("mov.b32 %f1, %r2;\nmin.NaN.f32 %f2, %f1, %f1;\nmov.b32 %r3, %f2;"));
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.ToString();
  EXPECT_NE(s.message().find("min"), std::string::npos) << s.ToString();

  s = Translate(Kernel("bar.sync 0, 64;\nmov.u32 %r3, 0;"));
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.ToString();
  EXPECT_NE(s.message().find("thread count"), std::string::npos) << s.ToString();
}

// nvcc's device-side assert: a call to the extern `__assertfail` (never defined in the module)
// becomes `trap.assert`, so a failed assert stops the job with its own reason.
TEST(JitTranslator, AssertFailBecomesAssertTrap) {
  const std::string before = R"(
.extern .func __assertfail
(
  .param .b64 __assertfail_param_0,
  .param .b64 __assertfail_param_1,
  .param .b32 __assertfail_param_2,
  .param .b64 __assertfail_param_3,
  .param .b64 __assertfail_param_4
)
;
.global .align 1 .b8 $str[4] = {116, 105, 100, 0};
)";
  const std::string body = R"(
  setp.ne.s32 %p1, %r1, 5;
  @%p1 bra $L__ok;
  mov.u64 %rd10, $str;
  cvta.global.u64 %rd11, %rd10;
  mov.u32 %r10, 7;
  mov.u64 %rd12, 1;
  { // callseq 0, 0
  .param .b64 param0;
  st.param.b64 [param0], %rd11;
  .param .b64 param1;
  st.param.b64 [param1], %rd11;
  .param .b32 param2;
  st.param.b32 [param2], %r10;
  .param .b64 param3;
  st.param.b64 [param3], %rd11;
  .param .b64 param4;
  st.param.b64 [param4], %rd12;
  call.uni __assertfail, (param0, param1, param2, param3, param4);
  } // callseq 0
$L__ok:
  mov.u32 %r3, %r2;
)";
  const std::string ptx = Kernel(body, before);
  Result<isa::Module> m = CompilePtx(ptx);
  ASSERT_TRUE(m.ok()) << m.status().ToString();

  kernels::Case c;
  c.name = "assert";
  c.ptx_file = "assert.ptx";
  c.ptx = ptx;
  kernels::Buffer input, output;
  input.name = "in";
  input.initial.assign(64 * 4, 0);
  output.name = "out";
  output.initial.assign(64 * 4, 0);
  c.buffers = {input, output};
  kernels::Launch launch;
  launch.kernel = "k";
  launch.block = {64, 1, 1};
  launch.args = {kernels::Arg::Pointer(0), kernels::Arg::Pointer(1)};
  c.launches = {launch};
  auto engine = sim::compute::SimtEngine::Create({.workers = 1});
  compute_bench::RunOptions options;
  options.verify = false;
  Result<compute_bench::CaseResult> r = compute_bench::RunCase(c, *engine, options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("device-side assert"), std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("thread (5,0,0)"), std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("trap.assert"), std::string::npos) << r.status().ToString();

  // Any other call to a function without a body is still refused at load.
  std::string other = before;
  other.replace(other.find(".extern .func __assertfail"), 26, ".extern .func not_assert");
  std::string other_body = body;
  other_body.replace(other_body.find("call.uni __assertfail"), 21, "call.uni not_assert");
  Status s = Translate(Kernel(other_body, other));
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.ToString();
  EXPECT_NE(s.message().find("not defined"), std::string::npos) << s.ToString();
}

// Device printf as nvcc 13 writes it (nvcc -ptx -O3 of printf("t=%d v=%f %s\n", tid, tid * 0.5,
// "str") and a guarded printf("only three\n")): the call becomes the vprintf instruction with the
// FIFO's address from the hidden module global; run on the engine, every thread leaves its record.
constexpr const char* kPrintfPtx = R"(
.extern .func  (.param .b32 func_retval0) vprintf
(
  .param .b64 vprintf_param_0,
  .param .b64 vprintf_param_1
)
;
.global .align 1 .b8 $str[14] = {116, 61, 37, 100, 32, 118, 61, 37, 102, 32, 37, 115, 10};
.global .align 1 .b8 $str$1[4] = {115, 116, 114};
.global .align 1 .b8 $str$2[12] = {111, 110, 108, 121, 32, 116, 104, 114, 101, 101, 10};
.visible .entry k(.param .u64 k_out)
{
  .local .align 8 .b8 __local_depot0[24];
  .reg .b64 %SP;
  .reg .b64 %SPL;
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .f64 %fd<3>;
  .reg .b64 %rd<16>;
  mov.u64 %SPL, __local_depot0;
  cvta.local.u64 %SP, %SPL;
  ld.param.u64 %rd1, [k_out];
  cvta.to.global.u64 %rd2, %rd1;
  add.u64 %rd3, %SP, 0;
  add.u64 %rd4, %SPL, 0;
  mov.u32 %r1, %tid.x;
  st.local.u32 [%rd4], %r1;
  cvt.rn.f64.u32 %fd1, %r1;
  mul.f64 %fd2, %fd1, 0d3FE0000000000000;
  st.local.f64 [%rd4+8], %fd2;
  mov.u64 %rd5, $str$1;
  cvta.global.u64 %rd6, %rd5;
  st.local.u64 [%rd4+16], %rd6;
  mov.u64 %rd7, $str;
  cvta.global.u64 %rd8, %rd7;
  { // callseq 0, 0
  .param .b64 param0;
  st.param.b64 [param0+0], %rd8;
  .param .b64 param1;
  st.param.b64 [param1+0], %rd3;
  .param .b32 retval0;
  call.uni (retval0),
  vprintf,
  (
  param0,
  param1
  );
  ld.param.b32 %r2, [retval0+0];
  } // callseq 0
  setp.ne.s32 %p1, %r1, 3;
  mov.u64 %rd9, $str$2;
  cvta.global.u64 %rd10, %rd9;
  { // callseq 1, 0
  .param .b64 param0;
  st.param.b64 [param0+0], %rd10;
  .param .b64 param1;
  st.param.b64 [param1+0], 0;
  .param .b32 retval0;
  @!%p1 call.uni (retval0), vprintf, (param0, param1);
  } // callseq 1
  mul.wide.u32 %rd11, %r1, 4;
  add.s64 %rd12, %rd2, %rd11;
  st.global.u32 [%rd12], %r2;
  ret;
}
)";

TEST(JitTranslator, VprintfCallsBecomeTheVprintfInstruction) {
  Result<isa::Module> m = CompilePtx(std::string(kHeader) + kPrintfPtx);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->globals.size(), 4u);
  EXPECT_EQ(m->globals[3].name, isa::kPrintfFifoGlobal);
  EXPECT_EQ(m->globals[3].size, 8u);
  Result<isa::Kernel> kernel = isa::DecodeKernel(m->kernels[0].image);
  ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
  const std::string text = isa::DisassembleKernel(*kernel);
  size_t calls = 0;
  for (size_t at = 0; (at = text.find("vprintf", at)) != std::string::npos; ++at) ++calls;
  EXPECT_EQ(calls, 2u) << text;

  // A loader's work by hand: globals, their addresses in bank 2, the FIFO, local memory.
  using namespace sim::compute;
  FakeChannelMemory mem;
  const uint64_t globals = kTestDataAddress, bank2 = kTestDataAddress + 0x1000,
                 fifo = kTestDataAddress + 0x10000, out = kTestDataAddress + 0x80000;
  mem.Map(kTestDataAddress, 0x100000);
  std::vector<uint64_t> addresses;
  for (size_t i = 0; i < m->globals.size(); ++i) {
    const uint64_t va = globals + i * 0x100;
    addresses.push_back(va);
    if (!m->globals[i].init.empty())
      mem.Write(va, m->globals[i].init.data(), m->globals[i].init.size());
  }
  mem.Write(addresses[3], &fifo, 8);
  mem.WriteArray(bank2, addresses);
  const uint64_t capacity = 0x8000;
  mem.Write(fifo + isa::kPrintfFifoCapacityOffset, &capacity, 8);
  sim::ComputeLaunch launch;
  launch.code_address = kTestCodeAddress;
  launch.shared_base = kTestSharedBase;
  launch.local_base = kTestLocalBase;
  launch.const_buffers[isa::kGlobalsBank] = {true, bank2, uint32_t(addresses.size() * 8)};
  ParamBuffer params;
  params.Add(out);
  auto engine = SimtEngine::Create({.workers = 2});
  TestLaunchResult r =
      RunTestKernel(*engine, mem, m->kernels[0].image, params, {2, 1, 1}, {64, 1, 1}, 0, &launch);
  ASSERT_EQ(r.outcome, sim::SliceOutcome::kDone) << r.fault.message;
  for (uint32_t v : mem.ReadArray<uint32_t>(out, 64)) EXPECT_EQ(v, 3u);  // vprintf's result

  uint64_t used = 0;
  mem.Read(fifo + isa::kPrintfFifoUsedOffset, &used, 8);
  // 128 records of 16 + 16 (format) + 8 + 8 + 8 + 8 ("str"), and blocks 0 and 1's thread 3.
  ASSERT_EQ(used, 128u * 64 + 2 * 32);
  std::vector<uint8_t> area(used);
  mem.Read(fifo + isa::kPrintfFifoHeaderBytes, area.data(), used);
  std::vector<int> seen(64, 0);
  int only_three = 0;
  for (uint64_t at = 0; at < used;) {
    uint32_t bytes, format_bytes;
    std::memcpy(&bytes, &area[at], 4);
    std::memcpy(&format_bytes, &area[at + 4], 4);
    const std::string format(reinterpret_cast<const char*>(&area[at + 16]), format_bytes);
    if (format == "only three\n") {
      ++only_three;
    } else {
      EXPECT_EQ(format, "t=%d v=%f %s\n");
      int32_t tid;
      double v;
      std::memcpy(&tid, &area[at + 32], 4);
      std::memcpy(&v, &area[at + 40], 8);
      ASSERT_GE(tid, 0);
      ASSERT_LT(tid, 64);
      ++seen[tid];
      EXPECT_EQ(v, tid * 0.5);
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(&area[at + 56]), 3), "str");
    }
    at += bytes;
  }
  EXPECT_EQ(only_three, 2);
  for (int n : seen) EXPECT_EQ(n, 2);

  // vprintf must have CUDA's prototype (here: no result).
  const std::string odd = std::string(kHeader) + R"(
.extern .func vprintf(.param .b64 a, .param .b64 b);
.visible .entry k()
{
  { .param .b64 param0; .param .b64 param1;
  st.param.b64 [param0], 0;
  st.param.b64 [param1], 0;
  call.uni vprintf, (param0, param1); }
  ret;
}
)";
  Status s = Translate(odd);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented) << s.ToString();
  EXPECT_NE(s.message().find("vprintf is declared with other parameters"), std::string::npos)
      << s.ToString();
}

TEST(JitTranslator, TooManyLiveRegistersIsAClearError) {
  // 300 loads all live until a final sum: more than the 255 registers of the ISA.
  std::string body = ".reg .b32 %q<301>;\n";
  for (int i = 0; i < 300; ++i)
    body += "ld.global.u32 %q" + std::to_string(i) + ", [%rd4+" + std::to_string(4 * i) + "];\n";
  body += "mov.u32 %r3, 0;\n";
  for (int i = 0; i < 300; ++i) body += "add.s32 %r3, %r3, %q" + std::to_string(i) + ";\n";
  Status s = Translate(Kernel(body));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("255"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("kernel 'k'"), std::string::npos) << s.ToString();
}

TEST(JitTranslator, ModuleLayout) {
  // Kernel parameters in declaration order at their alignment; .global variables become module
  // globals (addresses through constant bank 2); .const variables go to the bank 1 image.
  std::string ptx = std::string(kHeader) + R"(
.global .align 8 .b8 table[64] = {1, 2, 3};
.const .align 4 .u32 factor = 7;
.visible .entry k(.param .u32 a, .param .u64 b, .param .align 16 .b8 s[24])
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u32 %r1, [a];
  ld.const.u32 %r2, [factor];
  mov.u64 %rd1, table;
  ld.global.u32 %r3, [%rd1+4];
  ret;
}
)";
  Result<isa::Module> m = CompilePtx(ptx);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->kernels.size(), 1u);
  ASSERT_EQ(m->kernels[0].params.size(), 3u);
  EXPECT_EQ(m->kernels[0].params[0].offset, 0u);
  EXPECT_EQ(m->kernels[0].params[1].offset, 8u);
  EXPECT_EQ(m->kernels[0].params[2].offset, 16u);
  EXPECT_EQ(m->kernels[0].params[2].size, 24u);
  ASSERT_EQ(m->globals.size(), 1u);
  EXPECT_EQ(m->globals[0].name, "table");
  EXPECT_EQ(m->globals[0].size, 64u);
  EXPECT_EQ(m->globals[0].init[2], 3);
  ASSERT_EQ(m->const_image.size(), 4u);
  EXPECT_EQ(m->const_image[0], 7);
  Result<std::vector<uint8_t>> encoded = isa::EncodeModule(*m);
  EXPECT_TRUE(encoded.ok()) << encoded.status().ToString();
}

// Half precision, for reference: an f16's value, and the f16 nearest a double (ties to even; NaN
// as the engine's canonical 0x7e00) found by search over every finite f16, independent of the
// engine's own conversion.
double HalfValue(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, frac = h & 0x3ff;
  double v = exp == 0    ? std::ldexp(frac, -24)
             : exp == 31 ? (frac ? NAN : INFINITY)
                         : std::ldexp(frac | 0x400, exp - 25);
  return (h & 0x8000) ? -v : v;
}
uint16_t NearestHalf(double v) {
  if (std::isnan(v)) return 0x7e00;
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  // 65504 is the largest finite f16; from halfway to the next power (65520) up, infinity.
  if (a >= 65520) return sign | 0x7c00;
  uint16_t lo = 0, hi = 0x7bff;  // magnitudes are ordered like their encodings
  while (lo < hi) {
    const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (HalfValue(mid) <= a) {
      lo = mid;
    } else {
      hi = static_cast<uint16_t>(mid - 1);
    }
  }
  uint16_t best = lo;  // the largest f16 <= a; maybe the next one is nearer
  if (lo < 0x7bff) {
    const double below = a - HalfValue(lo), above = HalfValue(lo + 1) - a;
    if (above < below || (above == below && (lo & 1))) best = static_cast<uint16_t>(lo + 1);
  }
  return sign | best;
}

TEST(JitTranslator, HalfPrecisionArithmetic) {
  // %r2's halves as f16 x (bits 0-15) and y (16-31).
  auto x_of = [](uint32_t in) { return HalfValue(static_cast<uint16_t>(in)); };
  auto y_of = [](uint32_t in) { return HalfValue(static_cast<uint16_t>(in >> 16)); };
  const std::string unpack = "mov.b32 {%rs1, %rs2}, %r2;\n";
  Expect(unpack + "add.f16 %rs3, %rs1, %rs2;\ncvt.u32.u16 %r3, %rs3;",
         [&](uint32_t in, uint32_t) { return uint32_t{NearestHalf(x_of(in) + y_of(in))}; });
  Expect(unpack + "sub.rn.f16 %rs3, %rs1, %rs2;\ncvt.u32.u16 %r3, %rs3;",
         [&](uint32_t in, uint32_t) { return uint32_t{NearestHalf(x_of(in) - y_of(in))}; });
  Expect(unpack + "mul.f16 %rs3, %rs1, %rs2;\ncvt.u32.u16 %r3, %rs3;",
         [&](uint32_t in, uint32_t) { return uint32_t{NearestHalf(x_of(in) * y_of(in))}; });
  Expect(unpack + "fma.rn.f16 %rs3, %rs1, %rs2, %rs1;\ncvt.u32.u16 %r3, %rs3;",
         [&](uint32_t in, uint32_t) {
           return uint32_t{NearestHalf(std::fma(x_of(in), y_of(in), x_of(in)))};
         });
  Expect(unpack + "sub.sat.f16 %rs3, %rs1, %rs2;\ncvt.u32.u16 %r3, %rs3;",
         [&](uint32_t in, uint32_t) {
           const double d = x_of(in) - y_of(in);
           return uint32_t{NearestHalf(std::isnan(d) ? 0 : std::min(1.0, std::max(0.0, d)))};
         });
  // f16x2: each half on its own; the first element in bits 0-15.
  auto pair = [](double lo, double hi) {
    return uint32_t{NearestHalf(lo)} | uint32_t{NearestHalf(hi)} << 16;
  };
  Expect("mul.f16x2 %r3, %r2, %r2;",
         [&](uint32_t in, uint32_t) { return pair(x_of(in) * x_of(in), y_of(in) * y_of(in)); });
  Expect("fma.rn.f16x2 %r3, %r2, %r2, %r2;", [&](uint32_t in, uint32_t) {
    return pair(std::fma(x_of(in), x_of(in), x_of(in)), std::fma(y_of(in), y_of(in), y_of(in)));
  });
  Expect("shf.l.wrap.b32 %r4, %r2, %r2, 16;\nadd.f16x2 %r3, %r2, %r4;",
         [&](uint32_t in, uint32_t) { return pair(x_of(in) + y_of(in), y_of(in) + x_of(in)); });
  Expect("neg.f16x2 %r3, %r2;", [](uint32_t in, uint32_t) { return in ^ 0x80008000u; });
  Expect(
      unpack + "abs.f16 %rs3, %rs1;\ncvt.u32.u16 %r3, %rs3;",
      [](uint32_t in, uint32_t) { return in & 0x7fffu; }, "");
  // Comparisons: setp per half into p|q, set into 1.0 halves or all-ones halves.
  Expect(
      "setp.lt.f16x2 %p1|%p2, %r2, 0x3c003c00;\nselp.u32 %r4, 1, 0, %p1;\n"
      "selp.u32 %r5, 2, 0, %p2;\nadd.u32 %r3, %r4, %r5;",
      [&](uint32_t in, uint32_t) {
        return (x_of(in) < 1.0 ? 1u : 0u) + (y_of(in) < 1.0 ? 2u : 0u);
      });
  Expect(unpack + "setp.gtu.f16 %p1, %rs1, %rs2;\nselp.u32 %r3, 1, 0, %p1;",
         [&](uint32_t in, uint32_t) {
           const double x = x_of(in), y = y_of(in);
           return (std::isnan(x) || std::isnan(y) || x > y) ? 1u : 0u;
         });
  Expect("set.ge.f16x2.f16x2 %r3, %r2, 0;", [&](uint32_t in, uint32_t) {
    return (x_of(in) >= 0 ? 0x3c00u : 0u) | (y_of(in) >= 0 ? 0x3c000000u : 0u);
  });
  Expect("set.eq.u32.f16x2 %r3, %r2, %r2;", [&](uint32_t in, uint32_t) {
    return (x_of(in) == x_of(in) ? 0xffffu : 0u) | (y_of(in) == y_of(in) ? 0xffff0000u : 0u);
  });
  // What half precision still refuses: other roundings, bf16.
  EXPECT_FALSE(CompilePtx(Kernel(unpack + "add.rz.f16 %rs3, %rs1, %rs2;\nmov.u32 %r3, 0;")).ok());
  EXPECT_FALSE(CompilePtx(Kernel(unpack + "add.bf16 %rs3, %rs1, %rs2;\nmov.u32 %r3, 0;")).ok());
}

// bar.red's counter word is the translator's, not the program's: a kernel may still use all of its
// 48 KiB of static shared memory, and the header says which bytes are whose.
TEST(JitTranslator, BarRedWordIsInternalSharedMemory) {
  std::string ptx = std::string(kHeader) + R"(
.visible .entry k(.param .u64 out)
{
  .reg .pred %p<3>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<3>;
  .shared .align 16 .b8 tile[49152];
  mov.u32 %r1, %tid.x;
  st.shared.u32 [tile+49148], %r1;
  setp.ne.u32 %p1, %r1, 0;
  bar.red.popc.u32 %r2, 0, %p1;
  ld.param.u64 %rd1, [out];
  st.global.u32 [%rd1], %r2;
  ret;
}
)";
  Result<isa::Module> m = CompilePtx(ptx);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->kernels.size(), 1u);
  Result<isa::KernelHeader> h = isa::DecodeKernelHeader(m->kernels[0].image);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->shared_bytes, 49152u + 4);
  EXPECT_EQ(h->internal_shared_bytes, 4u);
  EXPECT_EQ(isa::ProgramSharedBytes(*h), 49152u);
}

}  // namespace
}  // namespace gpuvm::ptx
