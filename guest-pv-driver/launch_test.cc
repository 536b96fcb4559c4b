// Compute launches (class 0x90c0) as the driver programs them: every parameter arrives at the
// device's compute engine (checked with a recording engine), launches are validated like CUDA
// validates them, code-cache flushes follow code loads, and — when the real compute engine is in
// the build — a kernel really runs.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "guest-pv-driver/driver_impl.h"
#include "guest-pv-driver/test_util.h"

#ifdef GPUVM_HAVE_COMPUTE_ENGINE
#include "gpu/isa/assembler.h"
#include "gpu/isa/sample_kernels.h"
#include "gpu/sim/compute/simt_engine.h"
#endif

namespace gpuvm::guest {
namespace {

using testing::FakeComputeEngine;

class GuestDriverLaunchTest : public testing::GpuFixture {
 protected:
  void SetUp() override {
    engine_ = std::make_shared<FakeComputeEngine>();
    StartGpu(engine_);
    ctx_ = NewContext();
    ASSERT_NE(ctx_, nullptr);
    auto code = ctx_->LoadCode(std::vector<uint8_t>(256, 0));
    ASSERT_TRUE(code.ok());
    code_ = *code;
  }
  void TearDown() override {
    ctx_.reset();
    GpuFixture::TearDown();
  }

  LaunchParams Basic() {
    LaunchParams p;
    p.code_address = code_.va;
    return p;
  }
  Status Run(const LaunchParams& p) {
    auto f = ctx_->default_channel()->Launch(p);
    if (!f.ok()) return f.status();
    return ctx_->default_channel()->Wait(*f);
  }

  std::shared_ptr<FakeComputeEngine> engine_;
  std::unique_ptr<Context> ctx_;
  Allocation code_;
};

TEST_F(GuestDriverLaunchTest, EveryParameterArrives) {
  auto bank2 = ctx_->AllocDevice(256);
  ASSERT_TRUE(bank2.ok());
  const uint64_t addresses[2] = {0x1122334455667788, 0x99aabbccddeeff00};
  ASSERT_TRUE(ctx_->default_channel()->CopyHostToDevice(bank2->va, addresses, 16).ok());

  std::vector<uint8_t> params(37);
  for (size_t i = 0; i < params.size(); ++i) params[i] = uint8_t(i * 7 + 1);
  LaunchParams p = Basic();
  p.entry_offset = 128;
  p.grid = {300, 2, 3};
  p.block = {32, 4, 2};
  p.shared_bytes = 3000;
  p.local_bytes_per_thread = 64;
  p.params = params;
  p.banks = {{2, bank2->va, 256}};
  ASSERT_TRUE(Run(p).ok());

  auto records = engine_->records();
  ASSERT_EQ(records.size(), 1u);
  const sim::ComputeLaunch& l = records[0].launch;
  EXPECT_EQ(l.channel, ctx_->default_channel()->id());
  EXPECT_EQ(l.grid_x, 300u);
  EXPECT_EQ(l.grid_y, 2u);
  EXPECT_EQ(l.grid_z, 3u);
  EXPECT_EQ(l.block_x, 32u);
  EXPECT_EQ(l.block_y, 4u);
  EXPECT_EQ(l.block_z, 2u);
  EXPECT_EQ(l.shared_size, 3000u);
  EXPECT_EQ(l.code_address, code_.va);
  EXPECT_EQ(l.entry_offset, 128u);
  EXPECT_EQ(l.shared_base, kSharedWindow);
  EXPECT_EQ(l.local_base, kLocalWindow);
  EXPECT_NE(l.temp_address, 0u);
  EXPECT_GE(l.temp_size, 64u * 256);
  ASSERT_TRUE(l.const_buffers[0].valid);
  EXPECT_EQ(l.const_buffers[0].size, kMaxParamBytes);
  ASSERT_GE(records[0].bank0.size(), params.size());
  EXPECT_TRUE(std::equal(params.begin(), params.end(), records[0].bank0.begin()));
  EXPECT_FALSE(l.const_buffers[1].valid);
  ASSERT_TRUE(l.const_buffers[2].valid);
  EXPECT_EQ(l.const_buffers[2].address, bank2->va);
  EXPECT_EQ(l.const_buffers[2].size, 256u);
  ASSERT_EQ(records[0].bank2.size(), 16u);
  EXPECT_EQ(std::memcmp(records[0].bank2.data(), addresses, 16), 0);

  // Gdev's QUERY after the launch wrote the launch's sequence.
  const ReportSlot& query = ctx_->default_channel()->impl()->query_slot();
  EXPECT_EQ(query.Payload(), ctx_->default_channel()->last_fence().sequence);
  EXPECT_NE(query.Timestamp(), 0u);
}

TEST_F(GuestDriverLaunchTest, ParametersOfSuccessiveLaunchesDoNotMix) {
  for (uint32_t i = 1; i <= 5; ++i) {
    const uint32_t value = i * 1000;
    LaunchParams p = Basic();
    p.params = std::span(reinterpret_cast<const uint8_t*>(&value), 4);
    ASSERT_TRUE(ctx_->default_channel()->Launch(p).ok());
  }
  ASSERT_TRUE(ctx_->Synchronize().ok());
  auto records = engine_->records();
  ASSERT_EQ(records.size(), 5u);
  for (uint32_t i = 0; i < 5; ++i) {
    uint32_t got = 0;
    std::memcpy(&got, records[i].bank0.data(), 4);
    EXPECT_EQ(got, (i + 1) * 1000);
  }
}

TEST_F(GuestDriverLaunchTest, CodeCacheIsFlushedOnceAfterEachCodeChange) {
  const int base = engine_->flushes();
  ASSERT_TRUE(Run(Basic()).ok());
  EXPECT_EQ(engine_->flushes(), base + 1) << "first launch after LoadCode";
  ASSERT_TRUE(Run(Basic()).ok());
  EXPECT_EQ(engine_->flushes(), base + 1);
  auto more = ctx_->LoadCode(std::vector<uint8_t>(64, 1));
  ASSERT_TRUE(more.ok());
  ASSERT_TRUE(Run(Basic()).ok());
  EXPECT_EQ(engine_->flushes(), base + 2);
  // Another channel flushes for itself too.
  auto second = ctx_->CreateChannel();
  ASSERT_TRUE(second.ok());
  auto f = (*second)->Launch(Basic());
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*second)->Wait(*f).ok());
  EXPECT_EQ(engine_->flushes(), base + 2) << "a new channel starts with the current code";
}

