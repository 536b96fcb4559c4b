// Isolation under full virtualization: a hostile VM attacks while a victim VM keeps running the
// unmodified guest driver (copies in and out, memsets, checked every round). Each attack of issue 6
// must stay contained — the attacker's own channel faults or its write is dropped and counted, the
// aggregator logs it — and the victim's results must stay correct throughout.
//
// Both VMs live in this process (aggregator/testing/fv_test_vm.h): the attacker's accesses go
// straight to its FullVirtGpu, exactly the calls gpuvm-dm would make for its trapped accesses.
// Attacks through compute kernels are not here (the software GPU's compute engine is off in this
// test): a kernel reading past its allocation is an access to a VA the shadow does not map, the
// same MMU fault path the PTE attacks below exercise.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "aggregator/fv_gpu.h"
#include "aggregator/fv_host.h"
#include "aggregator/sim_gpu.h"
#include "aggregator/testing/fv_test_vm.h"
#include "gpu/hw/pbus.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/ramin.h"
#include "gpu/hw/vm.h"
#include "guest-pv-driver/driver.h"

namespace gpuvm::aggregator {
namespace {

namespace pf = gf100::pfifo;
namespace pbus = gf100::pbus;
namespace ramin = gf100::ramin;
namespace vm = gf100::vm;
using fv_testing::FvTestVm;
constexpr uint64_t kMiB = 1ull << 20;

class FvIsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SimGpuOptions o;
    o.vram_bytes = 384 * kMiB;
    o.compute_engine = false;
    auto gpu = SimGpu::Create(o);
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    gpu_ = std::move(*gpu);
    FvOptions fv;
    fv.reserved_bytes = 32 * kMiB;
    auto host = FvHost::Create(gpu_.get(), fv);
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    host_ = std::move(*host);
    host_->SetLog([this](const std::string& line) {
      std::lock_guard lock(log_mu_);
      log_ += line + "\n";
    });
    victim_ = AddVm("victim", FvMode::kNaive);
    attacker_ = AddVm("attacker", FvMode::kNaive);
  }
  void TearDown() override {
    StopVictim();
    for (auto& v : vms_) v->Stop();
    vms_.clear();
    host_.reset();
  }

  FvTestVm* AddVm(const std::string& name, FvMode mode) {
    auto v = std::make_unique<FvTestVm>(&lock_, gpu_.get());
    FvVmOptions o;
    o.mode = mode;
    o.vram_bytes = 96 * kMiB;
    o.channels = 8;
    o.vm_id = uint32_t(vms_.size() + 1);
    o.name = name;
    Status s = v->Start(host_.get(), o, 64 * kMiB);
    EXPECT_TRUE(s.ok()) << s.ToString();
    vms_.push_back(std::move(v));
    return vms_.back().get();
  }

  // The victim: a driver, a context and 2 MiB of VRAM, rewritten and checked round after round
  // on its own thread until StopVictim().
  void StartVictim() {
    victim_thread_ = std::thread([this] {
      auto driver = guest::Driver::Create(victim_);
      if (!driver.ok()) return Fail("victim driver: " + driver.status().ToString());
      auto ctx = (*driver)->CreateContext();
      if (!ctx.ok()) return Fail("victim context: " + ctx.status().ToString());
      constexpr uint64_t kBytes = 2 * kMiB;
      auto a = (*ctx)->AllocDevice(kBytes);
      if (!a.ok()) return Fail("victim alloc: " + a.status().ToString());
      std::vector<uint32_t> in(kBytes / 4), out(kBytes / 4);
      guest::Channel* ch = (*ctx)->default_channel();
      for (uint32_t round = 1; !stop_victim_ || rounds_ < 2; ++round) {
        for (size_t i = 0; i < in.size(); ++i) in[i] = uint32_t(i * 2654435761u) ^ round;
        if (Status s = ch->CopyHostToDevice(a->va, in.data(), kBytes); !s.ok()) {
          return Fail("victim htod: " + s.ToString());
        }
        if (auto f = ch->Memset32Async(a->va + 4096, round, 64); !f.ok()) {
          return Fail("victim memset: " + f.status().ToString());
        }
        if (Status s = ch->CopyDeviceToHost(out.data(), a->va, kBytes); !s.ok()) {
          return Fail("victim dtoh: " + s.ToString());
        }
        for (size_t i = 0; i < 64; ++i) in[1024 + i] = round;
        if (in != out) return Fail("victim data wrong in round " + std::to_string(round));
        ++rounds_;
      }
    });
  }
  void StopVictim() {
    stop_victim_ = true;
    if (victim_thread_.joinable()) victim_thread_.join();
  }
  void Fail(const std::string& why) {
    std::lock_guard lock(log_mu_);
    victim_error_ = why;
  }
  void ExpectVictimFine() {
    StopVictim();
    std::lock_guard lock(log_mu_);
    EXPECT_TRUE(victim_error_.empty()) << victim_error_ << "\naggregator log:\n" << log_;
    EXPECT_GE(rounds_.load(), 2);
  }
  std::string log() {
    std::lock_guard lock(log_mu_);
    return log_;
  }

