// The compute engine on hand-assembled kernels: SIMT control flow (divergence, nested divergence,
// loops with divergent exits, early exit, barriers in loops), shared/local/generic/constant memory,
// atomics under contention across workers, shfl and vote, 64-bit addressing, every fault kind, the
// code cache and slicing. Each test runs on both interpreter variants and with one and two workers.
#include <gtest/gtest.h>

#include <numeric>
#include <tuple>

#include "gpu/isa/assembler.h"
#include "gpu/sim/compute/simt_engine.h"
#include "gpu/sim/compute/test_support.h"

namespace gpuvm::sim::compute {
namespace {

std::vector<uint8_t> Asm(const std::string& text) {
  Result<std::vector<uint8_t>> r = isa::Assemble(text);
  EXPECT_TRUE(r.ok()) << r.status().ToString() << "\n" << text;
  return r.ok() ? *r : std::vector<uint8_t>{};
}

// Prologue shared by most kernels: r0 = global thread index (x), r2:r3 = first pointer parameter,
// r4:r5 = second, r6 = 32-bit parameter at offset 16.
constexpr const char* kPrologue = R"(
    s2r.u32 r0, %tid.x
    s2r.u32 r1, %ctaid.x
    s2r.u32 r2, %ntid.x
    mad.u32 r0, r1, r2, r0
    ld.const.c0.u64 r2, [rz+0]
    ld.const.c0.u64 r4, [rz+8]
    ld.const.c0.u32 r6, [rz+16]
)";

// The job faulted with `kind`, and the message says `says`.
void ExpectFault(const TestLaunchResult& r, ComputeFault::Kind kind, const char* says) {
  ASSERT_EQ(r.outcome, SliceOutcome::kFaulted);
  EXPECT_EQ(r.fault.kind, kind);
  EXPECT_NE(r.fault.message.find(says), std::string::npos) << r.fault.message;
}

class EngineTest : public ::testing::TestWithParam<std::tuple<InterpreterVariant, int>> {
 protected:
  void SetUp() override {
    engine_ = SimtEngine::Create(
        {.workers = std::get<1>(GetParam()), .interpreter = std::get<0>(GetParam())});
    mem_.Map(kTestDataAddress, 0x100000);
  }
  static constexpr uint64_t kIn = kTestDataAddress;
  static constexpr uint64_t kOut = kTestDataAddress + 0x80000;

  TestLaunchResult Run(const std::string& body, std::array<uint32_t, 3> grid,
                       std::array<uint32_t, 3> block, uint32_t shared = 0, uint32_t scalar = 0,
                       ComputeLaunch* overrides = nullptr) {
    ParamBuffer params;
    params.Add(kIn).Add(kOut).Add(scalar);
    std::vector<uint8_t> code = Asm(std::string(".params 20\n") + kPrologue + body);
    return RunTestKernel(*engine_, mem_, code, params, grid, block, shared, overrides);
  }
  TestLaunchResult RunOk(const std::string& body, std::array<uint32_t, 3> grid,
                         std::array<uint32_t, 3> block, uint32_t shared = 0, uint32_t scalar = 0) {
    TestLaunchResult r = Run(body, grid, block, shared, scalar);
    EXPECT_EQ(r.outcome, SliceOutcome::kDone) << r.fault.message;
    return r;
  }
  std::vector<uint32_t> Out(size_t n) { return mem_.ReadArray<uint32_t>(kOut, n); }

  std::unique_ptr<SimtEngine> engine_;
  FakeChannelMemory mem_;
};

// out[i] = value computed by `body` into r20; a store epilogue shared by the control-flow tests.
constexpr const char* kStoreR20 = R"(
    mulwide.u32 r30, r0, 4
    add.u64 r30, r4, r30
    st.global.a64.u32 [r30], r20
    exit
)";

TEST_P(EngineTest, IfElseReconverges) {
  // Odd lanes take one path, even lanes the other; after the join every lane is active again, which
  // vote.ballot proves (it reports the lanes that execute it).
  RunOk(std::string(R"(
    and.u32 r7, r0, 1
    setp.eq.u32 p0, r7, 1
    @p0 bra odd
    mov.u32 r20, 100
    bra join
  odd:
    mov.u32 r20, 200
  join:
    vote.ballot r21, pt
    add.u32 r20, r20, r21
  )") + kStoreR20,
        {1, 1, 1}, {64, 1, 1});
  std::vector<uint32_t> out = Out(64);
  for (uint32_t i = 0; i < 64; ++i) EXPECT_EQ(out[i], (i % 2 ? 200u : 100u) + 0xffffffffu) << i;
}

