// PvTables (pv_tables.h): para-virtual calls applied to a VM's own page tables on the software
// GPU's VRAM — registration and zeroing, machine addresses in PDEs and PTEs, every refusal with its
// code and nothing written by a refused call, releases flushed before the memory is the guest's.
// The whole path (guest driver -> doorbell -> these tables -> the GPU) is tests/pv_guest_test.cc.
#include "aggregator/pv_tables.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "aggregator/reserved_vram.h"
#include "aggregator/sim_gpu.h"
#include "aggregator/testing/unthreaded_sim.h"
#include "aggregator/vram_access.h"
#include "gpu/hw/vm.h"

namespace gpuvm::aggregator {
namespace {

namespace vm = gf100::vm;
using pv::CallResult;
using pv::SpaceKind;
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kVmBytes = 32 * kMiB;
constexpr uint64_t kRamBytes = 16 * kMiB;
constexpr uint64_t kSysramBase = 1ull << 36;
constexpr uint64_t kPd = 0x100000;     // a channel directory (64 KiB)
constexpr uint64_t kSmall = 0x200000;  // a small-page table (256 KiB)
constexpr uint64_t kLarge = 0x180000;  // a large-page table (8 KiB)
constexpr uint64_t kPd2 = 0x300000;

class PvTablesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto gpu = SimGpu::Create(testing::UnthreadedSim(128 * kMiB));
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    gpu_ = std::move(*gpu);
    vram_ = std::make_unique<VramAccess>(gpu_.get());
    pool_ = std::make_unique<ReservedVram>(64 * kMiB, 128 * kMiB);
    auto map = VramMap::Create(VramPolicy::kStatic, pool_.get(), vram_.get(), kVmBytes);
    ASSERT_TRUE(map.ok()) << map.status().ToString();
    map_ = std::move(*map);
    base_ = map_->static_base();
    // Whatever the guest left in its VRAM before it asked for tables there.
    std::memset(gpu_->vram_mapping().data() + base_, 0xa5, kVmBytes);
    PvTables::Hooks hooks;
    hooks.flush_tlb = [this](uint64_t machine) { flushed_.push_back(machine); };
    hooks.directory_in_use = [this](uint64_t pd) { return pd == busy_; };
    hooks.bar_tables_changed = [this] { ++bar_changes_; };
    tables_ = std::make_unique<PvTables>(map_.get(), hooks);
  }

  VmMemoryLayout Layout() const { return {base_, kVmBytes, kSysramBase, kRamBytes, map_.get()}; }
  uint64_t Machine64(uint64_t guest) {
    uint64_t v;
    std::memcpy(&v, gpu_->vram_mapping().data() + base_ + guest, 8);
    return v;
  }
  // Runs one op built by `build`; returns its result.
  template <typename F>
  CallResult Run(F build) {
    pv::BatchBuilder b(pv::kMaxAreaPages * pv::kPageBytes);
    build(b);
    std::span<const uint8_t> s = b.Finish();
    batch_.assign(s.begin(), s.end());
    const pv::DecodedBatch d = pv::DecodeBatch(batch_);
    EXPECT_EQ(d.status, CallResult::kOk) << d.error;
    EXPECT_EQ(d.calls.size(), 1u);
    return tables_->Apply(d.calls[0], batch_, Layout());
  }
  CallResult Attach(uint64_t pd, SpaceKind kind = SpaceKind::kChannel,
                    uint64_t limit = (1ull << 40) - 1) {
    return Run([&](pv::BatchBuilder& b) { b.Attach(pd, limit, kind); });
  }
  CallResult Write(uint64_t space, uint64_t table, uint64_t first,
                   const std::vector<uint64_t>& entries) {
    return Run([&](pv::BatchBuilder& b) { b.Write(space, table, first, entries); });
  }
  static uint64_t Pde(uint64_t large, uint64_t small, uint32_t pt_size = 0) {
    return vm::pde::Make(large ? vm::PdeTarget::kVram : vm::PdeTarget::kNone, large,
                         small ? vm::PdeTarget::kVram : vm::PdeTarget::kNone, small, pt_size);
  }
  // A channel space at kPd whose PDE 40 names kLarge and kSmall.
  void MakeSpace() {
    ASSERT_EQ(Attach(kPd), CallResult::kOk);
    ASSERT_EQ(Write(kPd, kPd, 40, {Pde(kLarge, kSmall)}), CallResult::kOk);
  }

