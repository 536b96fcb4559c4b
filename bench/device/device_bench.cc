// gpuvm-device-bench: figures of the software GF100, measured in one run and printed as medians
// (with min and max) over repeated runs:
//   - MMIO access cost through the gpu::Device port (BAR0 register read/write, BAR1 aperture
//   read/write);
//   - the MMU's translation cost with a TLB hit and with a miss (a full page walk);
//   - copy-engine (PCOPY) bandwidth for 64 MiB VRAM->VRAM and SYSRAM->VRAM, next to memcpy of the
//   same
//     size between two host buffers, and their ratio (target: >= 50 % of memcpy).
// Usage: gpuvm-device-bench [--out DIR] [--runs N]. Writes DIR/device-bench.json.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "gpu/hw/classes.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pmc.h"
#include "gpu/sim/device.h"
#include "gpu/sim/pinned_host_memory.h"
#include "gpu/sim/testing/test_driver.h"

namespace gpuvm {
namespace {

using Clock = std::chrono::steady_clock;
using sim::testing::Channel;
using sim::testing::MapFlags;
using sim::testing::TestDriver;
using sim::testing::Vm;

constexpr uint64_t kCopyBytes = 64ull << 20;
constexpr uint64_t kHostBus = 0x100000000ull;  // SYSRAM bus address of the host buffer (4 GiB)

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Summary {
  double median = 0, min = 0, max = 0;
};
Summary Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Summary s;
  s.min = v.front();
  s.max = v.back();
  s.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  return s;
}

// Runs `body` `runs` times (after one warm-up) and returns the per-run values it reports.
std::vector<double> Repeat(int runs, const std::function<double()>& body) {
  body();
  std::vector<double> values;
  for (int i = 0; i < runs; ++i) values.push_back(body());
  return values;
}

uint8_t* MapTouched(uint64_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  std::memset(p, 0x5a, bytes);
  return static_cast<uint8_t*>(p);
}

struct Row {
  std::string name;
  std::string unit;
  Summary s;
};

class Bench {
 public:
  explicit Bench(int runs) : runs_(runs) {}

  int Run(const std::string& out_dir) {
    host_ = MapTouched(kCopyBytes);
    if (!host_memory_.Register(kHostBus, host_, kCopyBytes).ok())
      return Fail("register host memory");
    sim::SimDeviceOptions options;
    options.host_memory = &host_memory_;
    auto device = sim::SimDevice::Create(options);
    if (!device.ok()) return Fail(device.status().ToString());
    device_ = std::move(device).value();
    // A fresh device's VRAM is zero: no need to clear allocations through PRAMIN.
    driver_ = std::make_unique<TestDriver>(device_.get(), device_->vram_size(), 0x10000,
                                           /*zero_fill=*/false);

    MeasureMmio();
    MeasurePageWalks();
    MeasureCopies();
    Print();
    return WriteJson(out_dir);
  }

 private:
  int Fail(const std::string& what) const {
    std::fprintf(stderr, "gpuvm-device-bench: %s\n", what.c_str());
    return 1;
  }

  void Add(std::string name, std::string unit, const std::vector<double>& values) {
    rows_.push_back({std::move(name), std::move(unit), Summarize(values)});
  }

  void MeasureMmio() {
    constexpr int kN = 1'000'000;
    // BAR0: PMC_BOOT_0 (read) and PMC_INTR_MASK_HOST (write, no side effect while interrupts are
    // off).
    Add("mmio_bar0_read", "ns", Repeat(runs_, [&] {
          uint32_t sink = 0;
          const auto t0 = Clock::now();
          for (int i = 0; i < kN; ++i) sink += device_->ReadReg(gf100::pmc::kBoot0);
          const double ns = Seconds(Clock::now() - t0) * 1e9 / kN;
          if (sink == 1) std::puts("");
          return ns;
        }));
    Add("mmio_bar0_write", "ns", Repeat(runs_, [&] {
          const auto t0 = Clock::now();
          for (int i = 0; i < kN; ++i) device_->WriteReg(gf100::pmc::kIntrMaskHost, 0xffffffff);
          return Seconds(Clock::now() - t0) * 1e9 / kN;
        }));
    // BAR1: a mapped page (through the BAR1 VM and the TLB).
    Vm* bar1 = driver_->CreateVm(device_->pci().bar1_size - 1);
    driver_->BindBar(gpu::Bar::k1, bar1);
    bar1->Map(0x10000, driver_->AllocVram(0x1000), 0x1000);
    bar1->Flush();
    Add("mmio_bar1_read", "ns", Repeat(runs_, [&] {
          uint32_t sink = 0;
          const auto t0 = Clock::now();
          for (int i = 0; i < kN; ++i) sink += device_->Read32(gpu::Bar::k1, 0x10000 + (i & 0xffc));
          const double ns = Seconds(Clock::now() - t0) * 1e9 / kN;
          if (sink == 1) std::puts("");
          return ns;
        }));
    Add("mmio_bar1_write", "ns", Repeat(runs_, [&] {
          const auto t0 = Clock::now();
          for (int i = 0; i < kN; ++i) device_->Write32(gpu::Bar::k1, 0x10000 + (i & 0xffc), i);
          return Seconds(Clock::now() - t0) * 1e9 / kN;
        }));
  }