TEST_P(EngineTest, NestedDivergence) {
  // Three levels: tid % 2, tid % 4, tid % 8 pick one of 8 leaves; each leaf records the ballot of
  // the lanes running with it (those sharing tid % 8), and after all joins the ballot is full
  // again.
  RunOk(std::string(R"(
    mov.u32 r20, 0
    and.u32 r7, r0, 1
    setp.ne.u32 p0, r7, 0
    @p0 bra l1_odd
      and.u32 r7, r0, 2
      setp.ne.u32 p1, r7, 0
      @p1 bra l2_b
        add.u32 r20, r20, 10
        bra l2_join
      l2_b:
        and.u32 r7, r0, 4
        setp.ne.u32 p2, r7, 0
        @!p2 bra l3_join
          add.u32 r20, r20, 1000
        l3_join:
        add.u32 r20, r20, 20
      l2_join:
      bra l1_join
    l1_odd:
      add.u32 r20, r20, 30
    l1_join:
    vote.ballot r21, pt
    setp.eq.u32 p3, r21, 0xffffffff
    @!p3 mov.u32 r20, 0xdead
  )") + kStoreR20,
        {1, 1, 1}, {96, 1, 1});
  std::vector<uint32_t> out = Out(96);
  for (uint32_t i = 0; i < 96; ++i) {
    uint32_t want = (i & 1) ? 30 : ((i & 2) ? 20 + ((i & 4) ? 1000 : 0) : 10);
    EXPECT_EQ(out[i], want) << i;
  }
}

TEST_P(EngineTest, LoopWithDivergentTripCountsAndBreak) {
  // Each lane loops tid % 37 times but breaks out early when the running sum passes 300; the ballot
  // after the loop shows all lanes reconverged.
  RunOk(std::string(R"(
    rem.u32 r7, r0, 37
    mov.u32 r20, 0
    mov.u32 r8, 0
  top:
    setp.ge.u32 p0, r8, r7
    @p0 bra done
    add.u32 r20, r20, r8
    setp.gt.u32 p1, r20, 300
    @p1 bra done
    add.u32 r8, r8, 1
    bra top
  done:
    vote.ballot r21, pt
    setp.ne.u32 p2, r21, 0xffffffff
    @p2 mov.u32 r20, 0xdead
  )") + kStoreR20,
        {2, 1, 1}, {128, 1, 1});
  std::vector<uint32_t> out = Out(256);
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t n = i % 37, sum = 0;
    for (uint32_t k = 0; k < n; ++k) {
      sum += k;
      if (sum > 300) break;
    }
    EXPECT_EQ(out[i], sum) << i;
  }
}

TEST_P(EngineTest, EarlyExitThenBarrierInLoop) {
  // Threads >= n exit at once; the rest run a shared-memory tree reduction with bar.sync inside the
  // loop (exited threads no longer count for the barrier). Thread 0 writes the block's sum.
  const uint32_t n = 200;
  std::vector<uint32_t> in(256);
  std::iota(in.begin(), in.end(), 1);
  mem_.WriteArray(kIn, in);
  RunOk(R"(
    .shared 1024
    setp.ge.u32 p0, r0, r6
    @p0 exit
    mulwide.u32 r30, r0, 4
    add.u64 r8, r2, r30
    ld.global.a64.u32 r10, [r8]
    shl.u32 r11, r0, 2
    st.shared.u32 [r11], r10
    bar 0
    mov.u32 r12, 128
  loop:
    add.u32 r13, r0, r12
    setp.lt.u32 p1, r0, r12
    setp.lt.u32 p2, r13, r6
    plop.and p1, p1, p2
    @!p1 bra skip
    shl.u32 r14, r13, 2
    ld.shared.u32 r15, [r14]
    ld.shared.u32 r16, [r11]
    add.u32 r16, r16, r15
    st.shared.u32 [r11], r16
  skip:
    bar 0
    shr.u32 r12, r12, 1
    setp.ne.u32 p3, r12, 0
    @p3 bra loop
    setp.ne.u32 p4, r0, 0
    @p4 exit
    ld.shared.u32 r20, [rz]
    st.global.a64.u32 [r4], r20
    exit
  )",
        {1, 1, 1}, {256, 1, 1}, 1024, n);
  EXPECT_EQ(Out(1)[0], n * (n + 1) / 2);
}

