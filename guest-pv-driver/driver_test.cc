// The driver against the software GF100 through the native Bus, part 1: probe, memory and
// mappings, copies on every path (DMA from pinned/registered memory, BAR1, staged) at various sizes
// and alignments, memsets, and their argument validation. Part 2 (fences, events, channels,
// contexts, threads, rings) is driver_sync_test.cc; the fixture is in test_util.h.
#include "guest-pv-driver/driver.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <vector>

#include "gpu/hw/pbus.h"
#include "gpu/hw/pmc.h"
#include "gpu/hw/vm.h"
#include "guest-pv-driver/driver_impl.h"
#include "guest-pv-driver/native_bus.h"
#include "guest-pv-driver/test_util.h"

namespace gpuvm::guest {
namespace {

namespace vm = gf100::vm;
using testing::ForwardingBus;
using testing::GuestDriverTest;
using testing::kVram;
using testing::Pattern;

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
  ContextOptions o;
  o.recycle_bytes = 0;  // every free unmaps at once
  auto ctx = NewContext(o);
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

// Managed memory: one address for the CPU and the GPU, inside the managed window, mapped as SYSRAM;
// bytes written on either side are seen on the other; freeing gives the host pages and the range
// back.
TEST_F(GuestDriverTest, ManagedMemoryHasOneAddressOnBothSides) {
  auto ctx = NewContext();
  const size_t size = 3 * 4096 + 100;
  auto m = ctx->AllocManaged(size);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->kind, MemoryKind::kManaged);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m->host), m->va);
  EXPECT_GE(m->va, kManagedBase);
  EXPECT_LT(m->va + size, kManagedLimit);
  auto pte = ctx->impl()->space()->ReadPte(m->va, false);
  ASSERT_TRUE(pte.ok());
  EXPECT_EQ(vm::pte::TargetOf(*pte), vm::Target::kSysramSnooped);
  // Found by either address, which are one.
  auto by_va = ctx->Find(m->va + size - 1);
  ASSERT_TRUE(by_va.ok());
  EXPECT_EQ(by_va->kind, MemoryKind::kManaged);
  auto by_host = ctx->FindHost(static_cast<uint8_t*>(m->host) + size - 1);
  ASSERT_TRUE(by_host.ok());
  EXPECT_EQ(by_host->va, m->va);

  // Zeroed; the CPU writes, the GPU copies that to VRAM and back to another offset, the CPU reads.
  auto* bytes = static_cast<uint8_t*>(m->host);
  EXPECT_TRUE(std::all_of(bytes, bytes + size, [](uint8_t b) { return b == 0; }));
  const auto in = Pattern(4096, 3);
  std::memcpy(bytes, in.data(), in.size());
  auto dev = ctx->AllocDevice(4096);
  ASSERT_TRUE(dev.ok());
  Channel* ch = ctx->default_channel();
  auto f = ch->CopyAsync(dev->va, m->va, 4096);
  ASSERT_TRUE(f.ok());
  f = ch->CopyAsync(m->va + 2 * 4096, dev->va, 4096);
  ASSERT_TRUE(f.ok());
  f = ch->Memset8Async(m->va + 3 * 4096, 0x5a, 100);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(ch->Wait(*f).ok());
  EXPECT_EQ(std::memcmp(bytes + 2 * 4096, in.data(), 4096), 0);
  EXPECT_TRUE(std::all_of(bytes + 3 * 4096, bytes + size, [](uint8_t b) { return b == 0x5a; }));

  ASSERT_TRUE(ctx->Free(m->va).ok());
  EXPECT_EQ(ctx->Find(m->va).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(ctx->FindHost(m->host).ok());
  // The host pages are gone (a fixed mapping there succeeds) and the range is free again.
  void* probe =
      mmap(m->host, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  EXPECT_EQ(probe, m->host);
  if (probe != MAP_FAILED) munmap(probe, 4096);
  auto again = ctx->AllocManaged(size);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->va, m->va);
  ASSERT_TRUE(ctx->Free(again->va).ok());
  ASSERT_TRUE(ctx->Free(dev->va).ok());
}

