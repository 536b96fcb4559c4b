// Isolation under para-virtualization (docs/PARAVIRT.md): a hostile pv VM attacks through its
// para-virtual calls, its call area and its BARs while a victim pv VM keeps running the unmodified
// guest driver (copies in and out, memsets and c = a + b kernels, checked every round). Each attack
// must be refused with its result code — or, where the guest only names its own memory, reach only
// that — counted against the attacker, and the victim's results must stay correct throughout.
//
// Both VMs live in this process (tests/fv_test_vm.h): the attacker's accesses go straight to its
// FullVirtGpu, exactly the calls gpuvm-dm would make for its trapped accesses; the attacker plays
// either a raw guest (its own call area, batches it builds itself) or a guest whose driver is
// subverted (calls through the driver's own writer, stores through its BAR3).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "aggregator/fv_gpu.h"
#include "gpu/hw/pbus.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/ramin.h"
#include "gpu/hw/vm.h"
#include "guest-pv-driver/driver.h"
#include "guest-pv-driver/driver_impl.h"
#include "pv/call_page.h"
#include "pv/protocol.h"
#include "tests/fv_test_vm.h"
#include "tests/isolation_victim.h"

namespace gpuvm::aggregator {
namespace {

namespace pf = gf100::pfifo;
namespace pbus = gf100::pbus;
namespace ramin = gf100::ramin;
namespace vm = gf100::vm;
using fv_testing::FvTestVm;
using pv::CallResult;
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kVmBytes = 64 * kMiB;
constexpr uint64_t kRamBytes = 64 * kMiB;
// The raw attacker's call area (guest-physical), its space and a table in its VRAM.
constexpr uint64_t kList = 0x3f00000, kArea = 0x3f10000;
constexpr uint32_t kAreaPages = 4;
constexpr uint64_t kPd = 0x2000000, kTable = 0x2100000;

guest::DriverOptions ParaVirtual() {
  guest::DriverOptions o;
  o.para_virtual = guest::DriverOptions::ParaVirtual::kOn;
  return o;
}

class PvIsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto w = fv_testing::FvTestWorld::Create({.gpu_vram_bytes = 256 * kMiB,
                                              .reserved_bytes = 32 * kMiB,
                                              .vram_policy = VramPolicy::kDynamic,
                                              .compute_engine = true,
                                              .compute_workers = 1});
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    world_ = std::move(*w);
    victim_ = AddVm("victim", FvMode::kPvMulticall);
    attacker_ = AddVm("attacker", FvMode::kPvNaive);
    ASSERT_TRUE(victim_ && attacker_);
  }
  void TearDown() override {
    StopVictim();
    world_.reset();
  }
  FvTestVm* AddVm(const std::string& name, FvMode mode) {
    FvVmOptions o;
    o.mode = mode;
    o.vram_bytes = kVmBytes;
    o.channels = 8;
    o.name = name;
    auto v = world_->AddVm(o, kRamBytes);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : nullptr;
  }

  // The victim: the isolation tests' workload (tests/isolation_victim.h) with kernels, its driver
  // on the PV window, on its own thread until ExpectVictimFine().
  void StartVictim() {
    victim_thread_ = std::thread([this] {
      const std::string error =
          fv_testing::RunVictim(victim_, ParaVirtual(), true, stop_victim_, rounds_);
      if (!error.empty()) Fail(error);
    });
    while (rounds_ < 1 && !Failed()) std::this_thread::yield();  // bound and running
  }
  void StopVictim() {
    stop_victim_ = true;
    if (victim_thread_.joinable()) victim_thread_.join();
  }
  void Fail(const std::string& why) {
    std::lock_guard lock(victim_mu_);
    victim_error_ = why;
    rounds_ = 1000;  // nothing more will come; let the waits go on
  }
  bool Failed() {
    std::lock_guard lock(victim_mu_);
    return !victim_error_.empty();
  }
  void ExpectVictimFine() {
    StopVictim();
    std::lock_guard lock(victim_mu_);
    EXPECT_TRUE(victim_error_.empty()) << victim_error_ << "\naggregator log:\n" << world_->log();
    EXPECT_GE(rounds_.load(), 2);
    EXPECT_EQ(victim_->vgpu().counters().faults, 0u);
    EXPECT_EQ(victim_->vgpu().refusals()[size_t(Refusal::kPageTableEntry)], 0u);
    EXPECT_GT(victim_->vgpu().pv()->tables().counters().calls, 0u) << "the victim used calls";
  }

