// The pv host through a VM's PV register window, played by hand as a (possibly hostile) guest would
// (docs/PARAVIRT.md): discovery, the call area's registration, doorbells, the answers in the
// guest's pages and registers, stores into registered tables refused, calls of one VM never
// touching another's. The unmodified guest driver on pv VMs is tests/pv_guest_test.cc.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "aggregator/fv_gpu.h"
#include "gpu/hw/pbus.h"
#include "gpu/hw/vm.h"
#include "pv/call_page.h"
#include "pv/protocol.h"
#include "tests/fv_test_vm.h"

namespace gpuvm::aggregator {
namespace {

namespace vm = gf100::vm;
using fv_testing::FvTestVm;
using fv_testing::FvTestWorld;
using pv::CallResult;
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kList = 0x10000;  // guest-physical: the page list
constexpr uint64_t kArea = 0x20000;  // ... and the area's pages, kAreaPages of them
constexpr uint32_t kAreaPages = 4;
constexpr uint64_t kPd = 0x100000;

class PvHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fv_testing::FvWorldOptions o;
    o.gpu_vram_bytes = 256 * kMiB;
    auto world = FvTestWorld::Create(o);
    ASSERT_TRUE(world.ok()) << world.status().ToString();
    world_ = std::move(*world);
  }
  FvTestVm* AddVm(FvMode mode, const std::string& name) {
    auto vm = world_->AddVm({.mode = mode, .vram_bytes = 32 * kMiB, .channels = 4, .name = name},
                            16 * kMiB);
    EXPECT_TRUE(vm.ok()) << vm.status().ToString();
    return vm.ok() ? *vm : nullptr;
  }
  static uint32_t Reg(FvTestVm* vm, uint32_t r) { return vm->ReadReg(r); }
  // Registers kAreaPages pages, scattered in reverse order, as the guest's call area.
  static void RegisterArea(FvTestVm* vm) {
    std::vector<uint64_t> list(kAreaPages);
    for (uint32_t i = 0; i < kAreaPages; ++i) list[i] = kArea + (kAreaPages - 1 - i) * 4096;
    std::memcpy(vm->ram().data() + kList, list.data(), list.size() * 8);
    vm->WriteReg(pv::kRegAreaListLo, uint32_t(kList));
    vm->WriteReg(pv::kRegAreaListHi, 0);
    vm->WriteReg(pv::kRegAreaPages, kAreaPages);
    ASSERT_EQ(Reg(vm, pv::kRegAreaStatus), 0u);
  }
  // Copies `batch` into the area (page by page, as the list says) and rings.
  static void Ring(FvTestVm* vm, std::span<const uint8_t> batch) {
    for (size_t i = 0; i < batch.size(); ++i) vm->ram()[AreaAddress(i)] = batch[i];
    vm->WriteReg(pv::kRegDoorbell, uint32_t(batch.size()));
  }
  static uint64_t AreaAddress(uint64_t offset) {
    return kArea + (kAreaPages - 1 - offset / 4096) * 4096 + offset % 4096;
  }
  static uint32_t AreaWord(FvTestVm* vm, uint64_t offset) {
    uint32_t v;
    std::memcpy(&v, vm->ram().data() + AreaAddress(offset), 4);
    return v;
  }
  uint64_t Machine64(uint64_t machine) {
    uint64_t v;
    std::memcpy(&v, world_->gpu().vram_mapping().data() + machine, 8);
    return v;
  }

  std::unique_ptr<FvTestWorld> world_;
};

