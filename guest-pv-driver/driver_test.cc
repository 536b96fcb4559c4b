// The driver against the software GF100 through the native Bus: probe, memory and mappings, copies
// on every path (DMA from pinned/registered memory, BAR1, staged) at various sizes and alignments,
// memsets, fences, events, several channels and contexts, threads, ring wrap-around, and argument
// validation.
#include "guest-pv-driver/driver.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "gpu/hw/pbus.h"
#include "gpu/hw/pmc.h"
#include "gpu/hw/vm.h"
#include "guest-pv-driver/driver_impl.h"
#include "guest-pv-driver/native_bus.h"

namespace gpuvm::guest {
namespace {

namespace vm = gf100::vm;
using std::chrono::milliseconds;

constexpr uint64_t kVram = 256ull << 20;

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

// A Bus that forwards everything to another; tests override what they change.
class ForwardingBus : public Bus {
 public:
  explicit ForwardingBus(Bus* inner) : inner_(inner) {}
  const gpu::PciIdentity& pci() const override { return inner_->pci(); }
  uint64_t Read(Bar bar, uint64_t offset, Width width) override {
    return inner_->Read(bar, offset, width);
  }
  void Write(Bar bar, uint64_t offset, Width width, uint64_t value) override {
    inner_->Write(bar, offset, width, value);
  }
  Status ReadBlock(Bar bar, uint64_t offset, void* dst, uint64_t length) override {
    return inner_->ReadBlock(bar, offset, dst, length);
  }
  Status WriteBlock(Bar bar, uint64_t offset, const void* src, uint64_t length) override {
    return inner_->WriteBlock(bar, offset, src, length);
  }
  Result<std::unique_ptr<DmaMapping>> MapDma(void* host, uint64_t length) override {
    return inner_->MapDma(host, length);
  }
  Status SetInterruptHandler(std::function<void(bool)> handler) override {
    return inner_->SetInterruptHandler(std::move(handler));
  }

 protected:
  Bus* const inner_;
};

// Lies about chosen BAR0 registers, and has no interrupt line.
class LyingBus final : public ForwardingBus {
 public:
  using ForwardingBus::ForwardingBus;
  std::map<uint64_t, uint32_t> lies;

  uint64_t Read(Bar bar, uint64_t offset, Width width) override {
    if (bar == Bar::k0) {
      auto it = lies.find(offset);
      if (it != lies.end()) return it->second;
    }
    return inner_->Read(bar, offset, width);
  }
  Status SetInterruptHandler(std::function<void(bool)>) override {
    return Status::Unimplemented("no interrupt line");
  }
};

class GuestDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    NativeGpuOptions o;
    o.device.vram_size = kVram;
    auto gpu = NativeGpu::Create(o);
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    gpu_ = std::move(*gpu);
    auto driver = Driver::Create(gpu_->bus());
    ASSERT_TRUE(driver.ok()) << driver.status().ToString();
    driver_ = std::move(*driver);
  }
  void TearDown() override {
    driver_.reset();
    if (gpu_ != nullptr) {
      EXPECT_EQ(static_cast<NativeBus*>(gpu_->bus())->mapped_bytes(), 0u) << "DMA mappings leaked";
    }
  }

