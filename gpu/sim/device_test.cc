// Drives the software GF100 through its registers only, as a driver would (with the nouveau-style
// TestDriver from gpu/sim/testing), and checks memory, registers and channel error records.
#include "gpu/sim/device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "gpu/hw/classes.h"
#include "gpu/hw/gpfifo.h"
#include "gpu/hw/pbus.h"
#include "gpu/hw/pci.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pgraph.h"
#include "gpu/hw/pmc.h"
#include "gpu/hw/ramin.h"
#include "gpu/sim/pinned_host_memory.h"
#include "gpu/sim/testing/test_driver.h"

namespace gpuvm::sim {
namespace {

namespace pf = gf100::pfifo;
namespace copy = gf100::copy;
namespace host = gf100::host;
using gpu::Bar;
using testing::Channel;
using testing::MapFlags;
using testing::TestDriver;
using testing::Vm;

constexpr uint64_t kVramSize = 64ull << 20;
constexpr uint32_t kCopySubc = 4;
constexpr uint32_t kM2mfSubc = 2;
constexpr uint32_t kComputeSubc = 1;

// Host memory for SYSRAM tests: 1 MiB at bus address 1 GiB.
constexpr uint64_t kHostBus = 0x40000000;
constexpr uint64_t kHostSize = 1 << 20;

class SimDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_buffer_ = static_cast<uint8_t*>(std::aligned_alloc(4096, kHostSize));
    std::memset(host_buffer_, 0, kHostSize);
    ASSERT_TRUE(host_.Register(kHostBus, host_buffer_, kHostSize).ok());
  }
  void TearDown() override {
    driver_.reset();
    device_.reset();
    std::free(host_buffer_);
  }

  void CreateDevice(std::shared_ptr<ComputeEngine> engine = nullptr, bool threaded = false,
                    std::chrono::nanoseconds slice = std::chrono::milliseconds(1)) {
    SimDeviceOptions options;
    options.vram_size = kVramSize;
    options.threaded = threaded;
    options.host_memory = host_memory_ != nullptr ? host_memory_ : &host_;
    options.compute_engine = std::move(engine);
    options.time_slice = slice;
    options.on_channel_drained = [this](uint32_t chid) {
      std::lock_guard lock(drained_mu_);
      drained_.push_back(chid);
    };
    auto device = SimDevice::Create(options);
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    device_ = std::move(device).value();
    driver_ = std::make_unique<TestDriver>(device_.get(), kVramSize);
  }

  // A new device with one VM that maps a page for semaphores (at `sem`, physical `sem_phys`); vm is
  // null when the device could not be made.
  struct SemaphoreVm {
    Vm* vm = nullptr;
    uint64_t sem = 0;
    uint64_t sem_phys = 0;
  };
  SemaphoreVm CreateDeviceWithSemaphoreVm() {
    CreateDevice();
    SemaphoreVm s;
    if (driver_ == nullptr) return s;
    s.vm = driver_->CreateVm();
    s.sem = s.vm->AllocMapped(0x1000, &s.sem_phys);
    s.vm->Flush();
    return s;
  }

  // Flags of a mapping of host memory (SYSRAM, snooped).
  static MapFlags Sysram() {
    MapFlags flags;
    flags.target = gf100::vm::Target::kSysramSnooped;
    return flags;
  }
  // `bytes` of new address space in `vm` mapped to the registered host buffer from `offset` on.
  static uint64_t MapHost(Vm* vm, uint64_t offset, uint64_t bytes) {
    const uint64_t va = vm->AllocVa(bytes);
    vm->Map(va, kHostBus + offset, bytes, Sysram());
    return va;
  }

  // A new device and VM for copies between VRAM and host memory: 0x4000 bytes of VRAM (vram_va,
  // vram_phys), `host_bytes` of the host buffer from `host_offset` on (sys_va), which starts with
  // `data`, a 0x4000-byte Pattern(seed); channel 1 of the VM has PCOPY bound. vm is null when the
  // device could not be made.
  struct SysramCopySetup {
    Vm* vm = nullptr;
    Channel* ch = nullptr;
    uint64_t vram_va = 0;
    uint64_t vram_phys = 0;
    uint64_t sys_va = 0;
    std::vector<uint8_t> data;
  };
  SysramCopySetup CreateSysramCopySetup(uint64_t host_offset, uint64_t host_bytes, uint8_t seed) {
    CreateDevice();
    SysramCopySetup s;
    if (driver_ == nullptr) return s;
    s.vm = driver_->CreateVm();
    s.vram_va = s.vm->AllocMapped(0x4000, &s.vram_phys);
    s.sys_va = MapHost(s.vm, host_offset, host_bytes);
    s.vm->Flush();
    s.data = Pattern(0x4000, seed);
    std::memcpy(host_buffer_ + host_offset, s.data.data(), s.data.size());
    s.ch = driver_->CreateChannel(1, s.vm);
    Bind(s.ch, kCopySubc, gf100::kClassCopy);
    return s;
  }

  // Binds `subc` of `ch` to `cls`.
  static void Bind(Channel* ch, uint32_t subc, uint32_t cls) {
    ch->Inc(subc, host::kSetObject, {cls});
  }

  static void PcopyLinear(Channel* ch, uint64_t src, uint64_t dst, uint32_t bytes,
                          uint32_t launch_extra = 0) {
    ch->Inc(kCopySubc, copy::kOffsetInUpper,
            {uint32_t(src >> 32), uint32_t(src), uint32_t(dst >> 32), uint32_t(dst)});
    ch->Inc(kCopySubc, copy::kLineLengthIn, {bytes});
    ch->Inc(kCopySubc, copy::kLaunchDma, {copy::kSrcPitch | copy::kDstPitch | 1 | launch_extra});
  }

  static void Release(Channel* ch, uint64_t va, uint32_t value, bool short_report = true) {
    ch->Inc(0, host::kSemaphoreA,
            {uint32_t(va >> 32), uint32_t(va), value,
             host::kSemOpRelease | (short_report ? host::kSemReleaseSize4 : 0)});
  }
  static void Acquire(Channel* ch, uint64_t va, uint32_t value, uint32_t op = host::kSemOpAcquire) {
    ch->Inc(0, host::kSemaphoreA, {uint32_t(va >> 32), uint32_t(va), value, op});
  }

  std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = uint8_t(seed + i * 7 + (i >> 8));
    return v;
  }
  std::vector<uint8_t> ReadVram(uint64_t address, size_t n) {
    std::vector<uint8_t> v(n);
    driver_->ReadBytes(address, v.data(), n);
    return v;
  }
  uint32_t Reg(uint32_t offset) { return device_->ReadReg(offset); }
  // The channels on_channel_drained reported since the last call, in order.
  std::vector<uint32_t> TakeDrained() {
    std::lock_guard lock(drained_mu_);
    return std::exchange(drained_, {});
  }

  PinnedHostMemory host_;
  gpu::HostMemory* host_memory_ = nullptr;  // what CreateDevice gives the device (null: host_)
  std::mutex drained_mu_;
  std::vector<uint32_t> drained_;
  uint8_t* host_buffer_ = nullptr;
  std::unique_ptr<SimDevice> device_;
  std::unique_ptr<TestDriver> driver_;
};

