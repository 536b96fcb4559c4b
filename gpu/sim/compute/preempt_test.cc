// Preemption of the compute engine (docs/SOFTWARE-GPU.md "Preemption"): a grid switched out at a
// slice boundary and resumed — on an engine with another number of workers, several times over —
// ends with results and an instruction count bit-identical to an uninterrupted run; a drained grid
// saves no block; a saved context that was cut short or altered is refused or only misleads the
// grid that owns it, never the host (run under ASan/UBSan).
#include <gtest/gtest.h>

#include "gpu/isa/assembler.h"
#include "gpu/sim/compute/simt_engine.h"
#include "gpu/sim/compute/test_support.h"

namespace gpuvm::sim::compute {
namespace {

constexpr uint64_t kIn = kTestDataAddress;
constexpr uint64_t kOut = kTestDataAddress + 0x80000;
constexpr uint32_t kIterations = 400;
constexpr std::array<uint32_t, 3> kGrid = {6, 1, 1};
constexpr std::array<uint32_t, 3> kBlock = {48, 1, 1};  // the second warp has 16 lanes
constexpr uint32_t kThreads = 6 * 48;

// Every piece of state a context holds is live across slices: shared memory exchanged through
// barriers, local memory, divergent paths that rejoin, registers and predicates.
constexpr const char* kKernel = R"(
    .params 20
    .shared 256
    .local 16
    s2r.u32 r0, %tid.x
    s2r.u32 r1, %ctaid.x
    s2r.u32 r2, %ntid.x
    mad.u32 r8, r1, r2, r0
    ld.const.c0.u64 r4, [rz+8]
    ld.const.c0.u32 r6, [rz+16]
    shl.u32 r11, r0, 2
    xor.u32 r13, r0, 1
    shl.u32 r14, r13, 2
    mov.u32 r20, r8
    mov.u32 r10, 0
  loop:
    st.shared.u32 [r11], r20
    bar 0
    ld.shared.u32 r15, [r14]
    bar 0
    add.u32 r16, r10, r0
    and.u32 r16, r16, 1
    setp.eq.u32 p1, r16, 0
    @p1 bra even
    mad.u32 r20, r20, 3, r15
    bra join
  even:
    xor.u32 r20, r20, r15
    add.u32 r20, r20, 7
  join:
    st.local.u32 [rz+4], r20
    ld.local.u32 r20, [rz+4]
    add.u32 r10, r10, 1
    setp.lt.u32 p0, r10, r6
    @p0 bra loop
    mulwide.u32 r30, r8, 4
    add.u64 r30, r4, r30
    st.global.a64.u32 [r30], r20
    exit
)";

class PreemptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::vector<uint8_t>> code = isa::Assemble(kKernel);
    ASSERT_TRUE(code.ok()) << code.status().ToString();
    code_ = *code;
    mem_.Map(kTestDataAddress, 0x100000);
    mem_.Map(kTestCodeAddress, code_.size());
    mem_.Write(kTestCodeAddress, code_.data(), code_.size());
    ParamBuffer params;
    params.Add(kIn).Add(kOut).Add(kIterations);
    mem_.Map(kTestParamAddress, params.bytes().size());
    mem_.Write(kTestParamAddress, params.bytes().data(), params.bytes().size());
    launch_.grid_x = kGrid[0];
    launch_.block_x = kBlock[0];
    launch_.shared_size = 256;
    launch_.code_address = kTestCodeAddress;
    launch_.shared_base = kTestSharedBase;
    launch_.local_base = kTestLocalBase;
    launch_.const_buffers[0] = {true, kTestParamAddress,
                                static_cast<uint32_t>(params.bytes().size())};
    // The reference: one uninterrupted run.
    auto engine = SimtEngine::Create({.workers = 2});
    auto job = engine->Start(launch_, &mem_);
    SliceOutcome o;
    while ((o = job->RunSlice()) == SliceOutcome::kMore) {
    }
    ASSERT_EQ(o, SliceOutcome::kDone) << job->fault().message;
    want_ = Out();
    want_instructions_ = job->thread_instructions();
    ClearOut();
  }
  std::vector<uint32_t> Out() const { return mem_.ReadArray<uint32_t>(kOut, kThreads); }
  void ClearOut() { mem_.WriteArray(kOut, std::vector<uint32_t>(kThreads, 0)); }
  static std::unique_ptr<SimtEngine> SmallSlices(int workers) {
    return SimtEngine::Create({.workers = workers, .slice = std::chrono::microseconds(20)});
  }
  // Runs `job` to its end (at most `max_slices`); returns the last outcome.
  static SliceOutcome Finish(ComputeJob& job, int max_slices = 1'000'000) {
    SliceOutcome o = SliceOutcome::kMore;
    for (int i = 0; i < max_slices && o == SliceOutcome::kMore; ++i) o = job.RunSlice();
    return o;
  }
  // A context saved after `slices` slices of a fresh launch.
  std::vector<uint8_t> SavedAfter(SimtEngine& engine, int slices) {
    auto job = engine.Start(launch_, &mem_);
    for (int i = 0; i < slices; ++i) EXPECT_EQ(job->RunSlice(), SliceOutcome::kMore);
    std::vector<uint8_t> image;
    EXPECT_TRUE(job->SaveContext(&image));
    return image;
  }

  std::vector<uint8_t> code_;
  FakeChannelMemory mem_;
  ComputeLaunch launch_;
  std::vector<uint32_t> want_;
  uint64_t want_instructions_ = 0;
};