  // ---- the raw attacker: its own call area and batches ----
  void RegisterArea() {
    std::vector<uint64_t> list(kAreaPages);
    for (uint32_t i = 0; i < kAreaPages; ++i) list[i] = kArea + i * 4096;
    std::memcpy(attacker_->ram().data() + kList, list.data(), list.size() * 8);
    attacker_->WriteReg(pv::kRegAreaListLo, uint32_t(kList));
    attacker_->WriteReg(pv::kRegAreaListHi, 0);
    attacker_->WriteReg(pv::kRegAreaPages, kAreaPages);
    ASSERT_EQ(attacker_->ReadReg(pv::kRegAreaStatus), 0u);
  }
  // Rings `bytes` as a batch; the batch's status.
  CallResult Ring(std::span<const uint8_t> bytes) {
    std::memcpy(attacker_->ram().data() + kArea, bytes.data(), bytes.size());
    attacker_->WriteReg(pv::kRegDoorbell, uint32_t(bytes.size()));
    return CallResult(attacker_->ReadReg(pv::kRegBatchStatus));
  }
  template <typename F>
  CallResult Call(F build) {
    pv::BatchBuilder b(kAreaPages * 4096);
    build(b);
    return Ring(b.Finish());
  }
  // A registered space at kPd whose PDE 0 names a small table at kTable.
  void RawSpace() {
    RegisterArea();
    const uint64_t pde = vm::pde::Make(vm::PdeTarget::kNone, 0, vm::PdeTarget::kVram, kTable);
    ASSERT_EQ(Call([&](pv::BatchBuilder& b) {
                b.Attach(kPd, (1ull << 40) - 1, pv::SpaceKind::kChannel);
                b.Write(kPd, kPd, 0, std::span(&pde, 1));
              }),
              CallResult::kOk);
  }
  uint64_t Machine64(uint64_t machine) {
    uint64_t v;
    std::memcpy(&v, world_->gpu().vram_mapping().data() + machine, 8);
    return v;
  }
  uint64_t AttackerBase() { return attacker_->vgpu().vram_map()->static_base(); }

  std::unique_ptr<fv_testing::FvTestWorld> world_;
  FvTestVm* victim_ = nullptr;
  FvTestVm* attacker_ = nullptr;
  std::thread victim_thread_;
  std::atomic<bool> stop_victim_{false};
  std::atomic<int> rounds_{0};
  std::mutex victim_mu_;
  std::string victim_error_;
};

// PTEs naming memory that is not the attacker's: refused with their codes, nothing written.
TEST_F(PvIsolationTest, PtesAtForeignVramOrPastTheRamAreRefused) {
  StartVictim();
  RawSpace();
  const uint64_t victim_base = victim_->vgpu().vram_map()->static_base();
  const vm::pte::Flags sys{.target = vm::Target::kSysramSnooped};
  struct Case {
    const char* what;
    uint64_t pte;
    CallResult code;
  };
  const Case cases[] = {
      {"VRAM past its own", vm::pte::Make(kVmBytes), CallResult::kForeignVram},
      {"the victim's VRAM past the attacker's by its machine address",
       vm::pte::Make(victim_base + kVmBytes), CallResult::kForeignVram},
      {"host memory past its RAM", vm::pte::Make(kRamBytes, sys), CallResult::kForeignSysram},
      {"another VM's bus window", vm::pte::Make(2ull << 36, sys), CallResult::kForeignSysram},
      {"the invalid target", vm::pte::Make(0, {.target = vm::Target::kInvalid}),
       CallResult::kBadEntry},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(Call([&](pv::BatchBuilder& b) { b.Write(kPd, kTable, 7, std::span(&c.pte, 1)); }),
              c.code);
    EXPECT_EQ(Machine64(AttackerBase() + kTable + 7 * 8), 0u);
  }
  EXPECT_EQ(attacker_->vgpu().pv()->counters().calls_refused, std::size(cases));
  // A machine address inside its own range is only a guest address: its own VRAM there.
  const uint64_t inside = vm::pte::Make(victim_base & (kVmBytes - 1));
  ASSERT_EQ(Call([&](pv::BatchBuilder& b) { b.Write(kPd, kTable, 7, std::span(&inside, 1)); }),
            CallResult::kOk);
  EXPECT_EQ(vm::pte::Address(Machine64(AttackerBase() + kTable + 7 * 8)),
            AttackerBase() + (victim_base & (kVmBytes - 1)));
  ExpectVictimFine();
}