TEST_F(PvHostTest, OnlyPvVmsAnswerTheWindow) {
  FvTestVm* fv = AddVm(FvMode::kLazy, "fv");
  FvTestVm* naive = AddVm(FvMode::kPvNaive, "naive");
  FvTestVm* multi = AddVm(FvMode::kPvMulticall, "multi");
  ASSERT_TRUE(fv && naive && multi);
  EXPECT_EQ(Reg(fv, pv::kRegId), 0u);
  EXPECT_EQ(Reg(naive, pv::kRegId), pv::kIdValue);
  EXPECT_EQ(Reg(naive, pv::kRegVersion), pv::kVersion);
  EXPECT_EQ(Reg(naive, pv::kRegMode), uint32_t(pv::Mode::kNaive));
  EXPECT_EQ(Reg(multi, pv::kRegMode), uint32_t(pv::Mode::kMulticall));
  EXPECT_EQ(Reg(multi, pv::kRegAreaMaxPages), pv::kMaxAreaPages);
  EXPECT_EQ(naive->vgpu().mode(), ipc::VmMode::kParaVirtualization);
  EXPECT_EQ(fv->vgpu().mode(), ipc::VmMode::kFullVirtualization);
  // Unknown offsets of the window read 0 and refuse writes.
  const uint64_t refused = naive->vgpu().counters().refused_registers;
  EXPECT_EQ(Reg(naive, pv::kWindow + 0x800), 0u);
  naive->WriteReg(pv::kWindow + 0x800, 1);
  naive->WriteReg(pv::kRegId, 1);
  EXPECT_EQ(naive->vgpu().counters().refused_registers, refused + 2);
}

TEST_F(PvHostTest, BadAreasAndDoorbellsAreRefusedWithTheirCodes) {
  FvTestVm* vm = AddVm(FvMode::kPvNaive, "vm");
  ASSERT_NE(vm, nullptr);
  // A doorbell before any area.
  vm->WriteReg(pv::kRegDoorbell, 64);
  EXPECT_EQ(Reg(vm, pv::kRegBatchStatus), uint32_t(CallResult::kNoArea));
  // Page lists: past the RAM, a page past the RAM, too many pages.
  vm->WriteReg(pv::kRegAreaListLo, uint32_t(16 * kMiB - 8));
  vm->WriteReg(pv::kRegAreaPages, 2);
  EXPECT_EQ(Reg(vm, pv::kRegAreaStatus), uint32_t(CallResult::kBadArea));
  EXPECT_EQ(Reg(vm, pv::kRegAreaPages), 0u);
  const uint64_t outside = 16 * kMiB;
  std::memcpy(vm->ram().data() + kList, &outside, 8);
  vm->WriteReg(pv::kRegAreaListLo, uint32_t(kList));
  vm->WriteReg(pv::kRegAreaPages, 1);
  EXPECT_EQ(Reg(vm, pv::kRegAreaStatus), uint32_t(CallResult::kBadArea));
  vm->WriteReg(pv::kRegAreaPages, pv::kMaxAreaPages + 1);
  EXPECT_EQ(Reg(vm, pv::kRegAreaStatus), uint32_t(CallResult::kBadArea));
  RegisterArea(vm);
  EXPECT_EQ(Reg(vm, pv::kRegAreaPages), kAreaPages);
  // Lengths: short, ragged, past the area; garbage in the area.
  for (uint32_t length : {0u, 24u, 100u, kAreaPages * 4096 + 8}) {
    vm->WriteReg(pv::kRegDoorbell, length);
    EXPECT_EQ(Reg(vm, pv::kRegBatchStatus), uint32_t(CallResult::kBadBatch)) << length;
  }
  std::vector<uint8_t> garbage(256, 0x5a);
  Ring(vm, garbage);
  EXPECT_EQ(Reg(vm, pv::kRegBatchStatus), uint32_t(CallResult::kBadBatch));
  EXPECT_EQ(AreaWord(vm, pv::kHeaderStatus), uint32_t(CallResult::kBadBatch));
  // A malformed op: that op BAD_OP, the one before NOT_RUN, nothing applied.
  pv::BatchBuilder b(kAreaPages * 4096);
  const uint32_t attach = b.Attach(kPd, (1ull << 40) - 1, pv::SpaceKind::kChannel);
  const uint32_t flush = b.Flush(kPd);
  std::vector<uint8_t> bytes(b.Finish().begin(), b.Finish().end());
  const uint16_t unknown = 77;
  std::memcpy(bytes.data() + flush + pv::kOpCode, &unknown, 2);
  Ring(vm, bytes);
  EXPECT_EQ(Reg(vm, pv::kRegBatchStatus), uint32_t(CallResult::kBadOp));
  EXPECT_EQ(AreaWord(vm, attach + pv::kOpResult), uint32_t(CallResult::kNotRun));
  EXPECT_EQ(AreaWord(vm, flush + pv::kOpResult), uint32_t(CallResult::kBadOp));
  EXPECT_EQ(vm->vgpu().pv()->tables().spaces(), 0u);
  const PvDeviceCounters& c = vm->vgpu().pv()->counters();
  EXPECT_EQ(c.doorbells, 7u);
  EXPECT_EQ(c.batches_refused, 7u);
  EXPECT_EQ(c.areas_refused, 3u);
  EXPECT_EQ(vm->vgpu().refusals()[size_t(Refusal::kPageTableEntry)], 10u);
}