// A yield request ends a slice at the next check instead of its deadline (an hour here: without
// it the slice would run the grid to its end), the grid goes on correct afterwards, and once
// cleared slices run to their deadline again.
TEST_F(PreemptTest, ARequestedYieldEndsTheSliceEarly) {
  auto engine = SimtEngine::Create({.workers = 2, .slice = std::chrono::hours(1)});
  auto job = engine->Start(launch_, &mem_);
  engine->RequestYield();
  EXPECT_EQ(job->RunSlice(), SliceOutcome::kMore);
  EXPECT_LT(job->thread_instructions(), want_instructions_);
  EXPECT_EQ(job->RunSlice(), SliceOutcome::kMore);  // still asked: ends early again
  engine->ClearYield();
  EXPECT_EQ(job->RunSlice(), SliceOutcome::kDone) << job->fault().message;
  EXPECT_EQ(Out(), want_);
  EXPECT_EQ(job->thread_instructions(), want_instructions_);
}

TEST_F(PreemptTest, SwitchedOutAndResumedElsewhereIsBitIdentical) {
  // Switched out every third slice, resumed alternately on a 1-, 2- and 3-worker engine.
  std::unique_ptr<SimtEngine> engines[] = {SmallSlices(1), SmallSlices(2), SmallSlices(3)};
  std::unique_ptr<ComputeJob> job = engines[0]->Start(launch_, &mem_);
  int switches = 0;
  SliceOutcome o = SliceOutcome::kMore;
  for (int slice = 1; o == SliceOutcome::kMore; ++slice) {
    ASSERT_LT(slice, 1'000'000);
    o = job->RunSlice();
    if (o != SliceOutcome::kMore || slice % 3 != 0) continue;
    std::vector<uint8_t> image;
    ASSERT_TRUE(job->SaveContext(&image));
    EXPECT_GT(image.size(), code_.size());
    job = engines[++switches % 3]->Resume(image, &mem_);
  }
  ASSERT_EQ(o, SliceOutcome::kDone) << job->fault().message;
  EXPECT_GT(switches, 2);
  EXPECT_EQ(Out(), want_);
  EXPECT_EQ(job->thread_instructions(), want_instructions_);
}

TEST_F(PreemptTest, SavedContextHoldsBlocksInFlight) {
  // One worker, one block in flight: the image carries its registers, shared and local memory.
  auto engine = SmallSlices(1);
  std::vector<uint8_t> image = SavedAfter(*engine, 1);
  EXPECT_GT(image.size(), 256u + 16u * 64u);
  auto job = engine->Resume(image, &mem_);
  ASSERT_EQ(Finish(*job), SliceOutcome::kDone) << job->fault().message;
  EXPECT_EQ(Out(), want_);
}

