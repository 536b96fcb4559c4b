// The compute class (0x90c0) as a driver programs it: launch state gathered from methods arrives at
// the injected ComputeEngine, jobs run slice by slice, and their faults become channel errors.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gpu/hw/classes.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pgraph.h"
#include "gpu/sim/device.h"
#include "gpu/sim/testing/test_driver.h"

namespace gpuvm::sim {
namespace {

namespace cp = gf100::compute;
namespace pf = gf100::pfifo;
using testing::Channel;
using testing::TestDriver;
using testing::Vm;

constexpr uint64_t kVramSize = 32ull << 20;
constexpr uint32_t kSubc = 1;

// A test double for the compute engine: records launches; each job runs `slices` slices, then
// writes 0xc0ffee + slice count at `target` (through the channel's memory) or fails as configured.
class FakeEngine final : public ComputeEngine {
 public:
  struct Behaviour {
    int slices = 3;
    uint64_t target = 0;  // 0: write into constant buffer 0 at offset 0x40
    bool fail_other = false;
    // With fail_other: the kind of fault, and the only channel that fails (-1: every channel).
    ComputeFault::Kind fail_kind = ComputeFault::Kind::kInvalidCode;
    int fail_channel = -1;
    // Called at the start of every slice (on the device's engine thread).
    std::function<void()> on_slice;
    // Jobs can be switched out (the image is their slice count) and drained (drained() holds
    // `drain_slices` slices after Drain()).
    bool preemptible = false;
    int drain_slices = 2;
  };
  int resumes = 0;
  Behaviour behaviour;
  std::vector<ComputeLaunch> launches;
  std::vector<uint64_t> space_ids;
  int flushes = 0;
  int slices_run = 0;
  int yield_requests = 0;
  int yield_clears = 0;
  void RequestYield() override { ++yield_requests; }
  void ClearYield() override { ++yield_clears; }

  class Job final : public ComputeJob {
   public:
    Job(FakeEngine* engine, const ComputeLaunch& launch, ChannelMemory* memory)
        : engine_(engine), launch_(launch), memory_(memory) {}
    SliceOutcome RunSlice() override {
      if (engine_->behaviour.on_slice) engine_->behaviour.on_slice();
      ++engine_->slices_run;
      if (++slices_ < engine_->behaviour.slices) return SliceOutcome::kMore;
      if (engine_->behaviour.fail_other &&
          (engine_->behaviour.fail_channel < 0 ||
           launch_.channel == uint32_t(engine_->behaviour.fail_channel))) {
        fault_.kind = engine_->behaviour.fail_kind;
        fault_.message = "bad opcode at 0x10";
        return SliceOutcome::kFaulted;
      }
      const uint64_t va = engine_->behaviour.target != 0 ? engine_->behaviour.target
                                                         : launch_.const_buffers[0].address + 0x40;
      MemoryFault mf;
      uint8_t* p = memory_->Translate(va, 4, true, &mf);
      if (p == nullptr) {
        fault_.kind = ComputeFault::Kind::kMmu;
        fault_.mmu = mf;
        fault_.message = "st.global";
        return SliceOutcome::kFaulted;
      }
      const uint32_t v = 0xc0ffee + slices_;
      std::memcpy(p, &v, 4);
      instructions_ += 100;
      return SliceOutcome::kDone;
    }
    const ComputeFault& fault() const override { return fault_; }
    uint64_t thread_instructions() const override { return instructions_; }
    void Drain() override {
      if (drain_at_ < 0) drain_at_ = slices_ + engine_->behaviour.drain_slices;
    }
    bool drained() const override { return drain_at_ >= 0 && slices_ >= drain_at_; }
    bool SaveContext(std::vector<uint8_t>* image) override {
      if (!engine_->behaviour.preemptible) return false;
      image->resize(sizeof slices_);
      std::memcpy(image->data(), &slices_, sizeof slices_);
      return true;
    }
    void set_slices(int slices) { slices_ = slices; }

   private:
    FakeEngine* engine_;
    int drain_at_ = -1;
    ComputeLaunch launch_;
    ChannelMemory* memory_;
    int slices_ = 0;
    uint64_t instructions_ = 0;
    ComputeFault fault_;
  };