  // The attacker's raw register accesses, as its trapped MMIO would arrive.
  uint32_t Reg(uint32_t offset) {
    std::lock_guard lock(lock_);
    Result<uint64_t> v = attacker_->vgpu().Read(gpu::Bar::k0, offset, 4, 0);
    return v.ok() ? uint32_t(*v) : 0;
  }
  void SetReg(uint32_t offset, uint32_t value) {
    std::lock_guard lock(lock_);
    (void)attacker_->vgpu().Write(gpu::Bar::k0, offset, 4, value, 0);
  }
  // Its VRAM through the PRAMIN window.
  uint32_t Vram32(uint64_t address) {
    SetReg(pbus::kPraminBase, uint32_t(address >> pbus::kPraminBaseShift));
    return Reg(pbus::kPraminWindow + uint32_t(address & ((1u << pbus::kPraminBaseShift) - 1)));
  }
  void SetVram32(uint64_t address, uint32_t value) {
    SetReg(pbus::kPraminBase, uint32_t(address >> pbus::kPraminBaseShift));
    SetReg(pbus::kPraminWindow + uint32_t(address & ((1u << pbus::kPraminBaseShift) - 1)), value);
  }
  uint64_t Vram64(uint64_t a) { return Vram32(a) | (uint64_t(Vram32(a + 4)) << 32); }
  void SetVram64(uint64_t a, uint64_t v) {
    SetVram32(a, uint32_t(v));
    SetVram32(a + 4, uint32_t(v >> 32));
  }
  // The guest address of the PTE mapping `va` in the address space of the attacker's channel
  // `chid` (found the way a hostile guest would: CHAN_TABLE -> instance -> directory -> table).
  uint64_t PteAddressOf(uint32_t chid, uint64_t va) {
    const uint64_t inst =
        uint64_t(Reg(pf::kChanTable + chid * pf::kChanTableStride) & pf::kChanInstMask) << 12;
    const uint64_t pd = Vram32(inst + ramin::kPageDirLo) & ramin::kPageDirAddrLoMask;
    const int shift = vm::kPdeShift(vm::kLargePageShift128K);
    const uint64_t pde = Vram64(pd + (va >> shift) * 8);
    EXPECT_NE(vm::pde::SmallTarget(pde), vm::PdeTarget::kNone);
    return vm::pde::SmallTableAddress(pde) + ((va & ((1ull << shift) - 1)) >> 12) * 8;
  }
  void FlushTlb(uint64_t pd) {
    SetReg(vm::kTlbFlushVspace, uint32_t(pd >> 8));
    SetReg(vm::kTlbFlushTrigger, vm::kFlushTrigger | vm::kFlushPageAll);
  }
  uint64_t PdOf(uint32_t chid) {
    const uint64_t inst =
        uint64_t(Reg(pf::kChanTable + chid * pf::kChanTableStride) & pf::kChanInstMask) << 12;
    return Vram32(inst + ramin::kPageDirLo) & ramin::kPageDirAddrLoMask;
  }