TEST_F(GuestDriverLaunchTest, LaunchesAreValidated) {
  auto host = ctx_->AllocHost(4096);
  ASSERT_TRUE(host.ok());
  struct Case {
    const char* what;
    std::function<void(LaunchParams&)> change;
    StatusCode code;
  };
  std::vector<uint8_t> big_params(kMaxParamBytes + 1);
  const std::vector<Case> cases = {
      {"zero grid", [](LaunchParams& p) { p.grid[0] = 0; }, StatusCode::kInvalidArgument},
      {"grid x 65536", [](LaunchParams& p) { p.grid[0] = 65536; }, StatusCode::kInvalidArgument},
      {"zero block", [](LaunchParams& p) { p.block[2] = 0; }, StatusCode::kInvalidArgument},
      {"block x 1025", [](LaunchParams& p) { p.block[0] = 1025; }, StatusCode::kInvalidArgument},
      {"block z 65", [](LaunchParams& p) { p.block[2] = 65; }, StatusCode::kInvalidArgument},
      {"2048 threads",
       [](LaunchParams& p) {
         p.block = {32, 32, 2};
       },
       StatusCode::kInvalidArgument},
      // 48 KiB plus what a JIT may add for itself (isa::kMaxInternalSharedBytes), plus one.
      {"shared",
       [](LaunchParams& p) {
         p.shared_bytes = kMaxSharedBytesPerBlock + isa::kMaxInternalSharedBytes + 1;
       },
       StatusCode::kInvalidArgument},
      {"local", [](LaunchParams& p) { p.local_bytes_per_thread = (16 << 10) + 1; },
       StatusCode::kInvalidArgument},
      {"params", [&](LaunchParams& p) { p.params = big_params; }, StatusCode::kInvalidArgument},
      {"bank 0",
       [](LaunchParams& p) {
         p.banks = {{0, p.code_address, 64}};
       },
       StatusCode::kInvalidArgument},
      {"bank 16",
       [](LaunchParams& p) {
         p.banks = {{16, p.code_address, 64}};
       },
       StatusCode::kInvalidArgument},
      {"bank twice",
       [](LaunchParams& p) {
         p.banks = {{1, p.code_address, 64}, {1, p.code_address, 64}};
       },
       StatusCode::kInvalidArgument},
      {"bank size",
       [](LaunchParams& p) {
         p.banks = {{1, p.code_address, 6}};
       },
       StatusCode::kInvalidArgument},
      {"bank outside",
       [](LaunchParams& p) {
         p.banks = {{1, 0x7000, 64}};
       },
       StatusCode::kNotFound},
      {"code nowhere", [](LaunchParams& p) { p.code_address = 0x7000; }, StatusCode::kNotFound},
      {"code past its allocation", [](LaunchParams& p) { p.entry_offset = 250; },
       StatusCode::kOutOfRange},
      {"code in host memory", [&](LaunchParams& p) { p.code_address = host->va; },
       StatusCode::kInvalidArgument},
  };
  for (const Case& c : cases) {
    LaunchParams p = Basic();
    c.change(p);
    EXPECT_EQ(ctx_->default_channel()->Launch(p).status().code(), c.code) << c.what;
  }
  EXPECT_TRUE(engine_->records().empty());
  EXPECT_TRUE(ctx_->status().ok());
  LaunchParams ok = Basic();
  ok.grid = {65535, 65535, 65535};
  ok.block = {1024, 1, 1};
  EXPECT_TRUE(Run(ok).ok());
}