// ---- identity, registers, tracing, interrupts
// --------------------------------------------------------------

TEST_F(SimDeviceTest, PciIdentityAndBoot0) {
  CreateDevice();
  const gpu::PciIdentity& pci = device_->pci();
  EXPECT_EQ(pci.vendor_id, 0x10de);
  EXPECT_EQ(pci.device_id, 0x06d8);
  EXPECT_EQ(pci.class_code, 0x030000u);
  EXPECT_EQ(pci.bar0_size, 16u << 20);
  EXPECT_EQ(pci.BarSize(Bar::k1), gf100::pci::kDefaultBar1Size);
  EXPECT_EQ((Reg(gf100::pmc::kBoot0) >> 20) & 0x1ff, 0xc0u);
  EXPECT_GT(device_->vram_fd(), 2);
  EXPECT_EQ(device_->vram_size(), kVramSize);
}

TEST_F(SimDeviceTest, UnknownRegistersReadZeroAndIgnoreWrites) {
  CreateDevice();
  EXPECT_EQ(Reg(0x123450), 0u);
  device_->WriteReg(0x123450, 0xdeadbeef);
  EXPECT_EQ(Reg(0x123450), 0u);
  EXPECT_EQ(device_->Read32(Bar::k0, 0x2000000), 0u);  // past BAR0
  EXPECT_EQ(device_->Read64(Bar::k0, 0xffffffffffffffffull), 0u);
  device_->Write32(Bar::k0, 0x2002, 1);  // unaligned
  const DeviceStats s = device_->stats();
  EXPECT_EQ(s.unknown_register_reads, 4u);
  EXPECT_EQ(s.unknown_register_writes, 2u);
  // Apertures without a VM read 0.
  EXPECT_EQ(device_->Read32(Bar::k1, 0), 0u);
  EXPECT_EQ(device_->Read32(Bar::k3, device_->pci().bar3_size), 0u);
  EXPECT_EQ(device_->stats().unmapped_aperture_accesses, 2u);
}

TEST_F(SimDeviceTest, RegisterTraceSeesExactSequence) {
  CreateDevice();
  std::vector<gpu::BarAccess> trace;
  device_->SetAccessObserver([&](const gpu::BarAccess& a) { trace.push_back(a); });
  device_->WriteReg(gf100::pbus::kPraminBase, 0x10);  // window at VRAM 0x100000
  device_->Write32(Bar::k0, gf100::pbus::kPraminWindow + 8, 0xcafe);
  const uint32_t v = device_->Read32(Bar::k0, gf100::pbus::kPraminWindow + 8);
  device_->Read8(Bar::k0, gf100::pbus::kPraminWindow + 9);
  device_->SetAccessObserver(nullptr);
  device_->ReadReg(0);  // not traced
  EXPECT_EQ(v, 0xcafeu);
  const std::vector<gpu::BarAccess> expected = {
      {Bar::k0, true, false, gf100::pbus::kPraminBase, 4, 0x10},
      {Bar::k0, true, false, gf100::pbus::kPraminWindow + 8, 4, 0xcafe},
      {Bar::k0, false, false, gf100::pbus::kPraminWindow + 8, 4, 0xcafe},
      {Bar::k0, false, false, gf100::pbus::kPraminWindow + 9, 1, 0xca},
  };
  EXPECT_EQ(trace, expected);
}

TEST_F(SimDeviceTest, InterruptLineIsLevelTriggered) {
  CreateDevice();
  std::vector<bool> levels;
  device_->SetInterruptHandler([&](bool level) { levels.push_back(level); });
  device_->WriteReg(gf100::pmc::kIntrHost, gf100::pmc::kIntrSoftware);  // pending, not enabled
  EXPECT_FALSE(device_->interrupt_asserted());
  device_->WriteReg(gf100::pmc::kIntrEnHost, gf100::pmc::kIntrEnSoftware);
  EXPECT_TRUE(device_->interrupt_asserted());
  device_->WriteReg(gf100::pmc::kIntrEnHost, gf100::pmc::kIntrEnSoftware);  // no change: no call
  device_->WriteReg(gf100::pmc::kIntrMaskHost, 0);                          // masked
  EXPECT_FALSE(device_->interrupt_asserted());
  device_->WriteReg(gf100::pmc::kIntrMaskHost, 0xffffffff);
  device_->WriteReg(gf100::pmc::kIntrHost, 0);
  EXPECT_FALSE(device_->interrupt_asserted());
  EXPECT_EQ(levels, (std::vector<bool>{false, true, false, true, false}));
}

TEST_F(SimDeviceTest, InterruptHandlerMayTouchTheDevice) {
  CreateDevice();
  std::vector<bool> levels;
  device_->WriteReg(gf100::pmc::kIntrEnHost, gf100::pmc::kIntrEnSoftware);
  device_->SetInterruptHandler([&](bool level) {
    levels.push_back(level);
    if (level) device_->WriteReg(gf100::pmc::kIntrHost, 0);  // acknowledge from the handler
  });
  device_->WriteReg(gf100::pmc::kIntrHost, gf100::pmc::kIntrSoftware);
  EXPECT_FALSE(device_->interrupt_asserted());
  EXPECT_EQ(levels, (std::vector<bool>{false, true, false}));
}

// ---- BAR3 VM, TLB, faults
// ---------------------------------------------------------------------------------

TEST_F(SimDeviceTest, Bar3TranslatesThroughItsVmProgrammedViaPramin) {
  CreateDevice();
  Vm* bar3 = driver_->CreateVm(device_->pci().bar3_size - 1);
  driver_->BindBar(Bar::k3, bar3);
  const uint64_t page = driver_->AllocVram(0x2000);
  bar3->Map(0x5000, page, 0x2000);
  bar3->Flush();
  device_->Write32(Bar::k3, 0x5010, 0x11223344);
  device_->Write64(Bar::k3, 0x5ffc, 0x8877665544332211ull);  // straddles two pages
  EXPECT_EQ(driver_->Read32(page + 0x10), 0x11223344u);
  EXPECT_EQ(driver_->Read32(page + 0xffc), 0x44332211u);
  EXPECT_EQ(driver_->Read32(page + 0x1000), 0x88776655u);
  EXPECT_EQ(device_->Read16(Bar::k3, 0x5012), 0x1122u);
  std::vector<uint8_t> data = Pattern(6000, 3), back(6000);
  ASSERT_TRUE(device_->WriteBlock(Bar::k3, 0x5000, data.data(), data.size()).ok());
  ASSERT_TRUE(device_->ReadBlock(Bar::k3, 0x5000, back.data(), back.size()).ok());
  EXPECT_EQ(back, data);
  EXPECT_EQ(ReadVram(page, data.size()), data);
  EXPECT_FALSE(device_->ReadBlock(Bar::k0, 0, back.data(), 4).ok());
  EXPECT_EQ(device_->ReadBlock(Bar::k3, device_->pci().bar3_size - 4, back.data(), 8).code(),
            StatusCode::kOutOfRange);
}

