// Test helpers shared by the driver's tests: a compute engine double that records launches (and the
// constant-bank bytes they carry) and fails on request, a fixture bringing up the software GPU
// with that engine plus a Driver through the native Bus (and the driver tests' own fixture on it),
// a Bus that forwards to another for tests that change some of its answers, and patterned data.
//
// Threading: FakeComputeEngine is called on the device's engine thread and read by the test thread
// under its mutex.
#ifndef GPUVM_GUEST_PV_DRIVER_TEST_UTIL_H_
#define GPUVM_GUEST_PV_DRIVER_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

#include "gpu/sim/compute_engine.h"
#include "guest-pv-driver/driver.h"
#include "guest-pv-driver/native_bus.h"

namespace gpuvm::guest::testing {

class FakeComputeEngine final : public sim::ComputeEngine {
 public:
  enum class Behaviour { kSucceed, kTrap, kMmuFault };
  struct Record {
    sim::ComputeLaunch launch;
    std::vector<uint8_t> bank0;  // the first 64 bytes of constant bank 0 at Start
    std::vector<uint8_t> bank2;  // the first 16 bytes of bank 2, when bound
  };

  std::unique_ptr<sim::ComputeJob> Start(const sim::ComputeLaunch& launch,
                                         sim::ChannelMemory* memory) override {
    Record r;
    r.launch = launch;
    r.bank0 = ReadBytes(memory, launch.const_buffers[0], 64);
    r.bank2 = ReadBytes(memory, launch.const_buffers[2], 16);
    std::lock_guard lock(mu_);
    records_.push_back(r);
    return std::make_unique<Job>(behaviour_, fault_address_, memory);
  }
  void FlushCodeCache() override {
    std::lock_guard lock(mu_);
    ++flushes_;
  }

  void set_behaviour(Behaviour b, uint64_t fault_address = 0) {
    std::lock_guard lock(mu_);
    behaviour_ = b;
    fault_address_ = fault_address;
  }
  std::vector<Record> records() {
    std::lock_guard lock(mu_);
    return records_;
  }
  int flushes() {
    std::lock_guard lock(mu_);
    return flushes_;
  }

 private:
  class Job final : public sim::ComputeJob {
   public:
    Job(Behaviour b, uint64_t address, sim::ChannelMemory* memory)
        : behaviour_(b), address_(address), memory_(memory) {}
    sim::SliceOutcome RunSlice() override {
      switch (behaviour_) {
        case Behaviour::kSucceed:
          return sim::SliceOutcome::kDone;
        case Behaviour::kTrap:
          fault_.kind = sim::ComputeFault::Kind::kTrap;
          fault_.message = "trap instruction";
          return sim::SliceOutcome::kFaulted;
        case Behaviour::kMmuFault: {
          sim::MemoryFault mf;
          if (memory_->Translate(address_, 4, true, &mf) != nullptr)
            return sim::SliceOutcome::kDone;
          fault_.kind = sim::ComputeFault::Kind::kMmu;
          fault_.mmu = mf;
          fault_.message = "st.global";
          return sim::SliceOutcome::kFaulted;
        }
      }
      return sim::SliceOutcome::kDone;
    }
    const sim::ComputeFault& fault() const override { return fault_; }
    uint64_t thread_instructions() const override { return 0; }

   private:
    Behaviour behaviour_;
    uint64_t address_;
    sim::ChannelMemory* memory_;
    sim::ComputeFault fault_;
  };

  static std::vector<uint8_t> ReadBytes(sim::ChannelMemory* memory,
                                        const sim::ComputeLaunch::ConstBuffer& cb, uint32_t n) {
    std::vector<uint8_t> out;
    if (!cb.valid) return out;
    sim::MemoryFault mf;
    if (const uint8_t* p = memory->Translate(cb.address, n, false, &mf)) out.assign(p, p + n);
    return out;
  }