// The reserved area's machine address, written by a guest, is a guest address: the PTE maps the
// attacker's own VRAM there (relocated into its slice), and what the GPU reads through it is the
// attacker's own memory, never the aggregator's.
TEST_F(PvIsolationTest, APteAtTheReservedAreasAddressMapsOnlyItsOwnVram) {
  StartVictim();
  auto driver = guest::Driver::Create(attacker_, ParaVirtual());
  ASSERT_TRUE(driver.ok()) << driver.status().ToString();
  auto ctx = (*driver)->CreateContext();
  ASSERT_TRUE(ctx.ok());
  auto buffer = (*ctx)->AllocDevice(4096);  // a small-page mapping of its own
  ASSERT_TRUE(buffer.ok());
  // Its PTE, rewritten through its own writer: guest VRAM 1 MiB (the reserved area's machine
  // address on this GPU), read and written through the GPU.
  guest::VmSpace* space = (*ctx)->impl()->space();
  const uint64_t pd_machine = AttackerBase() + space->directory().vram;
  const uint64_t pde = Machine64(pd_machine + (buffer->va >> 27) * 8);
  const uint64_t table = vm::pde::SmallTableAddress(pde) - AttackerBase();
  const uint64_t index = (buffer->va & ((1ull << 27) - 1)) >> 12;
  guest::PageTableWriter* writer = (*driver)->impl()->writer();
  const guest::PageTableRef t{table, 0, 32768};
  const uint64_t reserved_pte = vm::pte::Make(kMiB);
  ASSERT_TRUE(writer->WriteEntries(space->directory(), t, index, std::span(&reserved_pte, 1)).ok());
  ASSERT_TRUE(writer->Flush(space->directory()).ok());
  EXPECT_EQ(vm::pte::Address(Machine64(AttackerBase() + table + index * 8)), AttackerBase() + kMiB);
  std::vector<uint8_t> seen(4096), own(4096), reserved(4096);
  guest::Channel* ch = (*ctx)->default_channel();
  // A DMA copy by the GPU (not the BAR1 path, which the host translates in software).
  auto host = (*ctx)->AllocHost(4096);
  ASSERT_TRUE(host.ok());
  auto f = ch->CopyAsync(host->va, buffer->va, 4096);
  ASSERT_TRUE(f.ok() && ch->Wait(*f, std::chrono::seconds(30)).ok());
  std::memcpy(seen.data(), host->host, 4096);
  std::memcpy(own.data(), world_->gpu().vram_mapping().data() + AttackerBase() + kMiB, 4096);
  std::memcpy(reserved.data(), world_->gpu().vram_mapping().data() + kMiB, 4096);
  EXPECT_EQ(seen, own);
  EXPECT_NE(own, reserved) << "the test needs the two to differ";
  EXPECT_EQ(attacker_->vgpu().counters().faults, 0u);
  ExpectVictimFine();
}

// Tables outside its VRAM, tables it never registered, counts past the table or the op, unknown
// opcodes: each refused with its code, nothing applied.
TEST_F(PvIsolationTest, BadTablesCountsAndOpcodesAreRefused) {
  StartVictim();
  RawSpace();
  const uint64_t outside = vm::pde::Make(vm::PdeTarget::kNone, 0, vm::PdeTarget::kVram, kVmBytes);
  EXPECT_EQ(Call([&](pv::BatchBuilder& b) { b.Write(kPd, kPd, 1, std::span(&outside, 1)); }),
            CallResult::kNotInVram);
  EXPECT_EQ(Call([&](pv::BatchBuilder& b) { b.Attach(kVmBytes, 0, pv::SpaceKind::kChannel); }),
            CallResult::kNotInVram);
  const uint64_t pte = vm::pte::Make(0x10000);
  EXPECT_EQ(Call([&](pv::BatchBuilder& b) { b.Write(kPd, 0x2200000, 0, std::span(&pte, 1)); }),
            CallResult::kNotRegistered);
  EXPECT_EQ(Call([&](pv::BatchBuilder& b) { b.Write(0x2400000, kTable, 0, std::span(&pte, 1)); }),
            CallResult::kNotRegistered);
  EXPECT_EQ(Call([&](pv::BatchBuilder& b) { b.Clear(kPd, kTable, 32760, 100); }),
            CallResult::kOutOfTable);
  // Counts past the op (and so past what the page holds), an unknown opcode.
  pv::BatchBuilder b(kAreaPages * 4096);
  const uint32_t op = b.Write(kPd, kTable, 0, std::span(&pte, 1));
  std::vector<uint8_t> bytes(b.Finish().begin(), b.Finish().end());
  const uint32_t count = 1u << 20;
  std::memcpy(bytes.data() + op + 40, &count, 4);
  EXPECT_EQ(Ring(bytes), CallResult::kBadOp);
  const uint16_t unknown = 0x99;
  std::memcpy(bytes.data() + op + 40, "\1\0\0\0", 4);
  std::memcpy(bytes.data() + op + pv::kOpCode, &unknown, 2);
  EXPECT_EQ(Ring(bytes), CallResult::kBadOp);
  EXPECT_EQ(Machine64(AttackerBase() + kTable), 0u);
  EXPECT_EQ(attacker_->vgpu().pv()->counters().batches_refused, 2u);
  ExpectVictimFine();
}

