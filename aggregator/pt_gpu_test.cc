// The pass-through virtual GPU and the aggregator core: bounds checks on untrusted accesses,
// admission (a second pt VM refused, fv refused, duplicates), guest memory checks, DMA into the
// owner's RAM through the window — and nowhere else — and the reset when the VM goes.
#include "aggregator/pt_gpu.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "aggregator/aggregator.h"
#include "aggregator/sim_gpu.h"
#include "aggregator/testing/unthreaded_sim.h"
#include "base/os.h"
#include "gpu/hw/classes.h"
#include "gpu/hw/pbus.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/vm.h"
#include "gpu/sim/testing/test_driver.h"

namespace gpuvm::aggregator {
namespace {

using os::UniqueFd;

SimGpuOptions SmallSim() { return testing::UnthreadedSim(64ull << 20); }

ipc::VmConfig PtConfig(uint16_t domid = 1, uint64_t ram = 16ull << 20) {
  ipc::VmConfig c;
  c.domid = domid;
  c.mode = ipc::VmMode::kPassThrough;
  c.backend = ipc::Backend::kLocal;
  c.vcpus = 2;
  c.guest_ram_bytes = ram;
  c.bar0_size = 16ull << 20;
  c.bar1_size = 128ull << 20;
  c.bar3_size = 64ull << 20;
  c.name = "vm" + std::to_string(domid);
  return c;
}

// A gpu::Device that goes through a virtual GPU, so the register-level test driver can drive a VM's
// view of the GPU.
class VgpuDevice final : public gpu::Device {
 public:
  VgpuDevice(VirtualGpu* vgpu, const gpu::PciIdentity& pci) : vgpu_(vgpu), pci_(pci) {}
  const gpu::PciIdentity& pci() const override { return pci_; }
  uint64_t Read(gpu::Bar bar, uint64_t offset, gpu::Width width) override {
    auto v = vgpu_->Read(bar, offset, uint32_t(width), 0);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : 0;
  }
  void Write(gpu::Bar bar, uint64_t offset, gpu::Width width, uint64_t value) override {
    EXPECT_TRUE(vgpu_->Write(bar, offset, uint32_t(width), value, 0).ok());
  }
  Status ReadBlock(gpu::Bar, uint64_t, void*, uint64_t) override {
    return Status::Unimplemented("no blocks through a VM");
  }
  Status WriteBlock(gpu::Bar, uint64_t, const void*, uint64_t) override {
    return Status::Unimplemented("no blocks through a VM");
  }
  void SetInterruptHandler(gpu::InterruptHandler) override {}
  bool interrupt_asserted() const override { return vgpu_->interrupt_asserted(); }
  void SetAccessObserver(gpu::AccessObserver) override {}

 private:
  VirtualGpu* vgpu_;
  gpu::PciIdentity pci_;
};

class AggregatorPtTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto gpu = SimGpu::Create(SmallSim());
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    sim_ = gpu->get();
    auto aggregator = Aggregator::Create(std::move(*gpu));
    ASSERT_TRUE(aggregator.ok()) << aggregator.status().ToString();
    aggregator_ = std::move(*aggregator);
  }
  // A sealed RAM memfd of `bytes` plus our own mapping of it (the VM's view).
  UniqueFd MakeRam(uint64_t bytes) {
    auto fd = os::CreateSealedMemfd("test-ram", bytes);
    EXPECT_TRUE(fd.ok());
    auto map = os::SharedMapping::Map(fd->get(), 0, bytes, true);
    EXPECT_TRUE(map.ok());
    ram_view_ = std::move(*map);
    return std::move(*fd);
  }
  std::vector<UniqueFd> One(UniqueFd fd) {
    std::vector<UniqueFd> v;
    v.push_back(std::move(fd));
    return v;
  }
  // A pt VM of domain `domid` admitted by `aggregator`, `bytes` of RAM attached; null (and the test
  // failed) if either step fails.
  VmControlBlock* AdmitWithRam(Aggregator& aggregator, uint16_t domid, uint64_t bytes) {
    auto vm = aggregator.AdmitVm(PtConfig(domid, bytes));
    EXPECT_TRUE(vm.ok()) << vm.status().ToString();
    if (!vm.ok()) return nullptr;
    const Status attached = aggregator.AttachGuestMemory(
        **vm, {ipc::GuestMemoryKind::kLocalMemfd, bytes}, One(MakeRam(bytes)));
    EXPECT_TRUE(attached.ok()) << attached.ToString();
    return attached.ok() ? *vm : nullptr;
  }