  std::unique_ptr<SimGpu> gpu_;
  std::unique_ptr<VramAccess> vram_;
  std::unique_ptr<ReservedVram> pool_;
  std::unique_ptr<VramMap> map_;
  std::unique_ptr<PvTables> tables_;
  uint64_t base_ = 0;
  std::vector<uint64_t> flushed_;
  uint64_t busy_ = ~0ull;
  int bar_changes_ = 0;
  std::vector<uint8_t> batch_;
};

TEST_F(PvTablesTest, AChannelSpaceIsRegisteredZeroedAndWalkedAtItsMachineAddress) {
  ASSERT_EQ(Attach(kPd), CallResult::kOk);
  EXPECT_EQ(tables_->ChannelDirectory(kPd), base_ + kPd);
  EXPECT_EQ(tables_->ChannelDirectory(kPd2), 0u);
  EXPECT_TRUE(tables_->Registered(kPd, 1));
  EXPECT_TRUE(tables_->Registered(kPd + 0xfff8, 8));  // the whole 64 KiB directory
  EXPECT_FALSE(tables_->Registered(kPd + 0x10000, 8));
  EXPECT_FALSE(tables_->Registered(kPd - 8, 8));
  for (uint64_t at = 0; at < 0x10000; at += 8) ASSERT_EQ(Machine64(kPd + at), 0u) << at;
  // The PDE holds the tables' machine addresses; the tables are registered and zeroed.
  ASSERT_EQ(Write(kPd, kPd, 40, {Pde(kLarge, kSmall) | vm::pde::kSmallVol}), CallResult::kOk);
  const uint64_t pde = Machine64(kPd + 40 * 8);
  EXPECT_EQ(vm::pde::SmallTableAddress(pde), base_ + kSmall);
  EXPECT_EQ(vm::pde::LargeTableAddress(pde), base_ + kLarge);
  EXPECT_EQ(vm::pde::SmallTarget(pde), vm::PdeTarget::kVram);
  EXPECT_TRUE(pde & vm::pde::kSmallVol);
  EXPECT_TRUE(tables_->Registered(kSmall + 256 * 1024 - 8, 8));
  EXPECT_TRUE(tables_->Registered(kLarge + 8 * 1024 - 8, 8));
  EXPECT_FALSE(tables_->Registered(kLarge + 8 * 1024, 8));
  EXPECT_EQ(Machine64(kSmall + 1234 * 8), 0u);
  EXPECT_EQ(Machine64(kLarge + 1023 * 8), 0u);
  EXPECT_EQ(tables_->registered_objects(), 3u);
  EXPECT_EQ(tables_->counters().calls, 2u);
}

