// The unmodified guest driver in pv VMs inside one process (tests/fv_test_vm.h): it finds the PV
// window itself, writes its page tables with para-virtual calls (one doorbell per call in
// pv-naive, per batch in pv-multicall) and computes correct results, alone and beside fv VMs; in an
// fv VM the same driver finds no window and writes its tables natively. docs/PARAVIRT.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/fv_gpu.h"
#include "gpu/hw/pbus.h"
#include "guest-pv-driver/driver.h"
#include "guest-pv-driver/pv_calls.h"
#include "tests/fv_test_vm.h"

namespace gpuvm::aggregator {
namespace {

using fv_testing::FvTestVm;
constexpr uint64_t kMiB = 1ull << 20;

guest::DriverOptions ParaVirtual() {
  guest::DriverOptions o;
  o.para_virtual = guest::DriverOptions::ParaVirtual::kOn;  // FvTestVm is not a remote Bus
  return o;
}

struct Outcome {
  std::string error;  // empty: correct
  guest::ParaVirtualCounters pv;
};

// One VM's workload through the unmodified driver: allocate (small and large pages), copy in
// (BAR1, staged), memset, copy back, free, a second context; checked.
Outcome Workload(guest::Bus* bus, uint32_t seed, int rounds = 1) {
  Outcome out;
  auto driver = guest::Driver::Create(bus, ParaVirtual());
  if (!driver.ok()) return {"driver: " + driver.status().ToString(), {}};
  for (int round = 0; round < rounds; ++round) {
    auto ctx = (*driver)->CreateContext();
    if (!ctx.ok()) return {"context: " + ctx.status().ToString(), {}};
    for (uint64_t n : {uint64_t(1024), uint64_t(3 * kMiB)}) {
      auto a = (*ctx)->AllocDevice(n);
      if (!a.ok()) return {"alloc: " + a.status().ToString(), {}};
      std::vector<uint32_t> in(n / 4), back(n / 4);
      for (size_t i = 0; i < in.size(); ++i) in[i] = uint32_t(i * 2654435761u) ^ seed;
      guest::Channel* ch = (*ctx)->default_channel();
      if (Status s = ch->CopyHostToDevice(a->va, in.data(), n); !s.ok()) {
        return {"htod: " + s.ToString(), {}};
      }
      auto f = ch->Memset32Async(a->va, seed, 16);
      if (!f.ok()) return {"memset: " + f.status().ToString(), {}};
      if (Status s = ch->CopyDeviceToHost(back.data(), a->va, n); !s.ok()) {
        return {"dtoh: " + s.ToString(), {}};
      }
      for (size_t i = 0; i < 16; ++i) in[i] = seed;
      if (in != back) return {"data mismatch at " + std::to_string(n) + " bytes", {}};
      if (Status s = (*ctx)->Free(a->va); !s.ok()) return {"free: " + s.ToString(), {}};
    }
  }
  out.pv = (*driver)->para_virtual_counters();
  return out;
}

class PvGuestTest : public ::testing::TestWithParam<FvMode> {
 protected:
  void SetUp() override {
    auto w = fv_testing::FvTestWorld::Create({});
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    world_ = std::move(*w);
  }
  FvTestVm* AddVm(FvMode mode, uint64_t vram = 64 * kMiB) {
    auto vm =
        world_->AddVm({.mode = mode, .vram_bytes = vram, .channels = 8, .vm_id = 0, .name = ""});
    EXPECT_TRUE(vm.ok()) << vm.status().ToString();
    return vm.ok() ? *vm : nullptr;
  }
  std::unique_ptr<fv_testing::FvTestWorld> world_;
};

TEST_P(PvGuestTest, OneVmRunsTheUnmodifiedDriverWithCalls) {
  FvTestVm* vm = AddVm(GetParam());
  ASSERT_NE(vm, nullptr);
  const Outcome o = Workload(vm, 7, 2);
  ASSERT_TRUE(o.error.empty()) << o.error << "\n" << world_->log();
  const bool naive = GetParam() == FvMode::kPvNaive;
  EXPECT_EQ(o.pv.mode, naive ? 1u : 2u);
  EXPECT_GT(o.pv.calls, 20u);
  if (naive) {
    EXPECT_EQ(o.pv.doorbells, o.pv.calls) << "one doorbell per call";
  } else {
    EXPECT_LT(o.pv.doorbells * 2, o.pv.calls) << "multicall batches";
  }
  const FullVirtGpu& g = vm->vgpu();
  const PvTableCounters& t = g.pv()->tables().counters();
  // The guest's counts are from before its driver went away (its teardown made a few more calls).
  EXPECT_GE(t.calls, o.pv.calls) << "the host applied every call the guest made";
  EXPECT_LT(t.calls, o.pv.calls + 16);
  EXPECT_EQ(t.refused, 0u) << world_->log();
  EXPECT_GE(g.pv()->counters().doorbells, o.pv.doorbells);
  if (naive) {
    EXPECT_EQ(g.pv()->counters().doorbells, t.calls);
  }
  EXPECT_EQ(g.pv()->counters().batches_refused, 0u);
  // No shadowing, no MMIO TLB flush: the calls did it all.
  const FvCounters& k = g.counters();
  EXPECT_EQ(k.shadow.scans, 0u);
  EXPECT_EQ(k.tlb_flushes, 0u);
  EXPECT_GT(k.submissions, 0u);
  EXPECT_GT(k.shadow_channels_built, 0u);
  EXPECT_EQ(k.faults, 0u) << world_->log();
  EXPECT_EQ(k.refused_memory, 0u) << "the driver never stores into its registered tables";
  EXPECT_GT(t.tables_registered, 2u);
  EXPECT_GT(t.tables_released, 0u) << "the first context's tables went with it";
}

TEST_P(PvGuestTest, BesideFvVmsEveryVmIsCorrect) {
  std::vector<FvTestVm*> vms = {AddVm(GetParam()), AddVm(FvMode::kLazy),
                                AddVm(GetParam(), 32 * kMiB), AddVm(FvMode::kOptimized)};
  std::vector<Outcome> outcomes(vms.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < vms.size(); ++i) {
    threads.emplace_back([&, i] { outcomes[i] = Workload(vms[i], uint32_t(i + 1) * 0x1111, 2); });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < vms.size(); ++i) {
    EXPECT_TRUE(outcomes[i].error.empty()) << i << ": " << outcomes[i].error;
  }
  EXPECT_GT(outcomes[0].pv.calls, 0u);
  EXPECT_EQ(outcomes[1].pv.mode, 0u) << "an fv VM has no PV window: native page tables";
  EXPECT_EQ(outcomes[1].pv.calls, 0u);
  EXPECT_GT(vms[1]->vgpu().counters().shadow.scans, 0u);
  // The pv VMs' slices and the fv VMs' chunks never meet.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (FvTestVm* vm : vms) {
    const VramMap* map = vm->vgpu().vram_map();
    for (uint64_t g = 0; g < map->guest_bytes(); g += VramMap::kChunk) {
      if (const uint64_t m = map->Lookup(g)) ranges.push_back({m, m + VramMap::kChunk});
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) EXPECT_LE(ranges[i - 1].second, ranges[i].first);
}

// Per-call errors whatever the batching: a refused call is the Status of the call in pv-naive, of
// the next Commit (the driver's next submission) in pv-multicall; the calls after it are applied
// all the same (sent again), and nothing of a refused aperture store is stored.
TEST_P(PvGuestTest, ARefusedCallIsItsOwnStatusOrTheNextCommits) {
  FvTestVm* vm = AddVm(GetParam());
  ASSERT_NE(vm, nullptr);
  auto calls = guest::PvCalls::Open(vm);
  ASSERT_TRUE(calls.ok()) << calls.status().ToString();
  guest::PvCalls& pv = **calls;
  const bool naive = GetParam() == FvMode::kPvNaive;
  constexpr uint64_t kPd = 0x100000;
  const uint64_t entry = 0;
  const Status write = pv.Write(0x200000, 0x210000, 0, std::span(&entry, 1));  // no such space
  const Status attach = pv.Attach(kPd, (1ull << 40) - 1, pv::SpaceKind::kChannel);
  const Status into_table = pv.BarFill(1, kPd, 4096, 0x5a5a5a5a);  // the registered directory
  const Status fill = pv.BarFill(1, 0x300000, 8192, 0x01010101);
  const Status commit = pv.Commit();
  EXPECT_TRUE(attach.ok()) << attach.ToString();
  EXPECT_TRUE(fill.ok()) << fill.ToString();
  if (naive) {
    EXPECT_EQ(write.code(), StatusCode::kNotFound) << write.ToString();
    EXPECT_EQ(into_table.code(), StatusCode::kInvalidArgument) << into_table.ToString();
    EXPECT_TRUE(commit.ok()) << commit.ToString();
    EXPECT_EQ(pv.counters().doorbells, 4u);
  } else {
    EXPECT_TRUE(write.ok() && into_table.ok()) << "queued: nothing rang yet";
    EXPECT_EQ(commit.code(), StatusCode::kNotFound) << commit.ToString();
    EXPECT_TRUE(pv.Commit().ok()) << "a refusal is returned once";
    // One batch, then what followed each refusal again.
    EXPECT_EQ(pv.counters().doorbells, 3u);
  }
  EXPECT_EQ(pv.counters().calls, 2u);
  const PvTables& t = vm->vgpu().pv()->tables();
  EXPECT_EQ(t.spaces(), 1u) << "the ATTACH after the refused WRITE was applied";
  EXPECT_EQ(t.counters().refused, 2u);
  const uint64_t base = vm->vgpu().vram_map()->static_base();
  const uint8_t* vram = world_->gpu().vram_mapping().data();
  EXPECT_EQ(vram[base + 0x300000 + 8191], 0x01);
  EXPECT_EQ(vram[base + kPd], 0u);
}

// pv-multicall rings only when the device could depend on what is queued: a read, a single or bulk
// aperture store, a Commit; never at a FLUSH, an aperture block store or a register store.
TEST_P(PvGuestTest, MulticallRingsOnlyWhenTheDeviceCouldDependOnTheCalls) {
  if (GetParam() != FvMode::kPvMulticall) GTEST_SKIP() << "pv-naive rings per call";
  FvTestVm* vm = AddVm(GetParam());
  ASSERT_NE(vm, nullptr);
  auto calls = guest::PvCalls::Open(vm);
  ASSERT_TRUE(calls.ok()) << calls.status().ToString();
  guest::PvCalls& pv = **calls;
  guest::PvSyncBus bus(vm, &pv);
  constexpr uint64_t kPd = 0x100000;
  ASSERT_TRUE(pv.Attach(kPd, (1ull << 40) - 1, pv::SpaceKind::kChannel).ok());
  ASSERT_TRUE(pv.Flush(kPd).ok());
  const uint32_t words[3] = {1, 2, 3};
  ASSERT_TRUE(bus.WriteBlock(gpu::Bar::k1, 0x300000, words, sizeof words).ok());
  ASSERT_TRUE(bus.FillBlock(gpu::Bar::k3, 0x310000, 0, 4096).ok());
  // A register store behind them joins the queue (in order) instead of ringing.
  bus.Write(gpu::Bar::k0, gf100::pbus::kPraminBase, gpu::Width::k32, 0x30);
  EXPECT_EQ(pv.counters().doorbells, 0u);
  EXPECT_TRUE(pv.pending());
  EXPECT_NE(vm->Read(gpu::Bar::k0, gf100::pbus::kPraminBase, gpu::Width::k32), 0x30u);
  EXPECT_EQ(vm->vgpu().pv()->tables().spaces(), 0u) << "nothing applied yet";
  // A read of the device: the queue goes first, and the read sees what it stored.
  EXPECT_EQ(bus.Read(gpu::Bar::k1, 0x300004, gpu::Width::k32), 2u);
  EXPECT_EQ(pv.counters().doorbells, 1u);
  EXPECT_EQ(pv.counters().calls, 5u);
  EXPECT_EQ(vm->vgpu().pv()->tables().spaces(), 1u);
  EXPECT_EQ(bus.Read(gpu::Bar::k0, gf100::pbus::kPraminBase, gpu::Width::k32), 0x30u);
  // Unaligned or bulk stores trap, after the queue.
  ASSERT_TRUE(pv.Flush(kPd).ok());
  const std::vector<uint8_t> bulk(64 * 1024, 7);
  ASSERT_TRUE(bus.WriteBlock(gpu::Bar::k1, 0x400000, bulk.data(), bulk.size()).ok());
  EXPECT_EQ(pv.counters().doorbells, 2u);
  EXPECT_EQ(bus.Read(gpu::Bar::k1, 0x40fffc, gpu::Width::k32), 0x07070707u);
  EXPECT_TRUE(pv.Commit().ok());
  EXPECT_EQ(pv.counters().doorbells, 2u) << "nothing queued: a Commit does not ring";
}

INSTANTIATE_TEST_SUITE_P(Modes, PvGuestTest,
                         ::testing::Values(FvMode::kPvNaive, FvMode::kPvMulticall),
                         [](const auto& info) {
                           std::string n = FvModeName(info.param);
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace gpuvm::aggregator
