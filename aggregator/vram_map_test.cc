// VramMap: static slices and dynamic chunks assigned on first reference, zeroed before the guest
// sees them, given back on destruction; over-commit and exhaustion; RelocatePte and
// GuestMemoryView through a map.
#include "aggregator/vram_map.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "aggregator/aggregator.h"
#include "aggregator/reserved_vram.h"
#include "aggregator/shadow_page_table.h"
#include "aggregator/sim_gpu.h"
#include "aggregator/testing/same_file.h"
#include "aggregator/testing/unthreaded_sim.h"
#include "gpu/hw/vm.h"

namespace gpuvm::aggregator {
namespace {

namespace vm = gf100::vm;
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kChunk = VramMap::kChunk;

class VramMapTest : public testing::UnthreadedSimTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(MakeSim(16 * kMiB));
    pool_ = std::make_unique<ReservedVram>(8 * kMiB, 16 * kMiB);  // 8 MiB = 64 chunks
    // Whatever a previous owner left in the pool.
    std::memset(gpu_->vram_mapping().data() + 8 * kMiB, 0xa5, 8 * kMiB);
  }
  std::unique_ptr<VramMap> Make(VramPolicy policy, uint64_t bytes) {
    auto m = VramMap::Create(policy, pool_.get(), vram_.get(), bytes);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? std::move(*m) : nullptr;
  }
  bool MachineChunkIsZero(uint64_t machine) {
    const uint8_t* p = gpu_->vram_mapping().data() + (machine & ~(kChunk - 1));
    for (uint64_t i = 0; i < kChunk; ++i) {
      if (p[i] != 0) return false;
    }
    return true;
  }

  std::unique_ptr<ReservedVram> pool_;
};

TEST_F(VramMapTest, StaticIsOneZeroedSliceFreedAndScrubbedAtTheEnd) {
  auto m = Make(VramPolicy::kStatic, 4 * kMiB);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->static_base(), 8 * kMiB);
  EXPECT_EQ(m->Lookup(0x1234), 8 * kMiB + 0x1234);
  EXPECT_EQ(m->Lookup(4 * kMiB), 0u);  // outside
  EXPECT_EQ(m->assigned_bytes(), 4 * kMiB);
  EXPECT_EQ(pool_->used(), 4 * kMiB);
  for (uint64_t c = 0; c < 4 * kMiB; c += kChunk) EXPECT_TRUE(MachineChunkIsZero(8 * kMiB + c));
  const uint32_t v = 0xdeadbeef;
  ASSERT_TRUE(m->Write(kMiB + 8, &v, 4));
  m.reset();
  EXPECT_EQ(pool_->used(), 0u);
  EXPECT_TRUE(MachineChunkIsZero(9 * kMiB));
  // No contiguous run that large: refused with what is missing.
  auto big = VramMap::Create(VramPolicy::kStatic, pool_.get(), vram_.get(), 16 * kMiB);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("no free VRAM slice of 16 MiB"), std::string::npos);
}

TEST_F(VramMapTest, DynamicAssignsAZeroedChunkOnFirstReferenceOnly) {
  auto m = Make(VramPolicy::kDynamic, 8 * kMiB);  // as large as the pool: nothing taken yet
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->assigned_bytes(), 0u);
  EXPECT_EQ(pool_->used(), 0u);
  EXPECT_EQ(m->Lookup(5 * kMiB), 0u);
  // A read of a chunk never assigned: zeros, nothing assigned.
  std::vector<uint8_t> out(3 * kChunk, 0x11);
  ASSERT_TRUE(m->Read(5 * kMiB - kChunk, out.data(), out.size()));
  EXPECT_EQ(out, std::vector<uint8_t>(out.size(), 0));
  EXPECT_EQ(m->assigned_bytes(), 0u);

  Result<uint64_t> a = m->Assign(5 * kMiB + 0x3008);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a & (kChunk - 1), 0x3008u);
  EXPECT_GE(*a, 8 * kMiB);
  EXPECT_TRUE(MachineChunkIsZero(*a));  // the 0xa5 a previous owner left is gone
  EXPECT_EQ(m->assigned_bytes(), kChunk);
  EXPECT_EQ(m->Lookup(5 * kMiB + 0x3008), *a);
  // The same chunk again: the same machine page, not zeroed again.
  const uint32_t v = 0x12345678;
  ASSERT_TRUE(m->Write(5 * kMiB + 16, &v, 4));
  ASSERT_TRUE(m->Assign(5 * kMiB + 100).ok());
  uint32_t back = 0;
  ASSERT_TRUE(m->Read(5 * kMiB + 16, &back, 4));
  EXPECT_EQ(back, v);
  EXPECT_EQ(m->assigned_bytes(), kChunk);
  // A write straddling two chunks assigns both.
  std::vector<uint8_t> in(64, 0x5a);
  ASSERT_TRUE(m->Write(2 * kChunk - 32, in.data(), in.size()));
  EXPECT_EQ(m->assigned_bytes(), 3 * kChunk);
  std::vector<uint8_t> round(64);
  ASSERT_TRUE(m->Read(2 * kChunk - 32, round.data(), round.size()));
  EXPECT_EQ(round, in);
  EXPECT_NE(m->Lookup(kChunk), 0u);
  EXPECT_NE(m->Lookup(2 * kChunk), 0u);
  // Outside the VM: refused.
  EXPECT_FALSE(m->Assign(8 * kMiB).ok());
  EXPECT_FALSE(m->Write(8 * kMiB - 2, in.data(), 4));
  EXPECT_FALSE(m->Read(8 * kMiB - 2, round.data(), 4));
  m.reset();
  EXPECT_EQ(pool_->used(), 0u);  // everything back
}