TEST_F(PvTablesTest, PtesAreValidatedAndRelocatedAllOrNothing) {
  MakeSpace();
  const vm::pte::Flags sys{.target = vm::Target::kSysramSnooped};
  ASSERT_EQ(Write(kPd, kSmall, 7, {vm::pte::Make(0x400000), vm::pte::Make(0x5000, sys), 0}),
            CallResult::kOk);
  EXPECT_EQ(vm::pte::Address(Machine64(kSmall + 7 * 8)), base_ + 0x400000);
  EXPECT_EQ(vm::pte::Address(Machine64(kSmall + 8 * 8)), kSysramBase + 0x5000);
  EXPECT_EQ(Machine64(kSmall + 9 * 8), 0u);
  // The reserved area's machine address, written by a guest, is only a guest address: its own VRAM.
  ASSERT_EQ(Write(kPd, kSmall, 10, {vm::pte::Make(kMiB)}), CallResult::kOk);
  EXPECT_EQ(vm::pte::Address(Machine64(kSmall + 10 * 8)), base_ + kMiB);
  // Large pages in the large table.
  ASSERT_EQ(Run([&](pv::BatchBuilder& b) {
              b.WriteLinear(kPd, kLarge, 0, 4, vm::pte::Make(0x800000),
                            0x20 << vm::pte::kAddrShift);
            }),
            CallResult::kOk);
  EXPECT_EQ(vm::pte::Address(Machine64(kLarge + 3 * 8)), base_ + 0x800000 + 3 * 0x20000);

  // Each refusal leaves the table as it was, even for the good entries of the call.
  struct Case {
    const char* what;
    uint64_t bad;
    CallResult code;
  };
  const Case cases[] = {
      {"VRAM past the VM's", vm::pte::Make(kVmBytes), CallResult::kForeignVram},
      {"another VM's VRAM, by machine address", vm::pte::Make(base_ + kVmBytes),
       CallResult::kForeignVram},
      {"system memory past the VM's RAM", vm::pte::Make(kRamBytes, sys),
       CallResult::kForeignSysram},
      {"host memory far past the RAM", vm::pte::Make(1ull << 38, sys), CallResult::kForeignSysram},
      {"the invalid target", vm::pte::Make(0, {.target = vm::Target::kInvalid}),
       CallResult::kBadEntry},
      {"a storage kind", vm::pte::Make(0, {.storage_type = 0x70}), CallResult::kBadEntry},
      {"a compression tag", vm::pte::Make(0) | (1ull << 45), CallResult::kBadEntry},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const uint64_t before = Machine64(kSmall + 100 * 8);
    EXPECT_EQ(Write(kPd, kSmall, 100, {vm::pte::Make(0x10000), c.bad}), c.code);
    EXPECT_EQ(Machine64(kSmall + 100 * 8), before);
    EXPECT_EQ(Machine64(kSmall + 101 * 8), 0u);
    EXPECT_FALSE(tables_->last_refusal().empty());
  }
  EXPECT_EQ(tables_->counters().refused, std::size(cases));
  // Counts past the table, a table that is not the space's, a space that does not exist.
  EXPECT_EQ(Write(kPd, kLarge, 1023, {0, 0}), CallResult::kOutOfTable);
  EXPECT_EQ(Run([&](pv::BatchBuilder& b) { b.Clear(kPd, kSmall, 32760, 9); }),
            CallResult::kOutOfTable);
  EXPECT_EQ(Write(kPd, kSmall + 0x1000, 0, {0}), CallResult::kNotRegistered);
  EXPECT_EQ(Write(kPd, 0x500000, 0, {0}), CallResult::kNotRegistered);
  EXPECT_EQ(Write(kPd2, kSmall, 0, {0}), CallResult::kNotRegistered);
}

TEST_F(PvTablesTest, DirectoriesAndTablesOutsideTheVramOrOverlappingAreRefused) {
  EXPECT_EQ(Attach(kVmBytes - 0x8000), CallResult::kNotInVram);  // runs past the end
  EXPECT_EQ(Attach(4ull << 30), CallResult::kNotInVram);
  MakeSpace();
  EXPECT_EQ(Attach(kPd), CallResult::kConflict);               // attached already
  EXPECT_EQ(Attach(kPd + 0x8000), CallResult::kConflict);      // inside it
  EXPECT_EQ(Attach(kSmall + 0x10000), CallResult::kConflict);  // inside a table
  EXPECT_EQ(Attach(kSmall, SpaceKind::kBar3, 0xfff), CallResult::kConflict);
  struct Case {
    const char* what;
    uint64_t pde;
    CallResult code;
  };
  const Case cases[] = {
      {"a table past the VRAM", Pde(0, kVmBytes), CallResult::kNotInVram},
      {"a table running past the VRAM", Pde(0, kVmBytes - 0x1000), CallResult::kNotInVram},
      {"a table in system memory",
       vm::pde::Make(vm::PdeTarget::kNone, 0, vm::PdeTarget::kSysramSnooped, 0x1000),
       CallResult::kNotInVram},
      {"a table over the directory", Pde(0, kPd - 0x1000), CallResult::kConflict},
      {"a table over another table", Pde(kSmall + 0x2000, 0), CallResult::kConflict},
      {"a registered table with another size", Pde(0, kSmall, 1), CallResult::kConflict},
      {"a registered table of the other kind", Pde(kSmall, 0), CallResult::kConflict},
      {"its two tables overlapping", Pde(0x600000, 0x600000), CallResult::kConflict},
  };
  const uint64_t objects = tables_->registered_objects();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(Write(kPd, kPd, 41, {c.pde}), c.code);
    EXPECT_EQ(Machine64(kPd + 41 * 8), 0u);
    EXPECT_EQ(tables_->registered_objects(), objects);
  }
  // Two PDEs of one call naming overlapping new tables: refused, neither registered.
  EXPECT_EQ(Write(kPd, kPd, 41, {Pde(0, 0x600000), Pde(0, 0x610000)}), CallResult::kConflict);
  EXPECT_EQ(tables_->registered_objects(), objects);
  EXPECT_EQ(Write(kPd, kPd, 8190, {0, 0, 0}), CallResult::kOutOfTable);
}