TEST_F(PreemptTest, DrainFinishesStartedBlocksAndSavesNone) {
  auto engine = SmallSlices(2);
  std::vector<uint8_t> switched = SavedAfter(*engine, 1);
  ClearOut();
  auto job = engine->Start(launch_, &mem_);
  ASSERT_EQ(job->RunSlice(), SliceOutcome::kMore);
  job->Drain();
  EXPECT_FALSE(job->drained());
  SliceOutcome o = SliceOutcome::kMore;
  for (int i = 0; i < 1'000'000 && o == SliceOutcome::kMore && !job->drained(); ++i)
    o = job->RunSlice();
  ASSERT_EQ(o, SliceOutcome::kMore);
  ASSERT_TRUE(job->drained());
  // Started blocks finished and stored their results; no other block started.
  const std::vector<uint32_t> partial = Out();
  uint32_t finished = 0;
  for (uint32_t i = 0; i < kThreads; ++i) {
    if (partial[i] != 0) {
      EXPECT_EQ(partial[i], want_[i]) << i;
      ++finished;
    }
  }
  EXPECT_GT(finished, 0u);
  EXPECT_LT(finished, kThreads);
  std::vector<uint8_t> drained;
  ASSERT_TRUE(job->SaveContext(&drained));
  EXPECT_LT(drained.size(), switched.size());
  // Resumed, the grid starts the remaining blocks again.
  job = engine->Resume(drained, &mem_);
  ASSERT_EQ(Finish(*job), SliceOutcome::kDone) << job->fault().message;
  EXPECT_EQ(Out(), want_);
  EXPECT_EQ(job->thread_instructions(), want_instructions_);
}

TEST_F(PreemptTest, CutShortImagesAreRefused) {
  auto engine = SmallSlices(1);
  const std::vector<uint8_t> image = SavedAfter(*engine, 1);
  for (size_t len : {size_t{0}, size_t{3}, size_t{8}, size_t{40}, image.size() / 3,
                     image.size() / 2, image.size() - 1}) {
    std::vector<uint8_t> cut(image.begin(), image.begin() + len);
    auto job = engine->Resume(cut, &mem_);
    ASSERT_EQ(job->RunSlice(), SliceOutcome::kFaulted) << len;
    EXPECT_EQ(job->fault().kind, ComputeFault::Kind::kInvalidLaunch);
    EXPECT_NE(job->fault().message.find("context image rejected"), std::string::npos)
        << job->fault().message;
  }
  std::vector<uint8_t> longer = image;
  longer.push_back(0);
  auto job = engine->Resume(longer, &mem_);
  EXPECT_EQ(job->RunSlice(), SliceOutcome::kFaulted);
}

TEST_F(PreemptTest, AlteredImagesNeverHurtTheHost) {
  // Each byte of the image's structured part, and a sample of the rest, set to values that break
  // ranges: the job either refuses the image or runs (possibly to wrong results: its own loss).
  auto engine = SmallSlices(2);
  const std::vector<uint8_t> image = SavedAfter(*engine, 1);
  int refused = 0;
  for (size_t at = 0; at < image.size(); at += at < 1024 ? 1 : 211) {
    for (uint8_t value : {uint8_t{0xff}, uint8_t{0x01}}) {
      std::vector<uint8_t> bad = image;
      if (bad[at] == value) continue;
      bad[at] = value;
      auto job = engine->Resume(bad, &mem_);
      const SliceOutcome o = Finish(*job, 20);
      if (o == SliceOutcome::kFaulted) ++refused;
    }
  }
  EXPECT_GT(refused, 0);
}

TEST_F(PreemptTest, NothingToSaveBeforeTheFirstSliceOrAfterTheEnd) {
  auto engine = SmallSlices(1);
  auto job = engine->Start(launch_, &mem_);
  std::vector<uint8_t> image;
  EXPECT_FALSE(job->SaveContext(&image));
  ASSERT_EQ(Finish(*job), SliceOutcome::kDone);
  EXPECT_FALSE(job->SaveContext(&image));
  EXPECT_TRUE(image.empty());
}

}  // namespace
}  // namespace gpuvm::sim::compute