TEST_F(VramMapTest, DynamicExhaustionFailsOnlyTheVmAskingAndNeverTakesAnothersChunks) {
  auto first = Make(VramPolicy::kDynamic, 8 * kMiB);
  auto second = Make(VramPolicy::kDynamic, 8 * kMiB);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  std::set<uint64_t> firsts;
  for (uint64_t c = 0; c < 40; ++c) {
    Result<uint64_t> m = first->Assign(c * kChunk);
    ASSERT_TRUE(m.ok());
    const uint32_t mark = 0xf1f1f1f1;
    ASSERT_TRUE(first->Write(c * kChunk, &mark, 4));
    firsts.insert(*m);
  }
  uint64_t got = 0;
  for (uint64_t c = 0; c < 64; ++c) {
    Result<uint64_t> m = second->Assign(c * kChunk);
    if (!m.ok()) {
      EXPECT_EQ(m.status().code(), StatusCode::kResourceExhausted);
      EXPECT_NE(m.status().message().find("over-committed"), std::string::npos);
      continue;
    }
    ++got;
    EXPECT_EQ(firsts.count(*m), 0u);
  }
  EXPECT_EQ(got, 24u);  // what was left
  EXPECT_EQ(second->exhausted(), 40u);
  // The first VM's data untouched.
  for (uint64_t c = 0; c < 40; ++c) {
    uint32_t mark = 0;
    ASSERT_TRUE(first->Read(c * kChunk, &mark, 4));
    EXPECT_EQ(mark, 0xf1f1f1f1);
  }
  // The first VM goes: the second can have its chunks now, zeroed.
  first.reset();
  Result<uint64_t> m = second->Assign(63 * kChunk);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(firsts.count(*m), 1u);
  EXPECT_TRUE(MachineChunkIsZero(*m));
  // Larger than the whole pool: refused at creation.
  auto huge = VramMap::Create(VramPolicy::kDynamic, pool_.get(), vram_.get(), 64 * kMiB);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("no free VRAM"), std::string::npos);
}

TEST_F(VramMapTest, RelocatePteAssignsThroughTheMapAndRejectsWhenExhausted) {
  auto m = Make(VramPolicy::kDynamic, 8 * kMiB);
  ASSERT_NE(m, nullptr);
  VmMemoryLayout layout{.vram_bytes = 8 * kMiB, .vram_map = m.get()};
  // A large page (one chunk) and a small page inside another chunk.
  const RelocatedPte large = RelocatePte(vm::pte::Make(3 * kChunk), kChunk, layout);
  ASSERT_EQ(large.verdict, PteVerdict::kMapped);
  EXPECT_EQ(vm::pte::Address(large.value), m->Lookup(3 * kChunk));
  EXPECT_EQ(vm::pte::Address(large.value) % kChunk, 0u);
  const RelocatedPte small = RelocatePte(vm::pte::Make(5 * kChunk + 0x2000), 0x1000, layout);
  ASSERT_EQ(small.verdict, PteVerdict::kMapped);
  EXPECT_EQ(vm::pte::Address(small.value), m->Lookup(5 * kChunk + 0x2000));
  EXPECT_EQ(m->assigned_bytes(), 2 * kChunk);
  // Copying reads through the map.
  const uint64_t word = 0x0102030405060708;
  ASSERT_TRUE(m->Write(5 * kChunk + 0x2000, &word, 8));
  const GuestMemoryView view(vram_.get(), layout, {});
  uint64_t back = 0;
  EXPECT_TRUE(view.ReadVram(5 * kChunk + 0x2000, &back, 8));
  EXPECT_EQ(back, word);
  // Fill the pool from elsewhere; the next new chunk cannot be had: the PTE is rejected.
  std::vector<uint64_t> taken;
  while (true) {
    Result<uint64_t> t = pool_->Allocate(kChunk);
    if (!t.ok()) break;
    taken.push_back(*t);
  }
  const RelocatedPte refused = RelocatePte(vm::pte::Make(9 * kChunk), 0x1000, layout);
  EXPECT_EQ(refused.verdict, PteVerdict::kRejected);
  EXPECT_EQ(refused.value, 0u);
  EXPECT_NE(std::string(refused.reason).find("over-committed"), std::string::npos);
  // Pages it already has still relocate.
  EXPECT_EQ(RelocatePte(vm::pte::Make(3 * kChunk + 0x1000), 0x1000, layout).verdict,
            PteVerdict::kMapped);
  for (uint64_t t : taken) pool_->Free(t, kChunk);
}

