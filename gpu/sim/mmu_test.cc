// White-box tests of the page walk and the TLB, on page tables written straight into VRAM.
#include "gpu/sim/mmu.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpu/sim/pinned_host_memory.h"

namespace gpuvm::sim {
namespace {

namespace vm = gf100::vm;
using gf100::FaultReason;

constexpr uint64_t kPd = 0x10000;
constexpr uint64_t kSpt = 0x100000;  // small table for PDE 0
constexpr uint64_t kLpt = 0x200000;  // large table for PDE 0

class SimMmuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    vram_ = std::move(Vram::Create(16 << 20)).value();
    host_buffer_ = static_cast<uint8_t*>(std::aligned_alloc(4096, 1 << 16));
    ASSERT_TRUE(host_.Register(0x80000000, host_buffer_, 1 << 16).ok());
    memory_ = std::make_unique<PhysicalMemory>(vram_.get(), &host_);
    mmu_ = std::make_unique<Mmu>(memory_.get());
    SetPde(0, vm::pde::Make(vm::PdeTarget::kVram, kLpt, vm::PdeTarget::kVram, kSpt));
    space_ = mmu_->GetSpace({vm::Target::kVram, kPd});
    ASSERT_NE(space_, nullptr);
  }
  void TearDown() override { std::free(host_buffer_); }

  void SetPde(uint64_t index, uint64_t pde) { Store64(vram_->At(kPd + index * 8, 8), pde); }
  void SetSmallPte(uint64_t va, uint64_t pte) { Store64(vram_->At(kSpt + (va >> 12) * 8, 8), pte); }
  void SetLargePte(uint64_t va, uint64_t pte) { Store64(vram_->At(kLpt + (va >> 17) * 8, 8), pte); }
  uint8_t* Tr(uint64_t va, bool write = false, bool privileged = false, MemoryFault* f = nullptr,
              uint64_t limit = vm::kVaLimit - 1) {
    MemoryFault local;
    return mmu_->Translate(space_, limit, va, 4, write, privileged, f ? f : &local);
  }

  std::unique_ptr<Vram> vram_;
  PinnedHostMemory host_;
  uint8_t* host_buffer_ = nullptr;
  std::unique_ptr<PhysicalMemory> memory_;
  std::unique_ptr<Mmu> mmu_;
  AddressSpace* space_ = nullptr;
};

TEST_F(SimMmuTest, SmallLargeAndSysramPages) {
  SetSmallPte(0x3000, vm::pte::Make(0x400000));
  SetLargePte(0x40000, vm::pte::Make(0x600000));
  SetSmallPte(0x5000, vm::pte::Make(0x80001000, {false, false, vm::Target::kSysramSnooped, 0}));
  EXPECT_EQ(Tr(0x3010), vram_->At(0x400010, 1));
  EXPECT_EQ(Tr(0x40000 + 0x1f004), vram_->At(0x600000 + 0x1f004, 1));
  EXPECT_EQ(Tr(0x5008), host_buffer_ + 0x1008);
}

// A translation that reaches VRAM brings in the large page around it at once (Vram::Prefault):
// the engine threads take no page fault per 4 KiB there. Once per block; SYSRAM is left alone.
TEST_F(SimMmuTest, AWalkToVramPrefaultsItsLargePageOnce) {
  const uint64_t block = 0xa00000;  // 128 KiB aligned, nothing has touched it
  ASSERT_NE(lseek(vram_->fd(), off_t(block), SEEK_DATA), off_t(block));
  SetSmallPte(0x7000, vm::pte::Make(block + 0x3000));
  SetSmallPte(0x8000, vm::pte::Make(block + 0x9000));  // the same block
  SetSmallPte(0x5000, vm::pte::Make(0x80001000, {false, false, vm::Target::kSysramSnooped, 0}));
  const uint64_t before = vram_->prefaulted_blocks();
  ASSERT_NE(Tr(0x7000), nullptr);
  EXPECT_EQ(vram_->prefaulted_blocks(), before + 1);
  // The whole block is in the file now, not only the page translated.
  EXPECT_EQ(lseek(vram_->fd(), off_t(block), SEEK_DATA), off_t(block));
  EXPECT_GE(lseek(vram_->fd(), off_t(block), SEEK_HOLE), off_t(block + Vram::kPrefaultBlock));
  ASSERT_NE(Tr(0x8000), nullptr);
  ASSERT_NE(Tr(0x5000), nullptr);
  EXPECT_EQ(vram_->prefaulted_blocks(), before + 1);
}