  std::mutex mu_;
  Behaviour behaviour_ = Behaviour::kSucceed;
  uint64_t fault_address_ = 0;
  std::vector<Record> records_;
  int flushes_ = 0;
};

// The software GPU (64 MiB VRAM unless told) with an optional compute engine, and a Driver on it.
class GpuFixture : public ::testing::Test {
 protected:
  void StartGpu(std::shared_ptr<sim::ComputeEngine> engine, const DriverOptions& options = {},
                uint64_t vram_bytes = 64ull << 20) {
    NativeGpuOptions o;
    o.device.vram_size = vram_bytes;
    o.device.compute_engine = std::move(engine);
    auto gpu = NativeGpu::Create(o);
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    gpu_ = std::move(*gpu);
    auto driver = Driver::Create(gpu_->bus(), options);
    ASSERT_TRUE(driver.ok()) << driver.status().ToString();
    driver_ = std::move(*driver);
  }
  void TearDown() override { driver_.reset(); }

  std::unique_ptr<Context> NewContext(const ContextOptions& options = {}) {
    auto c = driver_->CreateContext(options);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  std::unique_ptr<NativeGpu> gpu_;
  std::unique_ptr<Driver> driver_;
};

inline constexpr uint64_t kVram = 256ull << 20;

inline std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

// A Bus that forwards everything to another; tests override what they change.
class ForwardingBus : public Bus {
 public:
  explicit ForwardingBus(Bus* inner) : inner_(inner) {}
  const gpu::PciIdentity& pci() const override { return inner_->pci(); }
  uint64_t Read(Bar bar, uint64_t offset, Width width) override {
    return inner_->Read(bar, offset, width);
  }
  void Write(Bar bar, uint64_t offset, Width width, uint64_t value) override {
    inner_->Write(bar, offset, width, value);
  }
  Status ReadBlock(Bar bar, uint64_t offset, void* dst, uint64_t length) override {
    return inner_->ReadBlock(bar, offset, dst, length);
  }
  Status WriteBlock(Bar bar, uint64_t offset, const void* src, uint64_t length) override {
    return inner_->WriteBlock(bar, offset, src, length);
  }
  Result<std::unique_ptr<DmaMapping>> MapDma(void* host, uint64_t length) override {
    return inner_->MapDma(host, length);
  }
  Status SetInterruptHandler(std::function<void(bool)> handler) override {
    return inner_->SetInterruptHandler(std::move(handler));
  }

 protected:
  Bus* const inner_;
};

// The driver's own tests (driver_test.cc, driver_sync_test.cc): a 256 MiB GPU, and no DMA mapping
// left behind when the driver is gone.
class GuestDriverTest : public GpuFixture {
 protected:
  void SetUp() override { StartGpu(nullptr, {}, kVram); }
  // Restarts the driver on a B (a ForwardingBus that stalls, delays, ...) around the GPU's bus. The
  // fixture owns it, so it outlives the driver however the test ends. Null (and a failure) when the
  // driver does not start.
  template <typename B>
  B* RestartDriverOn() {
    driver_.reset();
    auto bus = std::make_unique<B>(gpu_->bus());
    B* raw = bus.get();
    wrapper_ = std::move(bus);
    auto driver = Driver::Create(raw);
    EXPECT_TRUE(driver.ok()) << driver.status().ToString();
    if (!driver.ok()) return nullptr;
    driver_ = std::move(*driver);
    return raw;
  }
  std::unique_ptr<ForwardingBus> wrapper_;  // TearDown ends the driver before this goes
  void TearDown() override {
    driver_.reset();
    if (gpu_ != nullptr) {
      EXPECT_EQ(static_cast<NativeBus*>(gpu_->bus())->mapped_bytes(), 0u) << "DMA mappings leaked";
    }
  }
};

}  // namespace gpuvm::guest::testing

#endif  // GPUVM_GUEST_PV_DRIVER_TEST_UTIL_H_