// ---- per-VM backing: each VM's VRAM in a memfd of its own, the GPU's view stitched from them ----

// Bytes of `fd` at `offset`.
std::vector<uint8_t> FileBytes(int fd, uint64_t offset, size_t length) {
  std::vector<uint8_t> out(length);
  EXPECT_EQ(::pread(fd, out.data(), length, off_t(offset)), ssize_t(length));
  return out;
}
using testing::SameFile;

TEST_F(VramMapTest, PerVmBackingStitchesTheGpuViewFromEachVmsOwnFile) {
  auto a = Make(VramPolicy::kDynamic, 4 * kMiB);
  auto b = Make(VramPolicy::kDynamic, 4 * kMiB);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const int fa = a->backing_fd(), fb = b->backing_fd();
  ASSERT_GE(fa, 0);
  ASSERT_GE(fb, 0);
  EXPECT_FALSE(SameFile(fa, fb));
  EXPECT_FALSE(SameFile(fa, gpu_->sim_device()->vram_fd()));
  // Sealed, exactly the VM's VRAM long: what a device model and a guest may be handed.
  EXPECT_TRUE(os::CheckSealedMemfd(fa, 4 * kMiB).ok());
  uint8_t* const view = gpu_->vram_mapping().data();

  Result<uint64_t> ma = a->Assign(kMiB + 0x40);
  ASSERT_TRUE(ma.ok());
  // The GPU's store lands in the VM's file at the guest address, and the guest's store through its
  // file (BAR remap) is what the GPU reads.
  view[*ma] = 0xa1;
  EXPECT_EQ(FileBytes(fa, kMiB + 0x40, 1)[0], 0xa1);
  const uint8_t guest = 0xa2;
  ASSERT_EQ(::pwrite(fa, &guest, 1, off_t(kMiB + 0x80)), 1);
  EXPECT_EQ(view[*ma + 0x40], 0xa2);
  uint8_t back = 0;
  ASSERT_TRUE(a->Read(kMiB + 0x80, &back, 1));
  EXPECT_EQ(back, 0xa2);

  Result<uint64_t> mb = b->Assign(0);
  ASSERT_TRUE(mb.ok());
  std::vector<uint8_t> secret(kChunk, 0xb5);
  ASSERT_TRUE(b->Write(0, secret.data(), secret.size()));
  EXPECT_EQ(FileBytes(fb, 0, kChunk), secret);
  // A's file holds A's chunk and nothing else: data only there, none of B's bytes anywhere.
  EXPECT_EQ(::lseek(fa, 0, SEEK_DATA), off_t(kMiB));
  EXPECT_EQ(::lseek(fa, off_t(kMiB + kChunk), SEEK_DATA), off_t(-1));
  const std::vector<uint8_t> all = FileBytes(fa, 0, 4 * kMiB);
  EXPECT_EQ(std::count(all.begin(), all.end(), uint8_t(0xb5)), 0);

  // A guest scribbling where its VM has no chunk yet: reads (trapped) stay zero, and the chunk,
  // once assigned, starts zeroed all the same.
  const std::vector<uint8_t> early(kChunk, 0xee);
  ASSERT_EQ(::pwrite(fa, early.data(), early.size(), off_t(3 * kMiB)), ssize_t(early.size()));
  ASSERT_TRUE(a->Read(3 * kMiB, &back, 1));
  EXPECT_EQ(back, 0);
  Result<uint64_t> late = a->Assign(3 * kMiB);
  ASSERT_TRUE(late.ok());
  EXPECT_TRUE(MachineChunkIsZero(*late));
  EXPECT_EQ(FileBytes(fa, 3 * kMiB, 1)[0], 0);
}

