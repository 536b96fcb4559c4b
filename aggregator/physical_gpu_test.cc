// The physical GPU backends: --gpu parsing, the software GPU's reset (VRAM unreadable afterwards,
// the interrupt handler kept), the register-level helpers (quiesce, VRAM probe, PRAMIN scrub), the
// pci backend's argument and error handling, and the mapped-BAR device over ordinary memory.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "aggregator/gpu_spec.h"
#include "aggregator/pci_gpu.h"
#include "aggregator/physical_gpu.h"
#include "aggregator/sim_gpu.h"
#include "aggregator/testing/unthreaded_sim.h"
#include "gpu/hw/pbus.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pmc.h"

namespace gpuvm::aggregator {
namespace {

namespace pbus = gf100::pbus;

SimGpuOptions SmallSim() { return testing::UnthreadedSim(64ull << 20); }

void PraminWrite(gpu::Device& d, uint64_t vram, uint32_t value) {
  d.WriteReg(pbus::kPraminBase, uint32_t(vram >> pbus::kPraminBaseShift));
  d.WriteReg(uint32_t(pbus::kPraminWindow + (vram & 0xffff)), value);
}
uint32_t PraminRead(gpu::Device& d, uint64_t vram) {
  d.WriteReg(pbus::kPraminBase, uint32_t(vram >> pbus::kPraminBaseShift));
  return d.ReadReg(uint32_t(pbus::kPraminWindow + (vram & 0xffff)));
}

TEST(AggregatorGpuSpecTest, ParsesSimAndPciAddresses) {
  auto sim = ParseGpuSpec("sim");
  ASSERT_TRUE(sim.ok());
  EXPECT_EQ(sim->kind, GpuSpec::Kind::kSim);
  auto full = ParseGpuSpec("pci:0000:01:00.0");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(full->kind, GpuSpec::Kind::kPci);
  EXPECT_EQ(full->pci, (hv::Sbdf{0, 1, 0, 0}));
  auto short_form = ParseGpuSpec("pci:0a:1f.7");
  ASSERT_TRUE(short_form.ok());
  EXPECT_EQ(short_form->pci, (hv::Sbdf{0, 0x0a, 0x1f, 7}));
}

TEST(AggregatorGpuSpecTest, RefusesAnythingElseWithTheAcceptedForms) {
  for (const char* bad : {"", "gpu", "pci:", "pci:zz", "pci:00:20.0", "pci:00:00.8", "sim ",
                          "PCI:00:00.0", "pci:00:00.0:1"}) {
    auto spec = ParseGpuSpec(bad);
    EXPECT_FALSE(spec.ok()) << bad;
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(spec.status().message().find("pci:"), std::string::npos) << bad;
  }
}

TEST(AggregatorPciGpuTest, NoDeviceAtTheAddressIsNotFound) {
  auto gpu = PciGpu::Open(hv::Sbdf{0x7ff, 0xfe, 0x1f, 7});
  ASSERT_FALSE(gpu.ok());
  // Unavailable where libpciaccess cannot start at all (no sysfs), NotFound otherwise.
  EXPECT_TRUE(gpu.status().code() == StatusCode::kNotFound ||
              gpu.status().code() == StatusCode::kUnavailable)
      << gpu.status().ToString();
}

TEST(AggregatorPciGpuTest, RefusesADeviceThatIsNotAnNvidiaGpu) {
  struct stat st;
  if (::stat("/sys/bus/pci/devices/0000:00:00.0", &st) != 0) {
    GTEST_SKIP() << "no PCI device 0000:00:00.0 on this machine";
  }
  auto gpu = PciGpu::Open(hv::Sbdf{0, 0, 0, 0});
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), StatusCode::kFailedPrecondition) << gpu.status().ToString();
  EXPECT_NE(gpu.status().message().find("not an NVIDIA display controller"), std::string::npos);
}

TEST(AggregatorPciGpuTest, OpenPhysicalGpuPassesThePciErrorOn) {
  auto gpu = OpenPhysicalGpu(GpuSpec{GpuSpec::Kind::kPci, hv::Sbdf{0x7ff, 0xfe, 0x1f, 7}});
  EXPECT_FALSE(gpu.ok());
}

class MappedBarDeviceTest : public ::testing::Test {
 protected:
  MappedBarDeviceTest() : bar0_(1 << 20), bar1_(1 << 16), bar3_(1 << 16) {
    identity_.vendor_id = 0x10de;
    identity_.bar0_size = bar0_.size();
    identity_.bar1_size = bar1_.size();
    identity_.bar3_size = bar3_.size();
    device_ = std::make_unique<MappedBarDevice>(identity_, bar0_, bar1_, bar3_);
  }
  std::vector<uint8_t> bar0_, bar1_, bar3_;
  gpu::PciIdentity identity_;
  std::unique_ptr<MappedBarDevice> device_;
};

TEST_F(MappedBarDeviceTest, AccessesEveryWidthInsideTheBars) {
  device_->Write64(gpu::Bar::k1, 0x100, 0x1122334455667788ull);
  EXPECT_EQ(device_->Read64(gpu::Bar::k1, 0x100), 0x1122334455667788ull);
  EXPECT_EQ(device_->Read32(gpu::Bar::k1, 0x104), 0x11223344u);
  EXPECT_EQ(device_->Read16(gpu::Bar::k1, 0x102), 0x5566u);
  EXPECT_EQ(device_->Read8(gpu::Bar::k1, 0x100), 0x88u);
  device_->WriteReg(0x1700, 0xabcd);
  EXPECT_EQ(bar0_[0x1700], 0xcd);
}