TEST_F(PvTablesTest, TablesAreSharedAndReleasedOnlyAfterAFlush) {
  MakeSpace();
  ASSERT_EQ(Attach(kPd2), CallResult::kOk);
  // The same table under two spaces (and two PDEs).
  ASSERT_EQ(Write(kPd2, kPd2, 3, {Pde(kLarge, 0), Pde(kLarge, 0)}), CallResult::kOk);
  ASSERT_EQ(Write(kPd2, kLarge, 5, {vm::pte::Make(0x20000)}), CallResult::kOk);
  flushed_.clear();
  // Space 1 lets go of both tables: the large one stays (space 2 names it), the small one goes,
  // after a flush of space 1's directory.
  ASSERT_EQ(Run([&](pv::BatchBuilder& b) { b.Clear(kPd, kPd, 40, 1); }), CallResult::kOk);
  EXPECT_EQ(Machine64(kPd + 40 * 8), 0u);
  EXPECT_FALSE(tables_->Registered(kSmall, 8));
  EXPECT_TRUE(tables_->Registered(kLarge, 8));
  ASSERT_EQ(flushed_.size(), 1u);
  EXPECT_EQ(flushed_[0], base_ + kPd);
  EXPECT_EQ(Write(kPd, kSmall, 0, {0}), CallResult::kNotRegistered);
  // Moving a PDE's table: nothing released, no flush.
  flushed_.clear();
  ASSERT_EQ(Write(kPd2, kPd2, 3, {0}), CallResult::kOk);
  EXPECT_TRUE(tables_->Registered(kLarge, 8));
  EXPECT_TRUE(flushed_.empty());
  ASSERT_EQ(Write(kPd2, kPd2, 4, {0}), CallResult::kOk);
  EXPECT_FALSE(tables_->Registered(kLarge, 8));
  EXPECT_EQ(flushed_.size(), 1u);
  EXPECT_EQ(tables_->counters().tables_released, 2u);
}

TEST_F(PvTablesTest, FlushDetachAndBusy) {
  MakeSpace();
  ASSERT_EQ(Run([&](pv::BatchBuilder& b) { b.Flush(kPd); }), CallResult::kOk);
  ASSERT_EQ(flushed_.size(), 1u);
  EXPECT_EQ(flushed_[0], base_ + kPd);
  EXPECT_EQ(Run([&](pv::BatchBuilder& b) { b.Flush(kPd2); }), CallResult::kNotRegistered);
  busy_ = kPd;
  EXPECT_EQ(Run([&](pv::BatchBuilder& b) { b.Detach(kPd); }), CallResult::kBusy);
  EXPECT_TRUE(tables_->Registered(kPd, 8));
  busy_ = ~0ull;
  flushed_.clear();
  ASSERT_EQ(Run([&](pv::BatchBuilder& b) { b.Detach(kPd); }), CallResult::kOk);
  EXPECT_EQ(flushed_.size(), 1u);
  EXPECT_EQ(tables_->registered_objects(), 0u);
  EXPECT_EQ(tables_->ChannelDirectory(kPd), 0u);
  EXPECT_EQ(Run([&](pv::BatchBuilder& b) { b.Detach(kPd); }), CallResult::kNotRegistered);
  // Space limits.
  for (uint32_t i = 0; i < pv::kMaxSpaces; ++i) {
    ASSERT_EQ(Attach(0x1000000 + i * 0x1000, SpaceKind::kBar1, 0xfff), CallResult::kOk) << i;
  }
  EXPECT_EQ(Attach(kPd), CallResult::kExhausted);
  tables_->ReleaseAll();
  EXPECT_EQ(tables_->spaces(), 0u);
}

