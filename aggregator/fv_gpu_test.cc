// Full virtualization's building blocks inside one process: PTE validation and relocation, the
// reserved-VRAM allocator, and shadow page tables on the software GPU. The unmodified guest driver
// in fv VMs is tests/fv_guest_test.cc.
#include "aggregator/fv_gpu.h"

#include <gtest/gtest.h>

#include "aggregator/reserved_vram.h"
#include "aggregator/shadow_page_table.h"
#include "aggregator/sim_gpu.h"
#include "aggregator/testing/unthreaded_sim.h"
#include "aggregator/vram_access.h"
#include "gpu/hw/vm.h"

namespace gpuvm::aggregator {
namespace {

namespace vm = gf100::vm;
constexpr uint64_t kMiB = 1ull << 20;

// ---- PTE validation and relocation ----------------------------------------------------------

const VmMemoryLayout kLayout{.vram_base = 64 * kMiB,
                             .vram_bytes = 32 * kMiB,
                             .sysram_base = 1ull << 36,
                             .ram_bytes = 16 * kMiB};

TEST(FvPteTest, AbsentStaysAbsent) {
  EXPECT_EQ(RelocatePte(0, 4096, kLayout).verdict, PteVerdict::kEmpty);
  // Garbage in an absent entry is dropped, not copied.
  const RelocatedPte r = RelocatePte(~vm::pte::kPresent, 4096, kLayout);
  EXPECT_EQ(r.verdict, PteVerdict::kEmpty);
  EXPECT_EQ(r.value, 0u);
}

TEST(FvPteTest, VramInsideTheSliceIsRelocated) {
  const uint64_t guest = vm::pte::Make(0x123000, {.read_only = true});
  const RelocatedPte r = RelocatePte(guest, 4096, kLayout);
  ASSERT_EQ(r.verdict, PteVerdict::kMapped);
  EXPECT_EQ(vm::pte::Address(r.value), 64 * kMiB + 0x123000);
  EXPECT_EQ(vm::pte::TargetOf(r.value), vm::Target::kVram);
  EXPECT_TRUE(r.value & vm::pte::kReadOnly);
  // The last page of the slice.
  EXPECT_EQ(RelocatePte(vm::pte::Make(32 * kMiB - 4096), 4096, kLayout).verdict,
            PteVerdict::kMapped);
}

TEST(FvPteTest, VramOutsideTheSliceIsRejected) {
  for (uint64_t address : {32 * kMiB, 32 * kMiB + 4096, 64 * kMiB, uint64_t(0xfffffff000ull)}) {
    const RelocatedPte r = RelocatePte(vm::pte::Make(address), 4096, kLayout);
    EXPECT_EQ(r.verdict, PteVerdict::kRejected) << std::hex << address;
    EXPECT_EQ(r.value, 0u);
    EXPECT_NE(r.reason, nullptr);
  }
  // A large page that starts inside but ends outside.
  VmMemoryLayout odd = kLayout;
  odd.vram_bytes = 32 * kMiB + 64 * 1024;
  EXPECT_EQ(RelocatePte(vm::pte::Make(32 * kMiB), 128 * 1024, odd).verdict, PteVerdict::kRejected);
}

TEST(FvPteTest, SysramInsideTheRamIsRelocatedOutsideRejected) {
  const RelocatedPte in =
      RelocatePte(vm::pte::Make(0x5000, {.target = vm::Target::kSysramSnooped}), 4096, kLayout);
  ASSERT_EQ(in.verdict, PteVerdict::kMapped);
  EXPECT_EQ(vm::pte::Address(in.value), (1ull << 36) + 0x5000);
  EXPECT_EQ(vm::pte::TargetOf(in.value), vm::Target::kSysramSnooped);
  EXPECT_EQ(
      RelocatePte(vm::pte::Make(16 * kMiB, {.target = vm::Target::kSysramNoSnoop}), 4096, kLayout)
          .verdict,
      PteVerdict::kRejected);
  // Another VM's window is just "outside this VM's RAM".
  EXPECT_EQ(
      RelocatePte(vm::pte::Make(2ull << 36, {.target = vm::Target::kSysramSnooped}), 4096, kLayout)
          .verdict,
      PteVerdict::kRejected);
}

TEST(FvPteTest, InvalidTargetStorageKindsAndTagsAreRejected) {
  EXPECT_EQ(RelocatePte(vm::pte::Make(0, {.target = vm::Target::kInvalid}), 4096, kLayout).verdict,
            PteVerdict::kRejected);
  EXPECT_EQ(RelocatePte(vm::pte::Make(0, {.storage_type = 0xfe}), 4096, kLayout).verdict,
            PteVerdict::kRejected);
  EXPECT_EQ(RelocatePte(vm::pte::Make(0) | (1ull << 44), 4096, kLayout).verdict,
            PteVerdict::kRejected);
}

TEST(FvPteTest, LargePageLowBitsAreIgnored) {
  const RelocatedPte r = RelocatePte(vm::pte::Make(0x21000), 128 * 1024, kLayout);
  ASSERT_EQ(r.verdict, PteVerdict::kMapped);
  EXPECT_EQ(vm::pte::Address(r.value), 64 * kMiB + 0x20000);
}

TEST(FvReservedVramTest, AllocatesFreesAndCoalesces) {
  ReservedVram r(kMiB, 2 * kMiB);
  Result<uint64_t> a = r.Allocate(100);
  Result<uint64_t> b = r.Allocate(512 * 1024);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, kMiB);
  EXPECT_EQ(*b, kMiB + 4096);
  EXPECT_FALSE(r.Allocate(kMiB).ok());
  r.Free(*a, 100);
  r.Free(*b, 512 * 1024);
  EXPECT_EQ(r.used(), 0u);
  Result<uint64_t> whole = r.Allocate(kMiB);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(*whole, kMiB);
}

// ---- shadow page tables on the software GPU ------------------------------------------------

class FvShadowTest : public testing::UnthreadedSimTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(MakeSim(256 * kMiB));
    reserved_ = std::make_unique<ReservedVram>(kMiB, 32 * kMiB);
  }
  void GuestWrite64(uint64_t guest_address, uint64_t value) {
    vram_->Write64(kLayout.vram_base + guest_address, value);
  }

  std::unique_ptr<ReservedVram> reserved_;
};