  // An attacker PTE attack: a context with a small allocation, whose PTE the attacker rewrites to
  // `evil`, flushes, and then copies into. The copy must fail with the attacker's own MMU fault.
  void PteAttack(uint64_t evil) {
    auto driver = guest::Driver::Create(attacker_);
    ASSERT_TRUE(driver.ok()) << driver.status().ToString();
    auto ctx = (*driver)->CreateContext();
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    auto a = (*ctx)->AllocDevice(64 * 1024);
    ASSERT_TRUE(a.ok());
    const uint32_t chid = (*ctx)->default_channel()->id();
    const uint64_t pte = PteAddressOf(chid, a->va);
    ASSERT_NE(Vram64(pte) & vm::pte::kPresent, 0u) << "found the wrong PTE";
    SetVram64(pte, evil);
    FlushTlb(PdOf(chid));
    std::vector<uint8_t> bytes(64 * 1024, 0xa5);
    Status s = (*ctx)->default_channel()->CopyHostToDevice(a->va, bytes.data(), bytes.size());
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
    const FvCounters& k = attacker_->vgpu().counters();
    EXPECT_GT(k.shadow.entries_rejected, 0u);
    EXPECT_GT(k.faults, 0u);
    EXPECT_NE(log().find("page-table entries dropped"), std::string::npos) << log();
    EXPECT_NE(log().find("MMU fault"), std::string::npos) << log();
  }

  std::mutex lock_;
  std::unique_ptr<SimGpu> gpu_;
  std::unique_ptr<FvHost> host_;
  std::vector<std::unique_ptr<FvTestVm>> vms_;
  FvTestVm* victim_ = nullptr;
  FvTestVm* attacker_ = nullptr;
  std::thread victim_thread_;
  std::atomic<bool> stop_victim_{false};
  std::atomic<int> rounds_{0};
  std::mutex log_mu_;
  std::string log_;
  std::string victim_error_;
};

TEST_F(FvIsolationTest, PteToAnotherVmsVramFaultsOnlyTheAttacker) {
  StartVictim();
  // Just past its slice: where the victim's VRAM would be if slices were only offsets.
  PteAttack(vm::pte::Make(attacker_->vgpu().vram_bytes()));
  ExpectVictimFine();
}

TEST_F(FvIsolationTest, PteToTheAggregatorsVramFaultsOnlyTheAttacker) {
  StartVictim();
  // Physical-looking addresses: the reserved area begins at 1 MiB.
  PteAttack(vm::pte::Make(0xfffff000ull * 16));
  ExpectVictimFine();
}

TEST_F(FvIsolationTest, PteToSysramOutsideItsRamFaultsOnlyTheAttacker) {
  StartVictim();
  PteAttack(
      vm::pte::Make(attacker_->ram().size() + 0x1000, {.target = vm::Target::kSysramSnooped}));
  ExpectVictimFine();
}

TEST_F(FvIsolationTest, ChannelInstanceOrDirectoryOutsideItsSliceNeverRuns) {
  StartVictim();
  const uint64_t slice = attacker_->vgpu().vram_bytes();
  // Channel 5: its instance block beyond the slice. Channel 6: an instance inside whose page
  // directory lies beyond the slice.
  const uint64_t inst6 = 8 * kMiB, playlist = 9 * kMiB;
  SetVram32(inst6 + ramin::kSignature, ramin::kSignatureValue);
  SetVram32(inst6 + ramin::kPageDirLo, uint32_t(slice + 4 * kMiB));
  SetReg(pf::kChanTable + 5 * pf::kChanTableStride,
         pf::kChanValid | uint32_t((slice + kMiB) >> 12));
  SetReg(pf::kChanTable + 6 * pf::kChanTableStride, pf::kChanValid | uint32_t(inst6 >> 12));
  SetVram32(playlist, 5);
  SetVram32(playlist + 4, pf::kPlaylistEntryWord1);
  SetVram32(playlist + 8, 6);
  SetVram32(playlist + 12, pf::kPlaylistEntryWord1);
  SetReg(pf::kPlaylistWr, uint32_t(playlist >> 12));
  SetReg(pf::kPlaylistWrLen, 2);
  EXPECT_EQ(attacker_->vgpu().counters().shadow_channels_built, 0u);
  EXPECT_EQ(attacker_->vgpu().counters().refused_channels, 2u);
  EXPECT_NE(log().find("outside the slice"), std::string::npos) << log();
  ExpectVictimFine();
}