  std::unique_ptr<Context> NewContext(const ContextOptions& o = {}) {
    auto c = driver_->CreateContext(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  std::unique_ptr<NativeGpu> gpu_;
  std::unique_ptr<Driver> driver_;
};

// ---- probe
// ---------------------------------------------------------------------------------------------

TEST_F(GuestDriverTest, ProbeReportsTheDevice) {
  const DeviceInfo& info = driver_->info();
  EXPECT_EQ(info.boot0, gf100::pmc::kBoot0Value);
  EXPECT_EQ(info.chipset, 0xc0u);
  EXPECT_EQ(info.name, "Quadro 6000");
  EXPECT_EQ(info.vram_bytes, kVram);
  EXPECT_EQ(info.fb_partitions, 1u);
  EXPECT_EQ(info.large_page_bytes, 128u << 10);
  EXPECT_EQ(info.channels, 128u);
  EXPECT_EQ(info.pci.device_id, 0x06d8);
  EXPECT_LT(driver_->vram_free(), kVram);
}

TEST_F(GuestDriverTest, RefusesAnotherChip) {
  driver_.reset();
  LyingBus bus(gpu_->bus());
  bus.lies[gf100::pmc::kBoot0] = 0x0e4000a1;  // a GK104
  auto d = Driver::Create(&bus);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("not GF100"), std::string::npos) << d.status().ToString();
}

TEST_F(GuestDriverTest, RefusesNonsenseVramSizes) {
  driver_.reset();
  LyingBus bus(gpu_->bus());
  bus.lies[0x022438] = 0;  // no FB partitions
  EXPECT_EQ(Driver::Create(&bus).status().code(), StatusCode::kFailedPrecondition);
  bus.lies[0x022438] = 1000;
  EXPECT_EQ(Driver::Create(&bus).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(GuestDriverTest, SumsEnabledPartitions) {
  driver_.reset();
  LyingBus bus(gpu_->bus());
  bus.lies[0x022438] = 3;
  bus.lies[0x022554] = 0x2;  // partition 1 disabled
  bus.lies[0x11020c] = 64;
  bus.lies[0x11120c] = 999;
  bus.lies[0x11220c] = 32;
  auto d = Driver::Create(&bus);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)->info().vram_bytes, 96ull << 20);
  EXPECT_EQ((*d)->info().fb_partitions, 2u);
}

TEST_F(GuestDriverTest, WorksWithoutInterrupts) {
  driver_.reset();
  LyingBus bus(gpu_->bus());  // no interrupt line: the driver polls
  auto d = Driver::Create(&bus);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE((*d)->impl()->interrupts_enabled());
  auto ctx = (*d)->CreateContext();
  ASSERT_TRUE(ctx.ok());
  auto a = (*ctx)->AllocDevice(1 << 20);
  ASSERT_TRUE(a.ok());
  auto in = Pattern(1 << 20, 1);
  std::vector<uint8_t> out(in.size());
  ASSERT_TRUE((*ctx)->default_channel()->CopyHostToDevice(a->va, in.data(), in.size()).ok());
  ASSERT_TRUE((*ctx)->default_channel()->CopyDeviceToHost(out.data(), a->va, out.size()).ok());
  EXPECT_EQ(in, out);
}

// ---- memory and mappings
// -----------------------------------------------------------------------------------

TEST_F(GuestDriverTest, DeviceMemoryIsMappedWithSmallOrLargePages) {
  auto ctx = NewContext();
  VmSpace* space = ctx->impl()->space();
  auto small = ctx->AllocDevice(12345);
  auto large = ctx->AllocDevice(3 << 20);
  ASSERT_TRUE(small.ok() && large.ok());
  EXPECT_EQ(small->kind, MemoryKind::kDevice);
  EXPECT_EQ(small->va % 4096, 0u);
  EXPECT_EQ(large->va % (128 << 10), 0u);
  EXPECT_GE(small->va, kSmallHeapBase);
  EXPECT_GE(large->va, kLargeHeapBase);

  auto small_pte = space->ReadPte(small->va + 8192, false);
  ASSERT_TRUE(small_pte.ok());
  EXPECT_TRUE(*small_pte & vm::pte::kPresent);
  EXPECT_EQ(vm::pte::TargetOf(*small_pte), vm::Target::kVram);
  auto large_pte = space->ReadPte(large->va + (256 << 10), true);
  ASSERT_TRUE(large_pte.ok());
  EXPECT_TRUE(*large_pte & vm::pte::kPresent);
  EXPECT_EQ(vm::pte::Address(*large_pte) % (128 << 10), 0u);

  ASSERT_TRUE(ctx->Free(small->va).ok());
  ASSERT_TRUE(ctx->Free(large->va).ok());
  EXPECT_EQ(*space->ReadPte(small->va + 8192, false), 0u);
  EXPECT_EQ(*space->ReadPte(large->va + (256 << 10), true), 0u);
}

TEST_F(GuestDriverTest, HostMemoryIsMappedAsSysram) {
  auto ctx = NewContext();
  auto h = ctx->AllocHost(10000);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->kind, MemoryKind::kHost);
  ASSERT_NE(h->host, nullptr);
  auto pte = ctx->impl()->space()->ReadPte(h->va, false);
  ASSERT_TRUE(pte.ok());
  EXPECT_EQ(vm::pte::TargetOf(*pte), vm::Target::kSysramSnooped);
  EXPECT_GE(vm::pte::Address(*pte), NativeBus::kBusBase);
  auto found = ctx->FindHost(static_cast<uint8_t*>(h->host) + 9999);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->va, h->va);
  EXPECT_FALSE(ctx->FindHost(static_cast<uint8_t*>(h->host) + 10000).ok());
  ASSERT_TRUE(ctx->Free(h->va).ok());
  EXPECT_FALSE(ctx->FindHost(h->host).ok());
}