TEST_F(FvShadowTest, RescanRelocatesValidatesAndWritesOnlyChanges) {
  const uint64_t pd = 0x100000, small = 0x200000, large = 0x300000;
  // PDE 32 (4 GiB): a small-page table; PDE 300: a large-page table.
  GuestWrite64(pd + 32 * 8, vm::pde::Make(vm::PdeTarget::kNone, 0, vm::PdeTarget::kVram, small));
  GuestWrite64(pd + 300 * 8, vm::pde::Make(vm::PdeTarget::kVram, large, vm::PdeTarget::kNone, 0));
  GuestWrite64(small + 0 * 8, vm::pte::Make(0x400000));
  GuestWrite64(small + 1 * 8, vm::pte::Make(0x7000, {.target = vm::Target::kSysramSnooped}));
  GuestWrite64(small + 2 * 8, vm::pte::Make(40 * kMiB));  // outside the 32 MiB slice: attack
  GuestWrite64(large + 5 * 8, vm::pte::Make(0x800000));
  // PDE 40 names a table outside the slice.
  GuestWrite64(pd + 40 * 8,
               vm::pde::Make(vm::PdeTarget::kNone, 0, vm::PdeTarget::kVram, 200 * kMiB));

  std::vector<uint8_t> ram(kLayout.ram_bytes);
  const GuestMemoryView view(vram_.get(), kLayout, ram);
  auto space = ShadowSpace::Create(vram_.get(), reserved_.get(), pd);
  ASSERT_TRUE(space.ok());
  ShadowCounters c;
  ASSERT_TRUE((*space)->Rescan(view, c).ok());
  EXPECT_EQ(c.entries_rejected, 2u);  // the PTE and the PDE

  const uint64_t spd = (*space)->physical_pd();
  EXPECT_GE(spd, kMiB);
  EXPECT_LT(spd, 32 * kMiB);
  const uint64_t spde = vram_->Read64(spd + 32 * 8);
  ASSERT_EQ(vm::pde::SmallTarget(spde), vm::PdeTarget::kVram);
  const uint64_t spt = vm::pde::SmallTableAddress(spde);
  EXPECT_LT(spt, 32 * kMiB);  // in the reserved area, not the guest's table
  EXPECT_EQ(vm::pte::Address(vram_->Read64(spt)), kLayout.vram_base + 0x400000);
  EXPECT_EQ(vm::pte::Address(vram_->Read64(spt + 8)), kLayout.sysram_base + 0x7000);
  EXPECT_EQ(vram_->Read64(spt + 16), 0u);  // the attack is not in the shadow
  EXPECT_EQ(vram_->Read64(spd + 40 * 8), 0u);
  const uint64_t lpde = vram_->Read64(spd + 300 * 8);
  ASSERT_EQ(vm::pde::LargeTarget(lpde), vm::PdeTarget::kVram);
  EXPECT_EQ(vm::pte::Address(vram_->Read64(vm::pde::LargeTableAddress(lpde) + 5 * 8)),
            kLayout.vram_base + 0x800000);

  // Nothing changed: nothing written.
  ShadowCounters again;
  ASSERT_TRUE((*space)->Rescan(view, again).ok());
  EXPECT_EQ(again.entries_written, 0u);
  EXPECT_EQ(again.tables_unchanged, again.tables_scanned);
  // One PTE changed: one entry written.
  GuestWrite64(small + 3 * 8, vm::pte::Make(0x401000));
  ShadowCounters one;
  ASSERT_TRUE((*space)->Rescan(view, one).ok());
  EXPECT_EQ(one.entries_written, 1u);
  EXPECT_EQ(vm::pte::Address(vram_->Read64(spt + 24)), kLayout.vram_base + 0x401000);
  // The table goes away: the shadow PDE too, and its reserved VRAM comes back.
  const uint64_t used = reserved_->used();
  GuestWrite64(pd + 32 * 8, 0);
  ASSERT_TRUE((*space)->Rescan(view, one).ok());
  EXPECT_EQ(vram_->Read64(spd + 32 * 8), 0u);
  EXPECT_LT(reserved_->used(), used);
}