TEST_P(EngineTest, BarrierDeadlockFaults) {
  // Even threads wait at barrier 0, odd threads at barrier 1: neither can complete.
  TestLaunchResult r = Run(R"(
    and.u32 r7, r0, 1
    setp.eq.u32 p0, r7, 0
    @p0 bar 0
    @!p0 bar 1
    exit
  )",
                           {1, 1, 1}, {64, 1, 1});
  ExpectFault(r, ComputeFault::Kind::kBarrierDeadlock, "deadlock");
}

TEST_P(EngineTest, AtomicsUnderContention) {
  // 64 blocks x 256 threads: a global counter (add), a histogram in shared memory flushed with
  // global atomics, min/max, exch, inc with wrap, and a CAS loop (float max built from cas, lanes
  // retrying).
  mem_.WriteArray<uint32_t>(kOut, std::vector<uint32_t>(64, 0));
  mem_.WriteArray<uint32_t>(kOut + 4 * 30, {0x7fffffff});  // min slot
  RunOk(R"(
    .shared 64
    s2r.u32 r7, %tid.x
    setp.ge.u32 p0, r7, 16
    @p0 bra zeroed
    shl.u32 r8, r7, 2
    st.shared.u32 [r8], rz
  zeroed:
    bar 0
    mov.u32 r9, 1
    atom.global.a64.add.u32 rz, [r4], r9           // out[0] += 1
    and.u32 r10, r0, 15
    shl.u32 r10, r10, 2
    atom.shared.add.u32 rz, [r10], r9              // bins[tid % 16] += 1
    atom.global.a64.max.u32 rz, [r4+4], r0         // out[1] = max(tid)
    atom.global.a64.min.s32 rz, [r4+120], r0       // out[30] = min(tid)
    mov.u32 r11, 99
    atom.global.a64.inc.u32 rz, [r4+8], r11        // out[2] counts modulo 100
    cvt.rn.f32.u32 r12, r0
  retry:                                           // out[3] = max over float(tid) via cas
    ld.global.a64.u32 r13, [r4+12]
    max.f32 r14, r13, r12
    atom.global.a64.cas.u32 r15, [r4+12], r13, r14
    setp.ne.u32 p1, r15, r13
    @p1 bra retry
    atom.global.a64.add.f32 rz, [r4+16], r9        // r9 = 1 as bits: adds 1.4e-45 each
    bar 0
    @p0 exit
    shl.u32 r8, r7, 2
    ld.shared.u32 r16, [r8]
    add.u64 r17, r4, 32
    mulwide.u32 r19, r7, 4
    add.u64 r17, r17, r19
    atom.global.a64.add.u32 rz, [r17], r16         // out[8 + bin] += count
    exit
  )",
        {64, 1, 1}, {256, 1, 1}, 64);
  const uint32_t total = 64 * 256;
  std::vector<uint32_t> out = Out(32);
  EXPECT_EQ(out[0], total);
  EXPECT_EQ(out[1], total - 1);
  EXPECT_EQ(out[2], total % 100);
  float fmax;
  memcpy(&fmax, &out[3], 4);
  EXPECT_EQ(fmax, static_cast<float>(total - 1));
  float denorm_sum;
  memcpy(&denorm_sum, &out[4], 4);
  EXPECT_EQ(std::bit_cast<uint32_t>(denorm_sum), total);  // denormals add exactly
  for (int bin = 0; bin < 16; ++bin) EXPECT_EQ(out[8 + bin], total / 16) << bin;
  EXPECT_EQ(out[30], 0u);
}

