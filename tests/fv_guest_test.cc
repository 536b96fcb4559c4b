// The unmodified guest driver in full-virtualization VMs inside one process (tests/fv_test_vm.h: a
// guest::Bus that calls the FullVirtGpu directly, with guest RAM in a memfd as a local VM has it):
// one and four VMs at once, over-committed VRAM, the VRAM policies (no data of one VM ever reaches
// another), and guest stores into a bound channel's instance block — results correct, VMs unable
// to see each other, and hostile register/page-table writes contained; a guest flooding refused
// acts (every one counted, the log bounded).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/bar_remap.h"
#include "aggregator/fv_gpu.h"
#include "aggregator/fv_host.h"
#include "aggregator/testing/same_file.h"
#include "aggregator/vram_map.h"
#include "gpu/hw/pbus.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/ramin.h"
#include "gpu/hw/vm.h"
#include "guest-pv-driver/bus.h"
#include "guest-pv-driver/driver.h"
#include "tests/fv_test_vm.h"

namespace gpuvm::aggregator {
namespace {

using fv_testing::FvTestVm;
namespace pf = gf100::pfifo;
namespace vm = gf100::vm;
namespace ramin = gf100::ramin;
constexpr uint64_t kMiB = 1ull << 20;
using testing::SameFile;

// ---- refusals: counted, logged within bounds ---------------------------------------------------

// A guest flooding refused acts: each counted per kind (what the control plane's `stats` shows),
// the log bounded — 10 lines of each kind, then summaries that add up to the rest.
TEST(FvRefusalTest, EveryRefusalIsCountedAndTheLogStaysBounded) {
  fv_testing::FvWorldOptions options;
  // No summary falls due while the test runs (it would with the default 1 s on a slow machine):
  // the only ones are Detach's, so the lines can be counted exactly.
  options.guest_log.interval = std::chrono::hours(1);
  auto world = fv_testing::FvTestWorld::Create(options);
  ASSERT_TRUE(world.ok()) << world.status().ToString();
  fv_testing::FvTestWorld& w = **world;
  auto vm = w.AddVm(
      {.mode = FvMode::kNaive, .vram_bytes = 64 * kMiB, .channels = 4, .vm_id = 0, .name = "x"});
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  constexpr uint64_t kActs = 5000;
  for (uint64_t i = 0; i < kActs; ++i) {
    (*vm)->WriteReg(vm::kCfg, vm::kCfgLargePage64K);
    (*vm)->WriteReg(pf::kPlaylistWr, 2u << pf::kPlaylistTargetShift);  // SYSRAM: refused
    (*vm)->WriteReg(pf::kPlaylistWrLen, 1);
  }
  FullVirtGpu& g = (*vm)->vgpu();
  const RefusalCounts r = g.refusals();
  EXPECT_EQ(r[size_t(Refusal::kRegister)], kActs);
  EXPECT_EQ(r[size_t(Refusal::kPlaylist)], kActs);
  EXPECT_EQ(r[size_t(Refusal::kMemory)], 0u);
  EXPECT_EQ(DescribeRefusals(r), "refused: 5,000 BAR0 register writes, 5,000 playlists");
  {
    std::lock_guard lock(w.lock());
    ASSERT_TRUE(g.Detach().ok());  // writes what the rate limit left out
  }
  const std::string log = w.log();
  size_t lines = 0, large_pages = 0, playlists = 0;
  uint64_t summarized[2] = {0, 0};
  for (size_t start = 0; start < log.size();) {
    const size_t end = log.find('\n', start);
    const std::string line = log.substr(start, end - start);
    start = end == std::string::npos ? log.size() : end + 1;
    ++lines;
    large_pages += line.find("refused 64 KiB large pages") != std::string::npos;
    playlists += line.find("refused a playlist") != std::string::npos;
    for (int k = 0; k < 2; ++k) {
      const char* what = k == 0 ? " more refused BAR0 register writes" : " more refused playlists";
      const size_t at = line.find(what);
      if (at == std::string::npos) continue;
      std::string digits;
      for (size_t i = line.find(" msg=\"") + 6; i < at; ++i) {
        if (line[i] != ',') digits += line[i];
      }
      summarized[k] += std::stoull(digits);
    }
  }
  EXPECT_EQ(large_pages, 10u) << log;
  EXPECT_EQ(playlists, 10u) << log;
  EXPECT_EQ(summarized[0], kActs - 10) << log;
  EXPECT_EQ(summarized[1], kActs - 10) << log;
  // 10 + 10 lines and one summary of each kind (every act logged would have been 10,000 lines).
  EXPECT_EQ(lines, 22u) << log;
}

// ---- the guest driver in fv VMs -------------------------------------------------------------

class FvGuestTest : public ::testing::TestWithParam<FvMode> {
 protected:
  void SetUp() override { MakeWorld({}); }
  void MakeWorld(const fv_testing::FvWorldOptions& options) {
    world_.reset();
    auto w = fv_testing::FvTestWorld::Create(options);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    world_ = std::move(*w);
  }
  FvTestVm* AddVm(uint64_t vram, uint32_t channels = 8) {
    auto vm = world_->AddVm(
        {.mode = GetParam(), .vram_bytes = vram, .channels = channels, .vm_id = 0, .name = ""});
    EXPECT_TRUE(vm.ok()) << vm.status().ToString();
    return vm.ok() ? *vm : nullptr;
  }
  std::string log() { return world_->log(); }