TEST_F(GuestDriverTest, AllocationErrors) {
  auto ctx = NewContext();
  EXPECT_EQ(ctx->AllocDevice(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx->AllocHost(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx->AllocDevice(1ull << 50).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ctx->AllocDevice(kVram).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ctx->Free(0x1234).code(), StatusCode::kNotFound);
  auto a = ctx->AllocDevice(4096);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(ctx->Free(a->va + 4).code(), StatusCode::kNotFound);  // not the start
  ASSERT_TRUE(ctx->Free(a->va).ok());
  EXPECT_EQ(ctx->Free(a->va).code(), StatusCode::kNotFound);  // twice
  EXPECT_EQ(ctx->Find(a->va).status().code(), StatusCode::kNotFound);
  // Internal memory (rings, report slots) is not the user's to free.
  const uint64_t ring_va = ctx->impl()->Lookup(kSmallHeapBase, 0, true).value()->va;
  EXPECT_EQ(ctx->Free(ring_va).code(), StatusCode::kNotFound);
}

TEST_F(GuestDriverTest, VramComesBackAfterFreesAndContexts) {
  const uint64_t before = driver_->vram_free();
  const uint64_t bar3_before = driver_->impl()->instmem()->bar3_free();
  for (int i = 0; i < 5; ++i) {
    auto ctx = NewContext();
    std::vector<uint64_t> vas;
    for (uint64_t size : {4096ull, 1ull << 20, 7ull << 20, 100ull}) {
      auto a = ctx->AllocDevice(size);
      ASSERT_TRUE(a.ok());
      vas.push_back(a->va);
    }
    ASSERT_TRUE(ctx->CreateChannel().ok());
    ASSERT_TRUE(ctx->AllocHost(1 << 20).ok());
    ASSERT_TRUE(ctx->Free(vas[1]).ok());
  }
  EXPECT_EQ(driver_->vram_free(), before);
  EXPECT_EQ(driver_->impl()->instmem()->bar3_free(), bar3_before);
}

TEST_F(GuestDriverTest, AFreedInstanceObjectsBar3RangeServesTheNextObjectItsOwnVram) {
  // An object larger than an instance-memory chunk is mapped on its own. Free unmaps it without a
  // TLB flush; the next Allocate of that range flushes before using it, so the software GPU's TLB
  // (which really caches) never shows the old VRAM.
  InstMem* instmem = driver_->impl()->instmem();
  constexpr uint64_t kBig = 2 << 20;
  auto a = instmem->Allocate(kBig);
  ASSERT_TRUE(a.ok());
  const uint32_t old_word = 0xaaaa5555;
  ASSERT_TRUE(instmem->Write(*a, 0, &old_word, 4).ok());
  uint32_t seen = 0;
  ASSERT_TRUE(instmem->Read(*a, 0, &seen, 4).ok());  // the translation is in the TLB now
  instmem->Free(*a);
  const uint64_t held = *driver_->impl()->vram()->Allocate(kBig, 4096);  // a's VRAM, kept from b
  ASSERT_EQ(held, a->vram);
  auto b = instmem->Allocate(kBig);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->bar3, a->bar3) << "the lowest free BAR3 range comes back";
  EXPECT_NE(b->vram, a->vram);
  ASSERT_TRUE(instmem->Read(*b, 0, &seen, 4).ok());
  EXPECT_EQ(seen, 0u) << "a new object reads zeroed, from its own VRAM";
  // a's VRAM, through the PRAMIN window: untouched by b's zeroing.
  gpu_->device()->WriteReg(gf100::pbus::kPraminBase, uint32_t(a->vram >> 16));
  EXPECT_EQ(gpu_->device()->Read32(Bar::k0, gf100::pbus::kPraminWindow + (a->vram & 0xffff)),
            old_word);
  instmem->Free(*b);
  driver_->impl()->vram()->Free(held);
}

TEST_F(GuestDriverTest, SmallInstanceObjectsShareMappedChunksThatGoBackWhenEmpty) {
  InstMem* instmem = driver_->impl()->instmem();
  const uint64_t vram_before = driver_->vram_free();
  const uint64_t bar3_before = instmem->bar3_free();
  // 2 MiB of 256 KiB objects: more than the first chunk has left, so new chunks are mapped.
  std::vector<InstObject> objects;
  for (uint32_t i = 0; i < 8; ++i) {
    auto o = instmem->Allocate(256 << 10);
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    ASSERT_TRUE(instmem->Write(*o, (256 << 10) - 4, &i, 4).ok());
    objects.push_back(*o);
  }
  EXPECT_LT(instmem->bar3_free(), bar3_before);
  // Within a chunk, objects lie at the same distance in BAR3 as in VRAM (one mapping).
  EXPECT_EQ(objects[5].vram - objects[4].vram, objects[5].bar3 - objects[4].bar3);
  for (uint32_t i = 0; i < objects.size(); ++i) {
    uint32_t seen = ~0u;
    ASSERT_TRUE(instmem->Read(objects[i], (256 << 10) - 4, &seen, 4).ok());
    EXPECT_EQ(seen, i);
  }
  for (const InstObject& o : objects) instmem->Free(o);
  EXPECT_EQ(driver_->vram_free(), vram_before) << "emptied chunks go back";
  EXPECT_EQ(instmem->bar3_free(), bar3_before);
}

TEST_F(GuestDriverTest, ExhaustingVramIsAnErrorNotACrash) {
  auto ctx = NewContext();
  std::vector<uint64_t> vas;
  for (;;) {
    auto a = ctx->AllocDevice(16 << 20);
    if (!a.ok()) {
      EXPECT_EQ(a.status().code(), StatusCode::kResourceExhausted);
      break;
    }
    vas.push_back(a->va);
  }
  EXPECT_GT(vas.size(), 10u);
  for (uint64_t va : vas) ASSERT_TRUE(ctx->Free(va).ok());
  EXPECT_TRUE(ctx->AllocDevice(16 << 20).ok());
}

TEST_F(GuestDriverTest, RegisteredHostMemory) {
  auto ctx = NewContext();
  const size_t size = 64 << 10;
  void* mem = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  EXPECT_EQ(ctx->RegisterHost(static_cast<uint8_t*>(mem) + 1, 4096).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx->RegisterHost(mem, 100).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx->RegisterHost(nullptr, 4096).status().code(), StatusCode::kInvalidArgument);
  auto r = ctx->RegisterHost(mem, size);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->kind, MemoryKind::kRegisteredHost);
  EXPECT_EQ(ctx->RegisterHost(static_cast<uint8_t*>(mem) + 4096, 4096).status().code(),
            StatusCode::kAlreadyExists);

  auto dev = ctx->AllocDevice(size);
  ASSERT_TRUE(dev.ok());
  auto in = Pattern(size, 7);
  std::memcpy(mem, in.data(), size);
  Channel* ch = ctx->default_channel();
  // From registered memory: a DMA straight from the caller's pages, no staging.
  ASSERT_TRUE(ch->CopyHostToDevice(dev->va, mem, size).ok());
  std::memset(mem, 0, size);
  auto f = ch->CopyAsync(r->va, dev->va, size);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(ch->Wait(*f).ok());
  EXPECT_EQ(std::memcmp(mem, in.data(), size), 0);
  ASSERT_TRUE(ctx->Free(r->va).ok());
  munmap(mem, size);
}

// ---- copies
// ---------------------------------------------------------------------------------------------

struct CopyCase {
  uint64_t size;
  uint64_t offset;  // into the allocation
};

class GuestDriverCopyTest : public GuestDriverTest,
                            public ::testing::WithParamInterface<CopyEngine> {};

TEST_P(GuestDriverCopyTest, HostToDeviceAndBackAtSizesAndOffsets) {
  ContextOptions o;
  o.copy_engine = GetParam();
  o.staging_bytes = 256 << 10;  // several pipelined chunks for the big cases
  auto ctx = NewContext(o);
  Channel* ch = ctx->default_channel();
  const CopyCase cases[] = {{1, 0},       {3, 1},       {4096, 0},          {4096, 5},
                            {4097, 4093}, {100000, 12}, {(1 << 20) + 7, 3}, {5 << 20, 4096}};
  for (const CopyCase& c : cases) {
    const uint64_t alloc = c.size + c.offset + 64;
    auto a = ctx->AllocDevice(alloc);
    ASSERT_TRUE(a.ok());
    const auto guard = Pattern(alloc, 99);
    ASSERT_TRUE(ch->CopyHostToDevice(a->va, guard.data(), alloc).ok());
    const auto in = Pattern(c.size, uint32_t(c.size));
    Status s = ch->CopyHostToDevice(a->va + c.offset, in.data(), c.size);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<uint8_t> out(alloc);
    s = ch->CopyDeviceToHost(out.data(), a->va, alloc);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(std::equal(in.begin(), in.end(), out.begin() + c.offset)) << c.size;
    EXPECT_TRUE(std::equal(guard.begin(), guard.begin() + c.offset, out.begin())) << c.size;
    EXPECT_TRUE(
        std::equal(guard.begin() + c.offset + c.size, guard.end(), out.begin() + c.offset + c.size))
        << c.size;
    std::vector<uint8_t> part(c.size);
    ASSERT_TRUE(ch->CopyDeviceToHost(part.data(), a->va + c.offset, c.size).ok());
    EXPECT_EQ(part, in) << c.size;
    ASSERT_TRUE(ctx->Free(a->va).ok());
  }
}