  std::unique_ptr<ComputeJob> Start(const ComputeLaunch& launch, ChannelMemory* memory) override {
    launches.push_back(launch);
    space_ids.push_back(memory->AddressSpaceId());
    return std::make_unique<Job>(this, launch, memory);
  }
  void FlushCodeCache() override { ++flushes; }
  std::unique_ptr<ComputeJob> Resume(const std::vector<uint8_t>& image,
                                     ChannelMemory* memory) override {
    if (!behaviour.preemptible) return nullptr;
    ++resumes;
    auto job = std::make_unique<Job>(this, launches.back(), memory);
    int slices = 0;
    if (image.size() == sizeof slices) std::memcpy(&slices, image.data(), sizeof slices);
    job->set_slices(slices);
    return job;
  }
};

class SimComputeLaunchTest : public ::testing::Test {
 protected:
  void Create(std::shared_ptr<FakeEngine> engine, bool threaded = false) {
    engine_ = engine;
    SimDeviceOptions options;
    options.vram_size = kVramSize;
    options.threaded = threaded;
    options.compute_engine = engine;
    auto device = SimDevice::Create(options);
    ASSERT_TRUE(device.ok());
    device_ = std::move(device).value();
    driver_ = std::make_unique<TestDriver>(device_.get(), kVramSize);
    vm_ = driver_->CreateVm();
    cb_va_ = vm_->AllocMapped(0x1000, &cb_phys_);
    query_va_ = vm_->AllocMapped(0x1000, &query_phys_);
    vm_->Flush();
    ch_ = driver_->CreateChannel(4, vm_);
    ch_->Inc(kSubc, gf100::host::kSetObject, {gf100::kClassCompute});
  }

  void ProgramLaunch(Channel* ch = nullptr) {
    if (ch == nullptr) ch = ch_;
    ch->Inc(kSubc, cp::kGridDimYX, {(3u << 16) | 2});
    ch->Inc(kSubc, cp::kGridDimZ, {4});
    ch->Inc(kSubc, cp::kBlockDimYX, {(2u << 16) | 32});
    ch->Inc(kSubc, cp::kBlockDimZ, {1});
    ch->Inc(kSubc, cp::kSharedSize, {1024});
    ch->Inc(kSubc, cp::kSharedBase, {0xfe000000});
    ch->Inc(kSubc, cp::kLocalBase, {0xff000000});
    ch->Inc(kSubc, cp::kCodeAddressHigh, {0x1, 0x20000000});
    ch->Inc(kSubc, cp::kCpStartId, {0x40});
    ch->Inc(kSubc, cp::kTempAddressHigh, {0x0, 0x30000000, 0x0, 0x100000});
    // Constant buffer 0: 256 bytes at cb_va_, two parameter words uploaded at offset 8.
    ch->Inc(kSubc, cp::kCbSize, {256, uint32_t(cb_va_ >> 32), uint32_t(cb_va_), 8});
    ch->Inc(kSubc, cp::kCbData, {0x11111111, 0x22222222});
    ch->Inc(kSubc, cp::kCbBind, {(0u << cp::kCbBindIndexShift) | cp::kCbBindValid});
    ch->Inc(kSubc, cp::kFlush, {cp::kFlushCode});
    ch->Inc(kSubc, cp::kLaunch, {0});
    ch->Inc(kSubc, cp::kQueryAddressHigh,
            {uint32_t(query_va_ >> 32), uint32_t(query_va_), 0x5151, cp::kQueryGetShort});
  }

  // Creates the device on `engine` with interrupts enabled, launches once and runs until idle;
  // returns the launching channel's error.
  ChannelError LaunchWithInterrupts(std::shared_ptr<FakeEngine> engine) {
    Create(engine);
    driver_->EnableInterrupts();
    ProgramLaunch();
    ch_->Submit();
    device_->RunUntilIdle();
    return device_->channel_error(4);
  }