TEST_P(EngineTest, ShuffleAndVote) {
  // Warp sum with shfl.down, broadcast with shfl.idx, prefix-ish shfl.up with its predicate, bfly,
  // votes.
  RunOk(std::string(R"(
    s2r.u32 r7, %laneid
    mov.u32 r20, r7
    shfl.down r8, r20, 16, 31
    add.u32 r20, r20, r8
    shfl.down r8, r20, 8, 31
    add.u32 r20, r20, r8
    shfl.down r8, r20, 4, 31
    add.u32 r20, r20, r8
    shfl.down r8, r20, 2, 31
    add.u32 r20, r20, r8
    shfl.down r8, r20, 1, 31
    add.u32 r20, r20, r8
    shfl.idx r20, r20, 0, 31
    shfl.up r9|p1, r7, 1, 0
    mov.u32 r11, 1000
    @!p1 add.u32 r20, r20, r11       // lane 0: +1000
    add.u32 r20, r20, r9             // + (lane - 1) for lane > 0
    shfl.bfly r12, r7, 1, 31         // lane ^ 1
    mul.u32 r12, r12, 0x10000
    add.u32 r20, r20, r12
    setp.lt.u32 p2, r7, 8
    vote.any p3, p2
    vote.all p4, p2
    vote.uni p5, p3
    vote.ballot r13, p2
    @p3 add.u32 r20, r20, 0x1000000
    @p4 add.u32 r20, r20, 0x2000000
    @p5 add.u32 r20, r20, 0x4000000
    setp.eq.u32 p6, r13, 0xff
    @p6 add.u32 r20, r20, 0x8000000
  )") + kStoreR20,
        {1, 1, 1}, {64, 1, 1});
  std::vector<uint32_t> out = Out(64);
  for (uint32_t i = 0; i < 64; ++i) {
    uint32_t lane = i % 32;
    uint32_t want = 496 + (lane == 0 ? 1000 : lane - 1) + ((lane ^ 1) << 16) + 0x1000000 +
                    0x4000000 + 0x8000000;
    EXPECT_EQ(out[i], want) << i;
  }
}

TEST_P(EngineTest, SpecialRegistersIn3D) {
  // A 3x2x2 grid of 4x3x2 blocks; every thread writes a code of its coordinates at its linear
  // index.
  RunOk(R"(
    s2r.u32 r7, %tid.x
    s2r.u32 r8, %tid.y
    s2r.u32 r9, %tid.z
    s2r.u32 r10, %ctaid.x
    s2r.u32 r11, %ctaid.y
    s2r.u32 r12, %ctaid.z
    s2r.u32 r13, %nctaid.x
    s2r.u32 r14, %nctaid.y
    s2r.u32 r15, %ntid.y
    s2r.u32 r16, %warpid
    s2r.u32 r17, %laneid
    // block linear = (cz * ny + cy) * nx + cx; thread linear = (tz * 3 + ty) * 4 + tx
    mad.u32 r18, r12, r14, r11
    mad.u32 r18, r18, r13, r10
    mad.u32 r19, r9, r15, r8
    mad.u32 r19, r19, 4, r7
    mad.u32 r0, r18, 24, r19
    shl.u32 r20, r7, 0
    mad.u32 r20, r8, 16, r20
    mad.u32 r20, r9, 256, r20
    mad.u32 r20, r10, 4096, r20
    mad.u32 r20, r11, 65536, r20
    mad.u32 r20, r12, 1048576, r20
    mad.u32 r21, r16, 32, r17
    setp.ne.u32 p0, r21, r19        // warpid * 32 + laneid == thread index in block
    @p0 mov.u32 r20, 0xdead
  )" + std::string(kStoreR20),
        {3, 2, 2}, {4, 3, 2});
  std::vector<uint32_t> out = Out(12 * 24);
  for (uint32_t cz = 0; cz < 2; ++cz)
    for (uint32_t cy = 0; cy < 2; ++cy)
      for (uint32_t cx = 0; cx < 3; ++cx)
        for (uint32_t tz = 0; tz < 2; ++tz)
          for (uint32_t ty = 0; ty < 3; ++ty)
            for (uint32_t tx = 0; tx < 4; ++tx) {
              uint32_t index = ((cz * 2 + cy) * 3 + cx) * 24 + (tz * 3 + ty) * 4 + tx;
              EXPECT_EQ(out[index], tx + ty * 16 + tz * 256 + cx * 4096 + cy * 65536 + cz * 1048576)
                  << index;
            }
}