// The walk a GF100 does, on the guest's own tables: the small-page table first, then the large one.
TEST_F(FvShadowTest, LookupGuestPteWalksTheGuestsTables) {
  const uint64_t pd = 0x100000, small = 0x200000, large = 0x300000;
  GuestWrite64(pd + 32 * 8,
               vm::pde::Make(vm::PdeTarget::kVram, large, vm::PdeTarget::kVram, small));
  GuestWrite64(small + 1 * 8, vm::pte::Make(0x400000));
  GuestWrite64(large + 0 * 8, vm::pte::Make(0x800000));
  std::vector<uint8_t> ram(kLayout.ram_bytes);
  const GuestMemoryView view(vram_.get(), kLayout, ram);
  const uint64_t base = 32ull << vm::kPdeShift(ShadowSpace::kLargePageShift);
  GuestPte g = LookupGuestPte(view, pd, base + 0x1234);
  EXPECT_EQ(g.pte, vm::pte::Make(0x400000));
  EXPECT_EQ(g.page_bytes, 4096u);
  EXPECT_EQ(g.inner, 0x234u);
  EXPECT_EQ(g.table_target, vm::PdeTarget::kVram);
  EXPECT_EQ(g.table_address, small + 8);
  g = LookupGuestPte(view, pd, base + 0x2345);  // no small PTE there: the large page maps it
  EXPECT_EQ(g.pte, vm::pte::Make(0x800000));
  EXPECT_EQ(g.page_bytes, 128u * 1024);
  EXPECT_EQ(g.inner, 0x2345u);
  EXPECT_EQ(g.table_address, large);
  EXPECT_EQ(LookupGuestPte(view, pd, 0).pte, 0u);  // PDE 0 is empty
}

}  // namespace
}  // namespace gpuvm::aggregator