  SimGpu* sim_ = nullptr;
  std::unique_ptr<Aggregator> aggregator_;
  os::SharedMapping ram_view_;
};

TEST_F(AggregatorPtTest, ForwardsAccessesUntranslated) {
  auto vm = aggregator_->AdmitVm(PtConfig());
  ASSERT_TRUE(vm.ok()) << vm.status().ToString();
  VirtualGpu& v = *(*vm)->vgpu;
  EXPECT_EQ(v.vram_bytes(), 64ull << 20);
  ASSERT_TRUE(v.Write(gpu::Bar::k0, gf100::pbus::kPraminBase, 4, 0x42, 1).ok());
  EXPECT_EQ(sim_->device().ReadReg(gf100::pbus::kPraminBase), 0x42u);
  auto read = v.Read(gpu::Bar::k0, gf100::pbus::kPraminBase, 4, 0);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, 0x42u);
}

TEST_F(AggregatorPtTest, RefusesAccessesOutsideTheVmsBars) {
  ipc::VmConfig config = PtConfig();
  config.bar1_size = 1ull << 20;  // the VM sees a smaller BAR1 than the GPU has
  auto vm = aggregator_->AdmitVm(config);
  ASSERT_TRUE(vm.ok());
  VirtualGpu& v = *(*vm)->vgpu;
  EXPECT_EQ(v.Read(gpu::Bar::k1, 1ull << 20, 4, 0).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(v.Read(gpu::Bar::k1, (1ull << 20) - 2, 4, 0).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(v.Write(gpu::Bar::k0, ~uint64_t{0} - 1, 4, 0, 0).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(v.Write(gpu::Bar::k0, 16ull << 20, 1, 0, 0).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(v.Read(gpu::Bar::k0, 0, 3, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(v.Read(gpu::Bar::k1, (1ull << 20) - 4, 4, 0).ok());
}

TEST_F(AggregatorPtTest, RefusesBarsLargerThanTheGpus) {
  ipc::VmConfig config = PtConfig();
  config.bar3_size = 1ull << 30;
  auto vm = aggregator_->AdmitVm(config);
  ASSERT_FALSE(vm.ok());
  EXPECT_EQ(vm.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(aggregator_->vm_count(), 0u);
}

TEST_F(AggregatorPtTest, ASecondPtVmIsRefusedWithTheOwnerNamed) {
  auto first = aggregator_->AdmitVm(PtConfig(1));
  ASSERT_TRUE(first.ok());
  auto second = aggregator_->AdmitVm(PtConfig(2));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("a second pt VM is refused"), std::string::npos);
  EXPECT_NE(second.status().message().find("'vm1'"), std::string::npos);
  ASSERT_TRUE(aggregator_->RemoveVm((*first)->id).ok());
  EXPECT_TRUE(aggregator_->AdmitVm(PtConfig(2)).ok()) << "the GPU is free again";
}

// Names and the typed options are checked at admission too (base/vm_name.h, docs/IPC.md): the codec
// refuses them on the wire, and in-process callers come through AdmitVm. Refused with the reason,
// never cut or half-read.
TEST_F(AggregatorPtTest, MalformedConfigurationsAreRefusedSayingWhy) {
  using V = ipc::VgpuVariant;
  const struct {
    ipc::VmMode mode;
    const char* name;
    V variant;
    uint16_t channels;
    const char* says;
  } cases[] = {
      {ipc::VmMode::kFullVirtualization, "a@300", V::kDefault, 0, "has '@' at 2"},
      {ipc::VmMode::kFullVirtualization, "a,b", V::kDefault, 0, "has ','"},
      {ipc::VmMode::kFullVirtualization, "a", V::kDefault, 200, "channels must be 1 to 128"},
      {ipc::VmMode::kFullVirtualization, "a", V::kPvNaive, 0, "is not one of a fv VM's"},
      {ipc::VmMode::kParaVirtualization, "a", V::kFvLazy, 0, "is not one of a pv VM's"},
      {ipc::VmMode::kPassThrough, "guest one", V::kDefault, 0, "has ' ' at 6"},
      {ipc::VmMode::kPassThrough, "", V::kDefault, 0, "cannot be empty"},
      {ipc::VmMode::kPassThrough, "p", V::kFvLazy, 0, "a pt VM has the whole GPU"},
      {ipc::VmMode::kPassThrough, "p", V::kDefault, 4, "a pt VM has the whole GPU"},
  };
  for (const auto& c : cases) {
    ipc::VmConfig config = PtConfig(1);
    config.mode = c.mode;
    config.name = c.name;
    config.variant = c.variant;
    config.channels = c.channels;
    Result<VmControlBlock*> vm = aggregator_->AdmitVm(config);
    ASSERT_FALSE(vm.ok()) << c.name;
    EXPECT_EQ(vm.status().code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(vm.status().message().find(c.says), std::string::npos)
        << c.name << ": " << vm.status().message();
    EXPECT_EQ(aggregator_->vm_count(), 0u);
  }
  ipc::VmConfig share = PtConfig(1);
  share.share_milli = 12500;  // a pt VM may ask for a share
  EXPECT_TRUE(aggregator_->AdmitVm(share).ok());
}

ipc::VmConfig FvConfig(uint16_t domid, ipc::VmMode mode, const char* name, ipc::VgpuVariant variant,
                       uint32_t vram_mib, uint16_t channels = 0) {
  ipc::VmConfig c = PtConfig(domid);
  c.mode = mode;
  c.name = name;
  c.variant = variant;
  c.vram_mib = vram_mib;
  c.channels = channels;
  return c;
}

TEST_F(AggregatorPtTest, FvVmsShareTheGpuAndExcludePt) {
  using V = ipc::VgpuVariant;
  const ipc::VmConfig a = FvConfig(1, ipc::VmMode::kFullVirtualization, "a", V::kFvLazy, 8);
  const ipc::VmConfig b = FvConfig(2, ipc::VmMode::kFullVirtualization, "b", V::kFvNaive, 8, 4);
  auto first = aggregator_->AdmitVm(a);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = aggregator_->AdmitVm(b);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ((*first)->vgpu->vram_bytes(), 8ull << 20);
  EXPECT_NE((*second)->vgpu->DescribeCounters().find("fv-naive"), std::string::npos);
  // A VM larger than the 16 MiB the GPU has for VMs is refused (dynamic VRAM over-commits, but
  // not past that); a pt VM needs the whole GPU.
  ipc::VmConfig c = FvConfig(3, ipc::VmMode::kFullVirtualization, "c", V::kDefault, 32);
  EXPECT_EQ(aggregator_->AdmitVm(c).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(aggregator_->AdmitVm(PtConfig(4)).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(aggregator_->RemoveVm((*first)->id).ok());
  ASSERT_TRUE(aggregator_->RemoveVm((*second)->id).ok());
  EXPECT_TRUE(aggregator_->AdmitVm(PtConfig(4)).ok()) << "the GPU is free again";
  // ... and while the pt VM owns it, fv is refused.
  EXPECT_EQ(aggregator_->AdmitVm(a).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(AggregatorPtTest, ParaVirtualVmsShareTheGpuWithFvVmsAndNotWithPt) {
  using V = ipc::VgpuVariant;
  auto multicall =
      aggregator_->AdmitVm(FvConfig(1, ipc::VmMode::kParaVirtualization, "p", V::kDefault, 4));
  ASSERT_TRUE(multicall.ok()) << multicall.status().ToString();
  auto* pv = dynamic_cast<FullVirtGpu*>((*multicall)->vgpu.get());
  ASSERT_NE(pv, nullptr);
  EXPECT_EQ(pv->mode(), ipc::VmMode::kParaVirtualization);
  EXPECT_EQ(pv->fv_mode(), FvMode::kPvMulticall);  // the default
  ASSERT_NE(pv->pv(), nullptr);
  EXPECT_EQ(pv->vram_map()->policy(), VramPolicy::kStatic);  // the GPU walks its tables
  auto naive =
      aggregator_->AdmitVm(FvConfig(2, ipc::VmMode::kParaVirtualization, "q", V::kPvNaive, 4));
  ASSERT_TRUE(naive.ok()) << naive.status().ToString();
  EXPECT_EQ(static_cast<FullVirtGpu*>((*naive)->vgpu.get())->fv_mode(), FvMode::kPvNaive);
  // fv's variants are not pv's; an fv VM beside them is fine; pt is not.
  ipc::VmConfig config = FvConfig(3, ipc::VmMode::kParaVirtualization, "r", V::kFvLazy, 4);
  EXPECT_EQ(aggregator_->AdmitVm(config).status().code(), StatusCode::kInvalidArgument);
  config.mode = ipc::VmMode::kFullVirtualization;
  EXPECT_TRUE(aggregator_->AdmitVm(config).ok());
  EXPECT_EQ(aggregator_->AdmitVm(PtConfig(4)).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(AggregatorPtTest, GuestMemoryMustBeTheAnnouncedSealedMemfd) {
  auto vm = aggregator_->AdmitVm(PtConfig(1, 1ull << 20));
  ASSERT_TRUE(vm.ok());
  VmControlBlock& cb = **vm;
  // Another size than VM_CONFIG said.
  EXPECT_EQ(aggregator_
                ->AttachGuestMemory(cb, {ipc::GuestMemoryKind::kLocalMemfd, 2ull << 20},
                                    One(MakeRam(2ull << 20)))
                .code(),
            StatusCode::kInvalidArgument);
  // Not sealed: could shrink under our mapping.
  int raw = ::memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_GE(raw, 0);
  ASSERT_EQ(::ftruncate(raw, 1 << 20), 0);
  EXPECT_FALSE(aggregator_
                   ->AttachGuestMemory(cb, {ipc::GuestMemoryKind::kLocalMemfd, 1ull << 20},
                                       One(UniqueFd(raw)))
                   .ok());
  // A Xen domain for a local VM.
  EXPECT_EQ(
      aggregator_->AttachGuestMemory(cb, {ipc::GuestMemoryKind::kXenDomain, 1ull << 20}, {}).code(),
      StatusCode::kInvalidArgument);
  // The real thing, once.
  ASSERT_TRUE(aggregator_
                  ->AttachGuestMemory(cb, {ipc::GuestMemoryKind::kLocalMemfd, 1ull << 20},
                                      One(MakeRam(1ull << 20)))
                  .ok());
  EXPECT_EQ(aggregator_
                ->AttachGuestMemory(cb, {ipc::GuestMemoryKind::kLocalMemfd, 1ull << 20},
                                    One(MakeRam(1ull << 20)))
                .code(),
            StatusCode::kAlreadyExists);
}

TEST_F(AggregatorPtTest, WindowReachesExactlyTheOwnersRam) {
  GuestRamWindow& window = sim_->host_window();
  EXPECT_EQ(window.Translate(0x1000, 8), nullptr) << "no owner: nothing reachable";
  auto vm = aggregator_->AdmitVm(PtConfig(1, 1ull << 20));
  ASSERT_TRUE(vm.ok());
  ASSERT_TRUE(aggregator_
                  ->AttachGuestMemory(**vm, {ipc::GuestMemoryKind::kLocalMemfd, 1ull << 20},
                                      One(MakeRam(1ull << 20)))
                  .ok());
  uint8_t* p = window.Translate(0x1000, 8);
  ASSERT_NE(p, nullptr);
  std::memcpy(p, "gpuvm-pt", 8);
  EXPECT_EQ(std::memcmp(ram_view_.data() + 0x1000, "gpuvm-pt", 8), 0) << "not the guest's RAM";
  EXPECT_EQ(window.Translate((1ull << 20) - 4, 8), nullptr);
  EXPECT_EQ(window.Translate(1ull << 20, 1), nullptr);
  EXPECT_EQ(window.Translate(~uint64_t{0} - 2, 8), nullptr);
  ASSERT_TRUE(aggregator_->RemoveVm((*vm)->id).ok());
  EXPECT_EQ(window.Translate(0x1000, 8), nullptr) << "the window outlived its VM";
  EXPECT_EQ(sim_->resets(), 1u);
}

// The whole pt chain below the IPC: a register-level driver programs the GPU through the VM's
// virtual GPU, maps a page of guest RAM by its guest-physical address (SYSRAM PTE), and a channel
// releases a semaphore into it — the GPU's DMA lands in the VM's RAM. Then the VM goes: the GPU is
// reset and the next VM finds VRAM empty.
TEST_F(AggregatorPtTest, DmaLandsInGuestRamAndTheNextVmFindsNothing) {
  constexpr uint64_t kRam = 4ull << 20;
  constexpr uint64_t kGuestPage = 0x123000;  // a guest-physical address
  VmControlBlock* vm = AdmitWithRam(*aggregator_, 1, kRam);
  ASSERT_NE(vm, nullptr);
  uint64_t secret_vram = 0;
  {
    VgpuDevice through_vm(vm->vgpu.get(), sim_->device().pci());
    sim::testing::TestDriver driver(&through_vm, 64ull << 20);
    sim::testing::Vm* space = driver.CreateVm();
    sim::testing::Channel* ch = driver.CreateChannel(1, space);
    const uint64_t va = space->AllocVa(0x1000);
    space->Map(va, kGuestPage, 0x1000, {gf100::vm::Target::kSysramSnooped});
    space->Flush();
    ch->Inc(0, gf100::host::kSemaphoreA,
            {uint32_t(va >> 32), uint32_t(va), 0xc0ffee,
             gf100::host::kSemOpRelease | gf100::host::kSemReleaseSize4});
    ch->Submit();
    sim_->sim_device()->RunUntilIdle();
    uint32_t got = 0;
    std::memcpy(&got, ram_view_.data() + kGuestPage, 4);
    EXPECT_EQ(got, 0xc0ffeeu) << "the semaphore did not reach guest RAM";
    secret_vram = driver.AllocVram(0x1000);
    driver.Write32(secret_vram, 0x5ec2e7);
    ASSERT_EQ(driver.Read32(secret_vram), 0x5ec2e7u);
  }
  ASSERT_TRUE(aggregator_->RemoveVm(vm->id).ok());

  auto next = aggregator_->AdmitVm(PtConfig(2, kRam));
  ASSERT_TRUE(next.ok());
  VgpuDevice through_next((*next)->vgpu.get(), sim_->device().pci());
  sim::testing::TestDriver snoop(&through_next, 64ull << 20, 0x10000, /*zero_fill=*/false);
  EXPECT_EQ(snoop.Read32(secret_vram), 0u) << "the next VM reads the previous one's VRAM";
  EXPECT_EQ(through_next.ReadReg(gf100::pbus::kBar1Inst), 0u);
}

// BAR remap in pt (pt_gpu.h): the aperture pages whose PTEs map VRAM are handed out as the GPU's
// own VRAM file at their machine addresses; USER pages and SYSRAM pages keep trapping; a flush
// takes a changed PTE's page back; 64 KiB large pages turn it off; and after the VM is gone its
// copy of the file reaches nothing of the next owner's VRAM.
TEST_F(AggregatorPtTest, BarRemapHandsOutVramPagesButNotUserOrSysramPagesAndFollowsFlushes) {
  constexpr uint64_t kRam = 4ull << 20;
  VmControlBlock* vm = AdmitWithRam(*aggregator_, 1, kRam);
  ASSERT_NE(vm, nullptr);
  auto* pt = dynamic_cast<PassThroughGpu*>(vm->vgpu.get());
  ASSERT_NE(pt, nullptr);
  ASSERT_TRUE(pt->remaps()) << "the software GPU's VRAM is a memfd: pt remaps";
  uint64_t physical = 0, inner = 0;
  const uint32_t pattern = 0x7e57ab1e;
  os::SharedMapping mapped;  // the VM's view of its remapped BAR1 pages
  {
    VgpuDevice through_vm(pt, sim_->device().pci());
    sim::testing::TestDriver driver(&through_vm, 64ull << 20);
    sim::testing::Vm* space = driver.CreateVm();
    driver.CreateChannel(1, space);  // binds BAR1, the USER area and POLL_AREA
    sim::testing::Vm* bar1 = driver.bar1_vm();
    ASSERT_NE(bar1, nullptr);
    const uint64_t va = bar1->AllocMapped(0x4000, &physical);
    const uint64_t sysram_va = bar1->AllocVa(0x1000);
    bar1->Map(sysram_va, 0x10000, 0x1000, {gf100::vm::Target::kSysramSnooped});
    bar1->Flush();
    (void)through_vm.Read32(gpu::Bar::k1, va);  // a trapped access: the remapped set is recomputed

    const uint32_t poll = through_vm.ReadReg(gf100::pfifo::kPollArea);
    ASSERT_NE(poll & gf100::pfifo::kPollAreaEnable, 0u);
    const uint64_t user_first = uint64_t(poll & gf100::pfifo::kPollAreaAddrMask) << 12;
    const uint64_t user_end = user_first + gf100::pfifo::kChannels * gf100::pfifo::kUserPageSize;
    std::vector<BarRemapRequest> requests = pt->TakeBarRemapRequests();
    const BarRemapRequest* covering = nullptr;
    for (const BarRemapRequest& r : requests) {
      ASSERT_TRUE(r.map) << "nothing was mapped before";
      if (r.bar != gpu::Bar::k1) continue;
      EXPECT_FALSE(r.offset < user_end && user_first < r.offset + r.length)
          << "a USER page remapped: IB_PUT stores would not wake PFIFO";
      EXPECT_FALSE(r.offset <= sysram_va && sysram_va < r.offset + r.length)
          << "a SYSRAM page remapped";
      if (r.offset <= va && va + 0x4000 <= r.offset + r.length) covering = &r;
    }
    ASSERT_NE(covering, nullptr) << "the VRAM pages of BAR1 were not remapped";
    EXPECT_EQ(covering->backing_offset + (va - covering->offset), physical);
    // What is handed out is the GPU's VRAM: a store through it is what the GPU reads there.
    auto map = os::SharedMapping::Map(covering->fd, covering->backing_offset, covering->length,
                                      /*writable=*/true);
    ASSERT_TRUE(map.ok()) << map.status().ToString();
    mapped = std::move(*map);
    inner = va - covering->offset;
    std::memcpy(mapped.data() + inner, &pattern, 4);
    EXPECT_EQ(driver.Read32(physical), pattern);
    EXPECT_EQ(through_vm.Read32(gpu::Bar::k1, va), pattern) << "the trapped path sees the same";
    EXPECT_GT(pt->remapped_pages(), 0u);

    // The guest unmaps the pages: at the flush they trap again.
    bar1->Unmap(va, 0x4000);
    bar1->Flush();
    bool unmapped = false;
    for (const BarRemapRequest& r : pt->TakeBarRemapRequests()) {
      if (!r.map && r.bar == gpu::Bar::k1 && r.offset <= va && va < r.offset + r.length) {
        unmapped = true;
      }
    }
    EXPECT_TRUE(unmapped) << "a page the guest unmapped stays remapped after the flush";

    // 64 KiB large pages: the walk would misread the tables, so everything traps.
    const uint64_t va2 = bar1->AllocMapped(0x2000);
    bar1->Flush();
    (void)through_vm.Read32(gpu::Bar::k1, va2);
    (void)pt->TakeBarRemapRequests();
    ASSERT_GT(pt->remapped_pages(), 0u);
    through_vm.WriteReg(gf100::vm::kCfg, gf100::vm::kCfgLargePage64K);
    EXPECT_EQ(pt->remapped_pages(), 0u);
    for (const BarRemapRequest& r : pt->TakeBarRemapRequests()) EXPECT_FALSE(r.map);
    through_vm.WriteReg(gf100::vm::kCfg, 0);
  }

  // The VM goes; the next owner's VRAM is not what the old file holds.
  ASSERT_TRUE(aggregator_->RemoveVm(vm->id).ok());
  auto next = aggregator_->AdmitVm(PtConfig(2, kRam));
  ASSERT_TRUE(next.ok());
  VgpuDevice through_next((*next)->vgpu.get(), sim_->device().pci());
  sim::testing::TestDriver snoop(&through_next, 64ull << 20, 0x10000, /*zero_fill=*/false);
  EXPECT_EQ(snoop.Read32(physical), 0u) << "the next VM reads what the old mapping held";
  snoop.Write32(physical, 0x5ec2e7);
  uint32_t seen = 0;
  std::memcpy(&seen, mapped.data() + inner, 4);
  EXPECT_EQ(seen, pattern) << "the previous owner's mapping reaches the next owner's VRAM";
  auto* next_pt = dynamic_cast<PassThroughGpu*>((*next)->vgpu.get());
  ASSERT_NE(next_pt, nullptr);
  EXPECT_TRUE(next_pt->remaps());
}

// --pt-trap-all (AggregatorOptions::pt_bar_remap false): the baseline where every access traps.
TEST_F(AggregatorPtTest, WithRemapOffEveryAccessTraps) {
  auto gpu = SimGpu::Create(SmallSim());
  ASSERT_TRUE(gpu.ok());
  SimGpu* sim = gpu->get();
  AggregatorOptions options;
  options.pt_bar_remap = false;
  auto aggregator = Aggregator::Create(std::move(*gpu), options);
  ASSERT_TRUE(aggregator.ok()) << aggregator.status().ToString();
  VmControlBlock* vm = AdmitWithRam(**aggregator, 1, 4ull << 20);
  ASSERT_NE(vm, nullptr);
  auto* pt = dynamic_cast<PassThroughGpu*>(vm->vgpu.get());
  ASSERT_NE(pt, nullptr);
  EXPECT_FALSE(pt->remaps());
  VgpuDevice through_vm(pt, sim->device().pci());
  sim::testing::TestDriver driver(&through_vm, 64ull << 20);
  driver.CreateChannel(1, driver.CreateVm());
  const uint64_t va = driver.bar1_vm()->AllocMapped(0x4000);
  driver.bar1_vm()->Flush();
  through_vm.Write32(gpu::Bar::k1, va, 1);
  EXPECT_EQ(through_vm.Read32(gpu::Bar::k1, va), 1u);
  EXPECT_TRUE(pt->TakeBarRemapRequests().empty());
}

}  // namespace
}  // namespace gpuvm::aggregator