// Host memory that comes in at first use is told which way the access that walked to it goes
// (gpu::HostMemory::TranslateFor), so the destination of a device-to-host copy can be brought in
// for writing. Only a walk tells it: a TLB hit reaches no host memory.
TEST_F(SimMmuTest, AWalkToSysramTellsHostMemoryTheAccessDirection) {
  class Recording final : public gpu::HostMemory {
   public:
    explicit Recording(gpu::HostMemory* inner) : inner_(inner) {}
    uint8_t* Translate(uint64_t bus_address, uint64_t length) override {
      hints.push_back('?');
      return inner_->Translate(bus_address, length);
    }
    uint8_t* TranslateFor(uint64_t bus_address, uint64_t length, bool write) override {
      hints.push_back(write ? 'w' : 'r');
      return inner_->Translate(bus_address, length);
    }
    std::string hints;

   private:
    gpu::HostMemory* inner_;
  } recording(&host_);
  PhysicalMemory memory(vram_.get(), &recording);
  Mmu mmu(&memory);
  AddressSpace* space = mmu.GetSpace({vm::Target::kVram, kPd});
  ASSERT_NE(space, nullptr);
  SetSmallPte(0x5000, vm::pte::Make(0x80001000, {false, false, vm::Target::kSysramSnooped, 0}));
  SetSmallPte(0x6000, vm::pte::Make(0x80002000, {false, false, vm::Target::kSysramSnooped, 0}));
  MemoryFault fault;
  EXPECT_EQ(mmu.Translate(space, vm::kVaLimit - 1, 0x5010, 4, true, false, &fault),
            host_buffer_ + 0x1010);
  EXPECT_EQ(mmu.Translate(space, vm::kVaLimit - 1, 0x6000, 4, false, false, &fault),
            host_buffer_ + 0x2000);
  EXPECT_EQ(mmu.Translate(space, vm::kVaLimit - 1, 0x5020, 4, false, false, &fault),
            host_buffer_ + 0x1020);  // cached
  EXPECT_EQ(recording.hints, "wr");
}

TEST_F(SimMmuTest, FaultReasons) {
  MemoryFault f;
  EXPECT_EQ(Tr(0x9000, false, false, &f), nullptr);
  EXPECT_EQ(f.reason, FaultReason::kPageNotPresent);
  EXPECT_EQ(Tr(0x8000000, true, false, &f), nullptr);  // PDE 1 empty
  EXPECT_EQ(f.reason, FaultReason::kPtNotPresent);
  EXPECT_TRUE(f.write);
  EXPECT_EQ(f.va, 0x8000000u);
  EXPECT_EQ(Tr(0x2000, false, false, &f, 0x1fff), nullptr);
  EXPECT_EQ(f.reason, FaultReason::kVspaceLimit);
  EXPECT_EQ(mmu_->Translate(space_, ~0ull, 0x1ffe, 4, false, false, &f),
            nullptr);  // crosses a page
  EXPECT_EQ(mmu_->Translate(nullptr, ~0ull, 0x1000, 4, false, false, &f), nullptr);
  EXPECT_EQ(f.reason, FaultReason::kNoChannel);
  // PT_SIZE = 1: the tables cover only the first half of the PDE's 128 MiB.
  SetPde(0, vm::pde::Make(vm::PdeTarget::kVram, kLpt, vm::PdeTarget::kVram, kSpt, 1));
  mmu_->FlushAll();
  EXPECT_EQ(Tr(0x4000000, false, false, &f), nullptr);
  EXPECT_EQ(f.reason, FaultReason::kPtTooShort);
  // Targets that lead nowhere: VRAM past its end, unregistered host memory, the unused target 1.
  SetSmallPte(0x6000, vm::pte::Make(64ull << 20));
  SetSmallPte(0x7000, vm::pte::Make(0x90000000, {false, false, vm::Target::kSysramNoSnoop, 0}));
  SetSmallPte(0x8000, vm::pte::Make(0x1000, {false, false, vm::Target::kInvalid, 0}));
  for (uint64_t va : {0x6000, 0x7000, 0x8000}) {
    EXPECT_EQ(Tr(va, false, false, &f), nullptr);
    EXPECT_EQ(f.reason, FaultReason::kPageNotPresent);
  }
}