TEST_P(EngineTest, LocalGenericAndSubwordMemory) {
  // A per-thread local array through generic addresses (cvta = window + offset), plus u8/s16
  // accesses.
  RunOk(R"(
    .local 64
    s2r.u64 r8, %local_window
    mov.u32 r10, 0
  fill:
    mulwide.u32 r12, r10, 4
    add.u64 r12, r8, r12
    mad.u32 r14, r0, 100, r10
    st.generic.a64.u32 [r12], r14        // local[k] = tid * 100 + k through a generic address
    add.u32 r10, r10, 1
    setp.lt.u32 p0, r10, 16
    @p0 bra fill
    ld.local.u32 r15, [rz+28]            // local[7]
    ld.local.u32 r16, [rz+60]            // local[15]
    add.u32 r20, r15, r16
    st.local.u8 [rz+1], r0               // byte 1 of local[0] = tid
    mov.u32 r17, 0xfff0
    st.local.u16 [rz+2], r17             // bytes 2..3 = 0xfff0
    ld.local.u8 r18, [rz+1]
    ld.local.s16 r19, [rz+2]             // sign-extended: 0xfffffff0
    add.u32 r20, r20, r18
    add.u32 r20, r20, r19
  )" + std::string(kStoreR20),
        {2, 1, 1}, {64, 1, 1});
  std::vector<uint32_t> out = Out(128);
  for (uint32_t i = 0; i < 128; ++i) {
    EXPECT_EQ(out[i], (i * 100 + 7) + (i * 100 + 15) + (i & 0xff) + 0xfffffff0u) << i;
  }
}

TEST_P(EngineTest, SharedThroughGenericWindow) {
  RunOk(R"(
    .shared 256
    s2r.u32 r7, %tid.x
    s2r.u64 r8, %shared_window
    mulwide.u32 r10, r7, 4
    add.u64 r10, r8, r10
    st.generic.a64.u32 [r10], r7
    bar 0
    xor.u32 r11, r7, 63
    shl.u32 r11, r11, 2
    ld.shared.u32 r20, [r11]             // neighbour's value through the shared space directly
  )" + std::string(kStoreR20),
        {1, 1, 1}, {64, 1, 1}, 256);
  std::vector<uint32_t> out = Out(64);
  for (uint32_t i = 0; i < 64; ++i) EXPECT_EQ(out[i], i ^ 63) << i;
}

TEST_P(EngineTest, SixtyFourBitAddressing) {
  // A buffer above 4 GiB and a 64-bit loop counter.
  const uint64_t high = 0x12345670000ull;
  mem_.Map(high, 0x2000);
  mem_.WriteArray<uint64_t>(high, {0x1111111122222222ull});
  ParamBuffer params;
  params.Add(high);
  auto code = Asm(R"(
    .params 8
    ld.const.c0.u64 r2, [rz+0]
    ld.global.a64.u64 r4, [r2]
    mov.u64 r6, 0x100000000
    add.u64 r4, r4, r6
    s2r.u32 r0, %tid.x
    mulwide.u32 r8, r0, 8
    add.u64 r8, r2, r8
    st.global.a64.u64 [r8+4096], r4
    exit
  )");
  TestLaunchResult r = RunTestKernel(*engine_, mem_, code, params, {1, 1, 1}, {32, 1, 1});
  ASSERT_EQ(r.outcome, SliceOutcome::kDone) << r.fault.message;
  std::vector<uint64_t> out = mem_.ReadArray<uint64_t>(high + 4096, 32);
  for (uint64_t v : out) EXPECT_EQ(v, 0x1111111222222222ull);
}

TEST_P(EngineTest, CallFromDivergentSitesAndDivergentReturn) {
  // Even and odd lanes call the same function from different call sites: min-PC merges them inside
  // the callee, `ret` splits them by return address, and they reconverge at the join.
  RunOk(std::string(R"(
    and.u32 r7, r0, 1
    setp.eq.u32 p0, r7, 1
    mov.u32 r20, 0
    @p0 bra odd
    call r30, f
    add.u32 r20, r20, 100
    bra join
  odd:
    call r30, f
    add.u32 r20, r20, 200
  join:
    vote.ballot r21, pt
    setp.ne.u32 p1, r21, 0xffffffff
    @p1 mov.u32 r20, 0xdead
  )") + kStoreR20 +
            R"(
  f:
    vote.ballot r22, pt
    popc.u32 r22, r22
    add.u32 r20, r20, r22              // 32 when both groups run the callee together
    ret r30
  )",
        {1, 1, 1}, {64, 1, 1});
  std::vector<uint32_t> out = Out(64);
  for (uint32_t i = 0; i < 64; ++i) EXPECT_EQ(out[i], 32u + (i % 2 ? 200u : 100u)) << i;
}

