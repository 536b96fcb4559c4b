// Isolation under full virtualization: a hostile VM attacks while a victim VM keeps running the
// unmodified guest driver (copies in and out, memsets, checked every round). Each attack of issue 6
// must stay contained — the attacker's own channel faults or its write is dropped and counted, the
// aggregator logs it — and the victim's results must stay correct throughout.
//
// Both VMs live in this process (tests/fv_test_vm.h): the attacker's accesses go
// straight to its FullVirtGpu, exactly the calls gpuvm-dm would make for its trapped accesses.
// The software GPU runs with its compute engine, so attacks through kernels are here too; VRAM is
// dynamic and over-committed (two VMs of 96 MiB, 96 MiB for VMs).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "aggregator/bar_remap.h"
#include "aggregator/fv_gpu.h"
#include "aggregator/fv_host.h"
#include "aggregator/sim_gpu.h"
#include "aggregator/testing/same_file.h"
#include "gpu/hw/classes.h"
#include "gpu/hw/gpfifo.h"
#include "gpu/hw/mmu_fault.h"
#include "gpu/hw/pbus.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pgraph.h"
#include "gpu/hw/pmc.h"
#include "gpu/hw/ramin.h"
#include "gpu/hw/vm.h"
#include "gpu/isa/assembler.h"
#include "guest-pv-driver/driver.h"
#include "runtime/tests/test_kernels.h"
#include "tests/fv_test_vm.h"
#include "tests/isolation_victim.h"

namespace gpuvm::aggregator {
namespace {

namespace pf = gf100::pfifo;
namespace pbus = gf100::pbus;
namespace ramin = gf100::ramin;
namespace vm = gf100::vm;
using fv_testing::FvTestVm;
constexpr uint64_t kMiB = 1ull << 20;

using fv_testing::LaunchAdd;

class FvIsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // 96 MiB for VMs, two VMs of 96 MiB: VRAM is over-committed (dynamic allocation).
    auto w = fv_testing::FvTestWorld::Create({.gpu_vram_bytes = 128 * kMiB,
                                              .reserved_bytes = 32 * kMiB,
                                              .vram_policy = VramPolicy::kDynamic,
                                              .compute_engine = true,
                                              .compute_workers = 1});
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    world_ = std::move(*w);
    victim_ = AddVm("victim", FvMode::kNaive);
    attacker_ = AddVm("attacker", FvMode::kNaive);
  }
  void TearDown() override {
    StopVictim();
    world_.reset();
  }

  FvTestVm* AddVm(const std::string& name, FvMode mode) {
    FvVmOptions o;
    o.mode = mode;
    o.vram_bytes = 96 * kMiB;
    o.channels = 8;
    o.name = name;
    auto v = world_->AddVm(o, 64 * kMiB);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : nullptr;
  }

  // The victim: a driver, a context and 2 MiB of VRAM, rewritten and checked round after round
  // on its own thread until StopVictim().
  void StartVictim(bool kernels = false) {
    victim_thread_ = std::thread([this, kernels] {
      const std::string error = fv_testing::RunVictim(victim_, {}, kernels, stop_victim_, rounds_);
      if (!error.empty()) Fail(error);
    });
  }
  void StopVictim() {
    stop_victim_ = true;
    if (victim_thread_.joinable()) victim_thread_.join();
  }
  void Fail(const std::string& why) {
    std::lock_guard lock(victim_mu_);
    victim_error_ = why;
  }
  void ExpectVictimFine() {
    StopVictim();
    std::lock_guard lock(victim_mu_);
    EXPECT_TRUE(victim_error_.empty()) << victim_error_ << "\naggregator log:\n" << log();
    EXPECT_GE(rounds_.load(), 2);
  }
  std::string log() { return world_->log(); }