// A new driver instance (the VM's next program) registers its area: the spaces the last one left
// attached go, so it can attach the same directories again; one a bound channel uses stays.
TEST_F(PvTablesTest, ANewDriverInstanceReleasesWhatNoBoundChannelUses) {
  MakeSpace();  // kPd with a small table
  constexpr uint64_t kOtherPd = 0x300000, kBarPd = 0x40000;
  ASSERT_EQ(Attach(kOtherPd), CallResult::kOk);
  ASSERT_EQ(Attach(kBarPd, SpaceKind::kBar1, 0xfff), CallResult::kOk);
  EXPECT_EQ(Attach(kOtherPd), CallResult::kConflict) << "attached twice by one driver";
  busy_ = kPd;  // a channel of the old program is still bound to kPd
  EXPECT_EQ(tables_->ReleaseUnused(), 2u);
  EXPECT_EQ(tables_->spaces(), 1u);
  EXPECT_NE(tables_->ChannelDirectory(kPd), 0u) << "a bound channel's directory stays guarded";
  EXPECT_TRUE(tables_->Registered(kSmall, 8)) << "and so do its tables";
  EXPECT_FALSE(tables_->Registered(kOtherPd, 8));
  EXPECT_EQ(Attach(kOtherPd), CallResult::kOk);
  EXPECT_EQ(Attach(kBarPd, SpaceKind::kBar1, 0xfff), CallResult::kOk);
  EXPECT_EQ(Attach(kPd), CallResult::kConflict) << "still attached: its channel is bound";
  busy_ = ~0ull;
  EXPECT_EQ(tables_->ReleaseUnused(), 3u);
  EXPECT_EQ(tables_->spaces(), 0u);
  EXPECT_EQ(tables_->registered_objects(), 0u);
  EXPECT_EQ(tables_->counters().spaces_released_for_new_driver, 5u);
}

TEST_F(PvTablesTest, BarSpacesGetTheGuestsOwnEntriesNeverInARegisteredTable) {
  constexpr uint64_t kBarPd = 0x40000, kBarPt = 0x20000;
  const uint64_t before = Machine64(kBarPd);
  ASSERT_EQ(Attach(kBarPd, SpaceKind::kBar3, (64 * kMiB) - 1), CallResult::kOk);
  EXPECT_EQ(Machine64(kBarPd), before) << "a BAR directory is the guest's: not zeroed";
  EXPECT_FALSE(tables_->Registered(kBarPd, 8));
  EXPECT_EQ(tables_->ChannelDirectory(kBarPd), 0u);
  const uint64_t pde = Pde(0, kBarPt, 1);
  ASSERT_EQ(Write(kBarPd, kBarPd, 0, {pde}), CallResult::kOk);
  EXPECT_EQ(Machine64(kBarPd), pde) << "guest addresses: the software walk relocates";
  ASSERT_EQ(Write(kBarPd, kBarPt, 3, {vm::pte::Make(0x123000)}), CallResult::kOk);
  EXPECT_EQ(Machine64(kBarPt + 3 * 8), vm::pte::Make(0x123000));
  ASSERT_EQ(Write(kBarPd, kBarPd, 1, {0}), CallResult::kOk);  // a one-PDE directory: one page
  EXPECT_EQ(Write(kBarPd, kBarPd, 512, {0}), CallResult::kOutOfTable);
  EXPECT_EQ(Write(kBarPd, kBarPt, 3, {vm::pte::Make(kVmBytes)}), CallResult::kForeignVram);
  EXPECT_EQ(Write(kBarPd, kBarPd, 0, {Pde(0, kVmBytes)}), CallResult::kNotInVram);
  EXPECT_EQ(Write(kBarPd, kVmBytes - 8, 1, {0}), CallResult::kNotInVram);
  // A BAR space cannot write into a table the GPU walks.
  MakeSpace();
  EXPECT_EQ(Write(kBarPd, kSmall, 0, {vm::pte::Make(0)}), CallResult::kConflict);
  EXPECT_EQ(Write(kBarPd, kPd, 0, {0}), CallResult::kConflict);
  EXPECT_EQ(Machine64(kSmall), 0u);
  const int changes = bar_changes_;
  ASSERT_EQ(Run([&](pv::BatchBuilder& b) { b.Flush(kBarPd); }), CallResult::kOk);
  EXPECT_EQ(bar_changes_, changes + 1);
  ASSERT_EQ(Run([&](pv::BatchBuilder& b) { b.Detach(kBarPd); }), CallResult::kOk);
  EXPECT_EQ(tables_->spaces(), 1u);
}

}  // namespace
}  // namespace gpuvm::aggregator