TEST_F(SimDeviceTest, LargePagesTranslate) {
  CreateDevice();
  Vm* bar3 = driver_->CreateVm(device_->pci().bar3_size - 1);
  driver_->BindBar(Bar::k3, bar3);
  const uint64_t phys = driver_->AllocVram(0x40000, 0x20000);
  MapFlags large;
  large.large = true;
  bar3->Map(0x40000, phys, 0x40000, large);
  bar3->Flush();
  device_->Write32(Bar::k3, 0x40000 + 0x2a004, 77);
  EXPECT_EQ(driver_->Read32(phys + 0x2a004), 77u);
  EXPECT_TRUE(bar3->ReadPte(0x40000, true) & gf100::vm::pte::kPresent);
}

TEST_F(SimDeviceTest, TlbServesStaleTranslationUntilFlushed) {
  CreateDevice();
  Vm* bar3 = driver_->CreateVm(device_->pci().bar3_size - 1);
  driver_->BindBar(Bar::k3, bar3);
  const uint64_t a = driver_->AllocVram(0x1000), b = driver_->AllocVram(0x1000);
  driver_->Write32(a, 0xaaaa);
  driver_->Write32(b, 0xbbbb);
  bar3->Map(0x10000, a, 0x1000);
  bar3->Flush();
  EXPECT_EQ(device_->Read32(Bar::k3, 0x10000), 0xaaaau);
  bar3->Map(0x10000, b, 0x1000);  // PTE rewritten, flush forgotten
  EXPECT_EQ(device_->Read32(Bar::k3, 0x10000), 0xaaaau);
  EXPECT_EQ(device_->Read32(Bar::k3, 0x10000), 0xaaaau);
  bar3->Flush();
  EXPECT_EQ(device_->Read32(Bar::k3, 0x10000), 0xbbbbu);
  // A flush of every space (ALL_PDB) works too.
  bar3->Map(0x10000, a, 0x1000);
  EXPECT_EQ(device_->Read32(Bar::k3, 0x10000), 0xbbbbu);
  device_->WriteReg(gf100::vm::kTlbFlushTrigger,
                    gf100::vm::kFlushTrigger | gf100::vm::kFlushAllPdb);
  EXPECT_EQ(device_->Read32(Bar::k3, 0x10000), 0xaaaau);
}

TEST_F(SimDeviceTest, UnmappedBarAccessRecordsVmFaultAndRaisesInterrupt) {
  CreateDevice();
  Vm* bar3 = driver_->CreateVm(device_->pci().bar3_size - 1);
  driver_->BindBar(Bar::k3, bar3);
  bar3->Map(0x10000, driver_->AllocVram(0x1000), 0x1000);
  bar3->Flush();
  driver_->EnableInterrupts();
  std::vector<bool> levels;
  device_->SetInterruptHandler([&](bool level) { levels.push_back(level); });

  EXPECT_EQ(device_->Read32(Bar::k3, 0x23450), 0u);  // same PDE, no PTE
  const uint32_t unit = uint32_t(gf100::FaultUnit::kBar3);
  const uint32_t rec = pf::kVmFault + unit * pf::kVmFaultStride;
  EXPECT_EQ(Reg(rec + pf::kVmFaultInst),
            Reg(gf100::pbus::kBar3Inst) & gf100::pbus::kBarInstAddrMask);
  EXPECT_EQ(Reg(rec + pf::kVmFaultAddrLo), 0x23450u);
  EXPECT_EQ(Reg(rec + pf::kVmFaultAddrHi), 0u);
  EXPECT_EQ(Reg(rec + pf::kVmFaultFlags),
            uint32_t(gf100::FaultReason::kPageNotPresent) | pf::kVmFaultHub |
                (uint32_t(gf100::FaultHubClient::kBar) << pf::kVmFaultClientShift));
  EXPECT_EQ(Reg(pf::kVmFaultSource), 1u << unit);
  EXPECT_TRUE(Reg(pf::kIntr) & pf::kIntrVmFault);
  EXPECT_TRUE(Reg(gf100::pmc::kIntrHost) & gf100::pmc::kIntrPfifo);
  EXPECT_TRUE(device_->interrupt_asserted());

  // A second fault on the same unit does not overwrite the first record.
  device_->Write32(Bar::k3, 0x30000, 1);
  EXPECT_EQ(Reg(rec + pf::kVmFaultAddrLo), 0x23450u);

  device_->WriteReg(pf::kVmFaultSource, 1u << unit);  // acknowledge
  EXPECT_FALSE(Reg(pf::kIntr) & pf::kIntrVmFault);
  EXPECT_FALSE(device_->interrupt_asserted());
  EXPECT_EQ(levels, (std::vector<bool>{false, true, false}));

  // Other reasons: no page table for the PDE, and past the VM limit.
  driver_->BindBar(Bar::k3, driver_->CreateVm(device_->pci().bar3_size - 1));  // no tables at all
  EXPECT_EQ(device_->Read32(Bar::k3, 0x1000), 0u);
  EXPECT_EQ(Reg(rec + pf::kVmFaultFlags) & pf::kVmFaultReasonMask,
            uint32_t(gf100::FaultReason::kPtNotPresent));
  device_->WriteReg(pf::kVmFaultSource, 1u << unit);
  Vm* small = driver_->CreateVm(0xfffff);  // 1 MiB limit
  driver_->BindBar(Bar::k3, small);
  device_->Write32(Bar::k3, 0x100000, 5);
  EXPECT_EQ(Reg(rec + pf::kVmFaultFlags),
            uint32_t(gf100::FaultReason::kVspaceLimit) | pf::kVmFaultHub | pf::kVmFaultWrite |
                (uint32_t(gf100::FaultHubClient::kBar) << pf::kVmFaultClientShift));
  EXPECT_GE(device_->stats().aperture_faults, 3u);
}