// Stores of a subverted driver into its registered tables — through its own BAR3 mapping of them
// and through PRAMIN — are refused: the host's copy stays, and so does the attacker's own work.
TEST_F(PvIsolationTest, StoresIntoRegisteredTablesAreRefused) {
  StartVictim();
  auto driver = guest::Driver::Create(attacker_, ParaVirtual());
  ASSERT_TRUE(driver.ok()) << driver.status().ToString();
  auto ctx = (*driver)->CreateContext();
  ASSERT_TRUE(ctx.ok());
  auto buffer = (*ctx)->AllocDevice(64 * 1024);
  ASSERT_TRUE(buffer.ok());
  const guest::PageTableRef dir = (*ctx)->impl()->space()->directory();
  const uint64_t machine = AttackerBase() + dir.vram;
  std::vector<uint64_t> before(512);
  std::memcpy(before.data(), world_->gpu().vram_mapping().data() + machine, 4096);
  const uint64_t refused = attacker_->vgpu().counters().refused_memory;
  // A PDE aimed at the victim's VRAM, by BAR3 (the directory is mapped there) and by PRAMIN.
  const uint64_t evil = vm::pde::Make(
      vm::PdeTarget::kVram, victim_->vgpu().vram_map()->static_base(), vm::PdeTarget::kNone, 0);
  attacker_->Write64(gpu::Bar::k3, dir.bar3_offset + 8 * 300, evil);
  ASSERT_TRUE(attacker_->WriteBlock(gpu::Bar::k3, dir.bar3_offset, before.data(), 4096).ok());
  attacker_->WriteReg(pbus::kPraminBase, uint32_t(dir.vram >> pbus::kPraminBaseShift));
  attacker_->Write(gpu::Bar::k0, pbus::kPraminWindow + (dir.vram & 0xffff) + 8 * 301,
                   gpu::Width::k32, uint32_t(evil));
  std::vector<uint64_t> after(512);
  std::memcpy(after.data(), world_->gpu().vram_mapping().data() + machine, 4096);
  EXPECT_EQ(after, before);
  EXPECT_GE(attacker_->vgpu().counters().refused_memory, refused + 1 + 1024 + 1);
  // Reads give nothing of the host's copy.
  EXPECT_EQ(attacker_->Read64(gpu::Bar::k3, dir.bar3_offset + 8 * 288), 0u);
  // Its own work goes on, correct.
  std::vector<uint32_t> in(16384, 0x5a5a5a5a), out(16384);
  guest::Channel* ch = (*ctx)->default_channel();
  ASSERT_TRUE(ch->CopyHostToDevice(buffer->va, in.data(), 65536).ok());
  ASSERT_TRUE(ch->CopyDeviceToHost(out.data(), buffer->va, 65536).ok());
  EXPECT_EQ(in, out);
  // Detaching its space while its channel uses it: BUSY, the channel keeps its tables.
  Status busy = (*driver)->impl()->writer()->DetachSpace(dir);
  EXPECT_EQ(busy.code(), StatusCode::kFailedPrecondition) << busy.ToString();
  EXPECT_NE(busy.message().find("BUSY"), std::string::npos);
  ASSERT_TRUE(ch->CopyDeviceToHost(out.data(), buffer->va, 65536).ok());
  EXPECT_EQ(in, out);
  ExpectVictimFine();
}

