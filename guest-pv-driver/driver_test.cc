// The driver against the software GF100 through the native Bus: probe, memory, copies of every path
// (DMA from pinned/registered memory, BAR1, staged), memsets, fences, events, several channels and
// contexts, threads.
#include "guest-pv-driver/driver.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "gpu/hw/pfb.h"
#include "gpu/hw/vm.h"
#include "guest-pv-driver/driver_impl.h"
#include "guest-pv-driver/native_bus.h"

namespace gpuvm::guest {
namespace {

constexpr uint64_t kVram = 256ull << 20;

class DriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    NativeGpuOptions o;
    o.device.vram_size = kVram;
    auto gpu = NativeGpu::Create(o);
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    gpu_ = std::move(*gpu);
    auto driver = Driver::Create(gpu_->bus(), driver_options_);
    ASSERT_TRUE(driver.ok()) << driver.status().ToString();
    driver_ = std::move(*driver);
  }
  void TearDown() override { driver_.reset(); }

  std::unique_ptr<Context> NewContext(const ContextOptions& o = {}) {
    auto c = driver_->CreateContext(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  static std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
    std::vector<uint8_t> v(n);
    std::mt19937 rng(seed);
    for (auto& b : v) b = uint8_t(rng());
    return v;
  }

  DriverOptions driver_options_;
  std::unique_ptr<NativeGpu> gpu_;
  std::unique_ptr<Driver> driver_;
};

TEST_F(DriverTest, ProbeReportsTheDevice) {
  const DeviceInfo& info = driver_->info();
  EXPECT_EQ(info.chipset, 0xc0u);
  EXPECT_EQ(info.name, "Quadro 6000");
  EXPECT_EQ(info.vram_bytes, kVram);
  EXPECT_EQ(info.fb_partitions, 1u);
  EXPECT_EQ(info.large_page_bytes, 128u << 10);
  EXPECT_EQ(info.channels, 128u);
}

TEST_F(DriverTest, HostToDeviceAndBack) {
  auto ctx = NewContext();
  ASSERT_NE(ctx, nullptr);
  Channel* ch = ctx->default_channel();
  for (uint64_t size : {1ull, 3ull, 4096ull, 4097ull, 100000ull, 5ull << 20}) {
    auto a = ctx->AllocDevice(size);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    auto in = Pattern(size, uint32_t(size));
    ASSERT_TRUE(ch->CopyHostToDevice(a->va, in.data(), size).ok());
    std::vector<uint8_t> out(size, 0);
    Status s = ch->CopyDeviceToHost(out.data(), a->va, size);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(in, out) << size;
    ASSERT_TRUE(ctx->Free(a->va).ok());
  }
}

}  // namespace
}  // namespace gpuvm::guest