TEST_F(SimDeviceTest, WriteElementsIsExactlySingleWritesAPageAtATime) {
  CreateDevice();
  Vm* bar3 = driver_->CreateVm(device_->pci().bar3_size - 1);
  driver_->BindBar(Bar::k3, bar3);
  const uint64_t vram = driver_->AllocVram(0x2000);
  bar3->Map(0x5000, vram, 0x2000);  // 0x7000 on is unmapped
  bar3->Flush();
  // 4-byte elements from 0x5004 into the unmapped page: stored up to 0x7000, one fault per element
  // past it, as single writes would record.
  const uint64_t count = (0x7010 - 0x5004) / 4;
  std::vector<uint8_t> data = Pattern(count * 4, 5);
  const uint64_t faults = device_->stats().aperture_faults;
  device_->WriteElements(Bar::k3, 0x5004, gpu::Width::k32, data.data(), count);
  EXPECT_EQ(device_->stats().aperture_faults, faults + 4);
  EXPECT_EQ(driver_->Read32(vram + 0x4),
            uint32_t(data[0] | data[1] << 8 | data[2] << 16 | uint32_t(data[3]) << 24));
  std::vector<uint8_t> back(0x2000 - 4);
  ASSERT_TRUE(device_->ReadBlock(Bar::k3, 0x5004, back.data(), back.size()).ok());
  EXPECT_TRUE(std::equal(back.begin(), back.end(), data.begin()));
  // Repeated 8-byte elements from an unaligned offset: the one straddling 0x6000 goes bytewise.
  const uint64_t value = 0x8877665544332211ull;
  device_->WriteElements(Bar::k3, 0x5ff4, gpu::Width::k64, reinterpret_cast<const uint8_t*>(&value),
                         3, /*repeat=*/true);
  for (uint64_t at : {0x5ff4, 0x5ffc, 0x6004}) EXPECT_EQ(device_->Read64(Bar::k3, at), value) << at;
  // Under an access observer every element is seen as the single write it is.
  int seen = 0;
  device_->SetAccessObserver([&](const gpu::BarAccess& a) { seen += a.write && !a.block; });
  device_->WriteElements(Bar::k3, 0x5100, gpu::Width::k16, data.data(), 10);
  device_->SetAccessObserver(nullptr);
  EXPECT_EQ(seen, 10);
  EXPECT_EQ(device_->Read16(Bar::k3, 0x5112), uint16_t(data[18] | data[19] << 8));
}

TEST_F(SimDeviceTest, ReadOnlyPteRefusesWrites) {
  CreateDevice();
  Vm* bar3 = driver_->CreateVm(device_->pci().bar3_size - 1);
  driver_->BindBar(Bar::k3, bar3);
  const uint64_t page = driver_->AllocVram(0x1000);
  driver_->Write32(page, 42);
  MapFlags ro;
  ro.read_only = true;
  bar3->Map(0x10000, page, 0x1000, ro);
  bar3->Flush();
  EXPECT_EQ(device_->Read32(Bar::k3, 0x10000), 42u);
  device_->Write32(Bar::k3, 0x10000, 7);
  EXPECT_EQ(driver_->Read32(page), 42u);
  const uint32_t rec = pf::kVmFault + uint32_t(gf100::FaultUnit::kBar3) * pf::kVmFaultStride;
  EXPECT_EQ(Reg(rec + pf::kVmFaultFlags) & (pf::kVmFaultReasonMask | pf::kVmFaultWrite),
            uint32_t(gf100::FaultReason::kPageReadOnly) | pf::kVmFaultWrite);
}

// ---- channels
// -------------------------------------------------------------------------------------------

TEST_F(SimDeviceTest, CopyAndSemaphoreReleaseThroughAChannel) {
  CreateDevice();
  Vm* vm = driver_->CreateVm();
  uint64_t src_phys, dst_phys, sem_phys;
  const uint64_t src = vm->AllocMapped(0x3000, &src_phys);
  const uint64_t dst = vm->AllocMapped(0x3000, &dst_phys);
  const uint64_t sem = vm->AllocMapped(0x1000, &sem_phys);
  vm->Flush();
  const std::vector<uint8_t> data = Pattern(0x2a00, 9);
  driver_->WriteBytes(src_phys, data.data(), data.size());

  Channel* ch = driver_->CreateChannel(3, vm);
  Bind(ch, kCopySubc, gf100::kClassCopy);
  PcopyLinear(ch, src, dst + 0x100, uint32_t(data.size()));
  Release(ch, sem, 0x1234);
  Release(ch, sem + 0x10, 0x5678, /*short_report=*/false);
  ch->Inc(0, host::kSetReference, {99});
  ch->Submit();
  EXPECT_EQ(driver_->Read32(sem_phys), 0u);  // nothing runs until the device is stepped
  EXPECT_GT(device_->RunUntilIdle(), 0u);

  const ChannelError error = device_->channel_error(3);
  EXPECT_TRUE(error.ok()) << error.message;
  EXPECT_EQ(ReadVram(dst_phys + 0x100, data.size()), data);
  EXPECT_EQ(driver_->Read32(dst_phys + 0xfc), 0u);
  EXPECT_EQ(driver_->Read32(sem_phys), 0x1234u);
  EXPECT_EQ(driver_->Read32(sem_phys + 0x10), 0x5678u);
  EXPECT_EQ(driver_->Read32(sem_phys + 0x14), 0u);
  EXPECT_NE(driver_->Read64(sem_phys + 0x18), 0u);  // timestamp
  EXPECT_EQ(ch->ReadIbGet(), 1u);
  EXPECT_EQ(ch->ReadReference(), 99u);
  EXPECT_NE(driver_->Read32(ch->userd() + gf100::userd::kDmaGet), 0u);  // where the fetch stopped
  // Engine status: PCOPY0 last ran channel 3's context.
  EXPECT_EQ(Reg(pf::kEngineChannel + 4 * uint32_t(pf::Engine::kPcopy0)),
            pf::kEngineChannelValid | uint32_t(ch->instance() >> 12));
  EXPECT_FALSE(Reg(pf::kEngState + 4 * uint32_t(pf::Engine::kPcopy0)) & pf::kEngStateBusy);
  const ChannelStats stats = device_->channel_stats(3);
  EXPECT_EQ(stats.ib_entries, 1u);
  EXPECT_GT(stats.methods, 10u);
  EXPECT_GT(stats.engine_busy_ns[uint32_t(pf::Engine::kPcopy0)], 0u);
  EXPECT_TRUE(Reg(pf::kChanTable + 3 * 8 + 4) & pf::kStateRunnable);
}