  std::shared_ptr<FakeEngine> engine_;
  std::unique_ptr<SimDevice> device_;
  std::unique_ptr<TestDriver> driver_;
  Vm* vm_ = nullptr;
  Channel* ch_ = nullptr;
  uint64_t cb_va_ = 0, cb_phys_ = 0, query_va_ = 0, query_phys_ = 0;
};

TEST_F(SimComputeLaunchTest, LaunchWithoutEngineIsAChannelError) {
  Create(nullptr);
  ProgramLaunch();
  ch_->Submit();
  device_->RunUntilIdle();
  const ChannelError e = device_->channel_error(4);
  EXPECT_EQ(e.kind, ChannelError::Kind::kNoComputeEngine);
  EXPECT_EQ(e.method, cp::kLaunch);
  EXPECT_NE(e.message.find("no compute engine"), std::string::npos) << e.message;
  EXPECT_EQ(driver_->Read32(query_phys_), 0u);  // nothing after the LAUNCH ran
  EXPECT_TRUE(device_->ReadReg(pf::kSubfifo + pf::kSubfifoIntr) & pf::kSubfifoIntrIllegalMthd);
}

TEST_F(SimComputeLaunchTest, LaunchStateArrivesAndJobRunsInSlices) {
  Create(std::make_shared<FakeEngine>());
  ProgramLaunch();
  ch_->Submit();
  device_->RunUntilIdle();
  ASSERT_TRUE(device_->channel_error(4).ok()) << device_->channel_error(4).message;
  ASSERT_EQ(engine_->launches.size(), 1u);
  const ComputeLaunch& l = engine_->launches[0];
  EXPECT_EQ(l.channel, 4u);
  EXPECT_EQ(l.grid_x, 2u);
  EXPECT_EQ(l.grid_y, 3u);
  EXPECT_EQ(l.grid_z, 4u);
  EXPECT_EQ(l.block_x, 32u);
  EXPECT_EQ(l.block_y, 2u);
  EXPECT_EQ(l.block_z, 1u);
  EXPECT_EQ(l.shared_size, 1024u);
  EXPECT_EQ(l.shared_base, 0xfe000000u);
  EXPECT_EQ(l.local_base, 0xff000000u);
  EXPECT_EQ(l.code_address, 0x120000000ull);
  EXPECT_EQ(l.entry_offset, 0x40u);
  EXPECT_EQ(l.temp_address, 0x30000000ull);
  EXPECT_EQ(l.temp_size, 0x100000ull);
  EXPECT_TRUE(l.const_buffers[0].valid);
  EXPECT_EQ(l.const_buffers[0].address, cb_va_);
  EXPECT_EQ(l.const_buffers[0].size, 256u);
  EXPECT_FALSE(l.const_buffers[1].valid);
  EXPECT_EQ(engine_->space_ids[0],
            device_->mmu_for_testing()
                ->FindSpace({gf100::vm::Target::kVram, vm_->page_directory()})
                ->id());
  EXPECT_EQ(engine_->flushes, 1);
  EXPECT_EQ(engine_->slices_run, 3);
  // The upload, the job's own write, and the query written after the grid finished.
  EXPECT_EQ(driver_->Read32(cb_phys_ + 8), 0x11111111u);
  EXPECT_EQ(driver_->Read32(cb_phys_ + 12), 0x22222222u);
  EXPECT_EQ(driver_->Read32(cb_phys_ + 0x40), 0xc0ffee + 3u);
  EXPECT_EQ(driver_->Read32(query_phys_), 0x5151u);
  EXPECT_GT(device_->channel_stats(4).engine_busy_ns[uint32_t(pf::Engine::kPgraph)], 0u);
  EXPECT_EQ(device_->ReadReg(pf::kEngineChannel),
            pf::kEngineChannelValid | uint32_t(ch_->instance() >> 12));
}

TEST_F(SimComputeLaunchTest, OtherChannelsRunBetweenSlices) {
  auto engine = std::make_shared<FakeEngine>();
  engine->behaviour.slices = 5;
  Create(engine);
  Channel* other = driver_->CreateChannel(7, vm_);
  ProgramLaunch();
  ch_->Submit();
  // The other channel releases a semaphore; it gets its turn while the grid is still running.
  other->Inc(0, gf100::host::kSemaphoreA,
             {uint32_t(query_va_ >> 32), uint32_t(query_va_ + 0x100), 9,
              gf100::host::kSemOpRelease | gf100::host::kSemReleaseSize4});
  other->Submit();
  bool other_done_before_grid = false;
  while (device_->RunUntilIdle(1) == 1) {
    if (driver_->Read32(query_phys_ + 0x100) == 9 && engine_->slices_run < 5) {
      other_done_before_grid = true;
    }
  }
  EXPECT_TRUE(other_done_before_grid);
  EXPECT_EQ(driver_->Read32(query_phys_), 0x5151u);
}

TEST_F(SimComputeLaunchTest, MmuFaultInAJobBecomesVmFaultAndChannelError) {
  auto engine = std::make_shared<FakeEngine>();
  engine->behaviour.target = 0x7000000000;  // unmapped
  const ChannelError e = LaunchWithInterrupts(engine);
  EXPECT_EQ(e.kind, ChannelError::Kind::kMmuFault);
  EXPECT_EQ(e.fault.va, 0x7000000000ull);
  EXPECT_TRUE(e.fault.write);
  EXPECT_EQ(e.fault.reason, gf100::FaultReason::kPtNotPresent);
  const uint32_t rec = pf::kVmFault + uint32_t(gf100::FaultUnit::kPgraph) * pf::kVmFaultStride;
  EXPECT_EQ(device_->ReadReg(rec + pf::kVmFaultInst), uint32_t(ch_->instance() >> 12));
  EXPECT_EQ(device_->ReadReg(rec + pf::kVmFaultAddrLo), 0u);
  EXPECT_EQ(device_->ReadReg(rec + pf::kVmFaultAddrHi), 0x70u);
  EXPECT_EQ(device_->ReadReg(rec + pf::kVmFaultFlags),
            uint32_t(gf100::FaultReason::kPtNotPresent) | pf::kVmFaultWrite);  // GPC client 0
  EXPECT_TRUE(device_->interrupt_asserted());
  EXPECT_EQ(driver_->Read32(query_phys_), 0u);
}

TEST_F(SimComputeLaunchTest, OtherJobFaultsRaisePgraphTrap) {
  auto engine = std::make_shared<FakeEngine>();
  engine->behaviour.fail_other = true;
  const ChannelError e = LaunchWithInterrupts(engine);
  EXPECT_EQ(e.kind, ChannelError::Kind::kComputeFault);
  EXPECT_NE(e.message.find("bad opcode"), std::string::npos) << e.message;
  EXPECT_TRUE(device_->ReadReg(gf100::pgraph::kIntr) & gf100::pgraph::kIntrTrap);
  EXPECT_TRUE(device_->interrupt_asserted());
  device_->WriteReg(gf100::pgraph::kIntr, gf100::pgraph::kIntrTrap);
  EXPECT_FALSE(device_->interrupt_asserted());
}

// The driver learns why a job failed from the MP's error registers, found the way nouveau walks
// them: 0x400108 (GPC) -> 0x400118 (GPC 0) -> 0x502c90 (TPC 0) -> 0x504508 (MP) -> 0x504648/650.
TEST_F(SimComputeLaunchTest, TrapReasonIsInTheMpErrorRegisters) {
  namespace pg = gf100::pgraph;
  struct Case {
    ComputeFault::Kind kind;
    pg::MpWarpError warp;
    uint32_t global;
  };
  const Case cases[] = {
      {ComputeFault::Kind::kMisaligned, pg::MpWarpError::kMisalignedAddr, 0},
      {ComputeFault::Kind::kInvalidCode, pg::MpWarpError::kIllegalInstrEncoding, 0},
      {ComputeFault::Kind::kOutOfRange, pg::MpWarpError::kOorAddr, 0},
      {ComputeFault::Kind::kInvalidLaunch, pg::MpWarpError::kIllegalInstrParam, 0},
      {ComputeFault::Kind::kTrap, pg::MpWarpError::kNone, pg::kMpGlobalBptInt},
      {ComputeFault::Kind::kAssert, pg::MpWarpError::kNone, pg::kMpGlobalBptPause},
      {ComputeFault::Kind::kBarrierDeadlock, pg::MpWarpError::kNone, pg::kMpGlobalTimeout},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(int(c.kind));
    auto engine = std::make_shared<FakeEngine>();
    engine->behaviour.fail_other = true;
    engine->behaviour.fail_kind = c.kind;
    ASSERT_EQ(LaunchWithInterrupts(engine).kind, ChannelError::Kind::kComputeFault);
    ASSERT_TRUE(device_->ReadReg(pg::kIntr) & pg::kIntrTrap);
    EXPECT_EQ(device_->ReadReg(pg::kTrap), pg::kTrapGpc);
    EXPECT_EQ(device_->ReadReg(pg::kTrapGpcMask), 1u);
    EXPECT_EQ(device_->ReadReg(pg::kGpc0TrapStatus), pg::kGpcTrapTpc0);
    EXPECT_EQ(device_->ReadReg(pg::kTpc0TrapStatus), pg::kTpcTrapMp);
    EXPECT_EQ(device_->ReadReg(pg::kTpc0MpWarpError), uint32_t(c.warp));
    EXPECT_EQ(device_->ReadReg(pg::kTpc0MpGlobalError), c.global);
    EXPECT_EQ(device_->ReadReg(pg::kCurrentContext), uint32_t(ch_->instance() >> 12));
    // nouveau's acknowledgement, innermost first.
    device_->WriteReg(pg::kTpc0MpWarpError, 0);
    device_->WriteReg(pg::kTpc0MpGlobalError, c.global);
    device_->WriteReg(pg::kGpc0TrapStatus, pg::kGpcTrapTpc0);
    device_->WriteReg(pg::kTrapGpcMask, 1);
    device_->WriteReg(pg::kTrap, pg::kTrapGpc);
    device_->WriteReg(pg::kIntr, pg::kIntrTrap);
    EXPECT_EQ(device_->ReadReg(pg::kTpc0TrapStatus), 0u);
    EXPECT_EQ(device_->ReadReg(pg::kTrap), 0u);
    EXPECT_EQ(device_->ReadReg(pg::kTrapGpcMask), 0u);
    EXPECT_EQ(device_->ReadReg(pg::kGpc0TrapStatus), 0u);
    EXPECT_FALSE(device_->interrupt_asserted());
  }
}

// D1: while a trap is unacknowledged, PGRAPH's ENGINE_CHANNEL / ENG_STATE / context registers
// name the channel that trapped, though other channels keep running compute on PGRAPH; a second
// trap waits for the first to be acknowledged.
TEST_F(SimComputeLaunchTest, TrapLatchesPgraphChannelUntilAcknowledged) {
  namespace pg = gf100::pgraph;
  auto engine = std::make_shared<FakeEngine>();
  engine->behaviour.fail_other = true;
  engine->behaviour.fail_channel = 4;
  Create(engine);
  driver_->EnableInterrupts();
  Channel* other = driver_->CreateChannel(5, vm_);
  other->Inc(kSubc, gf100::host::kSetObject, {gf100::kClassCompute});
  ProgramLaunch();
  ProgramLaunch(other);
  ProgramLaunch(other);  // keeps PGRAPH busy with channel 5 well after channel 4 trapped
  ch_->Submit();
  other->Submit();
  device_->RunUntilIdle();
  ASSERT_EQ(device_->channel_error(4).kind, ChannelError::Kind::kComputeFault);
  ASSERT_TRUE(device_->channel_error(5).ok()) << device_->channel_error(5).message;
  EXPECT_EQ(engine_->launches.size(), 3u);
  const uint32_t pgraph = 4 * uint32_t(pf::Engine::kPgraph);
  EXPECT_EQ(device_->ReadReg(pf::kEngineChannel + pgraph),
            pf::kEngineChannelValid | uint32_t(ch_->instance() >> 12));
  EXPECT_EQ(device_->ReadReg(pf::kEngState + pgraph), pf::kEngStateFaulted | 4u);
  EXPECT_EQ(device_->ReadReg(pg::kCurrentContext), uint32_t(ch_->instance() >> 12));
  device_->WriteReg(pg::kIntr, pg::kIntrTrap);
  EXPECT_FALSE(device_->interrupt_asserted());
  EXPECT_FALSE(device_->ReadReg(pf::kEngState + pgraph) & pf::kEngStateFaulted);

  // Both channels trap now: the second report waits for the first acknowledgement.
  engine_->behaviour.fail_channel = -1;
  device_->WriteReg(pf::kChanTable + 4 * pf::kChanTableStride,
                    device_->ReadReg(pf::kChanTable + 4 * pf::kChanTableStride));  // revive 4
  ch_->Inc(kSubc, gf100::host::kSetObject, {gf100::kClassCompute});  // it starts afresh
  ProgramLaunch();
  ProgramLaunch(other);
  ch_->Submit();
  other->Submit();
  device_->RunUntilIdle();
  ASSERT_EQ(device_->channel_error(4).kind, ChannelError::Kind::kComputeFault);
  ASSERT_EQ(device_->channel_error(5).kind, ChannelError::Kind::kComputeFault);
  std::vector<uint32_t> blamed;
  for (int i = 0; i < 3 && (device_->ReadReg(pg::kIntr) & pg::kIntrTrap); ++i) {
    blamed.push_back(device_->ReadReg(pf::kEngState + pgraph) & 0x7f);
    const Channel* blamed_channel = blamed.back() == 4 ? ch_ : other;
    EXPECT_EQ(device_->ReadReg(pf::kEngineChannel + pgraph) & pf::kChanInstMask,
              uint32_t(blamed_channel->instance() >> 12));
    device_->WriteReg(pg::kIntr, pg::kIntrTrap);
  }
  EXPECT_EQ(blamed, (std::vector<uint32_t>{4, 5}));
  EXPECT_FALSE(device_->interrupt_asserted());
}

// D2: nouveau's kick (write the chid to 0x2634, poll until bit 20 clears) must not return while
// the engine thread is still inside that channel's time slice.
TEST_F(SimComputeLaunchTest, KickPendsUntilTheEngineLeavesTheChannel) {
  auto engine = std::make_shared<FakeEngine>();
  engine->behaviour.slices = 2;
  std::mutex mu;
  std::condition_variable cv;
  bool in_slice = false, release = false;
  engine->behaviour.on_slice = [&] {
    std::unique_lock lock(mu);
    in_slice = true;
    cv.notify_all();
    cv.wait(lock, [&] { return release; });
  };
  // Whatever happens below, let the engine thread go before the device is destroyed.
  auto let_go = [&] {
    {
      std::lock_guard lock(mu);
      release = true;
    }
    cv.notify_all();
  };
  struct Finally {
    std::function<void()> fn;
    ~Finally() { fn(); }
  } finally{let_go};
  Create(engine, /*threaded=*/true);
  ProgramLaunch();
  ch_->Submit();
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return in_slice; }));
  }
  // Another channel is not running: its kick is over at once.
  device_->WriteReg(pf::kKickChid, 9);
  EXPECT_EQ(device_->ReadReg(pf::kKickChid) & pf::kKickPending, 0u);
  // Channel 4 is inside its slice: pending until the slice ends.
  device_->WriteReg(pf::kKickChid, 4);
  EXPECT_EQ(device_->ReadReg(pf::kKickChid), pf::kKickPending | 4u);
  EXPECT_EQ(device_->ReadReg(pf::kKickChid), pf::kKickPending | 4u);
  let_go();
  bool cleared = false;
  for (int i = 0; i < 10000 && !cleared; ++i) {
    cleared = (device_->ReadReg(pf::kKickChid) & pf::kKickPending) == 0;
    if (!cleared) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(cleared);
  ASSERT_TRUE(device_->WaitIdle(std::chrono::seconds(10)));
  EXPECT_EQ(driver_->Read32(query_phys_), 0x5151u);
}

