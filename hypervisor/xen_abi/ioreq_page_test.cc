#include "hypervisor/xen_abi/ioreq_page.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gpuvm::hv::xen_abi {
namespace {

// A page-aligned shared page; MAP_SHARED so a forked child sees the same memory.
class SharedPage {
 public:
  SharedPage() {
    page_ = ::mmap(nullptr, kPageSize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(page_, MAP_FAILED);
  }
  ~SharedPage() { ::munmap(page_, kPageSize); }
  void* get() { return page_; }
  uint8_t* bytes() { return static_cast<uint8_t*>(page_); }

 private:
  void* page_;
};

IoRequest MmioWrite(uint64_t addr, uint32_t size, uint64_t data) {
  IoRequest r;
  r.space = IoSpace::kMmio;
  r.dir = IoDirection::kWrite;
  r.addr = addr;
  r.size = size;
  r.count = 1;
  r.data = data;
  return r;
}

TEST(IoreqLayout, StateByteHoldsStateAndFlagsAsXenLaysThemOut) {
  ioreq_t x;
  std::memset(&x, 0, sizeof(x));
  x.state = STATE_IORESP_READY;
  x.data_is_ptr = 1;
  x.dir = IOREQ_READ;
  x.df = 1;
  x.type = IOREQ_TYPE_PCI_CONFIG;
  const uint8_t* raw = reinterpret_cast<const uint8_t*>(&x);
  EXPECT_EQ(raw[kStateByteOffset] & 0x0f, STATE_IORESP_READY);
  EXPECT_EQ(raw[kStateByteOffset] & 0x10, 0x10);  // data_is_ptr
  EXPECT_EQ(raw[kStateByteOffset] & 0x20, 0x20);  // dir
  EXPECT_EQ(raw[kStateByteOffset] & 0x40, 0x40);  // df
  EXPECT_EQ(raw[31], IOREQ_TYPE_PCI_CONFIG);
  EXPECT_EQ(offsetof(ioreq_t, data), 8u);
  EXPECT_EQ(offsetof(ioreq_t, vp_eport), 24u);
  EXPECT_EQ(kMaxVcpusPerPage, 128u);
}

TEST(IoreqTranslation, RoundTripsEveryField) {
  IoRequest r;
  r.vcpu = 3;
  r.space = IoSpace::kMmio;
  r.dir = IoDirection::kRead;
  r.data_is_ptr = true;
  r.df = true;
  r.addr = 0xf1000000;
  r.data = 0x123456789abcdef0;
  r.size = 4;
  r.count = 16;
  const IoRequest back = FromXen(ToXen(r), 3);
  EXPECT_EQ(back.space, r.space);
  EXPECT_EQ(back.dir, r.dir);
  EXPECT_EQ(back.data_is_ptr, r.data_is_ptr);
  EXPECT_EQ(back.df, r.df);
  EXPECT_EQ(back.addr, r.addr);
  EXPECT_EQ(back.data, r.data);
  EXPECT_EQ(back.size, r.size);
  EXPECT_EQ(back.count, r.count);
  EXPECT_EQ(back.vcpu, 3u);
  EXPECT_FALSE(back.buffered);
}

TEST(IoreqTranslation, PciConfigAddressCarriesSbdfAndOffset) {
  IoRequest r;
  r.space = IoSpace::kPciConfig;
  r.sbdf = Sbdf{0x0001, 0x02, 0x1f, 0x7};
  r.addr = 0x44;
  r.size = 4;
  r.count = 1;
  const ioreq_t x = ToXen(r);
  EXPECT_EQ(x.type, IOREQ_TYPE_PCI_CONFIG);
  EXPECT_EQ(x.addr, 0x0001'02'00'0000'0044ull | (0x1full << 35) | (0x7ull << 32));
  const IoRequest back = FromXen(x, 0);
  EXPECT_EQ(back.sbdf, r.sbdf);
  EXPECT_EQ(back.addr, 0x44u);
}

TEST(IoreqTranslation, UnknownTypesAreKeptRaw) {
  ioreq_t x;
  std::memset(&x, 0, sizeof(x));
  x.type = 0x42;
  const IoRequest r = FromXen(x, 0);
  EXPECT_EQ(r.space, IoSpace::kUnknown);
  EXPECT_EQ(r.raw_type, 0x42);
  EXPECT_EQ(FromXen(ToXen(r), 0).raw_type, 0x42);
}

TEST(IoreqStateMachine, ReadyInprocessResponseNone) {
  SharedPage page;
  IoreqRequesterSlots guest(page.get(), 4);
  IoreqServerSlots server(page.get(), 4);

  EXPECT_FALSE(server.TryTake(2).has_value());
  ASSERT_TRUE(guest.Submit(2, ToXen(MmioWrite(0x1000, 4, 0xabcd))).ok());
  EXPECT_EQ(server.state(2), STATE_IOREQ_READY);
  EXPECT_FALSE(guest.TryCollect(2).has_value());

  std::optional<ioreq_t> taken = server.TryTake(2);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(server.state(2), STATE_IOREQ_INPROCESS);
  EXPECT_EQ(taken->addr, 0x1000u);
  EXPECT_EQ(taken->data, 0xabcdu);
  EXPECT_FALSE(server.TryTake(2).has_value()) << "an INPROCESS slot is not taken twice";

  server.Respond(2, 0x5555);
  EXPECT_EQ(guest.state(2), STATE_IORESP_READY);
  std::optional<uint64_t> data = guest.TryCollect(2);
  ASSERT_TRUE(data.has_value());
  EXPECT_EQ(*data, 0x5555u);
  EXPECT_EQ(guest.state(2), STATE_IOREQ_NONE);
  // Other slots untouched.
  for (uint32_t v : {0u, 1u, 3u}) EXPECT_EQ(server.state(v), STATE_IOREQ_NONE);
}

TEST(IoreqStateMachine, SubmitRefusesABusySlotAndOutOfRangeVcpus) {
  SharedPage page;
  IoreqRequesterSlots guest(page.get(), 2);
  ASSERT_TRUE(guest.Submit(0, ToXen(MmioWrite(0, 4, 1))).ok());
  EXPECT_EQ(guest.Submit(0, ToXen(MmioWrite(0, 4, 2))).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(guest.Submit(2, ToXen(MmioWrite(0, 4, 2))).code(), StatusCode::kOutOfRange);
  guest.Reset(0);
  EXPECT_TRUE(guest.Submit(0, ToXen(MmioWrite(0, 4, 2))).ok());
  IoreqServerSlots server(page.get(), 2);
  EXPECT_FALSE(server.TryTake(7).has_value());
}

TEST(IoreqStateMachine, RespondWithoutDataKeepsTheBufferAddress) {
  SharedPage page;
  IoreqRequesterSlots guest(page.get(), 1);
  IoreqServerSlots server(page.get(), 1);
  IoRequest rep = MmioWrite(0x2000, 4, 0x7000);
  rep.data_is_ptr = true;
  rep.count = 8;
  ASSERT_TRUE(guest.Submit(0, ToXen(rep)).ok());
  ASSERT_TRUE(server.TryTake(0).has_value());
  server.Respond(0, std::nullopt);
  EXPECT_EQ(guest.TryCollect(0), std::optional<uint64_t>(0x7000));
}

TEST(IoreqStateMachine, TheServersCopyIsImmuneToATornPage) {
  SharedPage page;
  IoreqRequesterSlots guest(page.get(), 1);
  IoreqServerSlots server(page.get(), 1);
  ASSERT_TRUE(guest.Submit(0, ToXen(MmioWrite(0x3000, 4, 1))).ok());
  std::optional<ioreq_t> taken = server.TryTake(0);
  ASSERT_TRUE(taken.has_value());
  std::memset(page.bytes(), 0xff, sizeof(ioreq_t));  // the guest scribbles after READY
  EXPECT_EQ(taken->addr, 0x3000u);
  EXPECT_EQ(taken->size, 4u);
  const IoRequest decoded = FromXen(*taken, 0);
  EXPECT_EQ(decoded.space, IoSpace::kMmio);
  server.Respond(
      0, 9);  // must not crash; the state nibble becomes IORESP_READY whatever the guest did
  EXPECT_EQ(server.state(0), STATE_IORESP_READY);
}

TEST(IoreqStateMachine, ThreadsHandOffThousandsOfRequests) {
  SharedPage page;
  constexpr uint32_t kVcpus = 3;
  constexpr int kPerVcpu = 2000;
  std::atomic<bool> stop{false};
  std::thread server_thread([&] {
    IoreqServerSlots server(page.get(), kVcpus);
    while (!stop.load()) {
      for (uint32_t v = 0; v < kVcpus; ++v) {
        if (auto req = server.TryTake(v)) server.Respond(v, req->data * 2 + v);
      }
    }
  });
  std::vector<std::thread> vcpus;
  std::atomic<int> errors{0};
  for (uint32_t v = 0; v < kVcpus; ++v) {
    vcpus.emplace_back([&, v] {
      IoreqRequesterSlots guest(page.get(), kVcpus);
      for (int i = 0; i < kPerVcpu; ++i) {
        IoRequest r = MmioWrite(0x100 * v, 8, static_cast<uint64_t>(i));
        r.dir = IoDirection::kRead;
        if (!guest.Submit(v, ToXen(r)).ok()) ++errors;
        std::optional<uint64_t> data;
        while (!(data = guest.TryCollect(v))) std::this_thread::yield();
        if (*data != static_cast<uint64_t>(i) * 2 + v) ++errors;
      }
    });
  }
  for (auto& t : vcpus) t.join();
  stop = true;
  server_thread.join();
  EXPECT_EQ(errors.load(), 0);
}

TEST(IoreqStateMachine, WorksAcrossProcessesOnASharedPage) {
  SharedPage page;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child is the server: answer 100 requests with data + 1.
    IoreqServerSlots server(page.get(), 1);
    for (int handled = 0; handled < 100;) {
      if (auto req = server.TryTake(0)) {
        server.Respond(0, req->data + 1);
        ++handled;
      }
    }
    ::_exit(0);
  }
  IoreqRequesterSlots guest(page.get(), 1);
  for (uint64_t i = 0; i < 100; ++i) {
    ASSERT_TRUE(guest.Submit(0, ToXen(MmioWrite(0, 8, i))).ok());
    std::optional<uint64_t> data;
    while (!(data = guest.TryCollect(0))) std::this_thread::yield();
    ASSERT_EQ(*data, i + 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(BufferedRing, PopsPostedWritesOfEverySizeInOrder) {
  SharedPage page;
  BufferedIoreqRing ring(page.get());
  EXPECT_FALSE(ring.Pop()->has_value());
  const uint32_t sizes[] = {1, 2, 4, 8};
  for (uint32_t size : sizes) {
    ASSERT_TRUE(PushBuffered(page.get(), MmioWrite(0xa0000 + size, size, 0x1122334455667788)).ok());
  }
  for (uint32_t size : sizes) {
    auto popped = ring.Pop();
    ASSERT_TRUE(popped.ok());
    ASSERT_TRUE(popped->has_value());
    const IoRequest& r = **popped;
    EXPECT_TRUE(r.buffered);
    EXPECT_EQ(r.space, IoSpace::kMmio);
    EXPECT_EQ(r.dir, IoDirection::kWrite);
    EXPECT_EQ(r.size, size);
    EXPECT_EQ(r.addr, 0xa0000u + size);
    EXPECT_EQ(r.data, size == 8 ? 0x1122334455667788u : 0x55667788u);
  }
  EXPECT_FALSE(ring.Pop()->has_value());
}

TEST(BufferedRing, WrapsAroundAndReportsFull) {
  SharedPage page;
  BufferedIoreqRing ring(page.get());
  for (uint64_t i = 0; i < 3 * IOREQ_BUFFER_SLOT_NUM; ++i) {
    ASSERT_TRUE(PushBuffered(page.get(), MmioWrite(0xb0000, 4, i)).ok());
    auto popped = ring.Pop();
    ASSERT_TRUE(popped.ok() && popped->has_value());
    ASSERT_EQ((*popped)->data, i & 0xffffffff);
  }
  for (uint32_t i = 0; i < IOREQ_BUFFER_SLOT_NUM; ++i) {
    ASSERT_TRUE(PushBuffered(page.get(), MmioWrite(0xb0000, 4, i)).ok());
  }
  EXPECT_EQ(PushBuffered(page.get(), MmioWrite(0xb0000, 4, 0)).code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(PushBuffered(page.get(), MmioWrite(0xb0000, 3, 0)).code(),
            StatusCode::kInvalidArgument);
}

TEST(BufferedRing, ImpossiblePointersAreDataLossAndResync) {
  SharedPage page;
  BufferedIoreqRing ring(page.get());
  uint32_t* pointers = reinterpret_cast<uint32_t*>(page.get());
  pointers[0] = 5;
  pointers[1] = 5 + IOREQ_BUFFER_SLOT_NUM + 1;  // more outstanding than the ring holds
  EXPECT_EQ(ring.Pop().status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(pointers[0], pointers[1]);
  EXPECT_FALSE(ring.Pop()->has_value());

  // An 8-byte write whose second half was never published.
  ASSERT_TRUE(PushBuffered(page.get(), MmioWrite(0xa0000, 8, 1)).ok());
  pointers[1] -= 1;
  EXPECT_EQ(ring.Pop().status().code(), StatusCode::kDataLoss);
  EXPECT_FALSE(ring.Pop()->has_value());
}

}  // namespace
}  // namespace gpuvm::hv::xen_abi