TEST_P(GuestDriverCopyTest, DeviceToDeviceAndPinned) {
  ContextOptions o;
  o.copy_engine = GetParam();
  auto ctx = NewContext(o);
  Channel* ch = ctx->default_channel();
  const uint64_t size = 3 << 20;
  auto a = ctx->AllocDevice(size);
  auto b = ctx->AllocDevice(size);
  auto pinned = ctx->AllocHost(size);
  ASSERT_TRUE(a.ok() && b.ok() && pinned.ok());
  const auto in = Pattern(size, 5);
  std::memcpy(pinned->host, in.data(), size);
  // pinned -> a (async DMA), a+17 -> b+3 (odd DtoD), b -> pinned.
  auto f1 = ch->CopyAsync(a->va, pinned->va, size);
  auto f2 = ch->CopyAsync(b->va + 3, a->va + 17, size - 100);
  ASSERT_TRUE(f1.ok() && f2.ok());
  ASSERT_TRUE(ch->Wait(*f1).ok());  // the source may be overwritten only after the copy read it
  std::memset(pinned->host, 0, size);
  auto f3 = ch->CopyAsync(pinned->va, b->va, size);
  ASSERT_TRUE(f3.ok());
  ASSERT_TRUE(ch->Wait(*f3).ok());
  EXPECT_TRUE(*ch->IsDone(*f2));
  const auto* out = static_cast<const uint8_t*>(pinned->host);
  EXPECT_EQ(std::memcmp(out + 3, in.data() + 17, size - 100), 0);
  // Synchronous copies to pinned memory take the DMA path too.
  std::vector<uint8_t> back(size);
  ASSERT_TRUE(ch->CopyDeviceToHost(back.data(), a->va, size).ok());
  EXPECT_EQ(back, in);
}

INSTANTIATE_TEST_SUITE_P(Engines, GuestDriverCopyTest,
                         ::testing::Values(CopyEngine::kPcopy, CopyEngine::kM2mf),
                         [](const auto& info) {
                           return info.param == CopyEngine::kPcopy ? "Pcopy" : "M2mf";
                         });

TEST_F(GuestDriverTest, SmallCopiesUseBar1AndBigOnesDma) {
  auto ctx = NewContext();
  Channel* ch = ctx->default_channel();
  auto a = ctx->AllocDevice(1 << 20);
  ASSERT_TRUE(a.ok());
  const auto in = Pattern(4096, 3);
  ASSERT_TRUE(ch->CopyHostToDevice(a->va, in.data(), 4096).ok());  // maps the buffer into BAR1
  BusCounters before = driver_->bus_counters();
  ASSERT_TRUE(ch->CopyHostToDevice(a->va + 100, in.data(), 4096).ok());
  BusCounters d = driver_->bus_counters() - before;
  EXPECT_EQ(d.total(), 1u) << "an already-mapped small copy is one BAR1 block write";
  EXPECT_EQ(d.block_writes[1], 1u);

  before = driver_->bus_counters();
  std::vector<uint8_t> big(64 << 10, 1);
  ASSERT_TRUE(ch->CopyHostToDevice(a->va, big.data(), big.size()).ok());
  d = driver_->bus_counters() - before;
  EXPECT_EQ(d.block_writes[1], 0u);
  EXPECT_EQ(d.writes[1], 1u) << "one staged DMA chunk: one IB_PUT write";
}