// GPUvm's completion test, as the aggregator's dispatcher polls it: "IB_GET caught up with IB_PUT
// and the channel not PENDING" must not hold while a grid the channel fetched still runs. The
// grid here finishes in the very slice that fetched its IB entry, the case in which IB_GET is
// already written but the end-of-slice state not yet published.
TEST_F(SimComputeLaunchTest, PendingWhileTheFetchedGridRunsAndBusyTimeCounts) {
  auto engine = std::make_shared<FakeEngine>();
  engine->behaviour.slices = 1;
  Create(engine);
  const uint32_t state = pf::kChanTable + 4 * pf::kChanTableStride + 4;
  const uint32_t busy = pf::kChanBusyUs + 4 * 4;
  std::vector<std::pair<uint32_t, uint32_t>> seen;  // (IB_GET, CHAN_TABLE state) inside slices
  engine->behaviour.on_slice = [&] {
    seen.emplace_back(ch_->ReadIbGet(), device_->ReadReg(state));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the grid takes >= 2 ms
  };
  const uint32_t busy_before = device_->ReadReg(busy);
  ProgramLaunch();
  ch_->Submit();
  device_->RunUntilIdle();
  ASSERT_TRUE(device_->channel_error(4).ok()) << device_->channel_error(4).message;
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].first, ch_->ib_put());          // fetched: IB_GET caught up ...
  EXPECT_TRUE(seen[0].second & pf::kStatePending);  // ... but the grid runs: PENDING
  EXPECT_EQ(ch_->ReadIbGet(), ch_->ib_put());
  EXPECT_FALSE(device_->ReadReg(state) & pf::kStatePending);  // done now
  // CHAN_BUSY_US (gpuvm extension) counted the slice the grid slept in; it is read-only.
  EXPECT_GE(device_->ReadReg(busy) - busy_before, 2000u);
  device_->WriteReg(busy, 0);
  EXPECT_GE(device_->ReadReg(busy) - busy_before, 2000u);
  EXPECT_EQ(device_->ReadReg(pf::kChanBusyUs + 4 * 5), 0u);  // another channel: nothing
}

