// LocalVmGuest's DMA paths (local_trap_bus.h) on a domain with no device model: AllocDma memory is
// guest RAM from the start, zeroed, and its frames are free again after it (zeroed when taken
// again), also at a given address; MapDma moves bytes in and gives them back. SplitRepTransfer: the
// traps (ioreqs) of a block transfer.
#include "guest-pv-driver/local_trap_bus.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <tuple>
#include <vector>

#include "hypervisor/backend.h"

namespace gpuvm::guest {

class LocalVmGuestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A local domain this process creates and plays the guest of (no device model).
    auto backend = hv::OpenBackend(hv::BackendKind::kLocal);
    ASSERT_TRUE(backend->CreateDomain({.domid = 7, .ram_bytes = 8 << 20, .vcpus = 1}).ok());
    auto io = backend->OpenGuestIo(7, {});
    ASSERT_TRUE(io.ok()) << io.status().ToString();
    auto vm = LocalVmGuest::Create(std::move(*io));
    ASSERT_TRUE(vm.ok()) << vm.status().ToString();
    vm_ = std::move(*vm);
  }
  Result<std::unique_ptr<DmaMapping>> AllocDma(uint64_t length) { return vm_->AllocDma(length); }
  Result<std::unique_ptr<DmaMapping>> MapDma(void* host, uint64_t length) {
    return vm_->MapDma(host, length);
  }
  // The guest-RAM bytes behind page `page` of `m`.
  uint8_t* Frame(const DmaMapping& m, uint64_t page) {
    return vm_->ram().data() + m.PageBusAddress(page * 4096);
  }

  std::shared_ptr<LocalVmGuest> vm_;
};

TEST_F(LocalVmGuestTest, AllocDmaIsZeroedGuestRamAndItsFramesComeBackZeroed) {
  const uint64_t free_before = vm_->free_frames();
  constexpr uint64_t kPages = 64;
  auto m = AllocDma(kPages * 4096);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(vm_->free_frames(), free_before - kPages);
  for (uint64_t p = 0; p < kPages; ++p) {
    const uint64_t bus = (*m)->PageBusAddress(p * 4096);
    EXPECT_GE(bus, 1u << 20);  // never the reserved low MiB
    EXPECT_LT(bus, vm_->ram().size());
    EXPECT_EQ((*m)->host()[p * 4096 + 17], 0);
    // The program's bytes are the frame's bytes (what the GPU reaches), both ways.
    (*m)->host()[p * 4096 + 17] = static_cast<uint8_t>(p + 1);
    EXPECT_EQ(Frame(**m, p)[17], static_cast<uint8_t>(p + 1));
  }
  std::vector<uint8_t*> frames;
  for (uint64_t p = 0; p < kPages; ++p) frames.push_back(Frame(**m, p));
  m->reset();
  EXPECT_EQ(vm_->free_frames(), free_before);
  // The same frames handed out again start zeroed: nothing of the last user shows through.
  auto again = AllocDma(kPages * 4096);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  for (uint64_t p = 0; p < kPages; ++p) {
    EXPECT_EQ(Frame(**again, p), frames[p]) << p;
    EXPECT_EQ((*again)->host()[p * 4096 + 17], 0) << p;
  }
}

TEST_F(LocalVmGuestTest, AllocDmaPlacesMemoryCongruentToItsFramesModulo2MiB) {
  // So that where the host gives shared memory huge pages, a 2 MiB block of guest RAM is one
  // page-table entry in this process as in the aggregator's view (base/os.h, "Huge pages").
  for (const uint64_t pages : {uint64_t{1}, uint64_t{300}, uint64_t{600}}) {
    auto m = AllocDma(pages * 4096);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const auto host = reinterpret_cast<uintptr_t>((*m)->host());
    EXPECT_EQ(host % os::kHugePageBytes, (*m)->PageBusAddress(0) % os::kHugePageBytes) << pages;
    // Mapped whole: every page's bytes are its frame's.
    for (uint64_t p = 0; p < pages; p += 97) {
      (*m)->host()[p * 4096] = 0x3c;
      EXPECT_EQ(Frame(**m, p)[0], 0x3c);
    }
  }
}

