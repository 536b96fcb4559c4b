// Register traces: the exact BAR accesses the driver makes for init, channel creation and teardown,
// a TLB flush and a submission, recorded by the software GPU's access observer and compared with
// the sequences nouveau performs on GF100 (docs/GUEST-DRIVER.md lists them).
#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <sstream>
#include <vector>

#include "gpu/hw/pbus.h"
#include "gpu/hw/pfb.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pgraph.h"
#include "gpu/hw/pmc.h"
#include "gpu/hw/ramin.h"
#include "gpu/hw/vm.h"
#include "guest-pv-driver/driver_impl.h"
#include "guest-pv-driver/native_bus.h"

namespace gpuvm::guest {
namespace {

namespace pf = gf100::pfifo;
namespace pmc = gf100::pmc;
namespace vm = gf100::vm;
using gpu::BarAccess;

// One expected access; an unset offset/value/size matches anything.
struct Expected {
  Bar bar;
  bool write;
  bool block;
  std::optional<uint64_t> offset;
  std::optional<uint64_t> value;  // single accesses
  std::optional<uint64_t> size;   // blocks
  std::string what;
};

std::string Describe(const BarAccess& a) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%s%s BAR%d 0x%llx %s 0x%llx", a.block ? "block " : "",
                a.write ? "W" : "R", int(a.bar), (unsigned long long)a.offset,
                a.block ? "size" : "=", (unsigned long long)(a.block ? a.size : a.value));
  return buf;
}

class Trace {
 public:
  // BAR0 register read / write.
  Trace& R(uint32_t reg, std::string what, std::optional<uint64_t> value = {}) {
    e_.push_back({Bar::k0, false, false, reg, value, {}, std::move(what)});
    return *this;
  }
  Trace& W(uint32_t reg, std::optional<uint64_t> value, std::string what) {
    e_.push_back({Bar::k0, true, false, reg, value, {}, std::move(what)});
    return *this;
  }
  Trace& W32(Bar bar, uint64_t offset, std::optional<uint64_t> value, std::string what) {
    e_.push_back({bar, true, false, offset, value, {}, std::move(what)});
    return *this;
  }
  Trace& Block(Bar bar, std::optional<uint64_t> offset, std::optional<uint64_t> size,
               std::string what) {
    e_.push_back({bar, true, true, offset, {}, size, std::move(what)});
    return *this;
  }
  // nouveau's gf100 TLB flush of the space whose directory is at `pd`.
  Trace& Flush(uint64_t pd, const std::string& what) {
    R(vm::kCfg, what + ": wait for a flush slot");
    W(vm::kTlbFlushVspace, pd >> 8, what + ": page directory");
    W(vm::kTlbFlushTrigger, vm::kFlushTrigger | vm::kFlushPageAll, what + ": trigger");
    return R(vm::kCfg, what + ": wait until queued");
  }
  // An instance-memory object in a chunk already mapped: its zeroing (one fill).
  Trace& InstAlloc(std::optional<uint64_t> bar3, uint64_t bytes, const std::string& what) {
    return Block(Bar::k3, bar3, bytes, what + ": zeroed");
  }
  // The first object of a new 1 MiB instance-memory chunk at `chunk_bar3`: the chunk's BAR3 PTEs
  // (one block of 256), BAR3 flush, then the object's zeroing.
  Trace& InstAllocNewChunk(uint64_t chunk_bar3, uint64_t bar3, uint64_t bytes, uint64_t bar3_pd,
                           const std::string& what) {
    Block(Bar::k3, (chunk_bar3 >> 12) * 8, 256 * 8, what + ": a new chunk's BAR3 PTEs");
    Flush(bar3_pd, what + ": BAR3");
    return InstAlloc(bar3, bytes, what);
  }

  void Check(const std::vector<BarAccess>& got, size_t from = 0) const {
    std::ostringstream log;
    for (size_t i = from; i < got.size(); ++i)
      log << "  " << i - from << ": " << Describe(got[i]) << "\n";
    ASSERT_GE(got.size() - from, e_.size()) << "trace too short; got:\n" << log.str();
    for (size_t i = 0; i < e_.size(); ++i) {
      const Expected& e = e_[i];
      const BarAccess& a = got[from + i];
      const bool match = a.bar == e.bar && a.write == e.write && a.block == e.block &&
                         (!e.offset || a.offset == *e.offset) &&
                         (!e.value || (!a.block && a.value == *e.value)) &&
                         (!e.size || (a.block && a.size == *e.size));
      ASSERT_TRUE(match) << "access " << i << " (" << e.what << ") is " << Describe(a)
                         << "\nwhole trace:\n"
                         << log.str();
    }
    EXPECT_EQ(got.size() - from, e_.size()) << "extra accesses at the end:\n" << log.str();
  }