// What an orphaned guest (its device model died, so nobody withdrew its BAR remap ranges) is left
// with: its VM's file, which no GPU page is backed by any more, so the next VM's data in the same
// machine pages never reaches it, whatever it writes.
TEST_F(VramMapTest, AReleasedChunkLeavesItsOldOwnersFileBeforeTheNextVmGetsIt) {
  for (VramPolicy policy : {VramPolicy::kStatic, VramPolicy::kDynamic}) {
    SCOPED_TRACE(VramPolicyName(policy));
    auto a = Make(policy, 4 * kMiB);
    ASSERT_NE(a, nullptr);
    const std::vector<uint8_t> mine(kChunk, 0xa5);
    ASSERT_TRUE(a->Write(0, mine.data(), mine.size()));
    const uint64_t machine = a->Lookup(0);
    ASSERT_NE(machine, 0u);
    auto held = os::DuplicateFd(a->backing_fd());
    ASSERT_TRUE(held.ok());
    auto orphan = os::SharedMapping::Map(held->get(), 0, 4 * kMiB, true);
    ASSERT_TRUE(orphan.ok());
    EXPECT_EQ(orphan->data()[0], 0xa5);

    a.reset();
    EXPECT_TRUE(MachineChunkIsZero(machine));
    EXPECT_EQ(orphan->data()[0], 0) << "the old owner's file is punched";
    std::memset(orphan->data(), 0xee, 4 * kMiB);
    EXPECT_TRUE(MachineChunkIsZero(machine)) << "the old file still backs the GPU's page";

    auto b = Make(policy, 4 * kMiB);
    ASSERT_NE(b, nullptr);
    ASSERT_TRUE(b->Assign(0).ok());
    ASSERT_EQ(b->Lookup(0), machine) << "the next VM gets the same machine page (first fit)";
    EXPECT_TRUE(MachineChunkIsZero(machine));
    const std::vector<uint8_t> theirs(kChunk, 0x5b);
    ASSERT_TRUE(b->Write(0, theirs.data(), theirs.size()));
    EXPECT_EQ(std::count(orphan->data(), orphan->data() + 4 * kMiB, uint8_t(0x5b)), 0);
    std::memset(orphan->data(), 0xdd, 4 * kMiB);
    std::vector<uint8_t> back(kChunk);
    ASSERT_TRUE(b->Read(0, back.data(), back.size()));
    EXPECT_EQ(back, theirs);
    b.reset();
    EXPECT_EQ(pool_->used(), 0u);
    EXPECT_EQ(lseek(gpu_->sim_device()->vram_fd(), off_t(machine), SEEK_HOLE), off_t(machine))
        << "released pages are holes in the GPU's own memory again";
  }
}

// Zeroing through VramAccess (MADV_REMOVE on the view) punches whichever file backs the pages.
TEST_F(VramMapTest, ZeroingABackedRangePunchesTheVmsFile) {
  auto a = Make(VramPolicy::kDynamic, 4 * kMiB);
  ASSERT_NE(a, nullptr);
  Result<uint64_t> m = a->Assign(2 * kMiB);
  ASSERT_TRUE(m.ok());
  const std::vector<uint8_t> bytes(kChunk, 0x3c);
  ASSERT_EQ(::pwrite(a->backing_fd(), bytes.data(), bytes.size(), off_t(2 * kMiB)),
            ssize_t(bytes.size()));
  ASSERT_FALSE(MachineChunkIsZero(*m));
  vram_->Fill(*m, 0, kChunk);
  // A hole (looked at before anything reads it: a read fault of a memfd hole allocates a page).
  EXPECT_EQ(::lseek(a->backing_fd(), off_t(2 * kMiB), SEEK_HOLE), off_t(2 * kMiB));
  EXPECT_TRUE(MachineChunkIsZero(*m));
}