  void MeasurePageWalks() {
    // A VM with 4096 mapped small pages (16 MiB).
    Vm* vm = driver_->CreateVm();
    const uint64_t va = vm->AllocMapped(16 << 20);
    vm->Flush();
    sim::Mmu* mmu = device_->mmu_for_testing();
    sim::AddressSpace* space = mmu->GetSpace({gf100::vm::Target::kVram, vm->page_directory()});
    constexpr int kPages = 4096;
    constexpr int kN = 1'000'000;
    Add("translate_tlb_hit", "ns", Repeat(runs_, [&] {
          sim::MemoryFault fault;
          uintptr_t sink = 0;
          const auto t0 = Clock::now();
          for (int i = 0; i < kN; ++i) {
            sink += uintptr_t(mmu->Translate(space, ~0ull, va + (uint64_t(i & 7) << 12), 4, false,
                                             false, &fault));
          }
          const double ns = Seconds(Clock::now() - t0) * 1e9 / kN;
          if (sink == 1) std::puts("");
          return ns;
        }));
    Add("translate_tlb_miss", "ns", Repeat(runs_, [&] {
          sim::MemoryFault fault;
          uintptr_t sink = 0;
          const auto t0 = Clock::now();
          for (int i = 0; i < kN / 10; ++i) {
            mmu->FlushAll();  // O(1): bumps the TLB generation
            sink += uintptr_t(mmu->Translate(space, ~0ull, va + (uint64_t(i % kPages) << 12), 4,
                                             false, false, &fault));
          }
          const double ns = Seconds(Clock::now() - t0) * 1e9 / (kN / 10);
          if (sink == 1) std::puts("");
          return ns;
        }));
    Add("page_walk", "ns", Repeat(runs_, [&] {
          sim::PageTranslation t;
          gf100::FaultReason reason;
          uintptr_t sink = 0;
          const auto t0 = Clock::now();
          for (int i = 0; i < kN; ++i) {
            mmu->Walk(*space, va + (uint64_t(i % kPages) << 12), &t, &reason);
            sink += uintptr_t(t.page);
          }
          const double ns = Seconds(Clock::now() - t0) * 1e9 / kN;
          if (sink == 1) std::puts("");
          return ns;
        }));
  }

  // One PCOPY of kCopyBytes from src to dst, then a semaphore release; returns GB/s.
  double TimedCopy(Channel* ch, uint64_t src, uint64_t dst, uint64_t sem_va, uint64_t sem_phys) {
    namespace copy = gf100::copy;
    ++sequence_;
    ch->Inc(4, copy::kOffsetInUpper,
            {uint32_t(src >> 32), uint32_t(src), uint32_t(dst >> 32), uint32_t(dst)});
    ch->Inc(4, copy::kLineLengthIn, {uint32_t(kCopyBytes)});
    ch->Inc(4, copy::kLaunchDma, {copy::kSrcPitch | copy::kDstPitch | 1});
    ch->Inc(0, gf100::host::kSemaphoreA,
            {uint32_t(sem_va >> 32), uint32_t(sem_va), sequence_,
             gf100::host::kSemOpRelease | gf100::host::kSemReleaseSize4});
    const auto t0 = Clock::now();
    ch->Submit();  // returns at once: the device thread runs the copy
    device_->WaitIdle(std::chrono::minutes(1));
    const double s = Seconds(Clock::now() - t0);
    if (driver_->Read32(sem_phys) != sequence_ || !device_->channel_error(ch->id()).ok()) {
      std::fprintf(stderr, "copy failed: %s\n", device_->channel_error(ch->id()).message.c_str());
      std::exit(1);
    }
    return double(kCopyBytes) / s / 1e9;
  }