  // The attacker's raw register accesses, as its trapped MMIO would arrive.
  uint32_t Reg(uint32_t offset) {
    std::lock_guard lock(world_->lock());
    Result<uint64_t> v = attacker_->vgpu().Read(gpu::Bar::k0, offset, 4, 0);
    return v.ok() ? uint32_t(*v) : 0;
  }
  void SetReg(uint32_t offset, uint32_t value) {
    std::lock_guard lock(world_->lock());
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

  // The unmodified guest driver on the attacker's VM, a context of it and its channel's id.
  struct AttackerContext {
    std::unique_ptr<guest::Driver> driver;
    std::unique_ptr<guest::Context> ctx;
    uint32_t chid = 0;
  };
  void OpenAttacker(AttackerContext* out) {
    auto driver = guest::Driver::Create(attacker_);
    ASSERT_TRUE(driver.ok()) << driver.status().ToString();
    auto ctx = (*driver)->CreateContext();
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    out->driver = std::move(*driver);
    out->ctx = std::move(*ctx);
    out->chid = out->ctx->default_channel()->id();
  }
  // Where channel `chid`'s IB_PUT is in BAR1 (its USER page, found through POLL_AREA). Takes the
  // world's lock (Reg): call it without.
  uint64_t IbPutAddress(uint32_t chid) {
    const uint64_t user = uint64_t(Reg(pf::kPollArea) & pf::kPollAreaAddrMask) << 12;
    return user + chid * pf::kUserPageSize + gf100::userd::kIbPut;
  }

  // An attacker PTE attack: a context with a small allocation, whose PTE the attacker rewrites to
  // `evil`, flushes, and then copies into. The copy must fail with the attacker's own MMU fault.
  void PteAttack(uint64_t evil) {
    AttackerContext mine;
    ASSERT_NO_FATAL_FAILURE(OpenAttacker(&mine));
    auto a = mine.ctx->AllocDevice(64 * 1024);
    ASSERT_TRUE(a.ok());
    const uint32_t chid = mine.chid;
    const uint64_t pte = PteAddressOf(chid, a->va);
    ASSERT_NE(Vram64(pte) & vm::pte::kPresent, 0u) << "found the wrong PTE";
    SetVram64(pte, evil);
    FlushTlb(PdOf(chid));
    std::vector<uint8_t> bytes(64 * 1024, 0xa5);
    Status s = mine.ctx->default_channel()->CopyHostToDevice(a->va, bytes.data(), bytes.size());
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
    const FvCounters& k = attacker_->vgpu().counters();
    EXPECT_GT(k.shadow.entries_rejected, 0u);
    EXPECT_GT(k.faults, 0u);
    EXPECT_NE(log().find("page-table entries dropped"), std::string::npos) << log();
    EXPECT_NE(log().find("MMU fault"), std::string::npos) << log();
  }

  std::unique_ptr<fv_testing::FvTestWorld> world_;
  FvTestVm* victim_ = nullptr;
  FvTestVm* attacker_ = nullptr;
  std::thread victim_thread_;
  std::atomic<bool> stop_victim_{false};
  std::atomic<int> rounds_{0};
  std::mutex victim_mu_;
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
  AttackerContext mine;
  ASSERT_NO_FATAL_FAILURE(OpenAttacker(&mine));
  const uint64_t ib_put = IbPutAddress(mine.chid);
  {
    std::lock_guard lock(world_->lock());
    ASSERT_TRUE(attacker_->vgpu().Write(gpu::Bar::k1, ib_put, 4, 0x7fffffff, 0).ok());
  }
  // The GPU fetches the garbage on its own thread: wait for the fault it causes (a read of
  // PMC_INTR_HOST polls the physical interrupts), so the driver's next IB_PUT cannot overtake it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (attacker_->vgpu().counters().faults == 0 && std::chrono::steady_clock::now() < deadline) {
    (void)Reg(gf100::pmc::kIntrHost);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  auto a = mine.ctx->AllocDevice(4096);
  ASSERT_TRUE(a.ok());
  auto f = mine.ctx->default_channel()->Memset32Async(a->va, 1, 1024);
  Status s =
      f.ok() ? mine.ctx->default_channel()->Synchronize(std::chrono::seconds(10)) : f.status();
  EXPECT_FALSE(s.ok());
  EXPECT_GT(attacker_->vgpu().counters().faults, 0u) << log();
  ExpectVictimFine();
}

// A rep access goes to aperture memory a page at a time, but the USER pages keep acting element by
// element: a block across the last USER page (a channel id the attacker does not own) and the page
// after it has each of that page's elements refused, and reads back the same as single reads do.
TEST_F(FvIsolationTest, BlockAccessesAcrossTheUserPagesActElementByElementThere) {
  StartVictim();
  AttackerContext mine;
  ASSERT_NO_FATAL_FAILURE(OpenAttacker(&mine));
  const uint64_t user = uint64_t(Reg(pf::kPollArea) & pf::kPollAreaAddrMask) << 12;
  const uint64_t last_user = user + uint64_t(pf::kChannels - 1) * pf::kUserPageSize;
  std::vector<uint8_t> block(2 * 4096);
  for (size_t i = 0; i < block.size(); ++i) block[i] = uint8_t(i * 7 + 1);
  std::vector<uint8_t> back(block.size()), single(block.size());
  {
    std::lock_guard lock(world_->lock());
    const uint64_t refused = attacker_->vgpu().counters().refused_channels;
    ASSERT_TRUE(attacker_->vgpu().WriteElements(gpu::Bar::k1, last_user, 8, block, 0).ok());
    EXPECT_EQ(attacker_->vgpu().counters().refused_channels - refused, 4096u / 8);
    ASSERT_TRUE(attacker_->vgpu().ReadElements(gpu::Bar::k1, last_user, 8, back, 0).ok());
    for (size_t at = 0; at < single.size(); at += 8) {
      Result<uint64_t> v = attacker_->vgpu().Read(gpu::Bar::k1, last_user + at, 8, 0);
      ASSERT_TRUE(v.ok());
      std::memcpy(single.data() + at, &*v, 8);
    }
  }
  EXPECT_EQ(back, single);
  ExpectVictimFine();
}

// IB entries and pushbuffers are read by the GPU through the attacker's shadow space only, so an
// address of another VM or of the aggregator is just an address its space does not map. The
// attacker writes GPFIFO entries into its own IB ring (in its RAM, found as a hostile guest would:
// RAMFC -> IB base -> its page tables) and submits them: (1) a pushbuffer segment at an unmapped
// address, (2) a real pushbuffer whose semaphore release aims at an unmapped address, (3) one aimed
// at a physical-looking address (where the aggregator's VRAM is). Each faults its own channel only.
TEST_F(FvIsolationTest, IbEntriesAndPushbuffersAtUnmappedOrForeignAddressesFaultOnlyTheAttacker) {
  namespace gpfifo = gf100::gpfifo;
  namespace host = gf100::host;
  StartVictim();
  auto driver = guest::Driver::Create(attacker_);
  ASSERT_TRUE(driver.ok()) << driver.status().ToString();
  const uint64_t user = uint64_t(Reg(pf::kPollArea) & pf::kPollAreaAddrMask) << 12;
  // A fresh context submits `entry` as its next GPFIFO entry; its channel must fault. (Contexts
  // stay: a faulted one's channel id is not handed out again.)
  std::vector<std::unique_ptr<guest::Context>> contexts;
  auto attack = [&](auto make_entry) {
    auto ctx = (*driver)->CreateContext();
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    contexts.push_back(std::move(*ctx));
    guest::Context* context = contexts.back().get();
    guest::Channel* ch = context->default_channel();
    auto pb = context->AllocDevice(4096);
    ASSERT_TRUE(pb.ok());
    ASSERT_TRUE(ch->Memset32Async(pb->va, 0, 1024).ok());
    ASSERT_TRUE(ch->Synchronize().ok());  // bound, idle
    const uint32_t chid = ch->id();
    const uint64_t inst =
        uint64_t(Reg(pf::kChanTable + chid * pf::kChanTableStride) & pf::kChanInstMask) << 12;
    const uint32_t ib_hi = Vram32(inst + ramin::kIbBaseHi);
    const uint64_t ib =
        Vram32(inst + ramin::kIbBaseLo) | (uint64_t(ib_hi & ramin::kIbBaseHiAddrMask) << 32);
    const uint32_t entries = 1u << ((ib_hi >> ramin::kIbOrderShift) & ramin::kIbOrderMask);
    const uint64_t ib_put = user + chid * pf::kUserPageSize + gf100::userd::kIbPut;
    uint32_t put = 0;
    {
      std::lock_guard lock(world_->lock());
      put = uint32_t(*attacker_->vgpu().Read(gpu::Bar::k1, ib_put, 4, 0));
    }
    // The ring's page in the attacker's RAM (pinned host memory: a SYSRAM PTE).
    const uint64_t slot = ib + uint64_t(put % entries) * gpfifo::kIbEntrySize;
    const uint64_t pte = Vram64(PteAddressOf(chid, slot));
    ASSERT_NE(pte & vm::pte::kPresent, 0u);
    ASSERT_NE(vm::pte::TargetOf(pte), vm::Target::kVram) << "the IB ring is in host memory";
    const uint64_t entry = make_entry(*context, pb->va);
    std::memcpy(attacker_->ram().data() + vm::pte::Address(pte) + (slot & 0xfff), &entry, 8);
    const uint64_t faults = attacker_->vgpu().counters().faults;
    {
      std::lock_guard lock(world_->lock());
      ASSERT_TRUE(attacker_->vgpu().Write(gpu::Bar::k1, ib_put, 4, (put + 1) % entries, 0).ok());
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (attacker_->vgpu().counters().faults == faults &&
           std::chrono::steady_clock::now() < deadline) {
      (void)Reg(gf100::pmc::kIntrHost);  // polls the physical interrupts
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_GT(attacker_->vgpu().counters().faults, faults) << log();
  };
  // (1) A pushbuffer segment nowhere in its space.
  attack([](guest::Context&, uint64_t) { return gpfifo::EncodeIbEntry(0x7f00000000ull, 64); });
  // (2) and (3): a real pushbuffer (in its VRAM) releasing a semaphore at an address its space does
  // not map, then at the aggregator's VRAM as a physical address would name it.
  for (uint64_t target : {uint64_t(0x7e00000000ull), uint64_t(2 * kMiB)}) {
    attack([&](guest::Context& ctx, uint64_t pb) {
      const uint32_t words[] = {gpfifo::IncHeader(0, host::kSemaphoreA, 4), uint32_t(target >> 32),
                                uint32_t(target), 0x5ec2e7ed,
                                host::kSemOpRelease | host::kSemReleaseSize4};
      EXPECT_TRUE(ctx.default_channel()->CopyHostToDevice(pb, words, sizeof words).ok());
      return gpfifo::EncodeIbEntry(pb, 5);
    });
  }
  EXPECT_EQ(victim_->vgpu().counters().faults, 0u);
  EXPECT_NE(log().find("name=attacker msg=\"MMU fault"), std::string::npos) << log();
  EXPECT_EQ(log().find("name=victim msg=\"MMU fault"), std::string::npos) << log();
  ExpectVictimFine();
}

TEST_F(FvIsolationTest, FloodsOfFlushesAndSubmissionsDoNotStarveTheVictim) {
  StartVictim();
  AttackerContext mine;
  ASSERT_NO_FATAL_FAILURE(OpenAttacker(&mine));
  const uint64_t pd = PdOf(mine.chid);
  const uint64_t ib_put = IbPutAddress(mine.chid);
  uint32_t current = 0;
  {
    std::lock_guard lock(world_->lock());
    current = uint32_t(*attacker_->vgpu().Read(gpu::Bar::k1, ib_put, 4, 0));
  }
  for (int i = 0; i < 2000; ++i) {
    FlushTlb(pd);
    std::lock_guard lock(world_->lock());
    (void)attacker_->vgpu().Write(gpu::Bar::k1, ib_put, 4, current, 0);  // "new" work: none
  }
  EXPECT_GE(attacker_->vgpu().counters().tlb_flushes, 2000u);
  EXPECT_GE(attacker_->vgpu().counters().submissions, 2000u);
  ExpectVictimFine();
}

TEST_F(FvIsolationTest, GarbageInEveryBar0RegisterIsContained) {
  StartVictim();
  std::mt19937 random(42);
  // Every register of BAR0: below the PRAMIN window and past it to the BAR's end.
  const uint64_t bar0 = attacker_->pci().bar0_size;
  for (uint64_t offset = 0; offset < bar0; offset += 4) {
    if (offset == pbus::kPraminWindow) offset += pbus::kPraminWindowSize;  // memory, below
    if (offset == pbus::kPraminBase) continue;  // keep the PRAMIN writes below meaningful
    SetReg(uint32_t(offset), (offset & 4) ? 0xffffffff : uint32_t(random()));
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

// A guest's kernels reading and writing past their allocations (its own address space, where
// nothing is mapped): its own context faults — an MMU fault on its channel, delivered to it only —
// while the victim's kernels and copies keep giving correct results.
TEST_F(FvIsolationTest, KernelsReadingAndWritingBeyondTheirAllocationsFaultOnlyTheAttacker) {
  StartVictim(/*kernels=*/true);
  auto driver = guest::Driver::Create(attacker_);
  ASSERT_TRUE(driver.ok());
  auto image = isa::Assemble(runtime::testing::kVaddAsm);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  // A fresh context of the attacker runs c = a + b over three 4 KiB buffers with `n` elements,
  // `c_offset` added to c's address; it must fault (its context aborted) and tell what it saw.
  auto attack = [&](uint32_t n, uint64_t c_offset) -> std::optional<guest::GpuFault> {
    auto ctx = (*driver)->CreateContext();
    EXPECT_TRUE(ctx.ok());
    if (!ctx.ok()) return std::nullopt;
    auto code = (*ctx)->LoadCode(*image);
    auto a = (*ctx)->AllocDevice(4096), b = (*ctx)->AllocDevice(4096),
         c = (*ctx)->AllocDevice(4096);
    EXPECT_TRUE(code.ok() && a.ok() && b.ok() && c.ok());
    if (!code.ok() || !a.ok() || !b.ok() || !c.ok()) return std::nullopt;
    Status s = LaunchAdd((*ctx)->default_channel(), code->va, a->va, b->va, c->va + c_offset, n);
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
    return (*ctx)->fault();
  };
  // Reads (and writes) running off the end of 4 KiB buffers: n covers 4 MiB.
  std::optional<guest::GpuFault> fault = attack(1u << 20, 0);
  ASSERT_TRUE(fault.has_value());
  EXPECT_EQ(fault->kind, guest::GpuFault::Kind::kMmuFault) << fault->message;
  const uint64_t faults_after_reads = attacker_->vgpu().counters().faults;
  EXPECT_GT(faults_after_reads, 0u) << log();
  // A store far past its allocation (inputs fine): the same, as a write fault.
  fault = attack(256, 512 * kMiB);
  ASSERT_TRUE(fault.has_value());
  EXPECT_TRUE(fault->write) << fault->message;
  EXPECT_GT(attacker_->vgpu().counters().faults, faults_after_reads);
  EXPECT_EQ(victim_->vgpu().counters().faults, 0u);
  EXPECT_NE(log().find("name=attacker msg=\"MMU fault"), std::string::npos) << log();
  EXPECT_EQ(log().find("name=victim msg=\"MMU fault"), std::string::npos) << log();
  ExpectVictimFine();
}

// A guest kernel that traps on the compute engine (not through the MMU) learns the precise reason
// from the MP trap registers 0x504648/0x504650, as natively: the aggregator reads the physical ones
// for the trapping VM and keeps its own copy, which only that VM reads and acknowledges. The
// victim, running kernels meanwhile, sees no trap and no reason.
TEST_F(FvIsolationTest, ComputeTrapReasonsReachOnlyTheTrappingVm) {
  namespace pg = gf100::pgraph;
  StartVictim(/*kernels=*/true);
  auto driver = guest::Driver::Create(attacker_);
  ASSERT_TRUE(driver.ok()) << driver.status().ToString();
  // Runs fault kernel `name` (runtime/tests/test_kernels.h) in a fresh context; its fault.
  auto run = [&](std::string_view name) -> std::optional<guest::GpuFault> {
    const runtime::testing::FaultKernel* k = nullptr;
    for (const auto& f : runtime::testing::kFaultKernels) {
      if (name == f.name) k = &f;
    }
    EXPECT_NE(k, nullptr) << name;
    auto kernel = isa::AssembleKernel(k != nullptr ? k->assembly : "");
    auto image = isa::Assemble(k != nullptr ? k->assembly : "");
    EXPECT_TRUE(kernel.ok() && image.ok()) << image.status().ToString();
    auto ctx = (*driver)->CreateContext();
    EXPECT_TRUE(ctx.ok());
    if (k == nullptr || !kernel.ok() || !image.ok() || !ctx.ok()) return std::nullopt;
    auto code = (*ctx)->LoadCode(*image);
    auto buffer = (*ctx)->AllocDevice(4096);
    EXPECT_TRUE(code.ok() && buffer.ok());
    if (!code.ok() || !buffer.ok()) return std::nullopt;
    const uint64_t pointer = buffer->va;
    guest::LaunchParams p;
    p.code_address = code->va;
    p.block = {32, 1, 1};  // trap_instruction traps in thread 5
    p.shared_bytes = kernel->header.shared_bytes;
    p.params = std::span(reinterpret_cast<const uint8_t*>(&pointer), 8);
    auto fence = (*ctx)->default_channel()->Launch(p);
    EXPECT_TRUE(fence.ok()) << fence.status().ToString();
    if (!fence.ok()) return std::nullopt;
    Status s = (*ctx)->default_channel()->Wait(*fence, std::chrono::seconds(30));
    EXPECT_EQ(s.code(), StatusCode::kAborted) << name << ": " << s.ToString() << "\n" << log();
    return (*ctx)->fault();
  };
  std::optional<guest::GpuFault> fault = run("shared_out_of_window");
  ASSERT_TRUE(fault.has_value());
  EXPECT_EQ(fault->kind, guest::GpuFault::Kind::kComputeTrap) << fault->message;
  EXPECT_EQ(fault->warp_error, uint32_t(pg::MpWarpError::kOorAddr)) << fault->message;
  EXPECT_EQ(fault->global_error, 0u);
  fault = run("store_misaligned");
  ASSERT_TRUE(fault.has_value());
  EXPECT_EQ(fault->kind, guest::GpuFault::Kind::kComputeTrap) << fault->message;
  EXPECT_EQ(fault->warp_error, uint32_t(pg::MpWarpError::kMisalignedAddr)) << fault->message;
  fault = run("trap_instruction");
  ASSERT_TRUE(fault.has_value());
  EXPECT_EQ(fault->warp_error, 0u);
  EXPECT_EQ(fault->global_error, pg::kMpGlobalBptInt) << fault->message;
  // The attacker's driver acknowledged its copies; the physical chain was acknowledged by the host.
  EXPECT_EQ(Reg(pg::kTpc0MpWarpError), 0u);
  EXPECT_EQ(Reg(pg::kTpc0MpGlobalError), 0u);
  EXPECT_EQ(Reg(pg::kTrap), 0u);
  {
    std::lock_guard lock(world_->lock());
    EXPECT_EQ(world_->gpu().device().ReadReg(pg::kTrap), 0u);
    EXPECT_EQ(world_->gpu().device().ReadReg(pg::kTpc0TrapStatus), 0u);
  }
  // The attacker acknowledging a reason it does not have, or writing garbage there, changes
  // nothing for the victim.
  SetReg(pg::kTpc0MpGlobalError, 0xffffffff);
  SetReg(pg::kTpc0MpWarpError, 0x1234);
  EXPECT_EQ(Reg(pg::kTpc0MpWarpError), 0x1234u);  // its own copy, as the hardware would keep it
  ExpectVictimFine();
  std::lock_guard lock(world_->lock());
  for (uint32_t r :
       {pg::kIntr, pg::kTrap, pg::kTpc0TrapStatus, pg::kTpc0MpWarpError, pg::kTpc0MpGlobalError}) {
    Result<uint64_t> v = victim_->vgpu().Read(gpu::Bar::k0, r, 4, 0);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(*v, 0u) << std::hex << r;
  }
  EXPECT_EQ(victim_->vgpu().counters().faults, 0u) << log();
  EXPECT_NE(log().find("name=attacker msg=\"compute trap"), std::string::npos) << log();
  EXPECT_EQ(log().find("name=victim msg=\"compute trap"), std::string::npos) << log();
}

// Dynamic VRAM over-committed: a VM that wants more than is left gets its own error — the PTEs
// the pool cannot back are dropped, its channel faults on them — and never a page of another VM.
TEST_F(FvIsolationTest, AVmNeedingMoreVramThanIsLeftFaultsAloneAndTakesNothingOfTheVictim) {
  StartVictim();
  while (rounds_ < 1) std::this_thread::yield();  // the victim's VRAM is in use
  std::set<uint64_t> victim_chunks;
  {
    std::lock_guard lock(world_->lock());
    const VramMap* map = victim_->vgpu().vram_map();
    for (uint64_t g = 0; g < map->guest_bytes(); g += VramMap::kChunk) {
      if (map->Lookup(g) != 0) victim_chunks.insert(map->Lookup(g));
    }
  }
  // A third VM holds 40 MiB (three VMs of 96 MiB on 96 MiB for VMs).
  FvTestVm* holder = AddVm("holder", FvMode::kLazy);
  auto holder_driver = guest::Driver::Create(holder);
  ASSERT_TRUE(holder_driver.ok());
  auto holder_ctx = (*holder_driver)->CreateContext();
  ASSERT_TRUE(holder_ctx.ok());
  auto held = (*holder_ctx)->AllocDevice(40 * kMiB);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  guest::Channel* hch = (*holder_ctx)->default_channel();
  auto hf = hch->Memset32Async(held->va, 0x600df00d, 40 * kMiB / 4);
  ASSERT_TRUE(hf.ok() && hch->Synchronize(std::chrono::seconds(30)).ok());
  AttackerContext mine;
  ASSERT_NO_FATAL_FAILURE(OpenAttacker(&mine));
  // 88 MiB of its 96: with the others' pages in use, the 96 MiB of VMs' VRAM cannot back it.
  auto big = mine.ctx->AllocDevice(88 * kMiB);
  ASSERT_TRUE(big.ok()) << big.status().ToString();  // the guest's own allocator agrees
  auto f = mine.ctx->default_channel()->Memset32Async(big->va, 0x5a5a5a5a, 88 * kMiB / 4);
  Status s =
      f.ok() ? mine.ctx->default_channel()->Synchronize(std::chrono::seconds(30)) : f.status();
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
  // Its guest is told why: a fault whose reason is "out of VRAM" (the runtime's
  // CUDA_ERROR_OUT_OF_MEMORY), not a bad address (docs/FULL-VIRTUALIZATION.md, "Out of VRAM").
  const std::optional<guest::GpuFault> fault = mine.ctx->fault();
  ASSERT_TRUE(fault.has_value());
  EXPECT_EQ(fault->kind, guest::GpuFault::Kind::kMmuFault);
  EXPECT_EQ(fault->reason, gf100::kFaultReasonGpuvmOutOfVram) << fault->message;
  EXPECT_NE(fault->message.find("OUT_OF_VRAM"), std::string::npos) << fault->message;
  EXPECT_NE(log().find("name=attacker msg=\"MMU fault"), std::string::npos) << log();
  EXPECT_NE(log().find("reported as out of VRAM"), std::string::npos) << log();
  EXPECT_GT(attacker_->vgpu().counters().out_of_vram_faults, 0u);
  {
    std::lock_guard lock(world_->lock());
    const VramMap* map = attacker_->vgpu().vram_map();
    EXPECT_GT(map->exhausted(), 0u)
        << "attacker " << (map->assigned_bytes() >> 10) << " KiB, victim "
        << (victim_->vgpu().vram_map()->assigned_bytes() >> 10) << " KiB";
    for (uint64_t g = 0; g < map->guest_bytes(); g += VramMap::kChunk) {
      if (map->Lookup(g) != 0) {
        EXPECT_EQ(victim_chunks.count(map->Lookup(g)), 0u) << g;
      }
    }
  }
  // The holder's data is intact too.
  std::vector<uint32_t> back(40 * kMiB / 4);
  ASSERT_TRUE(hch->CopyDeviceToHost(back.data(), held->va, 40 * kMiB).ok());
  EXPECT_EQ(std::count(back.begin(), back.end(), 0x600df00du), ptrdiff_t(back.size()));
  EXPECT_EQ(holder->vgpu().counters().faults, 0u);
  EXPECT_GT(attacker_->vgpu().counters().faults, 0u);
  EXPECT_NE(log().find("over-committed"), std::string::npos) << log();
  ExpectVictimFine();
}

// --- BAR remap (fv-bar-remap, fv-optimized): what a remapped guest can reach without a trap is
// exactly the BAR_MAP ranges its virtual GPU hands its device model. Each test maps those ranges
// here as the device model and guest would, and plays the attacker through them.

struct RemappedRange {
  gpu::Bar bar;
  uint64_t offset, length, backing;
  bool vram;         // backed by the attacker's own VRAM memfd (else: its scratch memory)
  bool victim_vram;  // backed by the victim's (never)
  os::SharedMapping bytes;
};

using testing::SameFile;
// A VM's own VRAM memfd (per-VM backing), -1 once it is detached.
int BackingOf(fv_testing::FvTestVm* vm) {
  const VramMap* map = vm->vgpu().vram_map();
  return map != nullptr ? map->backing_fd() : -1;
}

class FvRemapIsolationTest : public FvIsolationTest {
 protected:
  void SetUp() override {
    FvIsolationTest::SetUp();
    victim_ = AddVm("remap-victim", FvMode::kOptimized);
    attacker_ = AddVm("remap-attacker", FvMode::kBarRemap);
  }
  void TearDown() override {
    StopVictim();
    ctx_.reset();
    driver_.reset();
    ranges_.clear();
    FvIsolationTest::TearDown();
  }
  // Applies the attacker's queued BAR_MAP/BAR_UNMAP requests to `ranges_`, as gpuvm-dm would.
  void ApplyAttackerRemaps() {
    std::lock_guard lock(world_->lock());
    for (const BarRemapRequest& r : attacker_->vgpu().TakeBarRemapRequests()) {
      if (!r.map) {
        std::erase_if(ranges_, [&](const RemappedRange& m) {
          return m.bar == r.bar && m.offset == r.offset && m.length == r.length;
        });
        continue;
      }
      ASSERT_TRUE(r.bar == gpu::Bar::k1 || r.bar == gpu::Bar::k3);
      auto bytes = os::SharedMapping::Map(r.fd, r.backing_offset, r.length, true);
      ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
      ranges_.push_back({r.bar, r.offset, r.length, r.backing_offset,
                         SameFile(r.fd, BackingOf(attacker_)), SameFile(r.fd, BackingOf(victim_)),
                         std::move(*bytes)});
    }
  }
  bool Remapped(gpu::Bar bar, uint64_t offset) const {
    for (const RemappedRange& m : ranges_) {
      if (m.bar == bar && offset >= m.offset && offset - m.offset < m.length) return true;
    }
    return false;
  }
  // The attacker as a normal guest: a context, an allocation, copies in and out.
  void AttackerUsesItsGpu() {
    auto driver = guest::Driver::Create(attacker_);
    ASSERT_TRUE(driver.ok()) << driver.status().ToString();
    auto ctx = (*driver)->CreateContext();
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    auto a = (*ctx)->AllocDevice(256 * 1024);
    ASSERT_TRUE(a.ok());
    std::vector<uint8_t> in(256 * 1024, 0x5a), out(in.size());
    ASSERT_TRUE((*ctx)->default_channel()->CopyHostToDevice(a->va, in.data(), in.size()).ok());
    ASSERT_TRUE((*ctx)->default_channel()->CopyDeviceToHost(out.data(), a->va, out.size()).ok());
    EXPECT_EQ(in, out);
    instance_ =
        uint64_t(Reg(pf::kChanTable + (*ctx)->default_channel()->id() * pf::kChanTableStride) &
                 pf::kChanInstMask)
        << 12;
    driver_ = std::move(*driver);
    ctx_ = std::move(*ctx);
  }

  std::vector<RemappedRange> ranges_;
  std::unique_ptr<guest::Driver> driver_;
  std::unique_ptr<guest::Context> ctx_;
  uint64_t instance_ = 0;
};

TEST_F(FvRemapIsolationTest, RemappedPagesAreTheVmsOwnVramAndScribblingOnThemHurtsNoOneElse) {
  StartVictim();
  AttackerUsesItsGpu();
  ApplyAttackerRemaps();
  ASSERT_FALSE(ranges_.empty()) << "nothing was remapped\n" << log();
  // Every VRAM page handed out is a page of the attacker's own VRAM memfd (per-VM backing): never
  // the GPU's VRAM as a whole (the aggregator's reserved area: shadow tables, shadow instances,
  // our BAR1/USER), never the victim's.
  const uint64_t own = attacker_->vgpu().vram_bytes();
  uint64_t vram_pages = 0;
  for (const RemappedRange& m : ranges_) {
    EXPECT_FALSE(m.victim_vram);
    if (m.vram) {
      vram_pages += m.length / 4096;
      EXPECT_LE(m.backing + m.length, own);
    }
  }
  EXPECT_GT(vram_pages, 0u);
  // Channel descriptors and the USER pages of its own channels keep trapping; USER pages of ids it
  // does not own go to its scratch memory, never VRAM.
  const uint32_t poll = Reg(pf::kPollArea);
  ASSERT_NE(poll & pf::kPollAreaEnable, 0u);
  const uint64_t user = uint64_t(poll & pf::kPollAreaAddrMask) << 12;
  for (uint32_t v = 0; v < pf::kChannels; ++v) {
    const uint64_t page = user + uint64_t(v) * pf::kUserPageSize;
    if (v < 8) {
      EXPECT_FALSE(Remapped(gpu::Bar::k1, page)) << "own USER page " << v;
    } else {
      for (const RemappedRange& m : ranges_) {
        if (m.bar == gpu::Bar::k1 && page >= m.offset && page - m.offset < m.length) {
          EXPECT_FALSE(m.vram) << "foreign USER page " << v << " backed by VRAM";
        }
      }
    }
  }
  BarWalk bar3;
  const uint32_t bar3_inst = Reg(pbus::kBar3Inst);
  {
    std::lock_guard lock(world_->lock());
    const GuestMemoryView view(&world_->host().vram(), attacker_->vgpu().layout(),
                               attacker_->ram());
    WalkBarTables(view, bar3_inst, attacker_->pci().bar3_size, bar3);
  }
  bool found_instance = false;
  for (size_t page = 0; page < bar3.guest.size(); ++page) {
    if (bar3.machine[page] == 0 || bar3.guest[page] != instance_) continue;
    found_instance = true;
    EXPECT_FALSE(Remapped(gpu::Bar::k3, page * 4096)) << "the channel's instance block";
  }
  EXPECT_TRUE(found_instance) << "the driver reaches its instance block through BAR3";
  // Now the worst a remapped guest can do: overwrite everything it can reach without a trap, again
  // and again, while the victim computes.
  for (int round = 0; round < 20; ++round) {
    for (RemappedRange& m : ranges_) {
      std::memset(m.bytes.data(), 0xa5 ^ round, m.length);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ExpectVictimFine();
}

TEST_F(FvRemapIsolationTest, HostileBarPtesAreNeverRemapped) {
  AttackerUsesItsGpu();
  ApplyAttackerRemaps();
  // Find a remapped BAR3 page and its PTE in the attacker's BAR3 table, then aim that PTE at other
  // VMs' VRAM, the aggregator's, and SYSRAM outside its RAM.
  const uint64_t inst = uint64_t(Reg(pbus::kBar3Inst) & pbus::kBarInstAddrMask) << 12;
  const uint64_t pd = Vram32(inst + ramin::kPageDirLo) & ramin::kPageDirAddrLoMask;
  const uint64_t pde = Vram64(pd);
  ASSERT_NE(vm::pde::SmallTarget(pde), vm::PdeTarget::kNone);
  uint64_t page = 0;
  for (const RemappedRange& m : ranges_) {
    if (m.bar == gpu::Bar::k3 && m.vram) page = m.offset / 4096;
  }
  ASSERT_NE(page, 0u) << "no BAR3 page remapped\n" << log();
  const uint64_t pte = vm::pde::SmallTableAddress(pde) + page * 8;
  ASSERT_NE(Vram64(pte) & vm::pte::kPresent, 0u);
  const uint64_t refused_before = attacker_->vgpu().counters().refused_memory;
  for (uint64_t evil :
       {vm::pte::Make(attacker_->vgpu().vram_bytes()), vm::pte::Make(0xfffff000ull * 16),
        vm::pte::Make(2 * kMiB),
        vm::pte::Make(attacker_->ram().size() + 0x1000, {.target = vm::Target::kSysramSnooped})}) {
    SetVram64(pte, evil);
    SetReg(vm::kTlbFlushVspace, uint32_t(pd >> 8));
    SetReg(vm::kTlbFlushTrigger, vm::kFlushTrigger | vm::kFlushPageAll);
    {
      std::lock_guard lock(world_->lock());
      (void)attacker_->vgpu().Read(gpu::Bar::k3, page * 4096, 4, 0);  // a trap: the walk again
    }
    ApplyAttackerRemaps();
    // 2 MiB is inside the attacker's own VRAM: that one may be remapped, to its own page.
    if (vm::pte::Address(evil) == 2 * kMiB && vm::pte::TargetOf(evil) == vm::Target::kVram)
      continue;
    EXPECT_FALSE(Remapped(gpu::Bar::k3, page * 4096)) << std::hex << "PTE " << evil;
  }
  EXPECT_GT(attacker_->vgpu().counters().refused_memory, refused_before);
}

}  // namespace
}  // namespace gpuvm::aggregator