// A software GPU whose RestoreVram can be made to fail (what a full map count would do).
class GpuWithFailingRestore final : public PhysicalGpu {
 public:
  explicit GpuWithFailingRestore(SimGpu* gpu) : gpu_(gpu) {}
  std::string Describe() const override { return "restore fails on demand"; }
  gpu::Device& device() override { return gpu_->device(); }
  uint64_t vram_bytes() const override { return gpu_->vram_bytes(); }
  bool reaches_guest_memory() const override { return false; }
  std::span<uint8_t> vram_mapping() override { return gpu_->vram_mapping(); }
  bool can_back_vram() const override { return true; }
  Status BackVram(uint64_t address, uint64_t length, int fd, uint64_t offset,
                  bool populate) override {
    return gpu_->BackVram(address, length, fd, offset, populate);
  }
  Status RestoreVram(uint64_t address, uint64_t length) override {
    if (fail) return Status::ResourceExhausted("no");
    return gpu_->RestoreVram(address, length);
  }
  Status Reset() override { return Status::Unimplemented("no"); }
  uint64_t resets() const override { return 0; }
  void SetInterruptHandler(gpu::InterruptHandler) override {}
  bool fail = false;

 private:
  SimGpu* gpu_;
};

// A chunk that cannot be given back to the GPU's own memory may still be its VM's file: it never
// returns to the pool (the next VM would share it with whoever holds that file).
TEST_F(VramMapTest, AChunkWhoseRestoreFailsNeverReturnsToThePool) {
  GpuWithFailingRestore gpu(gpu_.get());
  VramAccess vram(&gpu);
  auto m = VramMap::Create(VramPolicy::kDynamic, pool_.get(), &vram, 4 * kMiB);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::string log;
  (*m)->SetLog([&](const std::string& line) { log += line; });
  ASSERT_TRUE((*m)->Assign(0).ok());
  ASSERT_TRUE((*m)->Assign(kMiB).ok());
  EXPECT_EQ(pool_->used(), 2 * kChunk);
  gpu.fail = true;
  m->reset();
  EXPECT_EQ(pool_->used(), 2 * kChunk) << "stranded chunks went back to the pool";
  EXPECT_NE(log.find("kept out of the pool"), std::string::npos) << log;
}

// ---- quarantine (aggregator.h): VRAM of a VM whose guest may still reach it --------------------

// The local probe: the RAM memfd's description, shared with another process (as the launcher, the
// device model and the guest share it), keeps the RAM "held" while that process maps it — even
// with its descriptor closed — and only its exit releases it.
TEST(VramQuarantineTest, LocalRamIsReleasedOnlyOnceNoProcessHoldsIt) {
  auto ram = os::CreateSealedMemfd("quarantine-ram", 1 << 20);
  ASSERT_TRUE(ram.ok()) << ram.status().ToString();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t guest = ::fork();
  if (guest == 0) {
    void* p = ::mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, ram->get(), 0);
    ram->Reset();  // only the mapping holds it now
    (void)!::write(ready[1], p == MAP_FAILED ? "n" : "y", 1);
    ::pause();
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  ::close(ready[0]);
  ::close(ready[1]);
  auto probe = WatchLocalRam(ram->get());
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  {
    // Our own mapping holds it too (the aggregator's GuestRam until the VM is removed).
    auto ours = os::SharedMapping::Map(ram->get(), 0, 1 << 20, true);
    ASSERT_TRUE(ours.ok());
    ram->Reset();
    EXPECT_FALSE(LocalRamReleased(probe->get()));
  }
  EXPECT_FALSE(LocalRamReleased(probe->get())) << "the guest process still maps it";
  ::kill(guest, SIGKILL);
  ASSERT_EQ(::waitpid(guest, nullptr, 0), guest);
  EXPECT_TRUE(LocalRamReleased(probe->get()));
  EXPECT_TRUE(LocalRamReleased(probe->get()));  // and stays so (the probe's lock is let go)
}

// A pool with no room asks its reclaim hook (the aggregator's quarantine) once, then tries again.
TEST(VramQuarantineTest, APoolWithNoRoomReclaimsOnceAndRetries) {
  ReservedVram pool(4 * VramMap::kChunk, 6 * VramMap::kChunk);
  Result<uint64_t> a = pool.Allocate(VramMap::kChunk), b = pool.Allocate(VramMap::kChunk);
  ASSERT_TRUE(a.ok() && b.ok());
  int calls = 0;
  bool give_back = false;
  pool.SetReclaim([&] {
    ++calls;
    if (!give_back) return false;
    pool.Free(*a, VramMap::kChunk);
    return true;
  });
  EXPECT_FALSE(pool.Allocate(VramMap::kChunk).ok());
  EXPECT_EQ(calls, 1);
  give_back = true;
  Result<uint64_t> c = pool.Allocate(VramMap::kChunk);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, *a);
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace gpuvm::aggregator