TEST_P(EngineTest, ReturnToANonInstructionFaults) {
  TestLaunchResult r = Run(R"(
    mov.u64 r40, 0x123456789           // words 10-11 (after the 10-word prologue): 11 is its extension
    mov.u32 r30, 11
    ret r30
  )",
                           {1, 1, 1}, {32, 1, 1});
  ASSERT_NO_FATAL_FAILURE(ExpectFault(r, ComputeFault::Kind::kInvalidCode, "ret"));
}

TEST_P(EngineTest, ManyDistinctImmediatesUseTheScratchRow) {
  // 300 distinct immediates overflow the constant-row budget; the result must not change.
  std::string body = "mov.u32 r20, 0\n";
  uint32_t want = 0;
  for (uint32_t k = 1; k <= 300; ++k) {
    body += "add.u32 r20, r20, " + std::to_string(k * 7919) + "\n";
    want += k * 7919;
  }
  RunOk(body + kStoreR20, {1, 1, 1}, {32, 1, 1});
  EXPECT_EQ(Out(1)[0], want);
}

TEST_P(EngineTest, ThreadInstructionCountAndSlices) {
  // A long loop with a 1 us slice: the job needs many slices and the count is exact. Block of 40
  // threads: the second warp has 8 lanes.
  auto engine = SimtEngine::Create({.workers = std::get<1>(GetParam()),
                                    .slice = std::chrono::microseconds(1),
                                    .interpreter = std::get<0>(GetParam())});
  ParamBuffer params;
  params.Add(kIn).Add(kOut).Add(uint32_t{0});
  auto code = Asm(R"(
    mov.u32 r0, 0
  loop:
    add.u32 r0, r0, 1
    setp.lt.u32 p0, r0, 20000
    @p0 bra loop
    exit
  )");
  TestLaunchResult r = RunTestKernel(*engine, mem_, code, params, {3, 1, 1}, {40, 1, 1});
  ASSERT_EQ(r.outcome, SliceOutcome::kDone) << r.fault.message;
  EXPECT_GT(r.slices, 3);
  EXPECT_EQ(r.thread_instructions, uint64_t{3} * 40 * (1 + 20000 * 3 + 1));
}

// ---- faults
// -------------------------------------------------------------------------------------------

TEST_P(EngineTest, UnmappedGlobalIsAnMmuFault) {
  TestLaunchResult r = Run(R"(
    mov.u64 r8, 0x7770000010
    ld.global.a64.u32 r9, [r8]
    exit
  )",
                           {1, 1, 1}, {32, 1, 1});
  ASSERT_EQ(r.outcome, SliceOutcome::kFaulted);
  EXPECT_EQ(r.fault.kind, ComputeFault::Kind::kMmu);
  EXPECT_EQ(r.fault.mmu.va, 0x7770000010ull);
  EXPECT_FALSE(r.fault.mmu.write);
  EXPECT_EQ(r.fault.mmu.reason, gf100::FaultReason::kPageNotPresent);
  EXPECT_NE(r.fault.message.find("ld.global"), std::string::npos) << r.fault.message;
}

TEST_P(EngineTest, WriteToReadOnlyPageFaults) {
  mem_.Map(0x3000000, 0x1000, /*writable=*/false);
  TestLaunchResult r = Run(R"(
    mov.u64 r8, 0x3000000
    ld.global.a64.u32 r9, [r8]            // reading is fine
    st.global.a64.u32 [r8+8], r9
    exit
  )",
                           {1, 1, 1}, {32, 1, 1});
  ASSERT_EQ(r.outcome, SliceOutcome::kFaulted);
  EXPECT_EQ(r.fault.kind, ComputeFault::Kind::kMmu);
  EXPECT_TRUE(r.fault.mmu.write);
  EXPECT_EQ(r.fault.mmu.reason, gf100::FaultReason::kPageReadOnly);
  EXPECT_EQ(r.fault.mmu.va, 0x3000008ull);
}

TEST_P(EngineTest, MisalignedAccessFaults) {
  TestLaunchResult r = Run(R"(
    ld.global.a64.u32 r9, [r2+2]
    exit
  )",
                           {1, 1, 1}, {32, 1, 1});
  ASSERT_EQ(r.outcome, SliceOutcome::kFaulted);
  EXPECT_EQ(r.fault.kind, ComputeFault::Kind::kMisaligned);
}