TEST_F(LocalVmGuestTest, AllocDmaZeroesFramesThatHeldBytes) {
  // Bytes left in free frames (an earlier process of the VM) never show through.
  for (uint64_t gpa = 1 << 20; gpa < vm_->ram().size(); gpa += 4096) vm_->ram()[gpa + 5] = 0xab;
  auto m = AllocDma(16 * 4096);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (uint64_t p = 0; p < 16; ++p) EXPECT_EQ((*m)->host()[p * 4096 + 5], 0) << p;
}

TEST_F(LocalVmGuestTest, AllocDmaRefusesBadSizesAndExhaustion) {
  EXPECT_EQ(AllocDma(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(AllocDma(4095).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(AllocDma(vm_->ram().size()).ok());  // the low MiB is never handed out
  EXPECT_FALSE(AllocDma(uint64_t{1} << 62).ok());
}

// Placed memory (managed memory: host address = GPU address) is guest RAM at exactly the address
// asked for; an address that is taken is refused without replacing the mapping or keeping frames.
TEST_F(LocalVmGuestTest, AllocDmaAtAnAddressPlacesGuestRamThereOrRefuses) {
  const uint64_t free_before = vm_->free_frames();
  auto* at = reinterpret_cast<uint8_t*>(uintptr_t{600} << 30);  // in the managed window
  auto m = vm_->AllocDma(4 * 4096, at);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->host(), at);
  EXPECT_EQ(vm_->free_frames(), free_before - 4);
  at[3 * 4096 + 9] = 0x77;
  EXPECT_EQ(Frame(**m, 3)[9], 0x77);  // the GPU's view of it

  // Overlapping the placed memory: refused, the memory untouched, no frame kept.
  auto clash = vm_->AllocDma(2 * 4096, at + 2 * 4096);
  EXPECT_EQ(clash.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(at[3 * 4096 + 9], 0x77);
  EXPECT_EQ(vm_->free_frames(), free_before - 4);
  EXPECT_EQ(vm_->AllocDma(4096, at + 1).status().code(), StatusCode::kInvalidArgument);

  m->reset();
  EXPECT_EQ(vm_->free_frames(), free_before);
  // The address range is free again.
  void* probe =
      mmap(at, 4 * 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  EXPECT_EQ(probe, at);
  if (probe != MAP_FAILED) munmap(probe, 4 * 4096);
}

TEST_F(LocalVmGuestTest, MapDmaOfAllocDmaMemorySharesItsFrames) {
  auto owned = AllocDma(4 * 4096);
  ASSERT_TRUE(owned.ok()) << owned.status().ToString();
  const uint64_t free_after_alloc = vm_->free_frames();
  auto again = MapDma((*owned)->host() + 4096, 2 * 4096);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(vm_->free_frames(), free_after_alloc);
  EXPECT_EQ((*again)->PageBusAddress(0), (*owned)->PageBusAddress(4096));
  // Freeing the memory first (against the contract) leaves the other mapping nothing to undo.
  owned->reset();
  again->reset();
  EXPECT_EQ(vm_->free_frames(), free_after_alloc + 4);
}

TEST_F(LocalVmGuestTest, MapDmaMovesBytesInAndGivesThemBack) {
  constexpr uint64_t kLength = 32 * 4096;
  void* mem = ::mmap(nullptr, kLength, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* bytes = static_cast<uint8_t*>(mem);
  for (uint64_t i = 0; i < kLength; i += 512) bytes[i] = static_cast<uint8_t>(i / 512);
  const uint64_t free_before = vm_->free_frames();
  auto m = MapDma(mem, kLength);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(vm_->free_frames(), free_before - 32);
  for (uint64_t i = 0; i < kLength; i += 512) {
    ASSERT_EQ(bytes[i], static_cast<uint8_t>(i / 512));
    ASSERT_EQ(Frame(**m, i / 4096)[i % 4096], static_cast<uint8_t>(i / 512));
  }
  bytes[4096] = 0x5a;
  const uint8_t* frame1 = Frame(**m, 1);
  EXPECT_EQ(frame1[0], 0x5a);
  m->reset();
  EXPECT_EQ(vm_->free_frames(), free_before);
  EXPECT_EQ(bytes[4096], 0x5a);  // private again, same bytes
  bytes[4096] = 1;
  EXPECT_EQ(frame1[0], 0x5a);  // the frame (free, not scrubbed) no longer follows the program
  ::munmap(mem, kLength);
}

}  // namespace gpuvm::guest

namespace gpuvm::guest {
namespace {

// The traps of a rep transfer (one ioreq per piece): whole 8-byte elements where aligned, one
// movsd run where a 4-byte head or tail would otherwise cost a trap of its own, bytes for the
// rest. bench/compat/churn.cu's pieces (4, 12, 32, 64, 128, 256 bytes back to back) cost one trap
// each.
TEST(SplitRepTransferTest, PiecesAndTraps) {
  using Pieces = std::vector<std::tuple<uint64_t, uint32_t, uint32_t>>;
  auto split = [](uint64_t gpa, uint64_t length, uint32_t whole = 8) {
    Pieces out;
    for (const RepPiece& p : SplitRepTransfer(gpa, length, whole)) {
      out.emplace_back(p.offset, p.element, p.count);
    }
    return out;
  };
  constexpr uint64_t kBar = 0x1000000000ull;
  EXPECT_EQ(split(kBar, 4096), (Pieces{{0, 8, 512}}));
  EXPECT_EQ(split(kBar, 4), (Pieces{{0, 4, 1}}));
  EXPECT_EQ(split(kBar + 4, 12), (Pieces{{0, 4, 3}})) << "was a byte head and a quadword: 2 traps";
  EXPECT_EQ(split(kBar, 20), (Pieces{{0, 4, 5}})) << "was 16 + 4 bytes: 2 traps";
  EXPECT_EQ(split(kBar + 16, 32), (Pieces{{0, 8, 4}}));
  EXPECT_EQ(split(kBar, 13), (Pieces{{0, 8, 1}, {8, 1, 5}})) << "a byte tail stays bytes";
  EXPECT_EQ(split(kBar + 4, 4091), (Pieces{{0, 4, 1022}, {4088, 1, 3}}));
  EXPECT_EQ(split(kBar + 3, 6), (Pieces{{0, 1, 5}, {5, 1, 1}}));
  EXPECT_EQ(split(kBar + 2, 2), (Pieces{{0, 1, 2}}));
  EXPECT_EQ(split(kBar + 4, 8, 4), (Pieces{{0, 4, 2}})) << "BAR0's movsd as before";
  EXPECT_EQ(split(kBar + 2, 8, 4), (Pieces{{0, 1, 2}, {2, 4, 1}, {6, 1, 2}}));
  int traps = 0;
  for (uint64_t at = 0; uint64_t n : {4, 12, 32, 64, 128, 256}) {
    traps += int(SplitRepTransfer(kBar + at, n, 8).size());
    at += n;
  }
  EXPECT_EQ(traps, 6);
  // Every byte exactly once, in order, in whole elements, for every small shape.
  for (uint64_t at = 0; at < 16; ++at) {
    for (uint64_t n = 1; n <= 40; ++n) {
      uint64_t next = 0;
      for (const RepPiece& p : SplitRepTransfer(kBar + at, n, 8)) {
        ASSERT_EQ(p.offset, next) << at << "+" << n;
        ASSERT_GT(p.count, 0u);
        ASSERT_EQ((kBar + at + p.offset) % p.element, 0u) << "aligned elements";
        next += uint64_t(p.element) * p.count;
      }
      ASSERT_EQ(next, n);
    }
  }
}

}  // namespace
}  // namespace gpuvm::guest