TEST_F(FvIsolationTest, ChannelIdsItDoesNotOwnAreRefused) {
  StartVictim();
  while (rounds_ < 1) std::this_thread::yield();  // the victim's channel is bound and running
  for (uint32_t chid = 8; chid < pf::kChannels; ++chid) {
    SetReg(pf::kChanTable + chid * pf::kChanTableStride, 0);
    SetReg(pf::kChanTable + chid * pf::kChanTableStride + 4, 0);
    SetReg(pf::kKickChid, chid);
  }
  EXPECT_EQ(attacker_->vgpu().counters().refused_channels, 3u * (pf::kChannels - 8));
  ExpectVictimFine();
}

TEST_F(FvIsolationTest, GarbageIbPutFaultsOnlyTheAttackersChannel) {
  StartVictim();
  auto driver = guest::Driver::Create(attacker_);
  ASSERT_TRUE(driver.ok());
  auto ctx = (*driver)->CreateContext();
  ASSERT_TRUE(ctx.ok());
  const uint32_t chid = (*ctx)->default_channel()->id();
  const uint64_t user = uint64_t(Reg(pf::kPollArea) & pf::kPollAreaAddrMask) << 12;
  {
    std::lock_guard lock(lock_);
    ASSERT_TRUE(attacker_->vgpu()
                    .Write(gpu::Bar::k1, user + chid * pf::kUserPageSize + gf100::userd::kIbPut, 4,
                           0x7fffffff, 0)
                    .ok());
  }
  auto a = (*ctx)->AllocDevice(4096);
  ASSERT_TRUE(a.ok());
  auto f = (*ctx)->default_channel()->Memset32Async(a->va, 1, 1024);
  Status s = f.ok() ? (*ctx)->default_channel()->Synchronize(std::chrono::seconds(10)) : f.status();
  EXPECT_FALSE(s.ok());
  EXPECT_GT(attacker_->vgpu().counters().faults, 0u) << log();
  ExpectVictimFine();
}

TEST_F(FvIsolationTest, FloodsOfFlushesAndSubmissionsDoNotStarveTheVictim) {
  StartVictim();
  auto driver = guest::Driver::Create(attacker_);
  ASSERT_TRUE(driver.ok());
  auto ctx = (*driver)->CreateContext();
  ASSERT_TRUE(ctx.ok());
  const uint32_t chid = (*ctx)->default_channel()->id();
  const uint64_t pd = PdOf(chid);
  const uint64_t user = uint64_t(Reg(pf::kPollArea) & pf::kPollAreaAddrMask) << 12;
  const uint64_t ib_put = user + chid * pf::kUserPageSize + gf100::userd::kIbPut;
  uint32_t current = 0;
  {
    std::lock_guard lock(lock_);
    current = uint32_t(*attacker_->vgpu().Read(gpu::Bar::k1, ib_put, 4, 0));
  }
  for (int i = 0; i < 2000; ++i) {
    FlushTlb(pd);
    std::lock_guard lock(lock_);
    (void)attacker_->vgpu().Write(gpu::Bar::k1, ib_put, 4, current, 0);  // "new" work: none
  }
  EXPECT_GE(attacker_->vgpu().counters().tlb_flushes, 2000u);
  EXPECT_GE(attacker_->vgpu().counters().submissions, 2000u);
  ExpectVictimFine();
}

TEST_F(FvIsolationTest, GarbageInEveryBar0RegisterIsContained) {
  StartVictim();
  std::mt19937 random(42);
  for (uint32_t offset = 0; offset < pbus::kPraminWindow; offset += 4) {
    if (offset == pbus::kPraminBase) continue;  // keep the PRAMIN writes below meaningful
    SetReg(offset, (offset & 4) ? 0xffffffff : uint32_t(random()));
  }
  // And PRAMIN stores all over its own slice and beyond it.
  for (int i = 0; i < 20000; ++i) {
    SetReg(pbus::kPraminBase, uint32_t(random()));
    SetReg(pbus::kPraminWindow + (random() & (pbus::kPraminWindowSize - 4)), uint32_t(random()));
  }
  EXPECT_GT(attacker_->vgpu().counters().refused_registers, 0u);
  EXPECT_GT(attacker_->vgpu().counters().refused_memory, 0u);
  ExpectVictimFine();
}

}  // namespace
}  // namespace gpuvm::aggregator