  void MeasureCopies() {
    Vm* vm = driver_->CreateVm();
    uint64_t sem_phys;
    const uint64_t src = vm->AllocMapped(kCopyBytes);
    const uint64_t dst = vm->AllocMapped(kCopyBytes);
    const uint64_t sem = vm->AllocMapped(0x1000, &sem_phys);
    const uint64_t sys = vm->AllocVa(kCopyBytes);
    MapFlags sysram;
    sysram.target = gf100::vm::Target::kSysramSnooped;
    vm->Map(sys, kHostBus, kCopyBytes, sysram);
    vm->Flush();
    Channel* ch = driver_->CreateChannel(0, vm);
    ch->Inc(4, gf100::host::kSetObject, {gf100::kClassCopy});

    std::vector<double> vram, sysram_to_vram, memcpy_gbs;
    uint8_t* a = MapTouched(kCopyBytes);
    uint8_t* b = MapTouched(kCopyBytes);
    TimedCopy(ch, src, dst, sem, sem_phys);  // warm-up: first touch of the VRAM memfd pages
    TimedCopy(ch, sys, dst, sem, sem_phys);
    for (int i = 0; i < runs_; ++i) {
      // Interleaved, so the three see the same machine state.
      const auto t0 = Clock::now();
      std::memcpy(b, a, kCopyBytes);
      memcpy_gbs.push_back(double(kCopyBytes) / Seconds(Clock::now() - t0) / 1e9);
      vram.push_back(TimedCopy(ch, src, dst, sem, sem_phys));
      sysram_to_vram.push_back(TimedCopy(ch, sys, dst, sem, sem_phys));
    }
    munmap(a, kCopyBytes);
    munmap(b, kCopyBytes);
    Add("memcpy_64MiB", "GB/s", memcpy_gbs);
    Add("copy_vram_to_vram_64MiB", "GB/s", vram);
    Add("copy_sysram_to_vram_64MiB", "GB/s", sysram_to_vram);
    const double m = Summarize(memcpy_gbs).median;
    ratio_vram_ = Summarize(vram).median / m;
    ratio_sysram_ = Summarize(sysram_to_vram).median / m;
  }

  void Print() const {
    std::printf("gpuvm-device-bench (revision %s, %d runs, medians)\n", GPUVM_REVISION, runs_);
    std::printf("  %-28s %12s %12s %12s  %s\n", "case", "median", "min", "max", "unit");
    for (const Row& r : rows_) {
      std::printf("  %-28s %12.2f %12.2f %12.2f  %s\n", r.name.c_str(), r.s.median, r.s.min,
                  r.s.max, r.unit.c_str());
    }
    std::printf("  copy VRAM->VRAM   / memcpy: %5.1f %%  (target >= 50 %%)\n", 100 * ratio_vram_);
    std::printf("  copy SYSRAM->VRAM / memcpy: %5.1f %%  (target >= 50 %%)\n", 100 * ratio_sysram_);
  }

  int WriteJson(const std::string& out_dir) const {
    if (out_dir.empty()) return 0;
    const std::string path = out_dir + "/device-bench.json";
    std::ofstream out(path);
    if (!out) return Fail("cannot write " + path);
    out << "{\n  \"program\": \"gpuvm-device-bench\",\n  \"revision\": \"" << GPUVM_REVISION
        << "\",\n  \"runs\": " << runs_ << ",\n  \"cases\": [\n";
    for (size_t i = 0; i < rows_.size(); ++i) {
      const Row& r = rows_[i];
      out << "    {\"name\": \"" << r.name << "\", \"unit\": \"" << r.unit
          << "\", \"median\": " << r.s.median << ", \"min\": " << r.s.min
          << ", \"max\": " << r.s.max << "}" << (i + 1 < rows_.size() ? "," : "") << "\n";
    }
    out << "  ],\n  \"ratios\": {\"copy_vram_to_vram_vs_memcpy\": " << ratio_vram_
        << ", \"copy_sysram_to_vram_vs_memcpy\": " << ratio_sysram_ << "}\n}\n";
    std::printf("  results: %s\n", path.c_str());
    return 0;
  }

  const int runs_;
  uint8_t* host_ = nullptr;
  sim::PinnedHostMemory host_memory_;
  std::unique_ptr<sim::SimDevice> device_;
  std::unique_ptr<TestDriver> driver_;
  std::vector<Row> rows_;
  uint32_t sequence_ = 0;
  double ratio_vram_ = 0, ratio_sysram_ = 0;
};

}  // namespace
}  // namespace gpuvm

int main(int argc, char** argv) {
  std::string out_dir;
  int runs = 7;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--out" && i + 1 < argc) {
      out_dir = argv[++i];
    } else if (arg == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--out DIR] [--runs N]\n", argv[0]);
      return 2;
    }
  }
  return gpuvm::Bench(runs).Run(out_dir);
}