#ifdef GPUVM_HAVE_COMPUTE_ENGINE
// The real engine: c[i] = a[i] + b[i] for i < n, over several blocks.
TEST(GuestDriverRealEngine, VectorAdd) {
  auto engine =
      std::shared_ptr<sim::ComputeEngine>(sim::compute::SimtEngine::Create({.workers = 2}));
  NativeGpuOptions o;
  o.device.vram_size = 64ull << 20;
  o.device.compute_engine = engine;
  auto gpu = NativeGpu::Create(o);
  ASSERT_TRUE(gpu.ok());
  auto driver = Driver::Create((*gpu)->bus());
  ASSERT_TRUE(driver.ok());
  auto ctx = (*driver)->CreateContext();
  ASSERT_TRUE(ctx.ok());
  auto image = isa::Assemble(isa::kVaddAsm);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  auto code = (*ctx)->LoadCode(*image);
  ASSERT_TRUE(code.ok());
  const uint32_t n = 10000;
  auto a = (*ctx)->AllocDevice(n * 4);
  auto b = (*ctx)->AllocDevice(n * 4);
  auto c = (*ctx)->AllocDevice(n * 4);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  std::vector<uint32_t> ha(n), hb(n), hc(n, 0);
  for (uint32_t i = 0; i < n; ++i) {
    ha[i] = i * 3;
    hb[i] = 1000000 - i;
  }
  Channel* ch = (*ctx)->default_channel();
  ASSERT_TRUE(ch->CopyHostToDevice(a->va, ha.data(), n * 4).ok());
  ASSERT_TRUE(ch->CopyHostToDevice(b->va, hb.data(), n * 4).ok());
  struct {
    uint64_t a, b, c;
    uint32_t n;
  } args{a->va, b->va, c->va, n};
  LaunchParams p;
  p.code_address = code->va;
  p.grid = {(n + 255) / 256, 1, 1};
  p.block = {256, 1, 1};
  p.params = std::span(reinterpret_cast<const uint8_t*>(&args), 28);
  auto f = ch->Launch(p);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  Status s = ch->Wait(*f);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(ch->CopyDeviceToHost(hc.data(), c->va, n * 4).ok());
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(hc[i], ha[i] + hb[i]) << i;
}
#endif

}  // namespace
}  // namespace gpuvm::guest