 private:
  std::vector<Expected> e_;
};

class GuestDriverTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    NativeGpuOptions o;
    o.device.vram_size = 64ull << 20;  // BAR1 128 MiB, BAR3 64 MiB (defaults)
    auto gpu = NativeGpu::Create(o);
    ASSERT_TRUE(gpu.ok());
    gpu_ = std::move(*gpu);
    gpu_->device()->SetAccessObserver([this](const BarAccess& a) {
      std::lock_guard lock(mu_);
      trace_.push_back(a);
    });
  }
  void TearDown() override {
    ctx_.reset();
    driver_.reset();
    gpu_->device()->SetAccessObserver(nullptr);
  }
  void CreateDriver() {
    auto d = Driver::Create(gpu_->bus());
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    driver_ = std::move(*d);
  }
  // The driver and one context (ctx_).
  void CreateDriverAndContext() {
    ASSERT_NO_FATAL_FAILURE(CreateDriver());
    auto ctx = driver_->CreateContext();
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    ctx_ = std::move(*ctx);
  }
  size_t Mark() {
    std::lock_guard lock(mu_);
    return trace_.size();
  }
  std::vector<BarAccess> Recorded() {
    std::lock_guard lock(mu_);
    return trace_;
  }

  std::unique_ptr<NativeGpu> gpu_;
  std::unique_ptr<Driver> driver_;
  std::unique_ptr<Context> ctx_;
  std::mutex mu_;
  std::vector<BarAccess> trace_;
};

