#include "qemu-device/device_model.h"

#include <atomic>
#include <cstring>
#include <thread>

#include "gtest/gtest.h"
#include "hypervisor/testing/backend_env.h"
#include "pv/protocol.h"
#include "qemu-device/testing/fake_aggregator.h"
#include "qemu-device/testing/fake_hypervisor.h"

namespace gpuvm::dm {
namespace {

using hv::IoDirection;
using hv::IoRequest;
using hv::IoSpace;
using testing::FakeAggregator;
using testing::FakePatternByte;
using testing::RecordedAccess;
using testing::RecordingIoreqServer;
using testing::VectorGuestMemory;

constexpr uint64_t kBar0At = 0xf2000000;
constexpr uint64_t kBar1At = 0xe0000000;
constexpr uint64_t kBar3At = 0xf4000000;

IoRequest Mmio(IoDirection dir, uint64_t addr, uint32_t size, uint64_t data = 0) {
  IoRequest r;
  r.space = IoSpace::kMmio;
  r.dir = dir;
  r.addr = addr;
  r.size = size;
  r.count = 1;
  r.data = data;
  return r;
}

IoRequest Config(IoDirection dir, uint32_t offset, uint32_t size, uint32_t data = 0,
                 hv::Sbdf sbdf = kDefaultSbdf) {
  IoRequest r = Mmio(dir, offset, size, data);
  r.space = IoSpace::kPciConfig;
  r.sbdf = sbdf;
  return r;
}

uint64_t Pattern(BarIndex bar, uint64_t offset, uint32_t size) {
  uint64_t v = 0;
  for (uint32_t i = 0; i < size; ++i) v |= uint64_t{FakePatternByte(bar, offset + i)} << (8 * i);
  return v;
}

class DeviceModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dm = DeviceModel::Create(DeviceModelConfig{}, &server_, &aggregator_, &memory_);
    ASSERT_TRUE(dm.ok()) << dm.status().ToString();
    dm_ = std::move(*dm);
  }
  uint64_t Handle(const IoRequest& r) { return dm_->Handle(r); }
  // What firmware does: program the BARs, then turn on memory decoding.
  void Program(uint64_t bar0 = kBar0At, uint64_t bar1 = kBar1At, uint64_t bar3 = kBar3At) {
    Handle(Config(IoDirection::kWrite, kPciBar0, 4, static_cast<uint32_t>(bar0)));
    Handle(Config(IoDirection::kWrite, kPciBar1, 4, static_cast<uint32_t>(bar1)));
    Handle(Config(IoDirection::kWrite, kPciBar1 + 4, 4, static_cast<uint32_t>(bar1 >> 32)));
    Handle(Config(IoDirection::kWrite, kPciBar3, 4, static_cast<uint32_t>(bar3)));
    Handle(Config(IoDirection::kWrite, kPciBar3 + 4, 4, static_cast<uint32_t>(bar3 >> 32)));
    Handle(Config(IoDirection::kWrite, kPciCommand, 2, kCommandMemory | kCommandBusMaster));
  }
  uint64_t Refused(Refusal r) const {
    return dm_->counters().Snapshot().refused[static_cast<size_t>(r)];
  }

  RecordingIoreqServer server_;
  FakeAggregator aggregator_;
  VectorGuestMemory memory_{64};
  std::unique_ptr<DeviceModel> dm_;
};