TEST_F(GuestDriverTest, CopyArgumentErrors) {
  auto ctx = NewContext();
  Channel* ch = ctx->default_channel();
  auto a = ctx->AllocDevice(8192);
  auto b = ctx->AllocDevice(8192);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<uint8_t> buf(16384);
  EXPECT_EQ(ch->CopyAsync(a->va, 0x5000, 16).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ch->CopyAsync(a->va, b->va, 8193).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(ch->CopyAsync(a->va + 8000, b->va, 193).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(ch->CopyHostToDevice(a->va, nullptr, 4).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ch->CopyDeviceToHost(nullptr, a->va, 4).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ch->CopyHostToDevice(a->va, buf.data(), 16384).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(ch->CopyDeviceToHost(buf.data(), b->va + 8192, 1).code(), StatusCode::kNotFound);
  EXPECT_EQ(ch->Memset32Async(a->va + 2, 0, 4).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ch->Memset8Async(a->va, 0, 8193).status().code(), StatusCode::kOutOfRange);
  // Zero-length copies inside an allocation are fine and do nothing.
  EXPECT_TRUE(ch->CopyAsync(a->va, b->va, 0).ok());
  EXPECT_TRUE(ch->CopyHostToDevice(a->va, buf.data(), 0).ok());
  EXPECT_TRUE(ctx->status().ok());
}

TEST_F(GuestDriverTest, Memsets) {
  auto ctx = NewContext();
  Channel* ch = ctx->default_channel();
  const uint64_t size = (2 << 20) + 4096 * 3 + 12;
  auto a = ctx->AllocDevice(size);
  ASSERT_TRUE(a.ok());
  struct Case {
    uint64_t offset, bytes;
  };
  for (const Case& c :
       std::vector<Case>{{0, 1}, {1, 3}, {5, 4095}, {3, 4097}, {7, 12289}, {1, size - 2}}) {
    const auto guard = Pattern(size, 11);
    ASSERT_TRUE(ch->CopyHostToDevice(a->va, guard.data(), size).ok());
    auto f = ch->Memset8Async(a->va + c.offset, 0x5a, c.bytes);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    std::vector<uint8_t> out(size);
    ASSERT_TRUE(ch->CopyDeviceToHost(out.data(), a->va, size).ok());
    for (uint64_t i = 0; i < size; ++i) {
      const bool inside = i >= c.offset && i < c.offset + c.bytes;
      ASSERT_EQ(out[i], inside ? 0x5a : guard[i]) << "byte " << i << " case " << c.bytes;
    }
  }
  for (uint64_t count : {1ull, 1023ull, 1024ull, 1025ull, 300000ull}) {
    auto f = ch->Memset32Async(a->va + 8, 0xdeadbeef + uint32_t(count), count);
    ASSERT_TRUE(f.ok());
    std::vector<uint32_t> out(count + 3);
    ASSERT_TRUE(ch->CopyDeviceToHost(out.data(), a->va, out.size() * 4).ok());
    for (uint64_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[i + 2], 0xdeadbeef + uint32_t(count)) << i;
    }
  }
}

// ---- fences and events
// -------------------------------------------------------------------------------------

TEST_F(GuestDriverTest, Fences) {
  auto ctx = NewContext();
  Channel* ch = ctx->default_channel();
  auto other = ctx->CreateChannel();
  ASSERT_TRUE(other.ok());
  auto a = ctx->AllocDevice(1 << 20);
  ASSERT_TRUE(a.ok());
  Fence previous = ch->last_fence();
  auto f = ch->Memset32Async(a->va, 1, 1 << 18);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->channel, ch->id());
  EXPECT_EQ(f->sequence, previous.sequence + 1);
  EXPECT_EQ(ch->last_fence(), *f);
  ASSERT_TRUE(ch->Wait(*f).ok());
  EXPECT_TRUE(*ch->IsDone(*f));
  EXPECT_TRUE(*ch->IsDone({ch->id(), 0}));
  EXPECT_EQ(ch->Wait({(*other)->id(), 1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ch->Wait({ch->id(), f->sequence + 10}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ch->IsDone({(*other)->id(), 1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ch->Synchronize().ok());
  EXPECT_TRUE(ctx->Synchronize().ok());
}

TEST_F(GuestDriverTest, SuccessfulWaitsTouchNoRegister) {
  auto ctx = NewContext();
  ASSERT_TRUE(driver_->impl()->interrupts_enabled());
  Channel* ch = ctx->default_channel();
  auto a = ctx->AllocDevice(64 << 20);
  ASSERT_TRUE(a.ok());
  auto f = ch->Memset32Async(a->va, 7, 16 << 20);
  ASSERT_TRUE(f.ok());
  const BusCounters before = driver_->bus_counters();
  ASSERT_TRUE(ch->Wait(*f).ok());
  EXPECT_EQ((driver_->bus_counters() - before).total(), 0u)
      << "fences are polled in host memory; no fault, no interrupt, no register access";
}

TEST_F(GuestDriverTest, WaitTimesOutOnABlockedChannelAndRecovers) {
  auto ctx = NewContext();
  Channel* ch = ctx->default_channel();
  auto ev = ctx->CreateEvent();
  ASSERT_TRUE(ev.ok());
  // Pretend the event was recorded with sequence 5 that nobody releases yet: the channel blocks.
  (*ev)->impl()->Recorded(5);
  ASSERT_TRUE(ch->WaitEvent(*ev).ok());
  auto a = ctx->AllocDevice(4096);
  ASSERT_TRUE(a.ok());
  auto f = ch->Memset32Async(a->va, 42, 1);
  ASSERT_TRUE(f.ok());
  Status s = ch->Wait(*f, milliseconds(50));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_FALSE(*ch->IsDone(*f));
  EXPECT_EQ((*ev)->Wait(milliseconds(10)).code(), StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(*(*ev)->Query());
  // The CPU releases the semaphore in host memory; the channel goes on.
  __atomic_store_n(reinterpret_cast<uint32_t*>((*ev)->impl()->slot().host), 5u, __ATOMIC_RELEASE);
  ASSERT_TRUE(ch->Wait(*f, std::chrono::seconds(10)).ok());
  uint32_t v = 0;
  ASSERT_TRUE(ch->CopyDeviceToHost(&v, a->va, 4).ok());
  EXPECT_EQ(v, 42u);
  EXPECT_TRUE(ctx->status().ok());
}

// A Bus whose PMC_BOOT_0 reads, once armed, block for a while and then run `resume` — what a
// trapping bus does while the device model or the aggregator behind it is stopped — or, once
// `gone`, read all-ones (a device model that died).
class StallingBus final : public ForwardingBus {
 public:
  using ForwardingBus::ForwardingBus;
  void Arm(std::chrono::milliseconds stall, std::function<void()> resume) {
    stall_ = stall;
    resume_ = std::move(resume);
  }
  std::atomic<bool> gone{false};
  std::atomic<int> stalls{0};

  bool remote() const override { return true; }
  uint64_t Read(Bar bar, uint64_t offset, Width width) override {
    if (bar == Bar::k0 && offset == gf100::pmc::kBoot0) {
      if (gone) return 0xffffffffu;
      if (resume_) {
        std::this_thread::sleep_for(stall_);
        std::exchange(resume_, nullptr)();
        ++stalls;
      }
    }
    return inner_->Read(bar, offset, width);
  }

 private:
  std::chrono::milliseconds stall_{0};
  std::function<void()> resume_;  // the waiting thread only
};

// A wait does not count time in which the path to the GPU was stalled (WaitClock): a 2 s wait on
// a channel that is blocked until the GPU "resumes" survives a 3 s stall of the bus, which its
// probe of PMC_BOOT_0 sits in; and a GPU that is gone ends even an unlimited wait, with
// Unavailable.
TEST_F(GuestDriverTest, WaitsDoNotCountAStalledBus) {
  driver_.reset();
  StallingBus bus(gpu_->bus());
  auto driver = Driver::Create(&bus);
  ASSERT_TRUE(driver.ok()) << driver.status().ToString();
  driver_ = std::move(*driver);
  auto ctx = NewContext();
  Channel* ch = ctx->default_channel();
  auto ev = ctx->CreateEvent();
  ASSERT_TRUE(ev.ok());
  (*ev)->impl()->Recorded(5);  // nobody releases it: the channel blocks (as above)
  ASSERT_TRUE(ch->WaitEvent(*ev).ok());
  auto a = ctx->AllocDevice(4096);
  ASSERT_TRUE(a.ok());
  auto f = ch->Memset32Async(a->va, 42, 1);
  ASSERT_TRUE(f.ok());
  auto* semaphore = reinterpret_cast<uint32_t*>((*ev)->impl()->slot().host);
  bus.Arm(std::chrono::seconds(3),
          [semaphore] { __atomic_store_n(semaphore, 5u, __ATOMIC_RELEASE); });
  const auto start = std::chrono::steady_clock::now();
  Status waited = ch->Wait(*f, std::chrono::seconds(2));
  EXPECT_TRUE(waited.ok()) << waited.ToString();
  EXPECT_EQ(bus.stalls.load(), 1);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  uint32_t v = 0;
  ASSERT_TRUE(ch->CopyDeviceToHost(&v, a->va, 4).ok());
  EXPECT_EQ(v, 42u);

  (*ev)->impl()->Recorded(6);
  ASSERT_TRUE(ch->WaitEvent(*ev).ok());
  auto g = ch->Memset32Async(a->va, 43, 1);
  ASSERT_TRUE(g.ok());
  bus.gone = true;
  EXPECT_EQ(ch->Wait(*g, kWaitForever).code(), StatusCode::kUnavailable);
  EXPECT_EQ((*ev)->Wait(kWaitForever).code(), StatusCode::kUnavailable);
  bus.gone = false;
  __atomic_store_n(semaphore, 6u, __ATOMIC_RELEASE);
  ASSERT_TRUE(ch->Wait(*g, std::chrono::seconds(10)).ok());
  ctx.reset();
  driver_.reset();  // before the bus it uses
}

TEST_F(GuestDriverTest, AContextWithAHungChannelStillTearsDown) {
  ContextOptions o;
  o.default_timeout = milliseconds(100);
  auto ctx = NewContext(o);
  const uint64_t vram_before = driver_->vram_free();
  auto a = ctx->AllocDevice(1 << 20);
  auto ev = ctx->CreateEvent();
  ASSERT_TRUE(a.ok() && ev.ok());
  (*ev)->impl()->Recorded(9);  // never released: the channel hangs on the acquire
  ASSERT_TRUE(ctx->default_channel()->WaitEvent(*ev).ok());
  ASSERT_TRUE(ctx->default_channel()->Memset32Async(a->va, 1, 1).ok());
  EXPECT_EQ(ctx->Synchronize().code(), StatusCode::kDeadlineExceeded);
  ctx.reset();  // bounded: one drain timeout, then the channel is taken off PFIFO
  EXPECT_GT(driver_->vram_free(), vram_before) << "VRAM is returned";
  // Its host pages (rings, report page) stay registered until the driver goes: the device might
  // have been in the middle of reading them.
  EXPECT_GT(static_cast<NativeBus*>(gpu_->bus())->mapped_bytes(), 0u);
  auto fresh = NewContext();
  auto b = fresh->AllocDevice(4096);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(fresh->default_channel()->Memset32Async(b->va, 3, 1).ok());
  EXPECT_TRUE(fresh->Synchronize().ok());
}

TEST_F(GuestDriverTest, EventsCompleteInOrderWithTimestamps) {
  auto ctx = NewContext();
  Channel* ch = ctx->default_channel();
  auto e1 = ctx->CreateEvent();
  auto e2 = ctx->CreateEvent();
  ASSERT_TRUE(e1.ok() && e2.ok());
  EXPECT_TRUE(*(*e1)->Query());  // never recorded: complete
  EXPECT_EQ((*e1)->TimestampNs().status().code(), StatusCode::kFailedPrecondition);
  auto a = ctx->AllocDevice(32 << 20);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(ch->Record(*e1).ok());
  ASSERT_TRUE(ch->Memset32Async(a->va, 3, 8 << 20).ok());
  ASSERT_TRUE(ch->Record(*e2).ok());
  ASSERT_TRUE((*e2)->Wait().ok());
  EXPECT_TRUE(*(*e1)->Query());
  auto t1 = (*e1)->TimestampNs();
  auto t2 = (*e2)->TimestampNs();
  ASSERT_TRUE(t1.ok() && t2.ok());
  EXPECT_LT(*t1, *t2) << "the memset between them took device time";
  // Re-recording moves the event forward.
  ASSERT_TRUE(ch->Record(*e1).ok());
  ASSERT_TRUE((*e1)->Wait().ok());
  EXPECT_GE(*(*e1)->TimestampNs(), *t2);
  EXPECT_TRUE(ctx->DestroyEvent(*e1).ok());
  EXPECT_EQ(ctx->DestroyEvent(*e1).code(), StatusCode::kNotFound);
}

TEST_F(GuestDriverTest, ChannelsOrderThroughEvents) {
  auto ctx = NewContext();
  Channel* producer = ctx->default_channel();
  auto consumer = ctx->CreateChannel();
  ASSERT_TRUE(consumer.ok());
  auto ev = ctx->CreateEvent();
  ASSERT_TRUE(ev.ok());
  const uint64_t size = 16 << 20;
  auto a = ctx->AllocDevice(size);
  auto b = ctx->AllocDevice(size);
  ASSERT_TRUE(a.ok() && b.ok());
  for (uint32_t round = 1; round <= 3; ++round) {
    ASSERT_TRUE(producer->Memset32Async(a->va, round, size / 4).ok());
    ASSERT_TRUE(producer->Record(*ev).ok());
    ASSERT_TRUE((*consumer)->WaitEvent(*ev).ok());
    auto f = (*consumer)->CopyAsync(b->va, a->va, size);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*consumer)->Wait(*f).ok());
    uint32_t last = 0;
    ASSERT_TRUE((*consumer)->CopyDeviceToHost(&last, b->va + size - 4, 4).ok());
    EXPECT_EQ(last, round);
  }
}

// cuStreamWaitEvent then cuEventDestroy at once is legal CUDA. The waiting channel's acquire may
// still be queued when the event's report slot goes back to the context and is handed to a new
// event: the new event must not make the old acquire wait again.
TEST_F(GuestDriverTest, AWaitOutlivesItsDestroyedEvent) {
  auto ctx = NewContext();
  Channel* waiter = ctx->default_channel();
  auto producer = ctx->CreateChannel();
  ASSERT_TRUE(producer.ok());
  const uint64_t size = 32 << 20;
  auto a = ctx->AllocDevice(size);
  ASSERT_TRUE(a.ok());
  for (int round = 0; round < 3; ++round) {
    auto ev = ctx->CreateEvent();
    ASSERT_TRUE(ev.ok());
    ASSERT_TRUE((*producer)->Record(*ev).ok());
    ASSERT_TRUE((*ev)->Wait().ok());
    // The waiter is busy, so its acquire of `ev` runs only after the event is gone.
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(waiter->Memset32Async(a->va, i, size / 4).ok());
    ASSERT_TRUE(waiter->WaitEvent(*ev).ok());
    ASSERT_TRUE(ctx->DestroyEvent(*ev).ok());
    auto reuse = ctx->CreateEvent();  // may get the same slot
    ASSERT_TRUE(reuse.ok());
    EXPECT_TRUE(waiter->Synchronize(std::chrono::seconds(5)).ok()) << "round " << round;
    ASSERT_TRUE(ctx->DestroyEvent(*reuse).ok());
  }
}

TEST_F(GuestDriverTest, EventsOfAnotherContextAreRefused) {
  auto c1 = NewContext();
  auto c2 = NewContext();
  auto ev = c2->CreateEvent();
  ASSERT_TRUE(ev.ok());
  EXPECT_EQ(c1->default_channel()->Record(*ev).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c1->default_channel()->WaitEvent(*ev).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c1->DestroyEvent(*ev).code(), StatusCode::kNotFound);
  EXPECT_EQ(c1->DestroyChannel(c2->default_channel()).code(), StatusCode::kNotFound);
  EXPECT_EQ(c1->DestroyChannel(c1->default_channel()).code(), StatusCode::kFailedPrecondition);
}

// ---- rings, channels, contexts, threads
// ---------------------------------------------------------------------

TEST_F(GuestDriverTest, RingsWrapAndReclaim) {
  ContextOptions o;
  o.ib_entries = 8;
  o.pushbuffer_bytes = 64 << 10;
  auto ctx = NewContext(o);
  Channel* ch = ctx->default_channel();
  auto a = ctx->AllocDevice(1 << 20);
  ASSERT_TRUE(a.ok());
  // Each memset of 4 KiB carries 4 KiB of inline pattern: 16 fill the pushbuffer.
  for (uint32_t i = 0; i < 300; ++i) {
    auto f = ch->Memset32Async(a->va + (i % 200) * 4096, i, 1024);
    ASSERT_TRUE(f.ok()) << i << " " << f.status().ToString();
    EXPECT_LE(ch->impl()->inflight(), 7u);
  }
  ASSERT_TRUE(ch->Synchronize().ok());
  std::vector<uint32_t> out(256 << 10);
  ASSERT_TRUE(ch->CopyDeviceToHost(out.data(), a->va, 1 << 20).ok());
  for (uint32_t page = 0; page < 200; ++page) {
    const uint32_t expected = page < 100 ? page + 200 : page;
    ASSERT_EQ(out[page * 1024], expected) << page;
    ASSERT_EQ(out[page * 1024 + 1023], expected) << page;
  }
}

TEST_F(GuestDriverTest, ChannelIdsAreAllocatedAndReused) {
  auto ctx = NewContext();
  std::vector<Channel*> channels;
  for (;;) {
    auto c = ctx->CreateChannel();
    if (!c.ok()) {
      EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
      break;
    }
    channels.push_back(*c);
  }
  EXPECT_EQ(channels.size(), 127u);  // plus the default channel: all 128
  const uint32_t id = channels[40]->id();
  ASSERT_TRUE(ctx->DestroyChannel(channels[40]).ok());
  auto again = ctx->CreateChannel();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->id(), id);
  auto a = ctx->AllocDevice(4096);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE((*again)->Memset32Async(a->va, 9, 1).ok());
  ASSERT_TRUE((*again)->Synchronize().ok());
}

TEST_F(GuestDriverTest, ContextsHaveSeparateAddressSpaces) {
  auto c1 = NewContext();
  auto c2 = NewContext();
  auto a1 = c1->AllocDevice(8192);
  auto a2 = c2->AllocDevice(8192);
  ASSERT_TRUE(a1.ok() && a2.ok());
  EXPECT_EQ(a1->va, a2->va) << "same heap layout, different spaces";
  ASSERT_TRUE(c1->default_channel()->Memset32Async(a1->va, 111, 2048).ok());
  ASSERT_TRUE(c2->default_channel()->Memset32Async(a2->va, 222, 2048).ok());
  uint32_t v1 = 0, v2 = 0;
  ASSERT_TRUE(c1->default_channel()->CopyDeviceToHost(&v1, a1->va + 8188, 4).ok());
  ASSERT_TRUE(c2->default_channel()->CopyDeviceToHost(&v2, a2->va + 8188, 4).ok());
  EXPECT_EQ(v1, 111u);
  EXPECT_EQ(v2, 222u);
}

TEST_F(GuestDriverTest, ThreadsOnChannelsAndContexts) {
  auto shared = NewContext();
  std::atomic<int> failures{0};
  auto work = [&](Context* ctx, Channel* ch, uint32_t seed) {
    for (int round = 0; round < 5; ++round) {
      const uint64_t size = (64 << 10) * (1 + (seed + round) % 5) + seed;
      auto a = ctx->AllocDevice(size);
      if (!a.ok()) {
        ++failures;
        return;
      }
      const auto in = Pattern(size, seed * 100 + round);
      std::vector<uint8_t> out(size);
      if (!ch->CopyHostToDevice(a->va, in.data(), size).ok() ||
          !ch->CopyDeviceToHost(out.data(), a->va, size).ok() || in != out ||
          !ctx->Free(a->va).ok()) {
        ++failures;
      }
    }
  };
  std::vector<std::thread> threads;
  std::vector<std::unique_ptr<Context>> own;
  for (uint32_t t = 0; t < 4; ++t) {
    auto ch = shared->CreateChannel();
    ASSERT_TRUE(ch.ok());
    threads.emplace_back(work, shared.get(), *ch, t);
    own.push_back(NewContext());
    threads.emplace_back(work, own.back().get(), own.back()->default_channel(), t + 10);
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(GuestDriverTest, ConcurrentSubmittersOnOneChannel) {
  auto ctx = NewContext();
  Channel* ch = ctx->default_channel();
  auto a = ctx->AllocDevice(1 << 20);
  ASSERT_TRUE(a.ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (uint32_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint32_t i = 0; i < 50; ++i) {
        auto f = ch->Memset32Async(a->va + t * 65536, t * 1000 + i, 16384);
        if (!f.ok() || !ch->Wait(*f).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (uint32_t t = 0; t < 4; ++t) {
    uint32_t v = 0;
    ASSERT_TRUE(ch->CopyDeviceToHost(&v, a->va + t * 65536 + 65532, 4).ok());
    EXPECT_EQ(v, t * 1000 + 49);
  }
}

// Regression (CI, RuntimeDriverApi.ThreadsShareContexts): Context::Synchronize (and Free, which
// synchronizes) walked the context's channels while another thread destroyed one of them.
TEST_F(GuestDriverTest, ChannelsDestroyedWhileTheContextSynchronizes) {
  auto ctx = NewContext();
  auto a = ctx->AllocDevice(1 << 20);
  ASSERT_TRUE(a.ok());
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> churners;
  for (uint32_t t = 0; t < 2; ++t) {
    churners.emplace_back([&, t] {
      for (uint32_t i = 0; i < 40; ++i) {
        auto ch = ctx->CreateChannel();
        if (!ch.ok() || !(*ch)->Memset32Async(a->va + t * 4096, i, 1024).ok() ||
            !ctx->DestroyChannel(*ch).ok()) {
          ++failures;
        }
      }
    });
  }
  std::thread syncer([&] {
    while (!stop.load()) {
      auto b = ctx->AllocDevice(4096);
      if (!ctx->Synchronize().ok() || !b.ok() || !ctx->Free(b->va).ok()) ++failures;
    }
  });
  for (auto& t : churners) t.join();
  stop = true;
  syncer.join();
  EXPECT_EQ(failures.load(), 0);
  uint32_t v = 0;
  ASSERT_TRUE(ctx->default_channel()->CopyDeviceToHost(&v, a->va + 4096 + 4092, 4).ok());
  EXPECT_EQ(v, 39u);
}

// A Context::Synchronize that started before DestroyChannel still covers the channel's work: the
// channel stays listed until it has drained.
TEST_F(GuestDriverTest, DestroyChannelDrainsBeforeItUnlists) {
  auto ctx = NewContext();
  auto a = ctx->AllocDevice(8 << 20);
  ASSERT_TRUE(a.ok());
  auto ch = ctx->CreateChannel();
  ASSERT_TRUE(ch.ok());
  for (int i = 0; i < 8; ++i) ASSERT_TRUE((*ch)->Memset32Async(a->va, i, 2 << 20).ok());
  std::thread destroyer([&] { EXPECT_TRUE(ctx->DestroyChannel(*ch).ok()); });
  ASSERT_TRUE(ctx->Synchronize().ok());
  uint32_t v = 0;  // read before the destroyer is joined
  EXPECT_TRUE(ctx->default_channel()->CopyDeviceToHost(&v, a->va + (8 << 20) - 4, 4).ok());
  EXPECT_EQ(v, 7u);
  destroyer.join();
}

// Synchronous copies from/to pageable memory on one channel share its bounce buffers: several
// threads copying through the same channel at once must each get their own bytes.
TEST_F(GuestDriverTest, ConcurrentStagedCopiesOnOneChannel) {
  ContextOptions o;
  o.staging_bytes = 64 << 10;  // many rounds through both halves per copy
  auto ctx = NewContext(o);
  Channel* ch = ctx->default_channel();
  constexpr uint32_t kThreads = 4;
  constexpr uint64_t kBytes = (200 << 10) + 12;  // above the BAR1 threshold, odd tail
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto a = ctx->AllocDevice(kBytes);
      if (!a.ok()) {
        ++failures;
        return;
      }
      for (uint32_t round = 0; round < 6; ++round) {
        const auto in = Pattern(kBytes, t * 1000 + round);
        std::vector<uint8_t> out(kBytes);
        if (!ch->CopyHostToDevice(a->va, in.data(), kBytes).ok() ||
            !ch->CopyDeviceToHost(out.data(), a->va, kBytes).ok() || in != out) {
          ++failures;
        }
      }
      if (!ctx->Free(a->va).ok()) ++failures;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// CUDA: a stream nobody has given work is idle (cuStreamQuery -> CUDA_SUCCESS). The driver's own
// setup commands of a new channel are not the caller's work.
TEST_F(GuestDriverTest, NewChannelsAndContextsAreIdle) {
  for (int i = 0; i < 5; ++i) {
    auto ctx = NewContext();
    Channel* d = ctx->default_channel();
    auto done = d->IsDone(d->last_fence());
    ASSERT_TRUE(done.ok());
    EXPECT_TRUE(*done) << "default channel of context " << i;
    for (int j = 0; j < 8; ++j) {
      auto ch = ctx->CreateChannel();
      ASSERT_TRUE(ch.ok());
      done = (*ch)->IsDone((*ch)->last_fence());
      ASSERT_TRUE(done.ok());
      EXPECT_TRUE(*done) << "channel " << j << " of context " << i;
    }
  }
}

TEST_F(GuestDriverTest, BadContextOptions) {
  ContextOptions o;
  o.ib_entries = 1000;
  EXPECT_EQ(driver_->CreateContext(o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.pushbuffer_bytes = 100;
  EXPECT_EQ(driver_->CreateContext(o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.default_timeout = std::chrono::nanoseconds(0);
  EXPECT_EQ(driver_->CreateContext(o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.copy_engine = CopyEngine(7);
  EXPECT_EQ(driver_->CreateContext(o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpuvm::guest