TEST_F(GuestDriverTraceTest, Init) {
  CreateDriver();
  // The layout the driver chooses (docs/GUEST-DRIVER.md): VRAM from 1 MiB; the BAR3 bootstrap
  // region [page table 128 KiB (PT_SIZE 1/2 for 64 MiB) | directory | instance block] first, mapped
  // at BAR3 0; then instance objects and VRAM in allocation order.
  const uint64_t boot = 1 << 20;
  const uint64_t pt_bytes = 128 << 10;
  const uint64_t pd = boot + pt_bytes;
  const uint64_t inst = pd + 0x1000;
  const uint64_t boot_pages = (pt_bytes + 0x2000) >> 12;
  const uint64_t bar3_limit = (64ull << 20) - 1;
  InstMem* im = driver_->impl()->instmem();
  ASSERT_EQ(im->bootstrap_vram(), boot);
  ASSERT_EQ(im->directory().vram, pd);
  ASSERT_EQ(im->instance_vram(), inst);

  Trace t;
  t.R(pmc::kBoot0, "PMC_BOOT_0: chipset", pmc::kBoot0Value)
      .R(pmc::kEnable, "PMC_ENABLE")
      .W(pmc::kEnable,
         pmc::kEnableResetValue | pmc::kEnablePfifo | pmc::kEnablePgraph | pmc::kEnablePcopy0 |
             pmc::kEnablePcopy1,
         "PMC_ENABLE: PFIFO, PGRAPH, PCOPY0/1")
      .R(gf100::pfb::kFbpCount, "PFB: partitions")
      .R(gf100::pfb::kFbpDisabledMask, "PFB: disabled partitions")
      .R(gf100::pfb::kFbpAmount, "PFB: MiB behind partition 0", 64)
      .R(vm::kCfg, "VM_CFG")
      .W(vm::kCfg, {}, "VM_CFG: 128 KiB large pages");
  // BAR3 through PRAMIN: window at the region, directory entry, self-mapping PTEs, instance block.
  t.W(gf100::pbus::kPraminBase, boot >> 16, "PRAMIN window");
  const uint64_t pde = vm::pde::Make(vm::PdeTarget::kNone, 0, vm::PdeTarget::kVram, boot, 1);
  const uint64_t w = gf100::pbus::kPraminWindow;
  t.W32(Bar::k0, w + pt_bytes, uint32_t(pde), "PRAMIN: BAR3 PDE low")
      .W32(Bar::k0, w + pt_bytes + 4, pde >> 32, "PRAMIN: BAR3 PDE high");
  for (uint64_t p = 0; p < boot_pages; ++p) {
    const uint64_t pte = vm::pte::Make(boot + p * 0x1000);
    t.W32(Bar::k0, w + p * 8, uint32_t(pte), "PRAMIN: BAR3 PTE low")
        .W32(Bar::k0, w + p * 8 + 4, pte >> 32, "PRAMIN: BAR3 PTE high");
  }
  namespace ri = gf100::ramin;
  const uint64_t winst = w + (inst - boot);
  t.W32(Bar::k0, winst + ri::kPageDirLo, pd, "PRAMIN: BAR3 RAMIN page directory")
      .W32(Bar::k0, winst + ri::kPageDirHi, 0, "PRAMIN: BAR3 RAMIN page directory high")
      .W32(Bar::k0, winst + ri::kVmLimitLo, bar3_limit, "PRAMIN: BAR3 RAMIN limit")
      .W32(Bar::k0, winst + ri::kVmLimitHi, 0, "PRAMIN: BAR3 RAMIN limit high")
      .W(gf100::pbus::kBar3Inst, gf100::pbus::kBarInstVmMode | (inst >> 12), "BAR3 instance")
      .Flush(pd, "BAR3")
      .Block(Bar::k3, boot_pages * 8, pt_bytes - boot_pages * 8, "BAR3 PT: clear the rest")
      .Block(Bar::k3, pt_bytes + 8, 0x1000 - 8, "BAR3 PD: clear the rest")
      .Block(Bar::k3, pt_bytes + 0x1000, ri::kPageDirLo, "BAR3 RAMIN: clear below 0x200")
      .Block(Bar::k3, pt_bytes + 0x1000 + 0x210, 0x1000 - 0x210, "BAR3 RAMIN: clear above");
  // BAR1: directory, instance block, binding; USER area mapped at BAR1 0; POLL_AREA.
  uint64_t bar3 = boot_pages << 12;
  uint64_t vram = boot + (boot_pages << 12);
  const uint64_t bar1_pd = vram;
  t.InstAllocNewChunk(bar3, bar3, 0x1000, pd, "BAR1 page directory");
  bar3 += 0x1000;
  vram += 0x1000;
  const uint64_t bar1_inst_bar3 = bar3, bar1_inst = vram;
  t.InstAlloc(bar3, 0x1000, "BAR1 instance block")
      .Block(Bar::k3, bar1_inst_bar3 + ri::kPageDirLo, 16, "BAR1 RAMIN: directory + limit")
      .W(gf100::pbus::kBar1Inst, gf100::pbus::kBarInstVmMode | (bar1_inst >> 12), "BAR1 instance");
  bar3 += 0x1000;
  vram += 0x1000 + 128 * 0x1000;  // the USER area's VRAM
  const uint64_t bar1_table_bar3 = bar3;
  t.InstAlloc(bar3, 256 << 10, "BAR1 small-page table")
      .Block(Bar::k3, bar1_inst_bar3 - 0x1000, 8, "BAR1 PDE")
      .Block(Bar::k3, bar1_table_bar3, 128 * 8, "BAR1 PTEs of the USER area")
      .Flush(bar1_pd, "BAR1")  // the USER area is not zeroed up front: each channel zeroes its page
      .W(pf::kPollArea, pf::kPollAreaEnable, "POLL_AREA: USER pages at BAR1 0");
  bar3 += 256 << 10;
  t.InstAlloc(bar3, 0x1000, "playlist buffer 0")
      .InstAlloc(bar3 + 0x1000, 0x1000, "playlist buffer 1");
  // Interrupts.
  t.W(pf::kIntr, 0xffffffff, "PFIFO_INTR: acknowledge")
      .W(pf::kIntrEn,
         pf::kIntrChanTableError | pf::kIntrPlaylist | pf::kIntrVmFault | pf::kIntrSubfifo,
         "PFIFO_INTR_EN");
  for (uint32_t n = 0; n < 3; ++n) {
    t.W(pf::kSubfifo + n * pf::kSubfifoStride + pf::kSubfifoIntr, 0xffffffff, "PSUBFIFO intr")
        .W(pf::kSubfifo + n * pf::kSubfifoStride + pf::kSubfifoIntrEn, 0xffffffff, "PSUBFIFO en");
  }
  t.W(gf100::pgraph::kIntr, 0xffffffff, "PGRAPH_INTR: acknowledge")
      .W(gf100::pgraph::kIntrEn, 0xffffffff, "PGRAPH_INTR_EN")
      .W(pmc::kIntrEnHost, pmc::kIntrEnHardware, "PMC_INTR_EN: hardware");
  t.Check(Recorded());

  // What the blocks carried: BAR1's instance block names its directory and limit.
  uint32_t words[4] = {};
  ASSERT_TRUE(gpu_->bus()->ReadBlock(Bar::k3, bar1_inst_bar3 + ri::kPageDirLo, words, 16).ok());
  EXPECT_EQ(words[0], bar1_pd);
  EXPECT_EQ(words[2], (128u << 20) - 1);
}