TEST_F(DeviceModelTest, ClaimsItsFunctionAndReleasesEverythingOnDestruction) {
  EXPECT_EQ(server_.devices, std::vector<hv::Sbdf>{kDefaultSbdf});
  Program();
  EXPECT_EQ(server_.ranges.size(), 3u);
  dm_.reset();
  EXPECT_TRUE(server_.devices.empty());
  EXPECT_TRUE(server_.ranges.empty());
  RecordingIoreqServer taken;
  ASSERT_TRUE(taken.MapPciDevice(kDefaultSbdf).ok());
  EXPECT_EQ(DeviceModel::Create({}, &taken, &aggregator_, nullptr).status().code(),
            StatusCode::kAlreadyExists);
  DeviceModelConfig bad;
  bad.layout.bar1_size = 3 << 20;
  EXPECT_EQ(DeviceModel::Create(bad, &taken, &aggregator_, nullptr).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(DeviceModelTest, FirmwareSizesAndProgramsTheBars) {
  EXPECT_EQ(Handle(Config(IoDirection::kRead, 0, 4)), 0x06d810deu);
  for (uint32_t reg : {kPciBar0, kPciBar1, kPciBar1 + 4, kPciBar3, kPciBar3 + 4}) {
    Handle(Config(IoDirection::kWrite, reg, 4, 0xffffffff));
  }
  EXPECT_EQ(Handle(Config(IoDirection::kRead, kPciBar0, 4)), 0xff000000u);
  EXPECT_EQ(Handle(Config(IoDirection::kRead, kPciBar1, 4)), 0xf800000cu);
  EXPECT_EQ(Handle(Config(IoDirection::kRead, kPciBar3, 4)), 0xfc00000cu);
  EXPECT_TRUE(server_.ranges.empty()) << "nothing decodes while sizing";
  Program();
  const std::vector<std::pair<uint64_t, uint64_t>> expected = {{kBar0At, kBar0At + (16 << 20) - 1},
                                                               {kBar1At, kBar1At + (128 << 20) - 1},
                                                               {kBar3At, kBar3At + (64 << 20) - 1}};
  EXPECT_EQ(server_.ranges, expected);
  EXPECT_EQ(dm_->mapped_range(BarIndex::kBar1), expected[1]);
  const TrapCounterValues c = dm_->counters().Snapshot();
  EXPECT_EQ(c.config_reads, 4u);
  EXPECT_EQ(c.config_writes, 11u);
  EXPECT_EQ(c.refused_total(), 0u);
}

TEST_F(DeviceModelTest, AccessesReachTheAggregatorAsBarAndOffset) {
  Program();
  EXPECT_EQ(Handle(Mmio(IoDirection::kRead, kBar0At + 0x1700, 4)),
            Pattern(BarIndex::kBar0, 0x1700, 4));
  Handle(Mmio(IoDirection::kWrite, kBar1At + 0x108c, 4, 0x42));
  EXPECT_EQ(Handle(Mmio(IoDirection::kRead, kBar1At + 0x108c, 4)), 0x42u);
  Handle(Mmio(IoDirection::kWrite, kBar3At + 0x10, 8, 0x1122334455667788));
  EXPECT_EQ(Handle(Mmio(IoDirection::kRead, kBar3At + 0x10, 2)), 0x7788u);
  IoRequest from_vcpu1 = Mmio(IoDirection::kWrite, kBar0At + 0x2634, 4, 0xffffffffff);
  from_vcpu1.vcpu = 1;
  Handle(from_vcpu1);
  const std::vector<RecordedAccess> expected = {
      {false, BarIndex::kBar0, 0x1700, 4, Pattern(BarIndex::kBar0, 0x1700, 4), 0},
      {true, BarIndex::kBar1, 0x108c, 4, 0x42, 0},
      {false, BarIndex::kBar1, 0x108c, 4, 0x42, 0},
      {true, BarIndex::kBar3, 0x10, 8, 0x1122334455667788, 0},
      {false, BarIndex::kBar3, 0x10, 2, 0x7788, 0},
      {true, BarIndex::kBar0, 0x2634, 4, 0xffffffff, 1},  // data masked to the access size
  };
  EXPECT_EQ(aggregator_.accesses(), expected);
  const TrapCounterValues c = dm_->counters().Snapshot();
  EXPECT_EQ(c.traps(BarIndex::kBar0), 2u);
  EXPECT_EQ(c.bar_reads[BarSlot(BarIndex::kBar1)], 1u);
  EXPECT_EQ(c.bar_writes[BarSlot(BarIndex::kBar1)], 1u);
  EXPECT_EQ(c.traps(BarIndex::kBar3), 2u);
}

TEST_F(DeviceModelTest, OnlyAParaVirtualDeviceHasThePvWindow) {
  // Not pv (this fixture): the window is nothing — reads 0, writes dropped, nothing forwarded (a
  // pt VM's GPU never sees them), rep accesses there refused.
  Program();
  EXPECT_EQ(Handle(Mmio(IoDirection::kRead, kBar0At + pv::kRegId, 4)), 0u);
  Handle(Mmio(IoDirection::kWrite, kBar0At + pv::kRegDoorbell, 4, 64));
  Handle(Mmio(IoDirection::kWrite, kBar0At + pv::kWindow + pv::kWindowSize - 4, 4, 1));
  EXPECT_TRUE(aggregator_.accesses().empty());
  EXPECT_EQ(dm_->pv_doorbells(), 0u);
  EXPECT_EQ(dm_->counters().Snapshot().traps(BarIndex::kBar0), 3u);
  EXPECT_EQ(dm_->counters().Snapshot().refused_total(), 0u);
  IoRequest rep = Mmio(IoDirection::kWrite, kBar0At + pv::kWindow, 4, 0);
  rep.count = 4;
  Handle(rep);
  EXPECT_EQ(Refused(Refusal::kOutsideBars), 1u);
  EXPECT_TRUE(aggregator_.accesses().empty());
  // Just past the window: forwarded as usual.
  Handle(Mmio(IoDirection::kRead, kBar0At + pv::kWindow + pv::kWindowSize, 4));
  EXPECT_EQ(aggregator_.accesses().size(), 1u);
  EXPECT_EQ(dm_->mmio_exits(), 5u) << "one per ioreq, the rep of four elements included";

  // A pv device: the window reaches the aggregator, doorbells are counted.
  dm_.reset();
  DeviceModelConfig config;
  config.pv_window = true;
  auto dm = DeviceModel::Create(config, &server_, &aggregator_, &memory_);
  ASSERT_TRUE(dm.ok()) << dm.status().ToString();
  dm_ = std::move(*dm);
  Program();
  EXPECT_EQ(Handle(Mmio(IoDirection::kRead, kBar0At + pv::kRegId, 4)),
            Pattern(BarIndex::kBar0, pv::kRegId, 4));
  Handle(Mmio(IoDirection::kWrite, kBar0At + pv::kRegDoorbell, 4, 64));
  Handle(Mmio(IoDirection::kWrite, kBar0At + pv::kRegDoorbell, 4, 128));
  Handle(Mmio(IoDirection::kWrite, kBar0At + pv::kRegAreaPages, 4, 1));
  EXPECT_EQ(dm_->pv_doorbells(), 2u);
  const std::vector<RecordedAccess> accesses = aggregator_.accesses();
  ASSERT_EQ(accesses.size(), 5u);
  EXPECT_EQ(accesses.back(), (RecordedAccess{true, BarIndex::kBar0, pv::kRegAreaPages, 4, 1, 0}));
}

TEST_F(DeviceModelTest, RelocationMovesTheRoutedRange) {
  Program();
  const int unmaps_before = server_.unmap_calls;
  Handle(Config(IoDirection::kWrite, kPciBar0, 4, 0xd0000000));
  EXPECT_EQ(server_.unmap_calls, unmaps_before + 1);
  EXPECT_EQ(dm_->mapped_range(BarIndex::kBar0),
            std::make_optional(std::make_pair<uint64_t, uint64_t>(0xd0000000, 0xd0ffffff)));
  EXPECT_EQ(Handle(Mmio(IoDirection::kRead, kBar0At, 4)), 0xffffffffu) << "old place";
  EXPECT_EQ(Refused(Refusal::kOutsideBars), 1u);
  EXPECT_EQ(Handle(Mmio(IoDirection::kRead, 0xd0000000, 4)), Pattern(BarIndex::kBar0, 0, 4));
  // Turning memory decoding off unmaps everything; on again maps everything back.
  Handle(Config(IoDirection::kWrite, kPciCommand, 2, 0));
  EXPECT_TRUE(server_.ranges.empty());
  Handle(Config(IoDirection::kWrite, kPciCommand, 2, kCommandMemory));
  EXPECT_EQ(server_.ranges.size(), 3u);
  // Unchanged writes cause no churn.
  const int maps = server_.map_calls;
  Handle(Config(IoDirection::kWrite, kPciBar0, 4, 0xd0000000));
  EXPECT_EQ(server_.map_calls, maps);
}

TEST_F(DeviceModelTest, BarsProgrammedOnTopOfEachOtherStayUnmappedUntilMoved) {
  Program();
  Handle(Config(IoDirection::kWrite, kPciBar3, 4, static_cast<uint32_t>(kBar0At)));  // over BAR0
  EXPECT_FALSE(dm_->mapped_range(BarIndex::kBar3).has_value());
  EXPECT_EQ(Refused(Refusal::kBarConflict), 1u);
  Handle(Config(IoDirection::kWrite, kPciInterruptLine, 1, 5));  // any config write re-syncs
  EXPECT_EQ(Refused(Refusal::kBarConflict), 1u) << "a lasting conflict is counted once";
  EXPECT_EQ(Handle(Mmio(IoDirection::kRead, kBar0At, 4)), Pattern(BarIndex::kBar0, 0, 4));
  Handle(Config(IoDirection::kWrite, kPciBar0, 4, 0xd0000000));  // BAR0 moves away
  EXPECT_TRUE(dm_->mapped_range(BarIndex::kBar3).has_value());
  EXPECT_EQ(Handle(Mmio(IoDirection::kRead, kBar0At, 4)), Pattern(BarIndex::kBar3, 0, 4));
}

TEST_F(DeviceModelTest, AHypervisorThatRefusesARangeIsCountedNotFatal) {
  server_.refuse_maps = true;
  Program();
  EXPECT_EQ(Refused(Refusal::kBarConflict), 3u);
  EXPECT_EQ(Handle(Mmio(IoDirection::kRead, kBar0At, 4)), 0xffffffffu);
  server_.refuse_maps = false;
  Handle(Config(IoDirection::kWrite, kPciCommand, 2, kCommandMemory));
  EXPECT_EQ(server_.ranges.size(), 3u);
}

struct HostileCase {
  const char* name;
  IoRequest request;
  uint64_t answer;
  Refusal reason;
};

TEST_F(DeviceModelTest, HostileRequestsAreRefusedCountedAndNeverForwarded) {
  Program();
  auto with = [](IoRequest r, auto change) {
    change(r);
    return r;
  };
  const IoRequest read4 = Mmio(IoDirection::kRead, kBar0At + 0x100, 4);
  const std::vector<HostileCase> cases = {
      {"size 0", with(read4, [](IoRequest& r) { r.size = 0; }), ~uint64_t{0}, Refusal::kBadSize},
      {"size 3", with(read4, [](IoRequest& r) { r.size = 3; }), ~uint64_t{0}, Refusal::kBadSize},
      {"size 16", with(read4, [](IoRequest& r) { r.size = 16; }), ~uint64_t{0}, Refusal::kBadSize},
      {"count 0", with(read4, [](IoRequest& r) { r.count = 0; }), 0xffffffff,
       Refusal::kBadRepetition},
      {"rep read without buffer", with(read4, [](IoRequest& r) { r.count = 2; }), 0xffffffff,
       Refusal::kBadRepetition},
      {"rep stos of more than Xen's 4096 repetitions",
       with(read4,
            [](IoRequest& r) {
              r.dir = IoDirection::kWrite;
              r.count = 4097;
            }),
       0xffffffff, Refusal::kBadRepetition},
      {"downward rep stos over a page",
       with(read4,
            [](IoRequest& r) {
              r.dir = IoDirection::kWrite;
              r.count = 1025;
              r.df = true;
            }),
       0xffffffff, Refusal::kBadRepetition},
      {"huge rep movs",
       with(read4,
            [](IoRequest& r) {
              r.data_is_ptr = true;
              r.count = 0xffffffff;
            }),
       0xffffffff, Refusal::kBadRepetition},
      {"outside every BAR", Mmio(IoDirection::kRead, 0x1000, 4), 0xffffffff, Refusal::kOutsideBars},
      {"straddles BAR0's end", Mmio(IoDirection::kRead, kBar0At + (16 << 20) - 2, 4), 0xffffffff,
       Refusal::kOutsideBars},
      {"top of the address space", Mmio(IoDirection::kRead, ~uint64_t{0} - 1, 8), ~uint64_t{0},
       Refusal::kOutsideBars},
      {"unaligned BAR0", Mmio(IoDirection::kRead, kBar0At + 2, 4), 0xffffffff, Refusal::kUnaligned},
      {"port I/O", with(read4, [](IoRequest& r) { r.space = IoSpace::kPort; }), 0xffffffff,
       Refusal::kUnknownSpace},
      {"unknown type", with(read4, [](IoRequest& r) { r.space = IoSpace::kUnknown; }), 0xffffffff,
       Refusal::kUnknownSpace},
      {"read in the posted ring", with(read4, [](IoRequest& r) { r.buffered = true; }), 0xffffffff,
       Refusal::kBufferedRead},
      {"someone else's function", Config(IoDirection::kRead, 0, 4, 0, hv::Sbdf{0, 0, 6, 0}),
       0xffffffff, Refusal::kWrongDevice},
      {"config beyond 4 KiB", Config(IoDirection::kRead, 4096, 4), 0xffffffff,
       Refusal::kOutsideConfig},
      {"config size 8", Config(IoDirection::kRead, 0, 8), ~uint64_t{0}, Refusal::kBadSize},
      {"config unaligned", Config(IoDirection::kRead, 2, 4), 0xffffffff, Refusal::kUnaligned},
      {"config rep", with(Config(IoDirection::kRead, 0, 4), [](IoRequest& r) { r.count = 2; }),
       0xffffffff, Refusal::kBadRepetition},
      {"buffer outside guest RAM",
       with(read4,
            [](IoRequest& r) {
              r.data_is_ptr = true;
              r.count = 4;
              r.data = 64 << 12;
            }),
       0xffffffff, Refusal::kBadPointer},
      {"buffer straddling the end of RAM",
       with(read4,
            [](IoRequest& r) {
              r.data_is_ptr = true;
              r.count = 4;
              r.data = (64 << 12) - 8;
            }),
       0xffffffff, Refusal::kBadPointer},
      {"buffer walking below 0",
       with(read4,
            [](IoRequest& r) {
              r.data_is_ptr = true;
              r.count = 4;
              r.df = true;
              r.data = 4;
            }),
       0xffffffff, Refusal::kBadPointer},
  };
  for (const HostileCase& c : cases) {
    const uint64_t before = Refused(c.reason);
    EXPECT_EQ(Handle(c.request), c.answer) << c.name;
    EXPECT_EQ(Refused(c.reason), before + 1) << c.name;
  }
  EXPECT_TRUE(aggregator_.accesses().empty()) << "nothing hostile reached the aggregator";
  EXPECT_EQ(Handle(with(read4, [](IoRequest& r) { r.space = IoSpace::kInvalidate; })), 0u);
  EXPECT_EQ(dm_->counters().Snapshot().housekeeping, 1u);
}

TEST_F(DeviceModelTest, RepMovsCopiesBetweenGuestMemoryAndTheApertures) {
  Program();
  for (int i = 0; i < 16; ++i) memory_.bytes()[0x2000 + i] = static_cast<uint8_t>(0xa0 + i);
  IoRequest out = Mmio(IoDirection::kWrite, kBar1At + 0x40, 4, 0x2000);
  out.data_is_ptr = true;
  out.count = 4;
  EXPECT_EQ(Handle(out), 0u);
  std::vector<RecordedAccess> writes = aggregator_.accesses();
  ASSERT_EQ(writes.size(), 4u);
  EXPECT_EQ(writes[1], (RecordedAccess{true, BarIndex::kBar1, 0x44, 4, 0xa7a6a5a4, 0}));
  // And back, walking downwards (df): element i is at addr - 4i and data - 4i.
  IoRequest in = Mmio(IoDirection::kRead, kBar1At + 0x4c, 4, 0x300c);
  in.data_is_ptr = true;
  in.count = 4;
  in.df = true;
  EXPECT_EQ(Handle(in), 0u);
  EXPECT_EQ(0, std::memcmp(&memory_.bytes()[0x3000], &memory_.bytes()[0x2000], 16));
  // A rep read that runs off the BAR fills the rest of the buffer with all-ones.
  IoRequest off_end = Mmio(IoDirection::kRead, kBar3At + (64 << 20) - 8, 4, 0x4000);
  off_end.data_is_ptr = true;
  off_end.count = 4;
  Handle(off_end);
  EXPECT_EQ(memory_.bytes()[0x4000], FakePatternByte(BarIndex::kBar3, (64 << 20) - 8));
  for (int i = 8; i < 16; ++i) EXPECT_EQ(memory_.bytes()[0x4000 + i], 0xff) << i;
}

TEST_F(DeviceModelTest, RepStosStoresOneValueManyTimesAndApertureAccessesMayBeUnaligned) {
  Program();
  IoRequest stos = Mmio(IoDirection::kWrite, kBar1At + 0x100, 2, 0xbeef);
  stos.count = 3;
  Handle(stos);
  const std::vector<RecordedAccess> a = aggregator_.accesses();
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[2], (RecordedAccess{true, BarIndex::kBar1, 0x104, 2, 0xbeef, 0}));
  EXPECT_EQ(Handle(Mmio(IoDirection::kRead, kBar1At + 0x101, 2)), 0xefbeu) << "unaligned is fine";
}

TEST_F(DeviceModelTest, RepStosOfManyPagesIsOneFillPerBarAndStopsAtTheBarsEnd) {
  Program();
  // 4096 8-byte elements (32 KiB, what Xen issues for one rep stosq at most) from BAR3 offset 0x8:
  // every element counted, every byte stored.
  IoRequest stos = Mmio(IoDirection::kWrite, kBar3At + 0x8, 8, 0x1122334455667788ull);
  stos.count = 4096;
  EXPECT_EQ(Handle(stos), 0u);
  EXPECT_EQ(aggregator_.accesses().size(), 4096u);
  EXPECT_EQ(aggregator_.accesses().back(),
            (RecordedAccess{true, BarIndex::kBar3, 0x8 + 4095 * 8, 8, 0x1122334455667788ull, 0}));
  EXPECT_EQ(dm_->counters().Snapshot().bar_writes[BarSlot(BarIndex::kBar3)], 4096u);
  // A fill that runs off BAR3's end stores what lies inside and refuses the rest.
  const uint64_t before = Refused(Refusal::kOutsideBars);
  IoRequest past = Mmio(IoDirection::kWrite, kBar3At + (64 << 20) - 16, 8, 7);
  past.count = 4;
  EXPECT_EQ(Handle(past), 0u);
  EXPECT_EQ(aggregator_.accesses().size(), 4098u);
  EXPECT_EQ(Refused(Refusal::kOutsideBars), before + 1);
}

TEST_F(DeviceModelTest, WithoutGuestMemoryBuffersAreRefused) {
  RecordingIoreqServer server;
  auto dm = DeviceModel::Create({}, &server, &aggregator_, nullptr);
  ASSERT_TRUE(dm.ok());
  IoRequest r = Mmio(IoDirection::kWrite, 0, 4, 0);
  r.data_is_ptr = true;
  (*dm)->Handle(r);
  EXPECT_EQ((*dm)->counters().Snapshot().refused[static_cast<size_t>(Refusal::kBadPointer)], 1u);
}

TEST_F(DeviceModelTest, AFailingAggregatorMeansAllOnes) {
  Program();
  aggregator_.FailAccesses(true);
  EXPECT_EQ(Handle(Mmio(IoDirection::kRead, kBar0At, 8)), ~uint64_t{0});
  Handle(Mmio(IoDirection::kWrite, kBar0At, 4, 1));
  EXPECT_EQ(Refused(Refusal::kAggregatorError), 2u);
}

TEST_F(DeviceModelTest, ABar1WriteIsPostedAndTheNextAccessWaitsForIt) {
  Program();
  // A doorbell-like store into BAR1: the guest's write completes (Handle returns) while the
  // aggregator has not performed it yet.
  EXPECT_EQ(Handle(Mmio(IoDirection::kWrite, kBar1At + 0x108c, 4, 0x42)), 0u);
  EXPECT_TRUE(aggregator_.accesses().empty());
  // Not even sent yet: that happens once the guest's request is completed (RunOnce).
  EXPECT_FALSE(aggregator_.posted().has_value());
  EXPECT_TRUE(dm_->write_posted());
  dm_->SendPostedWrite();
  ASSERT_TRUE(aggregator_.posted().has_value());
  EXPECT_EQ(*aggregator_.posted(), (RecordedAccess{true, BarIndex::kBar1, 0x108c, 4, 0x42, 0}));
  EXPECT_TRUE(dm_->write_posted());
  // The next access, a read of the same register, waits for it and sees its effect.
  EXPECT_EQ(Handle(Mmio(IoDirection::kRead, kBar1At + 0x108c, 4)), 0x42u);
  EXPECT_FALSE(dm_->write_posted());
  std::vector<RecordedAccess> expected = {{true, BarIndex::kBar1, 0x108c, 4, 0x42, 0},
                                          {false, BarIndex::kBar1, 0x108c, 4, 0x42, 0}};
  EXPECT_EQ(aggregator_.accesses(), expected);
  // Any access waits, of any vCPU, whatever it is: a configuration read ...
  Handle(Mmio(IoDirection::kWrite, kBar1At + 0x2000, 2, 0x1234));
  IoRequest config = Config(IoDirection::kRead, 0, 4);
  config.vcpu = 1;
  Handle(config);
  EXPECT_FALSE(aggregator_.posted().has_value());
  expected.push_back({true, BarIndex::kBar1, 0x2000, 2, 0x1234, 0});
  // ... a write of a register, which is never posted itself ...
  Handle(Mmio(IoDirection::kWrite, kBar1At + 0x3000, 4, 7));
  Handle(Mmio(IoDirection::kWrite, kBar0At + 0x2634, 4, 8));
  expected.push_back({true, BarIndex::kBar1, 0x3000, 4, 7, 0});
  expected.push_back({true, BarIndex::kBar0, 0x2634, 4, 8, 0});
  EXPECT_FALSE(aggregator_.posted().has_value()) << "BAR0 writes are not posted";
  // ... nor BAR3 writes, nor rep stores into BAR1 (which are performed after the posted one).
  Handle(Mmio(IoDirection::kWrite, kBar3At + 0x10, 4, 9));
  expected.push_back({true, BarIndex::kBar3, 0x10, 4, 9, 0});
  EXPECT_FALSE(aggregator_.posted().has_value());
  Handle(Mmio(IoDirection::kWrite, kBar1At + 0x40, 4, 10));
  IoRequest fill = Mmio(IoDirection::kWrite, kBar1At + 0x80, 4, 11);
  fill.count = 2;
  Handle(fill);
  expected.push_back({true, BarIndex::kBar1, 0x40, 4, 10, 0});
  expected.push_back({true, BarIndex::kBar1, 0x80, 4, 11, 0});
  expected.push_back({true, BarIndex::kBar1, 0x84, 4, 11, 0});
  EXPECT_FALSE(aggregator_.posted().has_value());
  EXPECT_EQ(aggregator_.accesses(), expected);
  EXPECT_FALSE(aggregator_.overtaken()) << "nothing reached the aggregator before a posted write";
  EXPECT_EQ(dm_->posted_writes(), 4u);
  EXPECT_EQ(dm_->counters().Snapshot().bar_writes[BarSlot(BarIndex::kBar1)], 6u);
}

TEST_F(DeviceModelTest, APostedWritesRefusalIsCountedWhenItIsKnown) {
  Program();
  aggregator_.FailAccesses(true);
  Handle(Mmio(IoDirection::kWrite, kBar1At + 0x40, 4, 1));
  EXPECT_EQ(Refused(Refusal::kAggregatorError), 0u) << "the aggregator has not answered yet";
  Handle(Config(IoDirection::kRead, 0, 4));
  EXPECT_EQ(Refused(Refusal::kAggregatorError), 1u) << "counted as a refused write always was";
  // The last write of a VM is settled when the device goes.
  aggregator_.FailAccesses(false);
  Handle(Mmio(IoDirection::kWrite, kBar1At + 0x80, 4, 5));
  EXPECT_EQ(aggregator_.settles(), 1u);
  dm_->SettlePostedWrite();
  EXPECT_EQ(aggregator_.settles(), 2u);
  Handle(Mmio(IoDirection::kWrite, kBar1At + 0xc0, 4, 6));
  dm_.reset();
  EXPECT_EQ(aggregator_.settles(), 3u);
  EXPECT_FALSE(aggregator_.posted().has_value());
  EXPECT_EQ(aggregator_.accesses().back(), (RecordedAccess{true, BarIndex::kBar1, 0xc0, 4, 6, 0}));
}

TEST_F(DeviceModelTest, PostedWritesCanBeTurnedOff) {
  RecordingIoreqServer server;
  FakeAggregator aggregator;
  DeviceModelConfig config;
  config.posted_writes = false;
  auto dm = DeviceModel::Create(config, &server, &aggregator, nullptr);
  ASSERT_TRUE(dm.ok()) << dm.status().ToString();
  (*dm)->Handle(Config(IoDirection::kWrite, kPciBar1, 4, static_cast<uint32_t>(kBar1At)));
  (*dm)->Handle(Config(IoDirection::kWrite, kPciBar1 + 4, 4, 0));
  (*dm)->Handle(Config(IoDirection::kWrite, kPciCommand, 2, kCommandMemory));
  (*dm)->Handle(Mmio(IoDirection::kWrite, kBar1At + 0x40, 4, 1));
  EXPECT_FALSE(aggregator.posted().has_value());
  EXPECT_EQ(aggregator.accesses().size(), 1u) << "performed before the guest's write completed";
  EXPECT_EQ((*dm)->posted_writes(), 0u);
}

TEST_F(DeviceModelTest, TheInterruptLineBecomesIntxOrMsi) {
  ASSERT_TRUE(dm_->HandleAggregatorEvent(InterruptLevel{true}).ok());
  EXPECT_TRUE(server_.intx);
  EXPECT_TRUE(Handle(Config(IoDirection::kRead, kPciStatus, 2)) & kStatusInterrupt);
  Handle(Config(IoDirection::kWrite, kPciCommand, 2, kCommandIntxDisable));
  EXPECT_FALSE(server_.intx) << "INTx disabled by the guest";
  Handle(Config(IoDirection::kWrite, kPciCommand, 2, 0));
  EXPECT_TRUE(server_.intx);
  ASSERT_TRUE(dm_->HandleAggregatorEvent(InterruptLevel{false}).ok());
  EXPECT_FALSE(server_.intx);
  // MSI: one message per rising edge, INTx silent.
  Handle(Config(IoDirection::kWrite, kMsiCapability + 4, 4, 0xfee00000));
  Handle(Config(IoDirection::kWrite, kMsiCapability + 12, 2, 0x41));
  Handle(Config(IoDirection::kWrite, kMsiCapability + 2, 2, 1));
  ASSERT_TRUE(dm_->HandleAggregatorEvent(InterruptLevel{true}).ok());
  ASSERT_TRUE(dm_->HandleAggregatorEvent(InterruptLevel{true}).ok());
  ASSERT_TRUE(dm_->HandleAggregatorEvent(InterruptLevel{false}).ok());
  ASSERT_TRUE(dm_->HandleAggregatorEvent(InterruptLevel{true}).ok());
  EXPECT_EQ(server_.msis, 2);
  EXPECT_FALSE(server_.intx);
}

TEST_F(DeviceModelTest, RunOnceServesRequestsAndStopsAtTeardown) {
  Program();
  server_.pending.push_back(Mmio(IoDirection::kRead, kBar0At + 4, 4));
  server_.pending.push_back(Mmio(IoDirection::kWrite, kBar0At + 8, 4, 9));
  aggregator_.PushEvent(BarMapRequest{77, BarIndex::kBar1, 0, 4096});
  ASSERT_TRUE(dm_->RunOnce(std::chrono::milliseconds(0)).ok());
  ASSERT_EQ(server_.completed.size(), 2u);
  EXPECT_EQ(server_.completed[0].second, Pattern(BarIndex::kBar0, 4, 4));
  ASSERT_EQ(aggregator_.bar_answers().size(), 1u);
  EXPECT_EQ(aggregator_.bar_answers()[0].first, 77u);
  EXPECT_EQ(aggregator_.bar_answers()[0].second.code(), StatusCode::kInvalidArgument)
      << "a BAR_MAP without its memory";
  aggregator_.PushEvent(TeardownRequest{5});
  EXPECT_EQ(dm_->RunOnce(std::chrono::milliseconds(0)).code(), StatusCode::kAborted);
  EXPECT_TRUE(dm_->teardown_requested());
}

TEST_F(DeviceModelTest, BarMapRemapsAperturePagesUntilUnmappedOrMoved) {
  Program();
  auto memory = os::CreateSealedMemfd("vram", 1 << 20);
  ASSERT_TRUE(memory.ok());
  auto fd = [&] { return memory->get(); };
  ASSERT_TRUE(
      dm_->HandleAggregatorEvent(BarMapRequest{1, BarIndex::kBar3, 0x4000, 0x2000, 0x10000, fd()})
          .ok());
  ASSERT_EQ(server_.memory.size(), 1u);
  EXPECT_EQ(server_.memory[0].first, kBar3At + 0x4000);
  EXPECT_EQ(server_.memory[0].last, kBar3At + 0x5fff);
  EXPECT_EQ(server_.memory[0].offset, 0x10000u);
  // Refused: BAR0, past the BAR's end, unaligned, no memory, overlapping.
  ASSERT_TRUE(
      dm_->HandleAggregatorEvent(BarMapRequest{2, BarIndex::kBar0, 0, 0x1000, 0, fd()}).ok());
  ASSERT_TRUE(dm_->HandleAggregatorEvent(
                     BarMapRequest{3, BarIndex::kBar3, (64 << 20) - 0x1000, 0x2000, 0, fd()})
                  .ok());
  ASSERT_TRUE(
      dm_->HandleAggregatorEvent(BarMapRequest{4, BarIndex::kBar1, 0x800, 0x1000, 0, fd()}).ok());
  ASSERT_TRUE(dm_->HandleAggregatorEvent(BarMapRequest{5, BarIndex::kBar1, 0, 0x1000, 0, -1}).ok());
  ASSERT_TRUE(
      dm_->HandleAggregatorEvent(BarMapRequest{6, BarIndex::kBar3, 0x5000, 0x1000, 0, fd()}).ok());
  ASSERT_EQ(aggregator_.bar_answers().size(), 6u);
  EXPECT_TRUE(aggregator_.bar_answers()[0].second.ok());
  EXPECT_EQ(aggregator_.bar_answers()[1].second.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(aggregator_.bar_answers()[2].second.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(aggregator_.bar_answers()[3].second.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(aggregator_.bar_answers()[4].second.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(aggregator_.bar_answers()[5].second.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(server_.memory.size(), 1u);
  EXPECT_EQ(dm_->counters().Snapshot().bar_maps, 1u);
  EXPECT_EQ(dm_->counters().Snapshot().bar_maps_refused, 5u);
  // Unmap: only what was mapped, exactly.
  ASSERT_TRUE(dm_->HandleAggregatorEvent(BarUnmapRequest{7, BarIndex::kBar3, 0x4000, 0x1000}).ok());
  EXPECT_EQ(aggregator_.bar_answers().back().second.code(), StatusCode::kNotFound);
  ASSERT_TRUE(dm_->HandleAggregatorEvent(BarUnmapRequest{8, BarIndex::kBar3, 0x4000, 0x2000}).ok());
  EXPECT_TRUE(aggregator_.bar_answers().back().second.ok());
  EXPECT_TRUE(server_.memory.empty());
  // A BAR that moves takes its remapped ranges with it: they trap (at the new place) again.
  ASSERT_TRUE(
      dm_->HandleAggregatorEvent(BarMapRequest{9, BarIndex::kBar1, 0, 0x1000, 0, fd()}).ok());
  ASSERT_EQ(server_.memory.size(), 1u);
  Program(kBar0At, kBar1At + (256 << 20), kBar3At);
  EXPECT_TRUE(server_.memory.empty());
}

// The BAR_UNMAP a register write caused (a TLB flush after the guest changed a remapped page's PTE)
// reaches the device model before the write's reply; it is applied before the guest's write
// completes, so the guest's next access traps instead of going through the retired mapping.
TEST_F(DeviceModelTest, ABarUnmapThatAWriteCausedIsAppliedBeforeTheWriteCompletes) {
  Program();
  auto memory = os::CreateSealedMemfd("vram", 1 << 20);
  ASSERT_TRUE(memory.ok());
  ASSERT_TRUE(
      dm_->HandleAggregatorEvent(BarMapRequest{1, BarIndex::kBar1, 0, 0x1000, 0, memory->get()})
          .ok());
  ASSERT_EQ(server_.memory.size(), 1u);
  aggregator_.PushEvent(BarUnmapRequest{2, BarIndex::kBar1, 0, 0x1000});
  Handle(Mmio(IoDirection::kWrite, kBar0At + 0x100cbc, 4, 0x80000001));
  EXPECT_TRUE(server_.memory.empty())
      << "the guest's write completes with the old mapping in place";
  ASSERT_EQ(aggregator_.bar_answers().size(), 2u);
  EXPECT_TRUE(aggregator_.bar_answers()[1].second.ok());
}

// A BAR_MAP/BAR_UNMAP the hypervisor cannot apply yet (Xen: a vCPU inside an access we must serve
// first) waits, with every one behind it, and is applied and answered in order by a later RunOnce.
TEST_F(DeviceModelTest, BarRequestsTheHypervisorCannotApplyYetWaitInOrder) {
  Program();
  auto memory = os::CreateSealedMemfd("vram", 1 << 20);
  ASSERT_TRUE(memory.ok());
  server_.busy_memory_changes = 3;  // the map, the map again behind the unmap, one RunOnce
  ASSERT_TRUE(dm_->HandleAggregatorEvent(
                     BarMapRequest{1, BarIndex::kBar3, 0x4000, 0x2000, 0, memory->get()})
                  .ok());
  ASSERT_TRUE(dm_->HandleAggregatorEvent(BarUnmapRequest{2, BarIndex::kBar3, 0x4000, 0x2000}).ok());
  EXPECT_TRUE(aggregator_.bar_answers().empty());
  EXPECT_TRUE(server_.memory.empty());
  ASSERT_TRUE(dm_->RunOnce(std::chrono::milliseconds(0)).ok());  // still busy once
  EXPECT_TRUE(aggregator_.bar_answers().empty());
  ASSERT_TRUE(dm_->RunOnce(std::chrono::milliseconds(0)).ok());
  ASSERT_EQ(aggregator_.bar_answers().size(), 2u);
  EXPECT_EQ(aggregator_.bar_answers()[0].first, 1u);
  EXPECT_TRUE(aggregator_.bar_answers()[0].second.ok());
  EXPECT_EQ(aggregator_.bar_answers()[1].first, 2u);
  EXPECT_TRUE(aggregator_.bar_answers()[1].second.ok());
  EXPECT_TRUE(server_.memory.empty());  // mapped, then unmapped
  EXPECT_EQ(dm_->counters().Snapshot().bar_maps, 1u);
  // An unmap that has to wait keeps its range: it is unmapped when tried again, not forgotten.
  ASSERT_TRUE(dm_->HandleAggregatorEvent(
                     BarMapRequest{3, BarIndex::kBar3, 0x4000, 0x2000, 0, memory->get()})
                  .ok());
  ASSERT_EQ(server_.memory.size(), 1u);
  server_.busy_memory_changes = 1;
  ASSERT_TRUE(dm_->HandleAggregatorEvent(BarUnmapRequest{4, BarIndex::kBar3, 0x4000, 0x2000}).ok());
  EXPECT_EQ(server_.memory.size(), 1u);
  ASSERT_TRUE(dm_->RunOnce(std::chrono::milliseconds(0)).ok());
  EXPECT_TRUE(server_.memory.empty());
  ASSERT_EQ(aggregator_.bar_answers().size(), 4u);
  EXPECT_TRUE(aggregator_.bar_answers()[3].second.ok());
}

// --- the same device model on every hypervisor backend
// -----------------------------------------------

// Runs a DeviceModel's event loop on its own thread (its owner from then on).
class DeviceModelThread {
 public:
  explicit DeviceModelThread(DeviceModel* dm) : dm_(dm) {
    thread_ = std::thread([this] {
      while (!stop_) {
        const Status s = dm_->RunOnce(std::chrono::milliseconds(20));
        if (!s.ok()) {
          ADD_FAILURE() << s.ToString();
          return;
        }
      }
    });
  }
  ~DeviceModelThread() {
    stop_ = true;
    thread_.join();
  }

 private:
  DeviceModel* dm_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

template <typename Backend>
class DeviceModelOnBackend : public hv::testing::BackendTest<Backend> {
 protected:
  using hv::testing::BackendTest<Backend>::env_;
  // Everything a test needs, or a skip.
  void Start() {
    GPUVM_ASSIGN_OR_SKIP(server_, env_->CreateIoreqServer());
    GPUVM_ASSIGN_OR_SKIP(memory_, env_->OpenGuestMemory());
    GPUVM_ASSIGN_OR_SKIP(guest_, env_->CreateGuest());
    auto dm = DeviceModel::Create(DeviceModelConfig{}, server_.get(), &aggregator_, memory_.get());
    ASSERT_TRUE(dm.ok()) << dm.status().ToString();
    dm_ = std::move(*dm);
    loop_ = std::make_unique<DeviceModelThread>(dm_.get());
  }
  void TearDown() override {
    loop_.reset();
    dm_.reset();
  }
  void ConfigWrite(uint32_t offset, uint32_t size, uint32_t value) {
    ASSERT_TRUE(guest_->ConfigWrite(0, kDefaultSbdf, offset, size, value).ok());
  }
  uint32_t ConfigRead(uint32_t offset, uint32_t size) {
    auto v = guest_->ConfigRead(0, kDefaultSbdf, offset, size);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : 0;
  }
  void Program() {
    ConfigWrite(kPciBar0, 4, static_cast<uint32_t>(kBar0At));
    ConfigWrite(kPciBar1, 4, static_cast<uint32_t>(kBar1At));
    ConfigWrite(kPciBar3, 4, static_cast<uint32_t>(kBar3At));
    ConfigWrite(kPciCommand, 2, kCommandMemory);
  }

  FakeAggregator aggregator_;
  std::unique_ptr<hv::IoreqServer> server_;
  std::unique_ptr<hv::GuestMemory> memory_;
  std::unique_ptr<hv::GuestIo> guest_;
  std::unique_ptr<DeviceModel> dm_;
  std::unique_ptr<DeviceModelThread> loop_;
};

using Backends = ::testing::Types<hv::testing::LocalBackend, hv::testing::XenBackend>;
TYPED_TEST_SUITE(DeviceModelOnBackend, Backends, hv::testing::BackendName);

TYPED_TEST(DeviceModelOnBackend, TheGuestEnumeratesSizesProgramsAndUsesTheGpu) {
  this->Start();
  if (this->IsSkipped() || this->HasFatalFailure()) return;
  EXPECT_EQ(this->ConfigRead(0, 4), 0x06d810deu);
  EXPECT_EQ(this->ConfigRead(kPciRevision, 4) >> 8, 0x030000u);
  this->ConfigWrite(kPciBar0, 4, 0xffffffff);
  EXPECT_EQ(this->ConfigRead(kPciBar0, 4), 0xff000000u);
  EXPECT_EQ(*this->guest_->Read(0, kBar0At, 4), 0xffffffffu) << "not decoding yet";
  this->Program();
  ASSERT_TRUE(this->guest_->Write(0, kBar0At + 0x1700, 4, 0x12345).ok());
  EXPECT_EQ(*this->guest_->Read(1, kBar0At + 0x1700, 4), 0x12345u);
  EXPECT_EQ(*this->guest_->Read(0, kBar1At + 0x8c, 4), Pattern(BarIndex::kBar1, 0x8c, 4));
  EXPECT_EQ(*this->guest_->Read(0, kBar3At + 8, 8), Pattern(BarIndex::kBar3, 8, 8));
  const TrapCounterValues c = this->dm_->counters().Snapshot();
  EXPECT_EQ(c.traps(BarIndex::kBar0), 2u);
  EXPECT_EQ(c.traps(BarIndex::kBar1), 1u);
  EXPECT_EQ(c.traps(BarIndex::kBar3), 1u);
  EXPECT_EQ(c.refused_total(), 0u);
}

TYPED_TEST(DeviceModelOnBackend, RelocatedBarsTrapAtTheirNewAddress) {
  this->Start();
  if (this->IsSkipped() || this->HasFatalFailure()) return;
  this->Program();
  EXPECT_EQ(*this->guest_->Read(0, kBar0At, 4), Pattern(BarIndex::kBar0, 0, 4));
  this->ConfigWrite(kPciBar0, 4, 0xd0000000);
  EXPECT_EQ(*this->guest_->Read(0, kBar0At, 4), 0xffffffffu) << "old address no longer traps";
  EXPECT_EQ(*this->guest_->Read(0, 0xd0000010, 4), Pattern(BarIndex::kBar0, 0x10, 4));
  this->ConfigWrite(kPciCommand, 2, 0);
  EXPECT_EQ(*this->guest_->Read(0, 0xd0000010, 4), 0xffffffffu);
  EXPECT_EQ(this->dm_->counters().Snapshot().traps(BarIndex::kBar0), 2u);
}

TYPED_TEST(DeviceModelOnBackend, RepMovsUsesTheGuestsOwnMemory) {
  this->Start();
  if (this->IsSkipped() || this->HasFatalFailure()) return;
  this->Program();
  std::span<uint8_t> ram = this->env_->guest_ram();
  for (int i = 0; i < 32; ++i) ram[0x5000 + i] = static_cast<uint8_t>(i);
  IoRequest movs = Mmio(IoDirection::kWrite, kBar1At + 0x200, 8, 0x5000);
  movs.data_is_ptr = true;
  movs.count = 4;
  ASSERT_TRUE(this->guest_->Submit(movs).ok());
  IoRequest back = Mmio(IoDirection::kRead, kBar1At + 0x200, 8, 0x6000);
  back.data_is_ptr = true;
  back.count = 4;
  ASSERT_TRUE(this->guest_->Submit(back).ok());
  EXPECT_EQ(0, std::memcmp(&ram[0x5000], &ram[0x6000], 32));
  EXPECT_EQ(this->dm_->counters().Snapshot().traps(BarIndex::kBar1), 8u);
}

TYPED_TEST(DeviceModelOnBackend, HostileTrapsAreAnsweredAndCounted) {
  this->Start();
  if (this->IsSkipped() || this->HasFatalFailure()) return;
  this->Program();
  IoRequest odd = Mmio(IoDirection::kRead, kBar0At, 3);
  EXPECT_EQ(*this->guest_->Submit(odd), ~uint64_t{0});
  IoRequest flood = Mmio(IoDirection::kRead, kBar1At, 4, 0);
  flood.data_is_ptr = true;
  flood.count = 0x7fffffff;
  EXPECT_TRUE(this->guest_->Submit(flood).ok());
  IoRequest port = Mmio(IoDirection::kRead, 0xcf8, 4);
  port.space = IoSpace::kPort;
  EXPECT_EQ(*this->guest_->Submit(port) & 0xffffffff, 0xffffffffu);
  const TrapCounterValues c = this->dm_->counters().Snapshot();
  EXPECT_EQ(c.refused_total(), 3u);
  EXPECT_TRUE(this->aggregator_.accesses().empty());
  // And the device still works.
  EXPECT_EQ(*this->guest_->Read(0, kBar0At + 4, 4), Pattern(BarIndex::kBar0, 4, 4));
}

TYPED_TEST(DeviceModelOnBackend, TheAggregatorsInterruptReachesTheGuest) {
  this->Start();
  if (this->IsSkipped() || this->HasFatalFailure()) return;
  this->aggregator_.PushEvent(InterruptLevel{true});
  for (int i = 0; i < 200 && this->guest_->interrupts().intx_levels == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(this->guest_->interrupts().intx_levels, 1u);
  EXPECT_TRUE(this->ConfigRead(kPciStatus, 2) & kStatusInterrupt);
  this->aggregator_.PushEvent(InterruptLevel{false});
  for (int i = 0; i < 200 && this->guest_->interrupts().intx_levels != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(this->guest_->interrupts().intx_levels, 0u);
}

}  // namespace
}  // namespace gpuvm::dm