// A channel whose instance block names a directory that is no registered pv space never runs: the
// GPU would walk whatever the guest left there.
TEST_F(PvIsolationTest, AChannelOnAnUnregisteredDirectoryNeverRuns) {
  StartVictim();
  RawSpace();
  constexpr uint64_t kInst = 0x2800000, kPlaylist = 0x2801000, kFake = 0x2810000;
  auto pramin32 = [&](uint64_t address, uint32_t value) {
    attacker_->WriteReg(pbus::kPraminBase, uint32_t(address >> pbus::kPraminBaseShift));
    attacker_->WriteReg(pbus::kPraminWindow + uint32_t(address & 0xffff), value);
  };
  // A "directory" of the guest's own making, full of entries aimed at the victim.
  const uint64_t evil = vm::pde::Make(
      vm::PdeTarget::kVram, victim_->vgpu().vram_map()->static_base(), vm::PdeTarget::kNone, 0);
  for (uint32_t i = 0; i < 64; ++i) {
    pramin32(kFake + 8 * i, uint32_t(evil));
    pramin32(kFake + 8 * i + 4, uint32_t(evil >> 32));
  }
  pramin32(kInst + ramin::kPageDirLo, uint32_t(kFake));
  pramin32(kInst + ramin::kPageDirHi, 0);
  attacker_->WriteReg(pf::kChanTable + 3 * pf::kChanTableStride,
                      pf::kChanValid | uint32_t(kInst >> 12));
  pramin32(kPlaylist, 3);
  pramin32(kPlaylist + 4, pf::kPlaylistEntryWord1);
  attacker_->WriteReg(pf::kPlaylistWr, uint32_t(kPlaylist >> 12));
  attacker_->WriteReg(pf::kPlaylistWrLen, 1);
  EXPECT_EQ(attacker_->vgpu().counters().shadow_channels_built, 0u);
  EXPECT_EQ(attacker_->vgpu().counters().refused_channels, 1u);
  EXPECT_NE(world_->log().find("not an attached para-virtual channel space"), std::string::npos)
      << world_->log();
  ExpectVictimFine();
}

// The attacker rewrites its call area from another thread while it rings, and floods doorbells:
// every doorbell answered with a code, whatever got in maps only its own slice, the victim fine.
TEST_F(PvIsolationTest, RewritingTheAreaAndDoorbellFloodsHurtOnlyTheAttacker) {
  StartVictim();
  RawSpace();
  pv::BatchBuilder b(kAreaPages * 4096);
  std::vector<uint64_t> ptes(1024, vm::pte::Make(0x400000));
  b.Write(kPd, kTable, 0, ptes);
  std::vector<uint8_t> batch(b.Finish().begin(), b.Finish().end());
  std::memcpy(attacker_->ram().data() + kArea, batch.data(), batch.size());
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> scribbles{0};
  std::thread scribbler([&] {
    uint64_t x = 0x2545f4914f6cdd1dull;
    while (!stop.load(std::memory_order_relaxed)) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const uint64_t at = pv::kHeaderBytes + pv::kWriteFixedBytes + (x % 1024) * 8;
      const uint64_t value = (x >> 40) % 2 ? vm::pte::Make(kVmBytes + 0x1000) : ptes[0];
      std::memcpy(attacker_->ram().data() + kArea + at, &value, 8);
      if ((x >> 24) % 97 == 0) {  // now and then the op's count or the batch's length
        const uint32_t junk = uint32_t(x >> 32);
        std::memcpy(attacker_->ram().data() + kArea + ((x >> 8) % 2 ? 12 : 72), &junk, 4);
      }
      scribbles.fetch_add(1, std::memory_order_relaxed);
    }
  });
  for (int i = 0; i < 2000 || scribbles.load() < 5000; ++i) {
    attacker_->WriteReg(pv::kRegDoorbell, uint32_t(i % 5 == 0 ? 24 : batch.size()));
    ASSERT_LT(attacker_->ReadReg(pv::kRegBatchStatus), pv::kResultCount);
    const uint32_t zero = 0;
    std::memcpy(attacker_->ram().data() + kArea + pv::kHeaderStatus, &zero, 4);
    std::memcpy(attacker_->ram().data() + kArea + pv::kHeaderDone, &zero, 4);
    std::memcpy(attacker_->ram().data() + kArea + pv::kHeaderBytes + pv::kOpResult, &zero, 4);
  }
  stop = true;
  scribbler.join();
  for (uint64_t e = 0; e < 1024; ++e) {
    const uint64_t p = Machine64(AttackerBase() + kTable + e * 8);
    if ((p & vm::pte::kPresent) == 0) continue;
    EXPECT_GE(vm::pte::Address(p), AttackerBase());
    EXPECT_LT(vm::pte::Address(p), AttackerBase() + kVmBytes);
  }
  const PvDeviceCounters& c = attacker_->vgpu().pv()->counters();
  EXPECT_GE(c.doorbells, 2000u);
  EXPECT_GT(c.batches_refused, 0u);  // every fifth one at least (24 bytes: no batch)
  ExpectVictimFine();
}

}  // namespace
}  // namespace gpuvm::aggregator