// PREEMPT (a gpuvm extension, docs/SOFTWARE-GPU.md "Preemption"): written while the channel's grid
// is inside a slice, the request is served when the slice ends; the grid's context is saved, the
// engine's job released, and the channel's next turn resumes it where it stopped.
TEST_F(SimComputeLaunchTest, PreemptSwitchesTheGridOutAndItResumes) {
  auto engine = std::make_shared<FakeEngine>();
  engine->behaviour.slices = 6;
  engine->behaviour.preemptible = true;
  uint32_t seen_in_slice = 0;
  engine->behaviour.on_slice = [&] {
    if (engine->slices_run == 2) {
      device_->WriteReg(pf::kPreempt, 4);
      seen_in_slice = device_->ReadReg(pf::kPreempt);
    }
  };
  Create(engine);
  ProgramLaunch();
  ch_->Submit();
  device_->RunUntilIdle();
  ASSERT_TRUE(device_->channel_error(4).ok()) << device_->channel_error(4).message;
  EXPECT_EQ(seen_in_slice, pf::kPreemptPending | 4u);
  EXPECT_EQ(device_->ReadReg(pf::kPreempt), pf::kPreemptSaved | 4u);
  EXPECT_EQ(device_->ReadReg(pf::kPreemptSavedBytes), sizeof(int));
  EXPECT_EQ(device_->ReadReg(pf::kPreemptCount), 1u);
  EXPECT_EQ(engine->resumes, 1);
  EXPECT_EQ(engine->launches.size(), 1u);
  // Six slices in all (the count survived the switch), then what follows the LAUNCH.
  EXPECT_EQ(engine->slices_run, 6);
  EXPECT_EQ(driver_->Read32(cb_phys_ + 0x40), 0xc0ffeeu + 6);
  EXPECT_EQ(driver_->Read32(query_phys_), 0x5151u);
  const ChannelStats stats = device_->channel_stats(4);
  EXPECT_EQ(stats.context_saves, 1u);
  EXPECT_EQ(stats.context_restores, 1u);
  EXPECT_EQ(stats.last_context_bytes, sizeof(int));
}