TEST_F(GuestDriverTraceTest, ChannelCreationAndTeardown) {
  ASSERT_NO_FATAL_FAILURE(CreateDriverAndContext());
  const uint64_t ctx_pd = ctx_->impl()->space()->directory().vram;

  const size_t mark = Mark();
  auto created = ctx_->CreateChannel();
  ASSERT_TRUE(created.ok());
  Channel::Impl* ch = (*created)->impl();
  const uint32_t chid = ch->id();
  const InstObject inst = ch->instance();
  Driver::Impl* d = driver_->impl();

  Trace t;
  t.InstAlloc(inst.bar3, 0x1000, "instance block")
      .Block(Bar::k3, {}, {}, "ring (IB + pushbuffer) PTEs, SYSRAM")
      .Flush(ctx_pd, "context")
      .Block(Bar::k3, {}, 8, "constant bank 0 PTE")
      .Flush(ctx_pd, "context")
      .Block(Bar::k1, d->user_bar1(chid), 0x1000, "USERD zeroed")
      .Block(Bar::k3, inst.bar3, 0x210, "RAMFC + VM binding")
      .W(pf::kChanTable + chid * 8, 0xc0000000u | uint32_t(inst.vram >> 12),
         "CHAN_TABLE: valid | poll | instance")
      .W(pf::kChanTable + chid * 8 + 4, 0x001f0001, "CHAN_TABLE state: runnable")
      .Block(Bar::k3, {}, 2 * 8, "playlist: two channels")
      .W(pf::kPlaylistWr, {}, "PLAYLIST_WR")
      .W(pf::kPlaylistWrLen, 0x01f00002, "PLAYLIST_WR_LEN: submit 2")
      .R(pf::kPlaylistRdLen, "PLAYLIST_RD_LEN: busy?")
      .W(pf::kRunlistIntr, pf::kRunlistIntrUpdateDone, "playlist update done: acknowledge")
      .W32(Bar::k1, d->user_bar1(chid) + gf100::userd::kIbPut, 1, "IB_PUT: object binding");
  t.Check(Recorded(), mark);

  // The RAMFC as written: USERD, signature, IB ring and its size, the context's directory and
  // limit.
  namespace ri = gf100::ramin;
  uint32_t ramfc[0x210 / 4] = {};
  ASSERT_TRUE(d->instmem()->Read(inst, 0, ramfc, sizeof(ramfc)).ok());
  EXPECT_EQ(ramfc[ri::kUserdLo / 4], d->userd_vram(chid));
  EXPECT_EQ(ramfc[ri::kSignature / 4], ri::kSignatureValue);
  EXPECT_EQ(ramfc[ri::kIbBaseHi / 4] >> ri::kIbOrderShift, 10u);  // 1024 entries
  EXPECT_EQ(ramfc[ri::kPageDirLo / 4], ctx_pd);
  EXPECT_EQ(ramfc[ri::kVmLimitLo / 4], 0xffffffffu);
  EXPECT_EQ(ramfc[ri::kVmLimitHi / 4], 0xffu);

  ASSERT_TRUE(ch->Synchronize(std::chrono::seconds(10)).ok());
  const size_t before_teardown = Mark();
  ASSERT_TRUE(ctx_->DestroyChannel(*created).ok());
  Trace down;
  down.W(pf::kChanTable + chid * 8 + 4, 0x001f0000, "CHAN_TABLE state: not runnable")
      .Block(Bar::k3, {}, 8, "playlist: one channel")
      .W(pf::kPlaylistWr, {}, "PLAYLIST_WR")
      .W(pf::kPlaylistWrLen, 0x01f00001, "PLAYLIST_WR_LEN: submit 1")
      .R(pf::kPlaylistRdLen, "PLAYLIST_RD_LEN")
      .W(pf::kRunlistIntr, pf::kRunlistIntrUpdateDone, "acknowledge")
      .W(pf::kKickChid, chid, "kick")
      .R(pf::kKickChid, "kick pending?")
      .W(pf::kChanTable + chid * 8, 0, "CHAN_TABLE: invalid")
      .Block(Bar::k3, {}, {}, "ring PTEs cleared")
      .Flush(ctx_pd, "context")
      .Block(Bar::k3, {}, 8, "constant bank PTE cleared")
      .Flush(ctx_pd, "context");
  // (the instance block goes back to its instance-memory chunk, which stays mapped)
  down.Check(Recorded(), before_teardown);
}