TEST_F(PvHostTest, ABatchIsAppliedInOrderUntilACallIsRefused) {
  FvTestVm* vm = AddVm(FvMode::kPvMulticall, "vm");
  ASSERT_NE(vm, nullptr);
  RegisterArea(vm);
  constexpr uint64_t kSmall = 0x200000;
  pv::BatchBuilder b(kAreaPages * 4096);
  std::vector<uint32_t> ops;
  ops.push_back(b.Attach(kPd, (1ull << 40) - 1, pv::SpaceKind::kChannel));
  const uint64_t pde = vm::pde::Make(vm::PdeTarget::kNone, 0, vm::PdeTarget::kVram, kSmall);
  ops.push_back(b.Write(kPd, kPd, 32, std::span(&pde, 1)));
  std::vector<uint64_t> ptes(600);  // the batch spans two pages of the area
  for (size_t i = 0; i < ptes.size(); ++i) ptes[i] = vm::pte::Make(0x400000 + i * 4096);
  ops.push_back(b.Write(kPd, kSmall, 0, ptes));
  ops.push_back(b.Flush(kPd));
  const uint64_t foreign = vm::pte::Make(64 * kMiB);  // past its 32 MiB
  ops.push_back(b.Write(kPd, kSmall, 700, std::span(&foreign, 1)));
  ops.push_back(b.Flush(kPd));
  Ring(vm, b.Finish());
  EXPECT_EQ(Reg(vm, pv::kRegBatchStatus), uint32_t(CallResult::kForeignVram));
  EXPECT_EQ(Reg(vm, pv::kRegBatchDone), 4u);
  EXPECT_EQ(AreaWord(vm, pv::kHeaderDone), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(AreaWord(vm, ops[i] + pv::kOpResult), 0u) << i;
  EXPECT_EQ(AreaWord(vm, ops[4] + pv::kOpResult), uint32_t(CallResult::kForeignVram));
  EXPECT_EQ(AreaWord(vm, ops[5] + pv::kOpResult), uint32_t(CallResult::kNotRun));
  // The GPU's view: the directory and table in the VM's slice, with machine addresses.
  const uint64_t base = vm->vgpu().vram_map()->static_base();
  ASSERT_NE(base, 0u);
  EXPECT_EQ(vm::pde::SmallTableAddress(Machine64(base + kPd + 32 * 8)), base + kSmall);
  EXPECT_EQ(vm::pte::Address(Machine64(base + kSmall + 599 * 8)), base + 0x400000 + 599 * 4096);
  EXPECT_EQ(Machine64(base + kSmall + 700 * 8), 0u);
  EXPECT_EQ(Reg(vm, pv::kRegCallsLo), 4u);
  EXPECT_EQ(Reg(vm, pv::kRegDoorbellsLo), 1u);

  // The guest's own stores into a registered table — PRAMIN here — are refused; elsewhere they
  // go through.
  const uint64_t before = Machine64(base + kSmall);
  const uint64_t refused = vm->vgpu().counters().refused_memory;
  vm->WriteReg(gf100::pbus::kPraminBase, uint32_t(kSmall >> gf100::pbus::kPraminBaseShift));
  vm->Write(gpu::Bar::k0, gf100::pbus::kPraminWindow, gpu::Width::k32, 0xdead);
  EXPECT_EQ(vm->Read(gpu::Bar::k0, gf100::pbus::kPraminWindow, gpu::Width::k32), 0u);
  EXPECT_EQ(Machine64(base + kSmall), before);
  EXPECT_EQ(vm->vgpu().counters().refused_memory, refused + 2);
  vm->WriteReg(gf100::pbus::kPraminBase, uint32_t(0x600000 >> gf100::pbus::kPraminBaseShift));
  vm->Write(gpu::Bar::k0, gf100::pbus::kPraminWindow, gpu::Width::k32, 0xbeef);
  EXPECT_EQ(vm->Read(gpu::Bar::k0, gf100::pbus::kPraminWindow, gpu::Width::k32), 0xbeefu);
}

// BAR_WRITE and BAR_FILL: stores through the apertures (and BAR0) carried by the call area,
// translated and checked as trapped stores are (BAR1 without VM mode here: the aperture is the VM's
// VRAM), all or nothing per call: a store reaching a registered table, VRAM past the VM's or past
// the BAR is refused whole with NOT_MAPPED.
TEST_F(PvHostTest, BarStoresAreCallsCheckedAsTrappedStoresAre) {
  FvTestVm* vm = AddVm(FvMode::kPvMulticall, "vm");
  ASSERT_NE(vm, nullptr);
  RegisterArea(vm);
  const uint64_t base = vm->vgpu().vram_map()->static_base();
  ASSERT_NE(base, 0u);
  const uint64_t traps = vm->vgpu().counters().traps[1];
  pv::BatchBuilder b(kAreaPages * 4096);
  std::vector<uint32_t> ops;
  ops.push_back(b.Attach(kPd, (1ull << 40) - 1, pv::SpaceKind::kChannel));
  const uint8_t data[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  ops.push_back(b.BarWrite(1, 0x600004, data));
  ops.push_back(b.BarFill(1, 0x300000, 8192, 0x11111111));
  ops.push_back(b.BarFill(1, kPd - 4096, 8192, 0x22222222));  // a free page, then the directory
  ops.push_back(b.BarWrite(1, 0x700000, data));
  Ring(vm, b.Finish());
  EXPECT_EQ(Reg(vm, pv::kRegBatchStatus), uint32_t(CallResult::kNotMapped));
  EXPECT_EQ(Reg(vm, pv::kRegBatchDone), 3u);
  EXPECT_EQ(AreaWord(vm, ops[3] + pv::kOpResult), uint32_t(CallResult::kNotMapped));
  EXPECT_EQ(AreaWord(vm, ops[4] + pv::kOpResult), uint32_t(CallResult::kNotRun));
  uint8_t back[16];
  std::memcpy(back, world_->gpu().vram_mapping().data() + base + 0x600004, 16);
  EXPECT_EQ(std::memcmp(back, data, 16), 0);
  EXPECT_EQ(vm->Read(gpu::Bar::k1, 0x600004, gpu::Width::k32), 0x04030201u) << "as trapped";
  EXPECT_EQ(Machine64(base + 0x300000 + 8184), 0x1111111111111111ull);
  EXPECT_EQ(Machine64(base + kPd - 4096), 0u) << "nothing of a refused store is stored";
  EXPECT_EQ(Machine64(base + kPd), 0u);
  EXPECT_EQ(Machine64(base + 0x700000), 0u);
  EXPECT_EQ(vm->vgpu().counters().traps[1], traps + 1) << "only the read above trapped";
  // Past the VM's VRAM, past the BAR: refused, nothing stored anywhere.
  for (uint64_t offset : {uint64_t(32 * kMiB - 4), uint64_t(1) << 40}) {
    pv::BatchBuilder bad(kAreaPages * 4096);
    bad.BarWrite(1, offset, data);
    Ring(vm, bad.Finish());
    EXPECT_EQ(Reg(vm, pv::kRegBatchStatus), uint32_t(CallResult::kNotMapped)) << offset;
  }
  EXPECT_EQ(vm->vgpu().pv()->tables().counters().refused, 3u);
  // BAR0: register writes applied in order as trapped ones (the PRAMIN base here); a PRAMIN store
  // into the registered directory refused whole.
  pv::BatchBuilder r(kAreaPages * 4096);
  const uint32_t pramin = uint32_t((kPd - 0x10000) >> gf100::pbus::kPraminBaseShift);
  r.BarWrite(0, gf100::pbus::kPraminBase,
             std::span(reinterpret_cast<const uint8_t*>(&pramin), sizeof pramin));
  r.BarWrite(0, gf100::pbus::kPraminWindow + 0x10000 - 8,
             data);  // 8 bytes before the directory, 8 in
  Ring(vm, r.Finish());
  EXPECT_EQ(Reg(vm, pv::kRegBatchStatus), uint32_t(CallResult::kNotMapped));
  EXPECT_EQ(Reg(vm, pv::kRegBatchDone), 1u);
  EXPECT_EQ(Reg(vm, gf100::pbus::kPraminBase), pramin);
  EXPECT_EQ(Machine64(base + kPd - 8), 0u) << "nothing of a refused store is stored";
  EXPECT_EQ(vm->vgpu().pv()->tables().counters().refused, 4u);
}

// A hostile guest rewrites a queued aperture store's offset, length and BAR while it rings: each
// doorbell stores all of one checked store or nothing, never into its registered directory, and
// nothing of another VM's VRAM changes.
TEST_F(PvHostTest, RewritingAQueuedApertureStoreReachesOnlyTheWritersOwnMemory) {
  FvTestVm* attacker = AddVm(FvMode::kPvMulticall, "attacker");
  FvTestVm* victim = AddVm(FvMode::kPvMulticall, "victim");
  ASSERT_TRUE(attacker && victim);
  RegisterArea(attacker);
  pv::BatchBuilder setup(kAreaPages * 4096);
  setup.Attach(kPd, (1ull << 40) - 1, pv::SpaceKind::kChannel);
  Ring(attacker, setup.Finish());
  ASSERT_EQ(Reg(attacker, pv::kRegBatchStatus), 0u);
  pv::BatchBuilder b(kAreaPages * 4096);
  const uint32_t op = b.BarFill(1, 0x300000, 4096, 0xffffffff);
  std::vector<uint8_t> batch(b.Finish().begin(), b.Finish().end());
  for (size_t i = 0; i < batch.size(); ++i) attacker->ram()[AreaAddress(i)] = batch[i];
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> scribbles{0};
  std::thread scribbler([&] {
    const uint64_t offsets[] = {0x300000,         kPd,       kPd - 4096,
                                32 * kMiB - 4096, 40 * kMiB, uint64_t(1) << 40};
    const uint32_t lengths[] = {4096, 0x40000, 1 << 20, 6, pv::kMaxBarStoreBytes + 4};
    std::mt19937 random(7);
    while (!stop.load(std::memory_order_relaxed)) {
      const uint64_t p = op + pv::kOpHeaderBytes;
      switch (random() % 3) {
        case 0:
          std::memcpy(attacker->ram().data() + AreaAddress(p), &offsets[random() % 6], 8);
          break;
        case 1:
          std::memcpy(attacker->ram().data() + AreaAddress(p + 12), &lengths[random() % 5], 4);
          break;
        default: {
          const uint32_t bar = uint32_t(random() % 4);
          std::memcpy(attacker->ram().data() + AreaAddress(p + 8), &bar, 4);
        }
      }
      scribbles.fetch_add(1, std::memory_order_relaxed);
    }
  });
  int applied = 0;
  for (int i = 0; i < 300 || scribbles.load() < 5000; ++i) {
    attacker->WriteReg(pv::kRegDoorbell, uint32_t(batch.size()));
    const uint32_t status = Reg(attacker, pv::kRegBatchStatus);
    ASSERT_LT(status, pv::kResultCount);
    applied += status == 0;
    const uint32_t zero = 0;
    std::memcpy(attacker->ram().data() + AreaAddress(pv::kHeaderStatus), &zero, 4);
    std::memcpy(attacker->ram().data() + AreaAddress(pv::kHeaderDone), &zero, 4);
    std::memcpy(attacker->ram().data() + AreaAddress(op + pv::kOpResult), &zero, 4);
  }
  stop = true;
  scribbler.join();
  // The same batch, rewritten back to what it was: applied as it says.
  for (size_t i = 0; i < batch.size(); ++i) attacker->ram()[AreaAddress(i)] = batch[i];
  attacker->WriteReg(pv::kRegDoorbell, uint32_t(batch.size()));
  EXPECT_EQ(Reg(attacker, pv::kRegBatchStatus), 0u) << applied << " applied while rewritten";
  const uint64_t base = attacker->vgpu().vram_map()->static_base();
  EXPECT_EQ(Machine64(base + 0x300000 + 4088), ~0ull);
  const uint8_t* vram = world_->gpu().vram_mapping().data();
  const std::vector<uint8_t> zeros(64 * 1024, 0);
  EXPECT_EQ(std::memcmp(vram + base + kPd, zeros.data(), zeros.size()), 0)
      << "the registered directory was never stored into";
  const uint64_t vbase = victim->vgpu().vram_map()->static_base();
  for (uint64_t at = 0; at < 32 * kMiB; at += zeros.size()) {
    ASSERT_EQ(std::memcmp(vram + vbase + at, zeros.data(), zeros.size()), 0) << at;
  }
}

// The guest rewrites its call area from another thread while it rings: the host reads each batch
// once, so every doorbell is answered as some whole batch (applied, or refused with a code), and
// the tables only ever hold what validation allowed; another VM goes on unharmed.
TEST_F(PvHostTest, RewritingTheAreaWhileTheHostReadsItHurtsOnlyTheWriter) {
  FvTestVm* attacker = AddVm(FvMode::kPvMulticall, "attacker");
  FvTestVm* victim = AddVm(FvMode::kPvNaive, "victim");
  ASSERT_TRUE(attacker && victim);
  RegisterArea(attacker);
  RegisterArea(victim);
  pv::BatchBuilder setup(kAreaPages * 4096);
  setup.Attach(kPd, (1ull << 40) - 1, pv::SpaceKind::kChannel);
  const uint64_t pde = vm::pde::Make(vm::PdeTarget::kNone, 0, vm::PdeTarget::kVram, 0x200000);
  setup.Write(kPd, kPd, 0, std::span(&pde, 1));
  Ring(victim, setup.Finish());
  ASSERT_EQ(Reg(victim, pv::kRegBatchStatus), 0u);
  Ring(attacker, setup.Finish());
  ASSERT_EQ(Reg(attacker, pv::kRegBatchStatus), 0u);
  pv::BatchBuilder b(kAreaPages * 4096);
  std::vector<uint64_t> ptes(1000, vm::pte::Make(0x400000));
  b.Write(kPd, 0x200000, 0, ptes);
  std::vector<uint8_t> batch(b.Finish().begin(), b.Finish().end());
  // The batch is written once; the scribbler then flips its entries between mapped pages and VRAM
  // past the VM's (and its count and opcode) while the guest keeps ringing.
  for (size_t i = 0; i < batch.size(); ++i) attacker->ram()[AreaAddress(i)] = batch[i];
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> scribbles{0};
  std::thread scribbler([&] {
    const uint64_t good = vm::pte::Make(0x400000), bad = vm::pte::Make(40 * kMiB);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    while (!stop.load(std::memory_order_relaxed)) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const uint64_t entry = pv::kHeaderBytes + pv::kWriteFixedBytes + (x % 1000) * 8;
      const uint64_t value = (x >> 40) % 3 == 0 ? bad : good;
      // One 8-byte entry (never across a page: entries are 8-aligned) or a field of the op.
      if ((x >> 20) % 64 == 0) {
        const uint32_t count = uint32_t(x >> 32) % 2000;
        std::memcpy(attacker->ram().data() + AreaAddress(pv::kHeaderBytes + 40), &count, 4);
      } else {
        std::memcpy(attacker->ram().data() + AreaAddress(entry), &value, 8);
      }
      scribbles.fetch_add(1, std::memory_order_relaxed);
    }
  });
  const uint64_t base = attacker->vgpu().vram_map()->static_base();
  const uint64_t slice = 32 * kMiB;
  int applied = 0, refused = 0;
  // At least 300 doorbells, and on until the scribbler has been at it for a while (however the
  // threads are scheduled, the two overlap).
  for (int i = 0; i < 300 || scribbles.load() < 5000; ++i) {
    attacker->WriteReg(pv::kRegDoorbell, uint32_t(batch.size()));
    const uint32_t status = Reg(attacker, pv::kRegBatchStatus);
    ASSERT_LT(status, pv::kResultCount);
    (status == 0 ? applied : refused)++;
    // Results written back must not leave the header's status/done set for the next ring.
    const uint32_t zero = 0;
    std::memcpy(attacker->ram().data() + AreaAddress(pv::kHeaderStatus), &zero, 4);
    std::memcpy(attacker->ram().data() + AreaAddress(pv::kHeaderDone), &zero, 4);
    std::memcpy(attacker->ram().data() + AreaAddress(pv::kHeaderBytes + pv::kOpResult), &zero, 4);
  }
  stop = true;
  scribbler.join();
  // Whatever got in maps only the attacker's own slice.
  for (uint64_t e = 0; e < 1000; ++e) {
    const uint64_t pte = Machine64(base + 0x200000 + e * 8);
    if ((pte & vm::pte::kPresent) == 0) continue;
    const uint64_t a = vm::pte::Address(pte);
    if (vm::pte::TargetOf(pte) == vm::Target::kVram) {
      EXPECT_TRUE(a >= base && a < base + slice) << std::hex << a;
    } else {
      const uint64_t sys = attacker->vgpu().partition().sysram_base;
      EXPECT_TRUE(a >= sys && a < sys + 16 * kMiB) << std::hex << a;
    }
  }
  EXPECT_GE(applied + refused, 300);
  // The victim: its calls still work, its table untouched by the attacker.
  pv::BatchBuilder v(kAreaPages * 4096);
  const uint64_t mine = vm::pte::Make(0x123000);
  v.Write(kPd, 0x200000, 9, std::span(&mine, 1));
  Ring(victim, v.Finish());
  EXPECT_EQ(Reg(victim, pv::kRegBatchStatus), 0u);
  const uint64_t vbase = victim->vgpu().vram_map()->static_base();
  EXPECT_EQ(vm::pte::Address(Machine64(vbase + 0x200000 + 9 * 8)), vbase + 0x123000);
  EXPECT_EQ(Machine64(vbase + 0x200000 + 8 * 8), 0u);
}

// A flood of doorbells (garbage, empty, valid) costs the flooder only: bounded work each, the
// refusals counted, the log rate-limited.
TEST_F(PvHostTest, DoorbellFloodsAreRefusedAndCounted) {
  FvTestVm* vm = AddVm(FvMode::kPvNaive, "flood");
  ASSERT_NE(vm, nullptr);
  RegisterArea(vm);
  std::vector<uint8_t> garbage(kAreaPages * 4096, 0xff);
  for (size_t i = 0; i < garbage.size(); ++i) vm->ram()[AreaAddress(i)] = garbage[i];
  for (int i = 0; i < 20000; ++i) vm->WriteReg(pv::kRegDoorbell, uint32_t(i % 3 == 0 ? 4096 : i));
  EXPECT_EQ(vm->vgpu().pv()->counters().doorbells, 20000u);
  EXPECT_EQ(vm->vgpu().pv()->counters().batches_refused, 20000u);
  const std::string log = world_->log();
  EXPECT_NE(log.find("para-virtual call refused"), std::string::npos);
  EXPECT_LT(log.size(), 20000u) << "the refusals are logged rate-limited";
}

}  // namespace
}  // namespace gpuvm::aggregator