// A PREEMPT naming the channel inside a slice asks the engine to end that slice early, and serving
// it withdraws the request; one naming another channel asks nothing of the running slice.
TEST_F(SimComputeLaunchTest, PreemptOfTheRunningChannelEndsItsSliceEarly) {
  auto engine = std::make_shared<FakeEngine>();
  engine->behaviour.slices = 6;
  engine->behaviour.preemptible = true;
  engine->behaviour.on_slice = [&] {
    if (engine->slices_run == 1) device_->WriteReg(pf::kPreempt, 9);  // not the running one
    if (engine->slices_run == 3) device_->WriteReg(pf::kPreempt, 4);
  };
  Create(engine);
  ProgramLaunch();
  ch_->Submit();
  device_->RunUntilIdle();
  ASSERT_TRUE(device_->channel_error(4).ok()) << device_->channel_error(4).message;
  EXPECT_EQ(engine->yield_requests, 1);
  EXPECT_GE(engine->yield_clears, 2);  // each served PREEMPT withdraws it
  EXPECT_EQ(engine->resumes, 1);
  EXPECT_EQ(driver_->Read32(query_phys_), 0x5151u);
}

TEST_F(SimComputeLaunchTest, SwitchedOutChannelStaysOffWhileNotRunnable) {
  auto engine = std::make_shared<FakeEngine>();
  engine->behaviour.slices = 6;
  engine->behaviour.preemptible = true;
  engine->behaviour.on_slice = [&] {
    if (engine->slices_run == 1) {
      device_->WriteReg(pf::kChanTable + 8 * 4 + 4, 0);  // RUNNABLE off
      device_->WriteReg(pf::kPreempt, 4);
    }
  };
  Create(engine);
  ProgramLaunch();
  ch_->Submit();
  device_->RunUntilIdle();
  EXPECT_EQ(engine->slices_run, 2);
  EXPECT_EQ(engine->resumes, 0);
  // Still pending work: the dispatcher's completion test does not pass a switched-out grid.
  EXPECT_TRUE(device_->ReadReg(pf::kChanTable + 8 * 4 + 4) & pf::kStatePending);
  EXPECT_EQ(driver_->Read32(query_phys_), 0u);
  device_->WriteReg(pf::kChanTable + 8 * 4 + 4, pf::kStateRunnable);
  device_->RunUntilIdle();
  EXPECT_EQ(engine->resumes, 1);
  EXPECT_EQ(engine->slices_run, 6);
  EXPECT_EQ(driver_->Read32(query_phys_), 0x5151u);
}