  std::unique_ptr<fv_testing::FvTestWorld> world_;
};

// No machine VRAM chunk belongs to two VMs, and channel ranges do not overlap.
void ExpectDisjoint(const std::vector<FvTestVm*>& vms) {
  std::map<uint64_t, size_t> owner;  // machine chunk -> VM
  for (size_t i = 0; i < vms.size(); ++i) {
    const VramMap* map = vms[i]->vgpu().vram_map();
    ASSERT_NE(map, nullptr);
    for (uint64_t g = 0; g < map->guest_bytes(); g += VramMap::kChunk) {
      const uint64_t m = map->Lookup(g);
      if (m == 0) continue;
      auto [it, fresh] = owner.emplace(m, i);
      EXPECT_TRUE(fresh) << "machine chunk " << m << " of VMs " << it->second << " and " << i;
    }
    const FvHost::Partition& a = vms[i]->vgpu().partition();
    for (size_t j = i + 1; j < vms.size(); ++j) {
      const FvHost::Partition& b = vms[j]->vgpu().partition();
      EXPECT_TRUE(a.first_channel + a.channels <= b.first_channel ||
                  b.first_channel + b.channels <= a.first_channel);
    }
  }
}

// One VM's workload: allocate, copy in, memset part, copy back (BAR1 path, DMA path, staged),
// check.
void Workload(guest::Bus* bus, uint32_t seed, std::atomic<int>* failures, std::string* why) {
  auto fail = [&](const std::string& what) {
    ++*failures;
    *why = what;
  };
  auto driver = guest::Driver::Create(bus);
  if (!driver.ok()) return fail("driver: " + driver.status().ToString());
  auto ctx = (*driver)->CreateContext();
  if (!ctx.ok()) return fail("context: " + ctx.status().ToString());
  for (uint64_t n : {uint64_t(1024), uint64_t(3 * kMiB)}) {
    auto a = (*ctx)->AllocDevice(n);
    if (!a.ok()) return fail("alloc: " + a.status().ToString());
    std::vector<uint32_t> in(n / 4), out(n / 4);
    for (size_t i = 0; i < in.size(); ++i) in[i] = uint32_t(i * 2654435761u) ^ seed;
    guest::Channel* ch = (*ctx)->default_channel();
    if (Status s = ch->CopyHostToDevice(a->va, in.data(), n); !s.ok()) {
      return fail("htod: " + s.ToString());
    }
    auto f = ch->Memset32Async(a->va, seed, 16);
    if (!f.ok()) return fail("memset: " + f.status().ToString());
    if (Status s = ch->CopyDeviceToHost(out.data(), a->va, n); !s.ok()) {
      return fail("dtoh: " + s.ToString());
    }
    for (size_t i = 0; i < 16; ++i) in[i] = seed;
    if (in != out) return fail("data mismatch at " + std::to_string(n) + " bytes");
  }
}

// Runs Workload on each of `vms` at once, VM i (from 0) with seed (i + `first`) * `step`, and
// returns how many failed (each failure is reported).
int RunWorkloadsAtOnce(const std::vector<FvTestVm*>& vms, uint32_t first, uint32_t step) {
  std::atomic<int> failures{0};
  std::vector<std::string> why(vms.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < vms.size(); ++i) {
    threads.emplace_back(Workload, vms[i], uint32_t(i + first) * step, &failures, &why[i]);
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < vms.size(); ++i) EXPECT_TRUE(why[i].empty()) << i << ": " << why[i];
  return failures;
}

TEST_P(FvGuestTest, OneVmRunsTheUnmodifiedDriver) {
  FvTestVm* vm = AddVm(128 * kMiB);
  std::atomic<int> failures{0};
  std::string why;
  Workload(vm, 7, &failures, &why);
  EXPECT_EQ(failures, 0) << why << "\n" << log();
  const FvCounters& k = vm->vgpu().counters();
  EXPECT_GT(k.submissions, 0u);
  EXPECT_GT(k.shadow.scans, 0u);
  EXPECT_GT(k.shadow_channels_built, 0u);
  EXPECT_EQ(k.shadow.entries_rejected, 0u) << log();
  EXPECT_EQ(k.faults, 0u) << log();
}

TEST_P(FvGuestTest, FourVmsOfDifferentSizesAtOnce) {
  std::vector<FvTestVm*> vms = {AddVm(64 * kMiB), AddVm(96 * kMiB), AddVm(128 * kMiB),
                                AddVm(32 * kMiB, 4)};
  EXPECT_EQ(RunWorkloadsAtOnce(vms, 1, 0x1111), 0) << log();
  ExpectDisjoint(vms);
}

// Dynamic VRAM: four VMs whose declared VRAM (4 x 64 MiB) is more than the GPU has for VMs
// (96 MiB) run correctly, because each touches only part of it.
TEST_P(FvGuestTest, OverCommittedVramWorksWhileWhatIsTouchedFits) {
  MakeWorld({.gpu_vram_bytes = 128 * kMiB, .reserved_bytes = 32 * kMiB});
  const uint64_t pool = world_->host().vm_vram().end() - world_->host().vm_vram().begin();
  std::vector<FvTestVm*> vms = {AddVm(64 * kMiB, 4), AddVm(64 * kMiB, 4), AddVm(64 * kMiB, 4),
                                AddVm(64 * kMiB, 4)};
  EXPECT_GT(4 * 64 * kMiB, pool);
  EXPECT_EQ(RunWorkloadsAtOnce(vms, 7, 0x1357), 0) << log();
  uint64_t assigned = 0;
  for (FvTestVm* vm : vms) {
    assigned += vm->vgpu().vram_map()->assigned_bytes();
    EXPECT_GT(vm->vgpu().vram_map()->assigned_bytes(), 0u);
    EXPECT_LT(vm->vgpu().vram_map()->assigned_bytes(), 64 * kMiB);
    EXPECT_EQ(vm->vgpu().vram_map()->exhausted(), 0u);
  }
  EXPECT_LE(assigned, pool);
  EXPECT_EQ(world_->host().vm_vram().used(), assigned);
  ExpectDisjoint(vms);
  // Dead VMs give every page back.
  for (FvTestVm* vm : vms) vm->Stop();
  EXPECT_EQ(world_->host().vm_vram().used(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Modes, FvGuestTest,
                         ::testing::Values(FvMode::kNaive, FvMode::kLazy, FvMode::kOptimized),
                         [](const auto& info) {
                           std::string n = FvModeName(info.param);
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

// ---- VRAM policies: no data of one VM ever reaches another --------------------------------

class FvVramPolicyTest : public ::testing::TestWithParam<VramPolicy> {};

FvVmOptions SmallVm() {
  FvVmOptions o;
  o.vram_bytes = 32 * kMiB;
  o.channels = 4;
  return o;
}

// VM A fills its buffers with a pattern and goes; VM B, given (some of) the same machine VRAM,
// reads its fresh buffers without writing them: zeros, never A's bytes.
TEST_P(FvVramPolicyTest, AFreshPageIsZeroEvenWhereTheLastVmWrote) {
  // 32 MiB for VMs: B must reuse A's pages.
  auto world = fv_testing::FvTestWorld::Create(
      {.gpu_vram_bytes = 64 * kMiB, .reserved_bytes = 32 * kMiB, .vram_policy = GetParam()});
  ASSERT_TRUE(world.ok()) << world.status().ToString();
  fv_testing::FvTestWorld& w = **world;
  constexpr uint64_t kBytes = 8 * kMiB;
  std::set<uint64_t> a_chunks;
  // A VM with the driver up, a context, and two 8 MiB buffers; `fill`: written with 0xa5, else
  // read back unwritten and checked to be zero.
  auto run = [&](bool fill) -> FvTestVm* {
    auto vm = w.AddVm(SmallVm());
    EXPECT_TRUE(vm.ok()) << vm.status().ToString();
    if (!vm.ok()) return nullptr;
    auto driver = guest::Driver::Create(*vm);
    EXPECT_TRUE(driver.ok());
    if (!driver.ok()) return nullptr;
    auto ctx = (*driver)->CreateContext();
    EXPECT_TRUE(ctx.ok());
    if (!ctx.ok()) return nullptr;
    guest::Channel* ch = (*ctx)->default_channel();
    for (int i = 0; i < 2; ++i) {
      auto buffer = (*ctx)->AllocDevice(kBytes);
      EXPECT_TRUE(buffer.ok());
      if (!buffer.ok()) return nullptr;
      std::vector<uint8_t> bytes(kBytes, fill ? 0xa5 : 0x11);
      if (fill) {
        EXPECT_TRUE(ch->CopyHostToDevice(buffer->va, bytes.data(), kBytes).ok());
      } else {
        EXPECT_TRUE(ch->CopyDeviceToHost(bytes.data(), buffer->va, kBytes).ok());
        EXPECT_EQ(std::count(bytes.begin(), bytes.end(), 0), ptrdiff_t(kBytes)) << "buffer " << i;
      }
    }
    return *vm;
  };
  FvTestVm* a = run(/*fill=*/true);
  ASSERT_NE(a, nullptr);
  {
    const VramMap* map = a->vgpu().vram_map();
    for (uint64_t g = 0; g < map->guest_bytes(); g += VramMap::kChunk) {
      if (map->Lookup(g) != 0) a_chunks.insert(map->Lookup(g));
    }
  }
  a->Stop();
  FvTestVm* b = run(/*fill=*/false);
  ASSERT_NE(b, nullptr);
  const VramMap* map = b->vgpu().vram_map();
  size_t reused = 0;
  for (uint64_t g = 0; g < map->guest_bytes(); g += VramMap::kChunk) {
    if (map->Lookup(g) != 0) reused += a_chunks.count(map->Lookup(g));
  }
  EXPECT_GT(reused, 0u) << "B got none of A's pages: the test proves nothing";
}

// ---- channel descriptors: guest stores into a bound channel's instance block ------------------

// The guest driver keeps its channels' instance blocks in its instance memory, which it reaches
// through BAR3; with BAR remap those pages still trap. A store there (or through PRAMIN) into a
// bound channel's block is copied, checked and propagated to the shadow instance the GPU runs the
// channel from; what is ours (USERD, the engine contexts) stays ours, and a new page directory is
// refused — that channel stops, the VM is told, another VM runs on.
// What BAR remap hands out (bar_remap.h). The software GPU's own VRAM: the VM's own memfd at guest
// addresses, never the GPU's VRAM, and a VM whose device model dies needs no quarantine (its guest
// can only hold that file). VRAM in a file (machine frames, the Xen test bed): that file at the
// machine addresses of the VM's pages, and it does.
TEST(FvRemapBackingTest, TheVmsOwnMemfdByDefaultMachineFramesWithVramInAFile) {
  for (const bool in_file : {false, true}) {
    SCOPED_TRACE(in_file ? "VRAM in a file" : "the GPU's own VRAM");
    char path[] = "/tmp/gpuvm-fv-vram-XXXXXX";
    os::UniqueFd file;
    fv_testing::FvWorldOptions options{.gpu_vram_bytes = 96 * kMiB, .reserved_bytes = 16 * kMiB};
    if (in_file) {
      file = os::UniqueFd(::mkstemp(path));
      ASSERT_TRUE(file.valid());
      ASSERT_EQ(::ftruncate(file.get(), off_t(options.gpu_vram_bytes)), 0);
      options.vram_file = path;
    }
    auto w = fv_testing::FvTestWorld::Create(options);
    if (in_file) ::unlink(path);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    auto vm = (*w)->AddVm({.mode = FvMode::kBarRemap,
                           .vram_bytes = 32 * kMiB,
                           .channels = 8,
                           .vm_id = 0,
                           .name = ""});
    ASSERT_TRUE(vm.ok()) << vm.status().ToString();
    FullVirtGpu& g = (*vm)->vgpu();
    const int own = g.vram_map()->backing_fd();
    EXPECT_EQ(own >= 0, !in_file);
    EXPECT_EQ((*w)->gpu().vram_frames_fd() >= 0, in_file);
    std::atomic<int> failures{0};
    std::string why;
    Workload(*vm, 3, &failures, &why);
    ASSERT_EQ(failures, 0) << why;
    std::lock_guard lock((*w)->lock());
    uint64_t vram_maps = 0;
    for (const BarRemapRequest& r : g.TakeBarRemapRequests()) {
      if (!r.map) continue;
      struct stat st;
      ASSERT_EQ(::fstat(r.fd, &st), 0);
      const bool scratch = ::fcntl(r.fd, F_GET_SEALS) >= 0 && !SameFile(r.fd, own);
      if (scratch) continue;  // the foreign USER ids' scratch memory
      ++vram_maps;
      if (in_file) {
        EXPECT_TRUE(SameFile(r.fd, file.get()));
        EXPECT_GE(r.backing_offset, options.reserved_bytes);  // machine addresses of the pool
        EXPECT_LE(r.backing_offset + r.length, options.gpu_vram_bytes);
      } else {
        EXPECT_TRUE(SameFile(r.fd, own)) << "BAR remap handed out something else than its VRAM";
        EXPECT_LE(r.backing_offset + r.length, g.vram_bytes());  // guest addresses
      }
    }
    EXPECT_GT(vram_maps, 0u);
    EXPECT_EQ(g.VramMayBeMapped(), in_file);
  }
}

TEST(FvDescriptorTest, StoresToABoundInstanceBlockReachItsShadowOrStopOnlyThatChannel) {
  auto world = fv_testing::FvTestWorld::Create({});
  ASSERT_TRUE(world.ok()) << world.status().ToString();
  fv_testing::FvTestWorld& w = **world;
  auto vm = w.AddVm(
      {.mode = FvMode::kBarRemap, .vram_bytes = 64 * kMiB, .channels = 4, .vm_id = 0, .name = ""});
  auto other = w.AddVm(
      {.mode = FvMode::kNaive, .vram_bytes = 64 * kMiB, .channels = 4, .vm_id = 0, .name = ""});
  ASSERT_TRUE(vm.ok() && other.ok());
  FullVirtGpu& g = (*vm)->vgpu();
  auto driver = guest::Driver::Create(*vm);
  ASSERT_TRUE(driver.ok()) << driver.status().ToString();
  auto ctx = (*driver)->CreateContext();
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  guest::Channel* ch = (*ctx)->default_channel();
  auto buffer = (*ctx)->AllocDevice(64 * 1024);
  ASSERT_TRUE(buffer.ok());
  auto round_trip = [&](uint8_t value) {
    std::vector<uint8_t> in(64 * 1024, value), out(in.size());
    return ch->CopyHostToDevice(buffer->va, in.data(), in.size()).ok() &&
           ch->CopyDeviceToHost(out.data(), buffer->va, out.size()).ok() && in == out;
  };
  ASSERT_TRUE(round_trip(0x11));
  std::lock_guard lock(w.lock());
  auto reg = [&](uint32_t offset) { return uint32_t(*g.Read(gpu::Bar::k0, offset, 4, 0)); };
  const uint32_t chid = ch->id();
  const uint64_t instance =
      uint64_t(reg(pf::kChanTable + chid * pf::kChanTableStride) & pf::kChanInstMask) << 12;
  const uint64_t shadow = w.host().shadow_instance(g.partition().first_channel + chid);
  auto shadow32 = [&](uint32_t at) {
    uint32_t v = 0;
    w.host().vram().Read(shadow + at, &v, 4);
    return v;
  };
  ASSERT_EQ(shadow32(ramin::kSignature) & ramin::kSignatureMask, ramin::kSignatureValue);
  // The BAR3 page the driver reaches the block through, found as a guest would (its BAR3 tables).
  BarWalk bar3;
  const GuestMemoryView view(&w.host().vram(), g.layout(), (*vm)->ram());
  WalkBarTables(view, reg(gf100::pbus::kBar3Inst), (*vm)->pci().bar3_size, bar3);
  uint64_t page = ~0ull;
  for (size_t i = 0; i < bar3.guest.size(); ++i) {
    if (bar3.machine[i] != 0 && bar3.guest[i] == instance) page = i;
  }
  ASSERT_NE(page, ~0ull) << "the driver reaches its instance block through BAR3";
  // BAR remap left that page trapping (while the rest of BAR3 is remapped).
  std::vector<BarRemapRequest> mapped;
  for (const BarRemapRequest& r : g.TakeBarRemapRequests()) {
    if (r.map) {
      mapped.push_back(r);
    } else {
      std::erase_if(mapped, [&](const BarRemapRequest& m) {
        return m.bar == r.bar && m.offset == r.offset && m.length == r.length;
      });
    }
  }
  EXPECT_FALSE(mapped.empty());
  for (const BarRemapRequest& m : mapped) {
    EXPECT_FALSE(m.bar == gpu::Bar::k3 && page * 4096 >= m.offset &&
                 page * 4096 - m.offset < m.length)
        << "the bound channel's instance block is remapped";
  }
  const uint64_t at = page * 4096;
  const uint32_t user_lo = shadow32(ramin::kUserdLo), pd_lo = shadow32(ramin::kPageDirLo);
  const uint64_t writes_before = g.counters().descriptor_writes;
  // A RAMFC word through BAR3 and another through PRAMIN: both reach the shadow.
  ASSERT_TRUE(g.Write(gpu::Bar::k3, at + 0x80, 4, 0x12345678, 0).ok());
  EXPECT_EQ(shadow32(0x80), 0x12345678u);
  ASSERT_TRUE(g.Write(gpu::Bar::k0, gf100::pbus::kPraminBase, 4,
                      uint32_t(instance >> gf100::pbus::kPraminBaseShift), 0)
                  .ok());
  const uint32_t window =
      gf100::pbus::kPraminWindow + uint32_t(instance & ((1u << gf100::pbus::kPraminBaseShift) - 1));
  ASSERT_TRUE(g.Write(gpu::Bar::k0, window + 0x84, 4, 0x9abcdef0, 0).ok());
  EXPECT_EQ(shadow32(0x84), 0x9abcdef0u);
  EXPECT_EQ(g.counters().descriptor_writes, writes_before + 2);
  // USERD and the engine context pointers stay ours; the directory's flag bits follow the guest,
  // its address stays the shadow directory.
  ASSERT_TRUE(g.Write(gpu::Bar::k3, at + ramin::kUserdLo, 8, 0x7777777777777000ull, 0).ok());
  ASSERT_TRUE(g.Write(gpu::Bar::k3, at + ramin::kGrContext, 4, 0xdead0000, 0).ok());
  const uint32_t guest_pd_lo = uint32_t(*g.Read(gpu::Bar::k3, at + ramin::kPageDirLo, 4, 0));
  ASSERT_TRUE(
      g.Write(gpu::Bar::k3, at + ramin::kPageDirLo, 4, guest_pd_lo | ramin::kPageDirVol, 0).ok());
  EXPECT_EQ(shadow32(ramin::kUserdLo), user_lo);
  EXPECT_EQ(shadow32(ramin::kGrContext), 0u);
  EXPECT_EQ(shadow32(ramin::kPageDirLo), pd_lo | ramin::kPageDirVol);
  ASSERT_TRUE(g.Write(gpu::Bar::k3, at + ramin::kPageDirLo, 4, guest_pd_lo, 0).ok());
  EXPECT_EQ(g.counters().refused_channels, 0u) << w.log();
  // A new page directory under the running channel: refused, that channel stopped.
  ASSERT_TRUE(g.Write(gpu::Bar::k3, at + ramin::kPageDirLo, 4, guest_pd_lo + 0x10000, 0).ok());
  EXPECT_EQ(g.counters().refused_channels, 1u);
  EXPECT_EQ(shadow32(ramin::kSignature), 0u) << "the shadow channel was not stopped";
  EXPECT_NE(w.log().find("page directory was rewritten"), std::string::npos) << w.log();
  EXPECT_NE(reg(pf::kIntr) & pf::kIntrPlaylist, 0u);
  // The other VM is not disturbed.
  w.lock().unlock();
  std::atomic<int> failures{0};
  std::string why;
  Workload(*other, 3, &failures, &why);
  w.lock().lock();
  EXPECT_EQ(failures, 0) << why << "\n" << w.log();
}

INSTANTIATE_TEST_SUITE_P(Policies, FvVramPolicyTest,
                         ::testing::Values(VramPolicy::kStatic, VramPolicy::kDynamic),
                         [](const auto& info) { return std::string(VramPolicyName(info.param)); });

}  // namespace
}  // namespace gpuvm::aggregator