TEST_P(EngineTest, OutOfRangeSharedLocalAndConstFault) {
  auto expect_range = [&](const char* body, uint32_t shared) {
    TestLaunchResult r = Run(body, {1, 1, 1}, {32, 1, 1}, shared);
    EXPECT_EQ(r.outcome, SliceOutcome::kFaulted) << body;
    EXPECT_EQ(r.fault.kind, ComputeFault::Kind::kOutOfRange) << body << r.fault.message;
  };
  expect_range(".shared 64\nst.shared.u32 [rz+64], r0\nexit", 64);
  // A 32-bit address wraps at 2^32 (0xfffffffc + 8 is 4, in range:
  // ThirtyTwoBitAddressesWrapAtFourGiB in ptx/translator), so a register near the top of the 32-bit
  // space still faults where it points.
  expect_range(".shared 64\nmov.u32 r8, 0xffffffc0\nld.shared.u32 r9, [r8+8]\nexit", 64);
  expect_range(".local 16\nst.local.u32 [rz+16], r0\nexit", 0);
  expect_range("ld.const.c0.u32 r9, [rz+20]\nexit", 0);  // params are 20 bytes
  expect_range("ld.const.c5.u32 r9, [rz+0]\nexit", 0);   // bank 5 not bound
}

TEST_P(EngineTest, TrapFaults) {
  TestLaunchResult r = Run("setp.eq.u32 p0, r0, 5\n@p0 trap\nexit", {1, 1, 1}, {32, 1, 1});
  ASSERT_NO_FATAL_FAILURE(ExpectFault(r, ComputeFault::Kind::kTrap, "thread (5,0,0)"));
}

TEST_P(EngineTest, AssertTrapFaultsWithItsOwnKind) {
  TestLaunchResult r = Run("setp.eq.u32 p0, r0, 9\n@p0 trap.assert\nexit", {1, 1, 1}, {32, 1, 1});
  ASSERT_NO_FATAL_FAILURE(ExpectFault(r, ComputeFault::Kind::kAssert, "thread (9,0,0)"));
  EXPECT_NE(r.fault.message.find("assert"), std::string::npos) << r.fault.message;
}

TEST_P(EngineTest, DeclaredParametersNeedNotBeRead) {
  // A kernel whose parameters are never read (bank 0 unused) runs; too small a bank still faults.
  ParamBuffer eight;
  eight.Add(uint64_t{0});
  TestLaunchResult r =
      RunTestKernel(*engine_, mem_, Asm(".params 8\nexit"), eight, {1, 1, 1}, {32, 1, 1});
  EXPECT_EQ(r.outcome, SliceOutcome::kDone) << r.fault.message;
  r = RunTestKernel(*engine_, mem_, Asm(".params 16\nexit"), eight, {1, 1, 1}, {32, 1, 1});
  EXPECT_EQ(r.outcome, SliceOutcome::kFaulted);
  EXPECT_EQ(r.fault.kind, ComputeFault::Kind::kInvalidLaunch) << r.fault.message;
}

TEST_P(EngineTest, InvalidCodeAndLaunchFault) {
  ParamBuffer none;
  std::vector<uint8_t> junk(64, 0xab);
  TestLaunchResult r = RunTestKernel(*engine_, mem_, junk, none, {1, 1, 1}, {32, 1, 1});
  EXPECT_EQ(r.outcome, SliceOutcome::kFaulted);
  EXPECT_EQ(r.fault.kind, ComputeFault::Kind::kInvalidCode);

  auto code = Asm(".shared 128\nexit");
  r = RunTestKernel(*engine_, mem_, code, none, {1, 1, 1}, {32, 1, 1}, /*shared=*/64);
  EXPECT_EQ(r.fault.kind, ComputeFault::Kind::kInvalidLaunch) << r.fault.message;
  r = RunTestKernel(*engine_, mem_, code, none, {1, 1, 1}, {0, 1, 1}, 128);
  EXPECT_EQ(r.fault.kind, ComputeFault::Kind::kInvalidLaunch);
  r = RunTestKernel(*engine_, mem_, code, none, {1, 1, 1}, {1024, 2, 1}, 128);
  EXPECT_EQ(r.fault.kind, ComputeFault::Kind::kInvalidLaunch);

  // Parameters declared but bank 0 not bound.
  auto needs_params = Asm(".params 8\nexit");
  r = RunTestKernel(*engine_, mem_, needs_params, none, {1, 1, 1}, {32, 1, 1});
  EXPECT_EQ(r.fault.kind, ComputeFault::Kind::kInvalidLaunch) << r.fault.message;

  // Code on an unmapped page (the helper wrote the image elsewhere).
  ComputeLaunch launch;
  launch.code_address = 0x9990000;
  r = RunTestKernel(*engine_, mem_, code, none, {1, 1, 1}, {32, 1, 1}, 128, &launch);
  EXPECT_EQ(r.fault.kind, ComputeFault::Kind::kMmu);
  EXPECT_EQ(r.fault.mmu.va, 0x9990000u);

  // A window the kernel needs is missing.
  auto needs_window = Asm("s2r.u64 r2, %shared_window\nexit");
  ComputeLaunch no_windows;
  no_windows.code_address = kTestCodeAddress;
  r = RunTestKernel(*engine_, mem_, needs_window, none, {1, 1, 1}, {32, 1, 1}, 0, &no_windows);
  EXPECT_EQ(r.fault.kind, ComputeFault::Kind::kInvalidLaunch) << r.fault.message;
}