TEST_F(SimComputeLaunchTest, PreemptDrainWaitsForStartedBlocks) {
  auto engine = std::make_shared<FakeEngine>();
  engine->behaviour.slices = 8;
  engine->behaviour.preemptible = true;
  engine->behaviour.drain_slices = 3;
  std::vector<uint32_t> seen;
  engine->behaviour.on_slice = [&] {
    seen.push_back(device_->ReadReg(pf::kPreempt));
    if (engine->slices_run == 1) device_->WriteReg(pf::kPreempt, 4 | pf::kPreemptDrain);
  };
  Create(engine);
  ProgramLaunch();
  ch_->Submit();
  device_->RunUntilIdle();
  ASSERT_TRUE(device_->channel_error(4).ok());
  // Requested in slice 2; drained after slice 2 + 3 = 5 slices; resumed for the rest.
  ASSERT_EQ(seen.size(), 8u);
  for (int i = 2; i < 5; ++i) EXPECT_TRUE(seen[i] & pf::kPreemptPending) << i;
  EXPECT_EQ(seen[5], pf::kPreemptSaved | pf::kPreemptDrain | 4u);
  EXPECT_EQ(engine->resumes, 1);
  EXPECT_EQ(driver_->Read32(query_phys_), 0x5151u);
}

TEST_F(SimComputeLaunchTest, PreemptWithoutAGridOrAnEngineThatSavesIsServedAtOnce) {
  auto engine = std::make_shared<FakeEngine>();
  engine->behaviour.slices = 3;
  Create(engine);
  device_->WriteReg(pf::kPreempt, 9);  // nothing on channel 9
  device_->RunUntilIdle();
  EXPECT_EQ(device_->ReadReg(pf::kPreempt), 9u);
  EXPECT_EQ(device_->ReadReg(pf::kPreemptCount), 1u);
  engine->behaviour.on_slice = [&] {
    if (engine->slices_run == 0) device_->WriteReg(pf::kPreempt, 4);
  };
  ProgramLaunch();
  ch_->Submit();
  device_->RunUntilIdle();
  // The fake engine (not preemptible here) keeps its job: served, nothing saved, grid finishes.
  EXPECT_EQ(device_->ReadReg(pf::kPreempt), 4u);
  EXPECT_EQ(device_->ReadReg(pf::kPreemptCount), 2u);
  EXPECT_EQ(engine->resumes, 0);
  EXPECT_EQ(driver_->Read32(query_phys_), 0x5151u);
}

}  // namespace
}  // namespace gpuvm::sim