TEST_F(SimMmuTest, PermissionsAreCheckedOnCachedEntries) {
  SetSmallPte(0x1000, vm::pte::Make(0x400000, {true, true, vm::Target::kVram, 0}));
  MemoryFault f;
  EXPECT_NE(Tr(0x1000, false, true, &f), nullptr);  // privileged read: fine
  EXPECT_EQ(Tr(0x1000, false, false, &f), nullptr);
  EXPECT_EQ(f.reason, FaultReason::kPageSupervisorOnly);
  EXPECT_EQ(Tr(0x1000, true, true, &f), nullptr);
  EXPECT_EQ(f.reason, FaultReason::kPageReadOnly);
}

TEST_F(SimMmuTest, TlbCachesUntilFlushAndCountsWalks) {
  SetSmallPte(0x1000, vm::pte::Make(0x400000));
  EXPECT_EQ(Tr(0x1000), vram_->At(0x400000, 1));
  const uint64_t walks = mmu_->walks();
  SetSmallPte(0x1000, vm::pte::Make(0x500000));
  EXPECT_EQ(Tr(0x1004), vram_->At(0x400004, 1));  // stale
  EXPECT_EQ(mmu_->walks(), walks);                // a hit
  mmu_->FlushSpace({vm::Target::kVram, kPd});
  EXPECT_EQ(Tr(0x1004), vram_->At(0x500004, 1));
  EXPECT_EQ(mmu_->walks(), walks + 1);
  // Another thread has its own L0 but shares the L1: it sees the same (cached) translation.
  SetSmallPte(0x1000, vm::pte::Make(0x600000));
  uint8_t* seen = nullptr;
  std::thread([&] { seen = Tr(0x1000); }).join();
  EXPECT_EQ(seen, vram_->At(0x500000, 1));
  // Faults are not cached: mapping a missing page takes effect without a flush.
  MemoryFault f;
  EXPECT_EQ(Tr(0x2000, false, false, &f), nullptr);
  SetSmallPte(0x2000, vm::pte::Make(0x700000));
  EXPECT_EQ(Tr(0x2000), vram_->At(0x700000, 1));
}

TEST_F(SimMmuTest, TranslateRunCoalescesContiguousPages) {
  for (uint64_t p = 0; p < 8; ++p)
    SetSmallPte(0x10000 + p * 0x1000, vm::pte::Make(0x400000 + p * 0x1000));
  SetSmallPte(0x18000, vm::pte::Make(0x900000));  // discontiguous
  uint64_t run = 0;
  MemoryFault f;
  uint8_t* p = mmu_->TranslateRun(space_, ~0ull, 0x10100, 0x10000, false, false, &run, &f);
  EXPECT_EQ(p, vram_->At(0x400100, 1));
  EXPECT_EQ(run, 0x8000u - 0x100);
}

TEST_F(SimMmuTest, ConcurrentTranslationsAndFlushes) {
  for (uint64_t p = 0; p < 64; ++p) SetSmallPte(p << 12, vm::pte::Make(0x400000 + (p << 12)));
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        const uint64_t va = uint64_t(i % 64) << 12;
        uint8_t* p = Tr(va);
        if (p != vram_->At(0x400000 + va, 1)) bad++;
      }
    });
  }
  for (int i = 0; i < 200; ++i) mmu_->FlushSpace({vm::Target::kVram, kPd});
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace gpuvm::sim