// Host pages the program already uses are never replaced: such a range of the window is skipped,
// and when every range tried is taken the allocation fails cleanly, leaving nothing behind. Bad
// sizes are refused.
TEST_F(GuestDriverTest, ManagedMemorySkipsTakenHostRangesAndRefusesBadSizes) {
  auto ctx = NewContext();
  EXPECT_EQ(ctx->AllocManaged(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx->AllocManaged(1ull << 50).status().code(), StatusCode::kResourceExhausted);
  auto first = ctx->AllocManaged(4096);
  ASSERT_TRUE(first.ok());
  // The window is first-fit: the next allocations go right after the first. Take 40 pages there.
  constexpr size_t kTaken = 40 * 4096;
  auto* next = static_cast<uint8_t*>(first->host) + 4096;
  void* squatter = mmap(next, kTaken, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  ASSERT_EQ(squatter, next);
  next[0] = 42;
  next[kTaken - 1] = 43;
  const uint64_t mapped_before = static_cast<NativeBus*>(gpu_->bus())->mapped_bytes();
  // 4 pages: the ranges tried (8) all fall in the 40 taken pages.
  auto refused = ctx->AllocManaged(4 * 4096);
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(next[0], 42);  // nothing replaced
  EXPECT_EQ(next[kTaken - 1], 43);
  EXPECT_EQ(static_cast<NativeBus*>(gpu_->bus())->mapped_bytes(), mapped_before);
  EXPECT_EQ(ctx->Find(reinterpret_cast<uintptr_t>(next)).status().code(), StatusCode::kNotFound);
  // 8 pages: the sixth range tried is past the taken pages, and serves.
  auto skipped = ctx->AllocManaged(8 * 4096);
  ASSERT_TRUE(skipped.ok()) << skipped.status().ToString();
  EXPECT_EQ(skipped->host, next + kTaken);
  EXPECT_EQ(next[0], 42);
  munmap(squatter, kTaken);
  // With the pages free again, the skipped ranges serve the next allocation.
  auto again = ctx->AllocManaged(4096);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->host, next);
  ASSERT_TRUE(ctx->Free(again->va).ok());
  ASSERT_TRUE(ctx->Free(skipped->va).ok());
  ASSERT_TRUE(ctx->Free(first->va).ok());
}

// Managed memory is the process's: contexts (and drivers) get disjoint ranges, and a context's
// end frees what it did not free itself.
TEST_F(GuestDriverTest, ManagedMemoryOfContextsIsDisjointAndGoesWithTheContext) {
  auto a = NewContext();
  auto b = NewContext();
  auto ma = a->AllocManaged(8192);
  auto mb = b->AllocManaged(8192);
  ASSERT_TRUE(ma.ok() && mb.ok());
  EXPECT_TRUE(ma->va + 8192 <= mb->va || mb->va + 8192 <= ma->va);
  EXPECT_EQ(a->Find(mb->va).status().code(), StatusCode::kNotFound);
  const uint64_t va = mb->va;
  b.reset();
  void* probe = mmap(reinterpret_cast<void*>(va), 8192, PROT_READ,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  EXPECT_EQ(probe, reinterpret_cast<void*>(va));
  if (probe != MAP_FAILED) munmap(probe, 8192);
  ASSERT_TRUE(a->Free(ma->va).ok());
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

// cudaMalloc/cudaFree of the same sizes in a loop: a freed device allocation stays mapped for the
// next one of its size (no page-table write, no TLB flush), counts as free VRAM, is bounded, and
// goes back to the VRAM allocator when it runs dry and with the context.
TEST_F(GuestDriverTest, FreedDeviceMemoryIsRecycledBoundedAndReclaimed) {
  const uint64_t before = driver_->vram_free();
  auto ctx = NewContext();
  const uint64_t with_context = driver_->vram_free();
  auto a = ctx->AllocDevice((1 << 20) + 1000);  // large pages: 1 MiB + 128 KiB mapped
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(ctx->Free(a->va).ok());
  EXPECT_EQ(driver_->vram_free(), with_context) << "recycled memory counts as free";
  EXPECT_EQ(ctx->Free(a->va).code(), StatusCode::kNotFound) << "freed is freed";
  const BusCounters bus = driver_->bus_counters();
  auto b = ctx->AllocDevice((1 << 20) + 5000);  // the same mapped size
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->va, a->va);
  EXPECT_EQ((driver_->bus_counters() - bus).total(), 0u) << "no page-table traffic";
  ASSERT_TRUE(ctx->default_channel()->Memset32Async(b->va, 7, 1000).ok());
  uint32_t word = 0;
  ASSERT_TRUE(ctx->default_channel()->CopyDeviceToHost(&word, b->va + 400, 4).ok());
  EXPECT_EQ(word, 7u);
  ASSERT_TRUE(ctx->Free(b->va).ok());
  // Many sizes: the cache keeps at most its budget; everything is still free VRAM.
  std::vector<uint64_t> vas;
  for (int i = 0; i < 12; ++i) {
    auto c = ctx->AllocDevice(4 << 20);
    ASSERT_TRUE(c.ok());
    vas.push_back(c->va);
  }
  for (uint64_t va : vas) ASSERT_TRUE(ctx->Free(va).ok());
  EXPECT_EQ(driver_->vram_free(), with_context);
  // An allocation only the recycled memory makes room for: the cache is given back first.
  const uint64_t unallocated = driver_->impl()->vram()->free_bytes();
  ASSERT_LT(unallocated, driver_->vram_free()) << "something is recycled";
  const uint64_t want = (driver_->vram_free() - (8ull << 20)) & ~((128ull << 10) - 1);
  ASSERT_GT(want, unallocated);
  auto big = ctx->AllocDevice(want);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  ASSERT_TRUE(ctx->Free(big->va).ok());
  ctx.reset();
  EXPECT_EQ(driver_->vram_free(), before);
  EXPECT_EQ(driver_->impl()->vram()->free_bytes(), before) << "nothing is kept past the context";
}

// bench/compat/churn.cu's loop on the driver: per iteration an allocation of one of five sizes
// (496 B + 0..4 pages), six small host-to-device copies, GPU work on it, six device-to-host copies,
// the free. Once each size has been seen, an iteration makes no page-table store (BAR3), no TLB
// flush (BAR0: 0x100c80 polls, 0x100cb8/0x100cbc stores) and no DMA registration: only the copies'
// BAR1 blocks and one IB_PUT. Counts, not times. (With ContextOptions::recycle_bytes = 0 an
// iteration costs 6 BAR0 reads, 6 BAR0 writes and 4 BAR3 blocks: the allocation and its BAR1 window
// mapped, both unmapped, three TLB flushes.)
TEST_F(GuestDriverTest, AnAllocCopyFreeLoopWritesNoPageTableOnceWarm) {
  auto ctx = NewContext();
  Channel* ch = ctx->default_channel();
  constexpr uint64_t kPieces[] = {4, 12, 32, 64, 128, 256};
  constexpr uint64_t kBuffer = 496;
  auto iteration = [&](int it) {
    std::vector<uint8_t> in = Pattern(kBuffer, it), back(kBuffer, 0);
    auto d = ctx->AllocDevice(kBuffer + uint64_t(it % 5) * 4096);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    for (uint64_t at = 0; uint64_t n : kPieces) {
      ASSERT_TRUE(ch->CopyHostToDevice(d->va + at, in.data() + at, n).ok());
      at += n;
    }
    ASSERT_TRUE(ch->Memset8Async(d->va + 100, uint8_t(it), 8).ok());  // the kernel's stand-in
    for (uint64_t at = kBuffer, p = std::size(kPieces); p-- > 0;) {
      at -= kPieces[p];
      ASSERT_TRUE(ch->CopyDeviceToHost(back.data() + at, d->va + at, kPieces[p]).ok());
    }
    std::fill(in.begin() + 100, in.begin() + 108, uint8_t(it));
    EXPECT_EQ(back, in) << "iteration " << it;
    ASSERT_TRUE(ctx->Free(d->va).ok());
  };
  for (int it = 0; it < 5; ++it) iteration(it);  // each size once: mapped, then recycled
  const BusCounters before = driver_->bus_counters();
  constexpr int kIterations = 20;
  for (int it = 5; it < 5 + kIterations; ++it) iteration(it);
  const BusCounters d = driver_->bus_counters() - before;
  EXPECT_EQ(d.writes[0], 0u) << "no BAR0 store: no TLB flush";
  EXPECT_EQ(d.reads[0], 0u) << "no BAR0 read: no TLB flush handshake, no fault decoding";
  EXPECT_EQ(d.writes[2] + d.block_writes[2], 0u) << "no BAR3 store: no page-table write";
  EXPECT_EQ(d.reads[2] + d.block_reads[2], 0u);
  EXPECT_EQ(d.dma_maps, 0u);
  EXPECT_EQ(d.block_writes[1], 6u * kIterations) << "the small uploads, through BAR1";
  EXPECT_EQ(d.block_reads[1], 6u * kIterations) << "the small downloads, through BAR1";
  EXPECT_EQ(d.writes[1], 1u * kIterations) << "one IB_PUT for the GPU work";
  EXPECT_EQ(d.reads[1], 0u);
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
  EXPECT_EQ(ctx->RegisterHost(nullptr, 4096).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ctx->RegisterHost(mem, 0).status().code(), StatusCode::kInvalidArgument);
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

// CUDA registers any range: unaligned start and size map the pages around them, the va is that of
// the exact byte. Neighbouring ranges that share a page both work (the later borrows the earlier's
// mapping of it, and keeps it while the earlier is gone); bytes registered twice are refused.
TEST_F(GuestDriverTest, RegisteredHostMemoryAtAnyAddressAndSize) {
  auto ctx = NewContext();
  const size_t size = 5 * 4096;
  auto* mem = static_cast<uint8_t*>(
      mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(mem, MAP_FAILED);
  // A: bytes 100 .. 4196 (two pages, both ends unaligned); B: 4196 .. 4296, sharing A's second
  // page; C: 4296 .. 13000 (B's page again, then three more); D: 13000 .. 13001, one byte.
  struct Range {
    size_t begin, end;
  };
  const Range ranges[] = {{100, 4196}, {4196, 4296}, {4296, 13000}, {13000, 13001}};
  std::vector<Allocation> regs;
  for (const Range& range : ranges) {
    auto r = ctx->RegisterHost(mem + range.begin, range.end - range.begin);
    ASSERT_TRUE(r.ok()) << range.begin << ": " << r.status().ToString();
    EXPECT_EQ(r->host, mem + range.begin);
    EXPECT_EQ(r->size, range.end - range.begin);
    EXPECT_EQ(r->va % 4096, (reinterpret_cast<uintptr_t>(mem) + range.begin) % 4096);
    regs.push_back(*r);
  }
  // Overlapping bytes, at either end or inside, are refused.
  for (const Range& bad :
       {Range{0, 101}, Range{4195, 4197}, Range{5000, 5001}, Range{13000, 14000}}) {
    EXPECT_EQ(ctx->RegisterHost(mem + bad.begin, bad.end - bad.begin).status().code(),
              StatusCode::kAlreadyExists)
        << bad.begin;
  }
  Channel* ch = ctx->default_channel();
  auto dev = ctx->AllocDevice(size);
  ASSERT_TRUE(dev.ok());
  auto check_all = [&](uint8_t seed) {
    // Each registration's bytes through its own va: host -> device, then device -> host.
    std::vector<uint8_t> in = Pattern(size, seed);
    std::memcpy(mem, in.data(), size);
    for (size_t i = 0; i < regs.size(); ++i) {
      if (regs[i].va == 0) continue;
      auto f = ch->CopyAsync(dev->va + ranges[i].begin, regs[i].va, regs[i].size);
      ASSERT_TRUE(f.ok());
      ASSERT_TRUE(ch->Wait(*f).ok());
    }
    std::memset(mem, 0, size);
    for (size_t i = 0; i < regs.size(); ++i) {
      if (regs[i].va == 0) continue;
      auto f = ch->CopyAsync(regs[i].va, dev->va + ranges[i].begin, regs[i].size);
      ASSERT_TRUE(f.ok());
      ASSERT_TRUE(ch->Wait(*f).ok());
      EXPECT_EQ(std::memcmp(mem + ranges[i].begin, in.data() + ranges[i].begin, regs[i].size), 0)
          << "registration " << i;
    }
    // And the synchronous copies find the registration holding a host pointer (a DMA).
    ASSERT_TRUE(ch->CopyDeviceToHost(mem + 4196, dev->va + 4196, 100).ok());
    EXPECT_EQ(std::memcmp(mem + 4196, in.data() + 4196, 100), 0);
  };
  check_all(3);
  // A goes: B still reaches the page it shared with A; a new range in A's old bytes works.
  ASSERT_TRUE(ctx->Free(regs[0].va).ok());
  regs[0].va = 0;
  check_all(5);
  auto again = ctx->RegisterHost(mem + 200, 3000);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(ctx->FindHost(mem + 4196).ok());
  EXPECT_EQ(ctx->FindHost(mem + 100).status().code(), StatusCode::kNotFound);
  for (size_t i = 1; i < regs.size(); ++i) ASSERT_TRUE(ctx->Free(regs[i].va).ok());
  ASSERT_TRUE(ctx->Free(again->va).ok());
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

// Pitched 2D copies (one submission of multi-line copies) between pinned and device memory, and
// 2D memsets, on either engine: every byte of the destinations checked, gaps between rows too.
TEST_P(GuestDriverCopyTest, PitchedCopiesAndMemsets) {
  ContextOptions o;
  o.copy_engine = GetParam();
  auto ctx = NewContext(o);
  Channel* ch = ctx->default_channel();
  const uint64_t width = 300, height = 20, src_pitch = 333, dst_pitch = 512;
  auto pinned = ctx->AllocHost(src_pitch * height);
  auto dev = ctx->AllocDevice(dst_pitch * height);
  ASSERT_TRUE(pinned.ok() && dev.ok());
  const auto in = Pattern(src_pitch * height, 3);
  std::memcpy(pinned->host, in.data(), in.size());
  ASSERT_TRUE(ch->Memset8Async(dev->va, 0xcd, dst_pitch * height).ok());
  auto f = ch->Copy2DAsync({dev->va, dst_pitch, pinned->va, src_pitch, width, height});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  std::vector<uint8_t> out(dst_pitch * height);
  ASSERT_TRUE(ch->CopyDeviceToHost(out.data(), dev->va, out.size()).ok());
  for (uint64_t y = 0; y < height; ++y) {
    for (uint64_t x = 0; x < dst_pitch; ++x) {
      ASSERT_EQ(out[y * dst_pitch + x], x < width ? in[y * src_pitch + x] : 0xcd) << x << "," << y;
    }
  }
  // A memset of a 200 x 7 window at (10, 3), rows dst_pitch apart.
  auto m = ch->Memset2DAsync(dev->va + 3 * dst_pitch + 10, dst_pitch, 0x5a5a5a5au, 200, 7);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE(ch->CopyDeviceToHost(out.data(), dev->va, out.size()).ok());
  for (uint64_t y = 0; y < height; ++y) {
    for (uint64_t x = 0; x < dst_pitch; ++x) {
      const bool set = y >= 3 && y < 10 && x >= 10 && x < 210;
      const uint8_t want = set ? 0x5a : (x < width ? in[y * src_pitch + x] : 0xcd);
      ASSERT_EQ(out[y * dst_pitch + x], want) << x << "," << y;
    }
  }
  // Spans past an allocation, pitches below the width, overflowing spans: refused.
  EXPECT_FALSE(
      ch->Copy2DAsync({dev->va, dst_pitch, pinned->va, src_pitch, width, height + 1}).ok());
  EXPECT_EQ(ch->Copy2DAsync({dev->va, 10, pinned->va, src_pitch, width, 2}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(ch->Copy2DAsync({dev->va, ~0ull / 2, pinned->va, src_pitch, width, 3}).ok());
  EXPECT_FALSE(ch->Memset2DAsync(dev->va, dst_pitch, 0, width, height + 1).ok());
  EXPECT_EQ(ch->Memset2DAsync(dev->va, 10, 0, width, 2).status().code(),
            StatusCode::kInvalidArgument);
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

}  // namespace
}  // namespace gpuvm::guest