TEST_P(EngineTest, FaultInOneBlockStopsTheGrid) {
  // Block 5 of 64 faults; the job reports it and stops (no hang, no crash); other channels' memory
  // is untouched.
  TestLaunchResult r = Run(R"(
    s2r.u32 r7, %ctaid.x
    setp.eq.u32 p0, r7, 5
    @p0 mov.u64 r4, 0x40
    mulwide.u32 r30, r0, 4
    add.u64 r30, r4, r30
    st.global.a64.u32 [r30], r0
    exit
  )",
                           {64, 1, 1}, {128, 1, 1});
  ASSERT_NO_FATAL_FAILURE(ExpectFault(r, ComputeFault::Kind::kMmu, "block (5,0,0)"));
}

// ---- code cache
// ---------------------------------------------------------------------------------------

TEST_P(EngineTest, CodeCacheReverifiesBytes) {
  ParamBuffer params;
  params.Add(kIn).Add(kOut).Add(uint32_t{0});
  auto v1 = Asm(std::string(kPrologue) + "mov.u32 r20, 1\n" + kStoreR20);
  auto v2 = Asm(std::string(kPrologue) + "mov.u32 r20, 2\n" + kStoreR20);
  ASSERT_EQ(v1.size(), v2.size());
  EXPECT_EQ(RunTestKernel(*engine_, mem_, v1, params, {1, 1, 1}, {32, 1, 1}).outcome,
            SliceOutcome::kDone);
  EXPECT_EQ(Out(1)[0], 1u);
  EXPECT_EQ(RunTestKernel(*engine_, mem_, v1, params, {1, 1, 1}, {32, 1, 1}).outcome,
            SliceOutcome::kDone);
  SimtEngine::CacheStats s = engine_->cache_stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 1u);
  // Same address, new bytes (no FLUSH): the engine notices and runs the new code.
  EXPECT_EQ(RunTestKernel(*engine_, mem_, v2, params, {1, 1, 1}, {32, 1, 1}).outcome,
            SliceOutcome::kDone);
  EXPECT_EQ(Out(1)[0], 2u);
  s = engine_->cache_stats();
  EXPECT_EQ(s.stale, 1u);
  // Another address space with the same address is a separate entry.
  FakeChannelMemory other(2);
  other.Map(kTestDataAddress, 0x100000);
  EXPECT_EQ(RunTestKernel(*engine_, other, v1, params, {1, 1, 1}, {32, 1, 1}).outcome,
            SliceOutcome::kDone);
  EXPECT_EQ(other.ReadArray<uint32_t>(kOut, 1)[0], 1u);
  EXPECT_EQ(engine_->cache_stats().entries, 2u);
  engine_->FlushCodeCache();
  EXPECT_EQ(engine_->cache_stats().entries, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Compute, EngineTest,
    ::testing::Combine(::testing::Values(InterpreterVariant::kGeneric, InterpreterVariant::kBest),
                       ::testing::Values(1, 2)),
    [](const auto& info) {
      return std::string(std::get<0>(info.param) == InterpreterVariant::kGeneric ? "Generic"
                                                                                 : "Best") +
             std::to_string(std::get<1>(info.param)) + "Workers";
    });

}  // namespace
}  // namespace gpuvm::sim::compute