TEST_F(SimDeviceTest, M2mfPushAndCopyWithQuery) {
  CreateDevice();
  Vm* vm = driver_->CreateVm();
  uint64_t buf_phys, q_phys;
  const uint64_t buf = vm->AllocMapped(0x2000, &buf_phys);
  const uint64_t q = vm->AllocMapped(0x1000, &q_phys);
  vm->Flush();
  namespace m2mf = gf100::m2mf;
  Channel* ch = driver_->CreateChannel(0, vm);
  Bind(ch, kM2mfSubc, gf100::kClassM2mf);
  // Inline upload of 10 bytes (3 DATA words) to buf + 4.
  ch->Inc(kM2mfSubc, m2mf::kOffsetOutHigh, {uint32_t(buf >> 32), uint32_t(buf + 4)});
  ch->Inc(kM2mfSubc, m2mf::kLineLengthIn, {10, 1});
  ch->Inc(kM2mfSubc, m2mf::kExec, {m2mf::kExecPush | m2mf::kExecLinearIn | m2mf::kExecLinearOut});
  ch->NonInc(kM2mfSubc, m2mf::kData, {0x03020100, 0x07060504, 0xffff0908});
  // Copy 2 lines of 8 bytes with pitches, then the query.
  ch->Inc(kM2mfSubc, m2mf::kOffsetInHigh, {uint32_t(buf >> 32), uint32_t(buf + 4), 16, 32, 8, 2});
  ch->Inc(kM2mfSubc, m2mf::kOffsetOutHigh, {uint32_t(buf >> 32), uint32_t(buf + 0x1000)});
  ch->Inc(kM2mfSubc, m2mf::kQueryAddressHigh, {uint32_t(q >> 32), uint32_t(q), 0xabcd});
  ch->Inc(kM2mfSubc, m2mf::kExec,
          {m2mf::kExecLinearIn | m2mf::kExecLinearOut |
           (m2mf::kExecQueryYes << m2mf::kExecQueryShift)});
  ch->Submit();
  device_->RunUntilIdle();
  ASSERT_TRUE(device_->channel_error(0).ok()) << device_->channel_error(0).message;
  std::vector<uint8_t> pushed = ReadVram(buf_phys + 4, 12);
  EXPECT_EQ(pushed, (std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0}));
  // Line 0: bytes 0..7 of buf+4; line 1: from buf+4+16 (zeros) to buf+0x1000+32.
  EXPECT_EQ(ReadVram(buf_phys + 0x1000, 8), (std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(driver_->Read32(q_phys), 0xabcdu);
  EXPECT_NE(driver_->Read64(q_phys + 8), 0u);
}

TEST_F(SimDeviceTest, SysramDmaBothWays) {
  auto [vm, ch, vram_va, vram_phys, sys_va, data] = CreateSysramCopySetup(0x10000, 0x9000, 1);
  ASSERT_NE(vm, nullptr);
  PcopyLinear(ch, sys_va, vram_va, 0x4000);           // SYSRAM -> VRAM
  PcopyLinear(ch, vram_va, sys_va + 0x4000, 0x4000);  // VRAM -> SYSRAM
  Release(ch, sys_va + 0x8000, 0x77);                 // a semaphore in host memory
  ch->Submit();
  device_->RunUntilIdle();
  ASSERT_TRUE(device_->channel_error(1).ok()) << device_->channel_error(1).message;
  EXPECT_EQ(ReadVram(vram_phys, data.size()), data);
  EXPECT_EQ(0, std::memcmp(host_buffer_ + 0x14000, data.data(), data.size()));
  uint32_t sem;
  std::memcpy(&sem, host_buffer_ + 0x18000, 4);
  EXPECT_EQ(sem, 0x77u);

  // A SYSRAM PTE outside every registered range faults instead of touching host memory.
  vm->Map(sys_va, 0x7000000000ull, 0x1000, Sysram());
  vm->Flush();
  PcopyLinear(ch, sys_va, vram_va, 0x100);
  ch->Submit();
  device_->RunUntilIdle();
  const ChannelError error = device_->channel_error(1);
  EXPECT_EQ(error.kind, ChannelError::Kind::kMmuFault);
  EXPECT_EQ(error.fault.va, sys_va);
  EXPECT_EQ(error.fault.reason, gf100::FaultReason::kPageNotPresent);
}

// Host memory whose next access, once armed, takes `stall` first: the engine thread stops in the
// middle of a slice, as it does when the aggregator's process is SIGSTOPped.
class StallingHostMemory final : public gpu::HostMemory {
 public:
  explicit StallingHostMemory(gpu::HostMemory* inner) : inner_(inner) {}
  void Arm(std::chrono::milliseconds stall) { stall_ms_ = stall.count(); }
  bool stalled() const { return stalled_; }
  uint8_t* Translate(uint64_t bus_address, uint64_t length) override {
    if (const int64_t ms = stall_ms_.exchange(0); ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      stalled_ = true;
    }
    return inner_->Translate(bus_address, length);
  }

 private:
  gpu::HostMemory* const inner_;
  std::atomic<int64_t> stall_ms_{0};
  std::atomic<bool> stalled_{false};
};

// A slice in which the engine did not run (here it sleeps 400 ms inside a copy) is not busy time:
// CHAN_BUSY_US, what the scheduler charges a VM, counts at most the slice plus
// PfifoConfig::max_slice_overrun_ns (50 ms), and the copy is done right all the same.
TEST_F(SimDeviceTest, AStalledSliceIsNotChargedAsBusyTime) {
  StallingHostMemory stalling(&host_);
  host_memory_ = &stalling;
  auto [vm, ch, vram_va, vram_phys, sys_va, data] = CreateSysramCopySetup(0, 0x4000, 3);
  ASSERT_NE(vm, nullptr);
  PcopyLinear(ch, sys_va, vram_va, 0x4000);
  stalling.Arm(std::chrono::milliseconds(400));
  ch->Submit();
  const auto start = std::chrono::steady_clock::now();
  device_->RunUntilIdle();
  const auto wall = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(device_->channel_error(1).ok()) << device_->channel_error(1).message;
  ASSERT_TRUE(stalling.stalled());
  ASSERT_GE(wall, std::chrono::milliseconds(400));
  EXPECT_EQ(ReadVram(vram_phys, data.size()), data);
  const uint64_t busy_ns = device_->channel_stats(1).busy_ns;
  EXPECT_GT(busy_ns, 0u);
  EXPECT_LT(busy_ns, 200'000'000u) << "the 400 ms stall was charged as busy time";
  EXPECT_LT(Reg(pf::kChanBusyUs + 4 * 1), 200'000u);
}

TEST_F(SimDeviceTest, EngineFaultsOnReadOnlyAndSupervisorPages) {
  CreateDevice();
  Vm* vm = driver_->CreateVm();
  uint64_t src_phys, dst_phys;
  const uint64_t src = vm->AllocMapped(0x1000, &src_phys);
  const uint64_t dst = vm->AllocVa(0x1000);
  dst_phys = driver_->AllocVram(0x1000);
  MapFlags ro;
  ro.read_only = true;
  vm->Map(dst, dst_phys, 0x1000, ro);
  const uint64_t priv = vm->AllocVa(0x1000);
  MapFlags sup;
  sup.supervisor_only = true;
  vm->Map(priv, driver_->AllocVram(0x1000), 0x1000, sup);
  vm->Flush();
  driver_->EnableInterrupts();

  Channel* a = driver_->CreateChannel(0, vm);
  Bind(a, kCopySubc, gf100::kClassCopy);
  PcopyLinear(a, src, dst, 0x100);
  a->Submit();
  Channel* b = driver_->CreateChannel(1, vm);
  Bind(b, kCopySubc, gf100::kClassCopy);
  PcopyLinear(b, priv, src, 0x100);  // the copy engine is not privileged
  b->Submit();
  device_->RunUntilIdle();

  ChannelError ea = device_->channel_error(0), eb = device_->channel_error(1);
  EXPECT_EQ(ea.kind, ChannelError::Kind::kMmuFault);
  EXPECT_EQ(ea.fault.reason, gf100::FaultReason::kPageReadOnly);
  EXPECT_TRUE(ea.fault.write);
  EXPECT_EQ(eb.kind, ChannelError::Kind::kMmuFault);
  EXPECT_EQ(eb.fault.reason, gf100::FaultReason::kPageSupervisorOnly);
  const uint32_t rec = pf::kVmFault + uint32_t(gf100::FaultUnit::kPcopy0) * pf::kVmFaultStride;
  EXPECT_EQ(Reg(rec + pf::kVmFaultInst), uint32_t(a->instance() >> 12));  // the first fault stays
  EXPECT_EQ(Reg(rec + pf::kVmFaultAddrLo), uint32_t(dst));
  EXPECT_EQ(Reg(rec + pf::kVmFaultFlags),
            uint32_t(gf100::FaultReason::kPageReadOnly) | pf::kVmFaultHub | pf::kVmFaultWrite |
                (uint32_t(gf100::FaultHubClient::kPcopy0) << pf::kVmFaultClientShift));
  EXPECT_TRUE(device_->interrupt_asserted());
  // A privileged client (PFIFO's semaphore release) may write the supervisor page.
  Channel* c = driver_->CreateChannel(2, vm);
  Release(c, priv, 5);
  c->Submit();
  device_->RunUntilIdle();
  EXPECT_TRUE(device_->channel_error(2).ok()) << device_->channel_error(2).message;
}

TEST_F(SimDeviceTest, TwoChannelsInterleaveThroughSemaphores) {
  auto [vm, sem, sem_phys] = CreateDeviceWithSemaphoreVm();
  ASSERT_NE(vm, nullptr);
  const uint64_t x = sem, y = sem + 0x10, log = sem + 0x100;
  Channel* a = driver_->CreateChannel(5, vm);
  Channel* b = driver_->CreateChannel(9, vm);
  // A: X=1; wait Y==1; log[0]=A2; X=2.   B: wait X==1; log[1]=B1; Y=1; wait X>=2; log[2]=B2.
  Release(a, x, 1);
  Acquire(a, y, 1);
  Release(a, log, 0xa2);
  Release(a, x, 2);
  Acquire(b, x, 1);
  Release(b, log + 4, 0xb1);
  Release(b, y, 1);
  Acquire(b, x, 2, host::kSemOpAcqGeq);
  Release(b, log + 8, 0xb2);
  b->Submit();  // B first: it must block until A runs
  a->Submit();
  device_->RunUntilIdle();
  EXPECT_TRUE(device_->channel_error(5).ok()) << device_->channel_error(5).message;
  EXPECT_TRUE(device_->channel_error(9).ok()) << device_->channel_error(9).message;
  EXPECT_EQ(driver_->Read32(sem_phys + 0x100), 0xa2u);
  EXPECT_EQ(driver_->Read32(sem_phys + 0x104), 0xb1u);
  EXPECT_EQ(driver_->Read32(sem_phys + 0x108), 0xb2u);
  EXPECT_EQ(driver_->Read32(sem_phys), 2u);
}

// Also what the aggregator's dispatcher learns from on_channel_drained: a channel is reported
// when it has finished everything submitted to it, never while it waits on a semaphore.
TEST_F(SimDeviceTest, AcquireBlocksOnlyItsChannelUntilTheCpuReleases) {
  auto [vm, sem, sem_phys] = CreateDeviceWithSemaphoreVm();
  ASSERT_NE(vm, nullptr);
  Channel* a = driver_->CreateChannel(0, vm);
  Channel* b = driver_->CreateChannel(1, vm);
  Acquire(a, sem, 7);
  Release(a, sem + 4, 1);
  a->Submit();
  Release(b, sem + 8, 2);
  b->Submit();
  device_->RunUntilIdle();
  EXPECT_EQ(driver_->Read32(sem_phys + 4), 0u);  // A waits
  EXPECT_EQ(driver_->Read32(sem_phys + 8), 2u);  // B ran
  EXPECT_TRUE(Reg(pf::kChanTable + 4) & pf::kStateAcquirePending);
  EXPECT_EQ(TakeDrained(), std::vector<uint32_t>{1});  // A waits: not drained
  device_->RunUntilIdle();
  EXPECT_TRUE(TakeDrained().empty());  // nothing ran
  driver_->Write32(sem_phys, 7);       // the CPU releases
  device_->RunUntilIdle();
  EXPECT_EQ(driver_->Read32(sem_phys + 4), 1u);
  EXPECT_FALSE(Reg(pf::kChanTable + 4) & pf::kStateAcquirePending);
  EXPECT_EQ(TakeDrained(), std::vector<uint32_t>{0});
}

TEST_F(SimDeviceTest, TimeSlicesAlternateBetweenBusyChannels) {
  // A 1 ns slice: every turn ends after its first unit of work (one 1 MiB copy chunk), whatever the
  // speed of the machine, so the sequence of turns is deterministic.
  CreateDevice(nullptr, false, std::chrono::nanoseconds(1));
  Vm* vm = driver_->CreateVm();
  uint64_t big_phys, sem_phys;
  const uint64_t big = vm->AllocMapped(16 << 20, &big_phys);
  const uint64_t sem = vm->AllocMapped(0x1000, &sem_phys);
  vm->Flush();
  Channel* a = driver_->CreateChannel(0, vm);
  Channel* b = driver_->CreateChannel(1, vm);
  Bind(a, kCopySubc, gf100::kClassCopy);
  Bind(b, kCopySubc, gf100::kClassCopy);
  // Each channel copies 8 MiB in 1 MiB chunks: at least 8 slices each, taken in turns.
  PcopyLinear(a, big, big + (8 << 20), 8 << 20);
  Release(a, sem, 1);
  PcopyLinear(b, big + (8 << 20), big, 8 << 20);
  Release(b, sem + 4, 1);
  a->Submit();
  b->Submit();
  std::vector<int> order;
  while (device_->RunUntilIdle(1) == 1) {
    order.push_back(Reg(pf::kSubfifo + pf::kSubfifoChannel) & 0x7f);
  }
  EXPECT_EQ(driver_->Read32(sem_phys), 1u);
  EXPECT_EQ(driver_->Read32(sem_phys + 4), 1u);
  ASSERT_GE(order.size(), 16u);
  // Round robin: while both have work, no channel runs two slices in a row.
  for (size_t i = 1; i < 16; ++i) EXPECT_NE(order[i], order[i - 1]) << "turn " << i;
}

TEST_F(SimDeviceTest, MalformedHeaderKillsOnlyItsChannel) {
  auto [vm, sem, sem_phys] = CreateDeviceWithSemaphoreVm();
  ASSERT_NE(vm, nullptr);
  driver_->EnableInterrupts();
  Channel* bad = driver_->CreateChannel(0, vm);
  Channel* good = driver_->CreateChannel(1, vm);
  Release(bad, sem, 1);
  bad->Raw(uint32_t(gf100::gpfifo::SecOp::kReserved6) << gf100::gpfifo::kSecOpShift);
  Release(bad, sem + 4, 1);
  bad->Submit();
  Release(good, sem + 8, 1);
  good->Submit();
  device_->RunUntilIdle();
  const ChannelError e = device_->channel_error(0);
  EXPECT_EQ(e.kind, ChannelError::Kind::kIllegalCommand);
  std::vector<uint32_t> drained = TakeDrained();  // the failed channel too: nothing more runs
  std::sort(drained.begin(), drained.end());
  EXPECT_EQ(drained, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(driver_->Read32(sem_phys), 1u);
  EXPECT_EQ(driver_->Read32(sem_phys + 4), 0u);  // nothing after the bad header
  EXPECT_EQ(driver_->Read32(sem_phys + 8), 1u);
  EXPECT_TRUE(device_->channel_error(1).ok());
  EXPECT_TRUE(Reg(pf::kSubfifo + pf::kSubfifoIntr) & pf::kSubfifoIntrIllegalCmd);
  EXPECT_EQ(Reg(pf::kSubfifoIntrSource), 1u);
  EXPECT_TRUE(Reg(pf::kIntr) & pf::kIntrSubfifo);
  EXPECT_TRUE(device_->interrupt_asserted());
  device_->WriteReg(pf::kSubfifo + pf::kSubfifoIntr, 0xffffffff);
  EXPECT_FALSE(device_->interrupt_asserted());

  // The dead channel stays dead; rebinding its CHAN_TABLE entry revives it.
  Release(bad, sem + 12, 3);
  bad->Submit();
  device_->RunUntilIdle();
  EXPECT_EQ(driver_->Read32(sem_phys + 12), 0u);
  device_->WriteReg(pf::kChanTable, Reg(pf::kChanTable));
  device_->RunUntilIdle();
  EXPECT_TRUE(device_->channel_error(0).ok());
  EXPECT_EQ(driver_->Read32(sem_phys + 12), 3u);
}

// D1: PSUBFIFO's CH and CACHE registers keep naming the failed channel until the driver clears
// INTR, though other channels run on; a second error waits for the first acknowledgement.
TEST_F(SimDeviceTest, SubfifoErrorRegistersLatchUntilAcknowledged) {
  CreateDevice(nullptr, false, std::chrono::nanoseconds(1));  // one unit of work per turn
  Vm* vm = driver_->CreateVm();
  uint64_t big_phys, sem_phys;
  const uint64_t big = vm->AllocMapped(16 << 20, &big_phys);
  const uint64_t sem = vm->AllocMapped(0x1000, &sem_phys);
  vm->Flush();
  driver_->EnableInterrupts();
  Channel* busy = driver_->CreateChannel(0, vm);
  Channel* bad = driver_->CreateChannel(1, vm);
  Channel* worse = driver_->CreateChannel(2, vm);
  Bind(busy, kCopySubc, gf100::kClassCopy);
  PcopyLinear(busy, big, big + (8 << 20), 8 << 20);  // 8 turns of 1 MiB
  Release(busy, sem, 1);
  busy->Submit();
  bad->Raw(uint32_t(gf100::gpfifo::SecOp::kReserved6) << gf100::gpfifo::kSecOpShift);
  bad->Submit();
  Bind(worse, 3, 0x1234);  // unknown class: ILLEGAL_MTHD at method 0
  worse->Submit();
  device_->RunUntilIdle();
  EXPECT_EQ(driver_->Read32(sem_phys), 1u);  // the busy channel ran on after both errors
  ASSERT_EQ(device_->channel_error(1).kind, ChannelError::Kind::kIllegalCommand);
  ASSERT_EQ(device_->channel_error(2).kind, ChannelError::Kind::kIllegalMethod);

  const uint32_t sf = pf::kSubfifo;
  EXPECT_EQ(Reg(sf + pf::kSubfifoIntr), pf::kSubfifoIntrIllegalCmd);
  EXPECT_EQ(Reg(sf + pf::kSubfifoChannel) & 0x7f, 1u);
  device_->WriteReg(sf + pf::kSubfifoIntr, Reg(sf + pf::kSubfifoIntr));
  // The second report takes its place.
  EXPECT_TRUE(device_->interrupt_asserted());
  EXPECT_EQ(Reg(sf + pf::kSubfifoIntr), pf::kSubfifoIntrIllegalMthd);
  EXPECT_EQ(Reg(sf + pf::kSubfifoChannel) & 0x7f, 2u);
  EXPECT_EQ(Reg(sf + pf::kSubfifoCacheAddr), (3u << 16) | host::kSetObject);
  EXPECT_EQ(Reg(sf + pf::kSubfifoCacheData), 0x1234u);
  device_->WriteReg(sf + pf::kSubfifoIntr, Reg(sf + pf::kSubfifoIntr));
  EXPECT_EQ(Reg(sf + pf::kSubfifoIntr), 0u);
  EXPECT_FALSE(device_->interrupt_asserted());
}

TEST_F(SimDeviceTest, IbEntryOutsideTheVmFaults) {
  CreateDevice();
  Vm* vm = driver_->CreateVm(0x3fffffff);  // 1 GiB address space
  vm->AllocMapped(0x1000);
  vm->Flush();
  Channel* ch = driver_->CreateChannel(2, vm);
  ch->SubmitIbEntry(0x80000000, 4);  // past the limit
  device_->RunUntilIdle();
  const ChannelError e = device_->channel_error(2);
  EXPECT_EQ(e.kind, ChannelError::Kind::kMmuFault);
  EXPECT_EQ(e.fault.reason, gf100::FaultReason::kVspaceLimit);
  EXPECT_EQ(e.fault.va, 0x80000000u);
  const uint32_t rec = pf::kVmFault + uint32_t(gf100::FaultUnit::kPsubfifo0) * pf::kVmFaultStride;
  EXPECT_EQ(Reg(rec + pf::kVmFaultInst), uint32_t(ch->instance() >> 12));
  EXPECT_EQ(Reg(rec + pf::kVmFaultAddrLo), 0x80000000u);
  EXPECT_EQ(Reg(rec + pf::kVmFaultFlags),
            uint32_t(gf100::FaultReason::kVspaceLimit) | pf::kVmFaultHub |
                (uint32_t(gf100::FaultHubClient::kPfifo) << pf::kVmFaultClientShift));
}

TEST_F(SimDeviceTest, BadCommandsEndInChannelErrors) {
  CreateDevice();
  Vm* vm = driver_->CreateVm();
  vm->AllocMapped(0x1000);
  vm->Flush();
  struct Case {
    const char* name;
    std::function<void(Channel*)> push;
    ChannelError::Kind kind;
  };
  const std::vector<Case> cases = {
      {"empty subchannel", [](Channel* c) { c->Inc(3, 0x300, {1}); },
       ChannelError::Kind::kEmptySubchannel},
      {"unknown class", [](Channel* c) { Bind(c, 1, 0x1234); }, ChannelError::Kind::kIllegalMethod},
      {"bad semaphore op", [](Channel* c) { c->Inc(0, host::kSemaphoreD, {0x3}); },
       ChannelError::Kind::kIllegalSemaphore},
      {"legacy header", [](Channel* c) { c->Raw(0x00040100); },
       ChannelError::Kind::kIllegalCommand},
      {"block-linear copy",
       [](Channel* c) {
         Bind(c, kCopySubc, gf100::kClassCopy);
         c->Inc(kCopySubc, copy::kLaunchDma, {1});
       },
       ChannelError::Kind::kIllegalMethod},
      {"CB_BIND index 20",
       [](Channel* c) {
         Bind(c, kComputeSubc, gf100::kClassCompute);
         c->Inc(kComputeSubc, gf100::compute::kCbBind, {(20 << 8) | 1});
       },
       ChannelError::Kind::kIllegalMethod},
  };
  uint32_t chid = 0;
  for (const Case& c : cases) {
    Channel* ch = driver_->CreateChannel(chid, vm);
    c.push(ch);
    ch->Submit();
    device_->RunUntilIdle();
    EXPECT_EQ(device_->channel_error(chid).kind, c.kind) << c.name;
    ++chid;
  }
  // IB_PUT past the ring.
  Channel* ch = driver_->CreateChannel(chid, vm);
  ch->WriteIbPut(ch->ib_entries() + 3);
  device_->RunUntilIdle();
  EXPECT_EQ(device_->channel_error(chid).kind, ChannelError::Kind::kIbPutOverflow);
  // A channel whose RAMFC signature is wrong.
  ++chid;
  Channel* bad = driver_->CreateChannel(chid, vm);
  driver_->Write32(bad->instance() + gf100::ramin::kSignature, 0xbad);
  device_->WriteReg(pf::kChanTable + chid * 8, Reg(pf::kChanTable + chid * 8));
  Release(bad, 0x1000000, 1);
  bad->Submit();
  device_->RunUntilIdle();
  EXPECT_EQ(device_->channel_error(chid).kind, ChannelError::Kind::kBadInstance);
}

TEST_F(SimDeviceTest, ThreadedModeRunsAsynchronously) {
  CreateDevice(nullptr, /*threaded=*/true);
  Vm* vm = driver_->CreateVm();
  uint64_t src_phys, dst_phys, sem_phys;
  const uint64_t src = vm->AllocMapped(1 << 20, &src_phys);
  const uint64_t dst = vm->AllocMapped(1 << 20, &dst_phys);
  const uint64_t sem = vm->AllocMapped(0x1000, &sem_phys);
  vm->Flush();
  driver_->Write32(src_phys + 0xffffc, 0x5eed);
  Channel* ch = driver_->CreateChannel(0, vm);
  Bind(ch, kCopySubc, gf100::kClassCopy);
  for (int i = 0; i < 4; ++i) {
    PcopyLinear(ch, src, dst, 1 << 20);
    Release(ch, sem, i + 1);
    ch->Submit();
  }
  ASSERT_TRUE(device_->WaitIdle(std::chrono::seconds(30)));
  EXPECT_TRUE(device_->channel_error(0).ok()) << device_->channel_error(0).message;
  EXPECT_EQ(driver_->Read32(sem_phys), 4u);
  EXPECT_EQ(driver_->Read32(dst_phys + 0xffffc), 0x5eedu);
  EXPECT_EQ(ch->ReadIbGet(), 4u);
}

TEST_F(SimDeviceTest, ConcurrentMmioWhileChannelsRun) {
  CreateDevice(nullptr, /*threaded=*/true);
  Vm* bar3 = driver_->CreateVm(device_->pci().bar3_size - 1);
  driver_->BindBar(Bar::k3, bar3);
  const uint64_t scratch = driver_->AllocVram(0x4000);
  bar3->Map(0x100000, scratch, 0x4000);
  bar3->Flush();
  Vm* vm = driver_->CreateVm();
  uint64_t sem_phys;
  const uint64_t buf = vm->AllocMapped(2 << 20);
  const uint64_t sem = vm->AllocMapped(0x1000, &sem_phys);
  vm->Flush();
  Channel* ch = driver_->CreateChannel(0, vm);
  Bind(ch, kCopySubc, gf100::kClassCopy);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      // Each thread owns one page of the scratch area (through BAR3) and reads shared registers.
      const uint64_t base = 0x100000 + uint64_t(t) * 0x1000;
      for (uint32_t i = 0; !stop.load() && i < 20000; ++i) {
        device_->Write32(Bar::k3, base + (i & 0xffc), i);
        if (device_->Read32(Bar::k3, base + (i & 0xffc)) != i) bad++;
        if ((device_->ReadReg(gf100::pmc::kBoot0) >> 20) != 0xc0) bad++;
        device_->ReadReg(pf::kChanTable + 4);
      }
    });
  }
  for (uint32_t round = 1; round <= 20; ++round) {
    PcopyLinear(ch, buf, buf + (1 << 20), 1 << 20);
    Release(ch, sem, round);
    ch->Submit();
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(device_->WaitIdle(std::chrono::seconds(60)));
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(driver_->Read32(sem_phys), 20u);
  EXPECT_TRUE(device_->channel_error(0).ok()) << device_->channel_error(0).message;
}

TEST_F(SimDeviceTest, NonStallInterruptAndPfifoDisable) {
  auto [vm, sem, sem_phys] = CreateDeviceWithSemaphoreVm();
  ASSERT_NE(vm, nullptr);
  driver_->EnableInterrupts();
  Channel* ch = driver_->CreateChannel(0, vm);
  device_->WriteReg(gf100::pmc::kEnable, 0);  // PFIFO off: nothing runs
  Release(ch, sem, 1);
  ch->Inc(0, host::kNonStallInterrupt, {0});
  ch->Submit();
  device_->RunUntilIdle();
  EXPECT_EQ(driver_->Read32(sem_phys), 0u);
  device_->WriteReg(gf100::pmc::kEnable, gf100::pmc::kEnableResetValue);
  device_->RunUntilIdle();
  EXPECT_EQ(driver_->Read32(sem_phys), 1u);
  EXPECT_EQ(Reg(pf::kEngineIntrSource), 1u);
  EXPECT_TRUE(Reg(pf::kIntr) & pf::kIntrEngine);
  EXPECT_TRUE(device_->interrupt_asserted());
  device_->WriteReg(pf::kEngineIntr, pf::kEngineIntrNotify);
  EXPECT_FALSE(device_->interrupt_asserted());
}

}  // namespace
}  // namespace gpuvm::sim
