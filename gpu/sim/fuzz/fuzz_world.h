// The world both device fuzz targets start from: a fresh single-step software GPU (small VRAM,
// short time slices, a little host memory, a trivial compute engine) set up through its registers
// by the TestDriver, with one channel whose VM maps data pages of every kind (VRAM, SYSRAM,
// read-only, supervisor-only, large). A fresh world per input keeps every run reproducible.
#ifndef GPUVM_GPU_SIM_FUZZ_FUZZ_WORLD_H_
#define GPUVM_GPU_SIM_FUZZ_FUZZ_WORLD_H_

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "gpu/hw/classes.h"
#include "gpu/sim/device.h"
#include "gpu/sim/pinned_host_memory.h"
#include "gpu/sim/testing/test_driver.h"

namespace gpuvm::sim::fuzz {

// Fixed virtual addresses in the channel's VM, so fuzzed commands can name them.
inline constexpr uint64_t kDataVa = 0x1000000;    // 64 KiB VRAM
inline constexpr uint64_t kSysVa = 0x1100000;     // 16 KiB SYSRAM
inline constexpr uint64_t kRoVa = 0x1200000;      // 4 KiB read-only
inline constexpr uint64_t kPrivVa = 0x1300000;    // 4 KiB supervisor-only
inline constexpr uint64_t kLargeVa = 0x1400000;   // 128 KiB large page
inline constexpr uint64_t kHostBus = 0x40000000;  // where the host buffer sits on the bus
inline constexpr uint64_t kHostSize = 16 << 10;

// A compute engine whose jobs touch their code and first constant buffer, then finish (or fault).
class FuzzEngine final : public ComputeEngine {
 public:
  class Job final : public ComputeJob {
   public:
    Job(const ComputeLaunch& l, ChannelMemory* m) : launch_(l), memory_(m) {}
    SliceOutcome RunSlice() override {
      MemoryFault f;
      const uint64_t va = (++slices_ == 1) ? launch_.code_address + launch_.entry_offset
                                           : launch_.const_buffers[0].address;
      if (memory_->Translate(va & ~3ull, 4, slices_ == 2, &f) == nullptr) {
        fault_.kind = ComputeFault::Kind::kMmu;
        fault_.mmu = f;
        return SliceOutcome::kFaulted;
      }
      if (launch_.grid_x == 0) {
        fault_.kind = ComputeFault::Kind::kInvalidLaunch;
        fault_.message = "zero grid";
        return SliceOutcome::kFaulted;
      }
      return slices_ >= 2 ? SliceOutcome::kDone : SliceOutcome::kMore;
    }
    const ComputeFault& fault() const override { return fault_; }
    uint64_t thread_instructions() const override { return slices_; }

   private:
    ComputeLaunch launch_;
    ChannelMemory* memory_;
    int slices_ = 0;
    ComputeFault fault_;
  };
  std::unique_ptr<ComputeJob> Start(const ComputeLaunch& l, ChannelMemory* m) override {
    return std::make_unique<Job>(l, m);
  }
  void FlushCodeCache() override {}
};

struct World {
  static constexpr uint64_t kVramSize = 8 << 20;

  World() {
    host = static_cast<uint8_t*>(std::aligned_alloc(4096, kHostSize));
    std::memset(host, 0, kHostSize);
    (void)host_memory.Register(kHostBus, host, kHostSize);
    SimDeviceOptions options;
    options.vram_size = kVramSize;
    options.threaded = false;
    options.host_memory = &host_memory;
    options.compute_engine = std::make_shared<FuzzEngine>();
    options.time_slice = std::chrono::microseconds(50);
    options.bar1_size = 32 << 20;  // the USER area sits at 16 MiB in BAR1
    options.bar3_size = 1 << 20;
    device = std::move(SimDevice::Create(options)).value();
    driver = std::make_unique<testing::TestDriver>(device.get(), kVramSize, 0x10000,
                                                   /*zero_fill=*/false);
    vm = driver->CreateVm(0xffffffffff);
    vm->Map(kDataVa, driver->AllocVram(64 << 10), 64 << 10);
    testing::MapFlags f;
    f.target = gf100::vm::Target::kSysramNoSnoop;
    vm->Map(kSysVa, kHostBus, kHostSize, f);
    f = {};
    f.read_only = true;
    vm->Map(kRoVa, driver->AllocVram(0x1000), 0x1000, f);
    f = {};
    f.supervisor_only = true;
    vm->Map(kPrivVa, driver->AllocVram(0x1000), 0x1000, f);
    f = {};
    f.large = true;
    vm->Map(kLargeVa, driver->AllocVram(128 << 10, 128 << 10), 128 << 10, f);
    testing::ChannelOptions co;
    co.ib_entries = 16;
    co.pushbuffer_size = 64 << 10;
    channel = driver->CreateChannel(1, vm, co);
    driver->EnableInterrupts();
    device->SetInterruptHandler([](bool) {});
  }
  ~World() {
    driver.reset();
    device.reset();
    std::free(host);
  }

  uint8_t* host = nullptr;
  PinnedHostMemory host_memory;
  std::unique_ptr<SimDevice> device;
  std::unique_ptr<testing::TestDriver> driver;
  testing::Vm* vm = nullptr;
  testing::Channel* channel = nullptr;
};

}  // namespace gpuvm::sim::fuzz

#endif  // GPUVM_GPU_SIM_FUZZ_FUZZ_WORLD_H_
