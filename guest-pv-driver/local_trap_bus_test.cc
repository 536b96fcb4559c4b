// LocalVmGuest's DMA paths (local_trap_bus.h) on a domain with no device model: AllocDma memory is
// guest RAM from the start, zeroed, and its frames are free again after it (zeroed when taken
// again); MapDma
// moves bytes in and gives them back.
#include "guest-pv-driver/local_trap_bus.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>

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