TEST_F(MappedBarDeviceTest, OutsideOrUnalignedAccessesReadZeroAndAreDropped) {
  const auto before = bar3_;
  device_->Write32(gpu::Bar::k3, bar3_.size(), 1);       // past the end
  device_->Write32(gpu::Bar::k3, bar3_.size() - 2, 1);   // runs off the end
  device_->Write32(gpu::Bar::k3, 2, 0xffffffff);         // unaligned
  device_->Write64(gpu::Bar::k3, ~uint64_t{0} - 3, 1);   // would wrap
  EXPECT_EQ(bar3_, before);
  bar3_[4] = 7;
  EXPECT_EQ(device_->Read32(gpu::Bar::k3, 2), 0u);
  EXPECT_EQ(device_->Read32(gpu::Bar::k3, bar3_.size()), 0u);
}

TEST_F(MappedBarDeviceTest, BlocksAreBoundsCheckedAndNotForBar0) {
  std::vector<uint8_t> data(300, 0x5a);
  ASSERT_TRUE(device_->WriteBlock(gpu::Bar::k1, 17, data.data(), data.size()).ok());
  std::vector<uint8_t> back(300);
  ASSERT_TRUE(device_->ReadBlock(gpu::Bar::k1, 17, back.data(), back.size()).ok());
  EXPECT_EQ(back, data);
  EXPECT_EQ(device_->WriteBlock(gpu::Bar::k0, 0, data.data(), 4).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(device_->ReadBlock(gpu::Bar::k3, bar3_.size() - 10, back.data(), 11).code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(device_->ReadBlock(gpu::Bar::k3, ~uint64_t{0}, back.data(), 2).code(),
            StatusCode::kOutOfRange);
}

TEST_F(MappedBarDeviceTest, InterruptLineIsPolledFromPmcIntr) {
  std::atomic<int> calls{0};
  std::atomic<bool> level{true};
  device_->SetInterruptHandler([&](bool asserted) {
    level = asserted;
    ++calls;
  });
  EXPECT_EQ(calls.load(), 1);  // the current level at once
  EXPECT_FALSE(level.load());
  std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(&bar0_[gf100::pmc::kIntrHost]))
      .store(1u << 8);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!level.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(level.load());
  EXPECT_TRUE(device_->interrupt_asserted());
  device_->SetInterruptHandler(nullptr);
}

TEST(AggregatorSimGpuTest, ResetLeavesNothingOfThePreviousOwner) {
  auto gpu = SimGpu::Create(SmallSim());
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  std::atomic<int> handler_calls{0};
  (*gpu)->SetInterruptHandler([&](bool) { ++handler_calls; });
  const int after_install = handler_calls.load();
  gpu::Device& before = (*gpu)->device();
  PraminWrite(before, 0x200000, 0xdeadbeef);
  before.WriteReg(pbus::kBar1Inst, 0x80000010);
  ASSERT_EQ(PraminRead(before, 0x200000), 0xdeadbeefu);

  ASSERT_TRUE((*gpu)->Reset().ok());
  EXPECT_EQ((*gpu)->resets(), 1u);
  gpu::Device& after = (*gpu)->device();
  EXPECT_EQ(PraminRead(after, 0x200000), 0u) << "VRAM of the previous owner is readable";
  EXPECT_EQ(after.ReadReg(pbus::kBar1Inst), 0u);
  EXPECT_EQ(after.ReadReg(gf100::pmc::kBoot0), gf100::pmc::kBoot0Value);
  EXPECT_GT(handler_calls.load(), after_install) << "the handler was not installed again";
  EXPECT_EQ(ProbeVramBytes(after), 64ull << 20);
}

TEST(AggregatorSimGpuTest, ScrubThroughPraminZeroesEveryWindow) {
  SimGpuOptions o = SmallSim();
  o.vram_bytes = 4ull << 20;  // a few windows; the real thing is the same loop
  auto gpu = SimGpu::Create(o);
  ASSERT_TRUE(gpu.ok());
  gpu::Device& d = (*gpu)->device();
  for (uint64_t at : {uint64_t{0}, uint64_t{0x10004}, uint64_t{0x1ffffc}, uint64_t{0x3ffffc}}) {
    PraminWrite(d, at, 0x12345678);
  }
  d.WriteReg(pbus::kPraminBase, 0x21);
  ScrubVramThroughPramin(d, o.vram_bytes);
  EXPECT_EQ(d.ReadReg(pbus::kPraminBase), 0x21u) << "the window base is restored";
  for (uint64_t at : {uint64_t{0}, uint64_t{0x10004}, uint64_t{0x1ffffc}, uint64_t{0x3ffffc}}) {
    EXPECT_EQ(PraminRead(d, at), 0u) << at;
  }
}

TEST(AggregatorSimGpuTest, QuiesceUnbindsChannelsAndApertures) {
  auto gpu = SimGpu::Create(SmallSim());
  ASSERT_TRUE(gpu.ok());
  gpu::Device& d = (*gpu)->device();
  namespace pf = gf100::pfifo;
  d.WriteReg(pbus::kBar3Inst, 0x80000020);
  d.WriteReg(pf::kPollArea, pf::kPollAreaEnable | 0x10);
  d.WriteReg(gf100::pmc::kIntrEnHost, 1);
  QuiesceChannels(d);
  EXPECT_EQ(d.ReadReg(pbus::kBar3Inst), 0u);
  EXPECT_EQ(d.ReadReg(pf::kPollArea), 0u);
  EXPECT_EQ(d.ReadReg(gf100::pmc::kIntrEnHost), 0u);
  for (uint32_t chid = 0; chid < pf::kChannels; ++chid) {
    EXPECT_EQ(d.ReadReg(pf::kChanTable + chid * pf::kChanTableStride) & pf::kChanValid, 0u);
  }
  EXPECT_FALSE(d.interrupt_asserted());
}

}  // namespace
}  // namespace gpuvm::aggregator