TEST_F(GuestDriverTraceTest, MappingIsPteStoresPlusOneFlush) {
  ASSERT_NO_FATAL_FAILURE(CreateDriverAndContext());
  const uint64_t pd = ctx_->impl()->space()->directory().vram;
  // The small-page table of the heap exists (the report page and rings live there): one PTE block.
  size_t mark = Mark();
  auto a = ctx_->AllocDevice(4096);
  ASSERT_TRUE(a.ok());
  Trace t;
  t.Block(Bar::k3, {}, 8, "PTE").Flush(pd, "context");
  t.Check(Recorded(), mark);
  // Freed, it is kept mapped for the next allocation of its size (Context::Impl::recycled_): no
  // access at all, and the next AllocDevice of that size gets it back without one either.
  mark = Mark();
  ASSERT_TRUE(ctx_->Free(a->va).ok());
  EXPECT_EQ(Recorded().size(), mark) << "a recycled free touches no page table";
  auto again = ctx_->AllocDevice(4000);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->va, a->va);
  EXPECT_EQ(Recorded().size(), mark) << "a recycled allocation touches no page table";
  // A large allocation in a fresh PDE: its large-page table (an 8 KiB instance object), the PDE,
  // 32 PTEs in one block, one flush.
  mark = Mark();
  auto big = ctx_->AllocDevice(4 << 20);
  ASSERT_TRUE(big.ok());
  Trace b;
  b.InstAlloc({}, 8192, "large-page table")
      .Block(Bar::k3, {}, 8, "PDE")
      .Block(Bar::k3, {}, (4u << 20) / (128 << 10) * 8, "32 large-page PTEs")
      .Flush(pd, "context");
  b.Check(Recorded(), mark);
  // Unmapping what is too large to keep: the same shape as mapping.
  auto huge = ctx_->AllocDevice(8 << 20);
  ASSERT_TRUE(huge.ok());
  mark = Mark();
  ASSERT_TRUE(ctx_->Free(huge->va).ok());
  Trace u;
  u.Block(Bar::k3, {}, (8u << 20) / (128 << 10) * 8, "64 large-page PTEs cleared")
      .Flush(pd, "context");
  u.Check(Recorded(), mark);
}

TEST_F(GuestDriverTraceTest, ASubmissionIsOneBar1Write) {
  ASSERT_NO_FATAL_FAILURE(CreateDriverAndContext());
  auto a = ctx_->AllocDevice(1 << 20);
  ASSERT_TRUE(a.ok());
  Channel* ch = ctx_->default_channel();
  ASSERT_TRUE(ch->Synchronize().ok());
  const size_t mark = Mark();
  auto f = ch->Memset32Async(a->va, 1, 1 << 18);
  ASSERT_TRUE(f.ok());
  const uint32_t put = f->sequence % 1024;  // one IB entry per submission, from 0
  Trace t;
  t.W32(Bar::k1, driver_->impl()->user_bar1(ch->id()) + gf100::userd::kIbPut, put, "IB_PUT");
  t.Check(Recorded(), mark);
}

}  // namespace
}  // namespace gpuvm::guest
