// Driver: probe, device-wide setup (BAR3 instance memory, BAR1 + USER area, PFIFO), the channel
// table and playlist, and the decoding of GPU errors from PFIFO/PGRAPH interrupt state.
#include <sys/prctl.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "base/enum_names.h"
#include "base/hex.h"
#include "gpu/hw/mmu_fault.h"
#include "gpu/hw/pbus.h"
#include "gpu/hw/pci.h"
#include "gpu/hw/pfb.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pgraph.h"
#include "gpu/hw/pmc.h"
#include "gpu/hw/ramin.h"
#include "gpu/hw/vm.h"
#include "guest-pv-driver/driver_impl.h"
#include "guest-pv-driver/vm_geometry.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace gpuvm::guest {

namespace pf = gf100::pfifo;
namespace pmc = gf100::pmc;
namespace vm = gf100::vm;

namespace {

constexpr uint32_t kChidMask = pf::kChannels - 1;
// nouveau ORs 0x01f00000 into PLAYLIST_WR_LEN (gf100_fifo_runlist_commit); its meaning is not
// documented (gpu/hw/pfifo.h).
constexpr uint32_t kPlaylistWrLenNouveau = 0x01f00000;
constexpr uint32_t kAllBits = 0xffffffff;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const char* FaultReasonName(uint32_t reason) {
  if (reason == gf100::kFaultReasonGpuvmOutOfVram) {
    return "OUT_OF_VRAM: the hypervisor has no VRAM left for this page";
  }
  const gf100::FaultReasonText* text = gf100::FaultReasonTextOf(reason);
  return text != nullptr ? text->name : "unknown reason";
}

// nouveau's names of the MP warp errors (gf100_mp_warp_error) and global error bits
// (gf100_mp_global_error).
std::string MpTrapReason(uint32_t warp_error, uint32_t global_error) {
  static constexpr const char* kWarpErrors[] = {"NO_ERROR",
                                                "STACK_ERROR",
                                                "API_STACK_ERROR",
                                                "RET_EMPTY_STACK_ERROR",
                                                "PC_WRAP",
                                                "MISALIGNED_PC",
                                                "PC_OVERFLOW",
                                                "MISALIGNED_IMMC_ADDR",
                                                "MISALIGNED_REG",
                                                "ILLEGAL_INSTR_ENCODING",
                                                "ILLEGAL_SPH_INSTR_COMBO",
                                                "ILLEGAL_INSTR_PARAM",
                                                "INVALID_CONST_ADDR",
                                                "OOR_REG",
                                                "OOR_ADDR",
                                                "MISALIGNED_ADDR",
                                                "INVALID_ADDR_SPACE",
                                                "ILLEGAL_INSTR_PARAM2",
                                                "INVALID_CONST_ADDR_LDC",
                                                "GEOMETRY_SM_ERROR",
                                                "DIVERGENT",
                                                "WARP_EXIT"};
  static constexpr struct {
    uint32_t bit;
    const char* name;
  } kGlobalErrors[] = {
      {gf100::pgraph::kMpGlobalSmToSmFault, "SM_TO_SM_FAULT"},
      {gf100::pgraph::kMpGlobalL1Error, "L1_ERROR"},
      {gf100::pgraph::kMpGlobalMultipleWarpErrors, "MULTIPLE_WARP_ERRORS"},
      {gf100::pgraph::kMpGlobalPhysicalStackOverflow, "PHYSICAL_STACK_OVERFLOW"},
      {gf100::pgraph::kMpGlobalBptInt, "BPT_INT"},
      {gf100::pgraph::kMpGlobalBptPause, "BPT_PAUSE"},
      {gf100::pgraph::kMpGlobalSingleStepComplete, "SINGLE_STEP_COMPLETE"},
      {gf100::pgraph::kMpGlobalTimeout, "TIMEOUT"},
  };
  if (warp_error == 0 && global_error == 0) return "no reason given";
  std::string out;
  if (warp_error != 0) {
    out = "warp error ";
    out += warp_error < std::size(kWarpErrors) ? std::string(kWarpErrors[warp_error])
                                               : Hex(warp_error);
  }
  uint32_t rest = global_error;
  for (const auto& g : kGlobalErrors) {
    if (!(global_error & g.bit)) continue;
    out += out.empty() ? "global error " : ", ";
    out += g.name;
    rest &= ~g.bit;
  }
  if (rest != 0) out += (out.empty() ? "global error " : ", ") + Hex(rest);
  return out;
}

const char* FaultUnitName(uint32_t unit) {
  using U = gf100::FaultUnit;
  static constexpr EnumName<U> kNames[] = {{U::kPgraph, "PGRAPH"},   {U::kPeephole, "PEEPHOLE"},
                                           {U::kBar1, "BAR1"},       {U::kBar3, "BAR3"},
                                           {U::kPsubfifo0, "PFIFO"}, {U::kPcopy0, "PCOPY0"},
                                           {U::kPcopy1, "PCOPY1"}};
  return NameOf(kNames, U(unit), "unit ?");
}

std::string SubfifoIntrNames(uint32_t intr) {
  struct Bit {
    uint32_t bit;
    const char* name;
  };
  static constexpr Bit kBits[] = {
      {pf::kSubfifoIntrIbPutOverflow, "IB_PUT_OVERFLOW"},
      {pf::kSubfifoIntrIbEntryInvalid, "IB_ENTRY_INVALID"},
      {pf::kSubfifoIntrIllegalCmd, "ILLEGAL_CMD"},
      {pf::kSubfifoIntrIllegalMthd, "ILLEGAL_MTHD"},
      {pf::kSubfifoIntrSwMthd, "EMPTY_SUBC"},
      {pf::kSubfifoIntrIllegalSem, "ILLEGAL_SEM"},
      {pf::kSubfifoIntrSigMismatch, "SIG_MISMATCH"},
      {pf::kSubfifoIntrGpuvmKilled, "KILLED_BY_HOST"},
      {pf::kSubfifoIntrGpuvmTimeLimit, "KERNEL_TIME_LIMIT"},
  };
  std::string s;
  for (const Bit& b : kBits) {
    if (intr & b.bit) s += std::string(s.empty() ? "" : "|") + b.name;
  }
  return s.empty() ? Hex(intr) : s;
}

// DRM mode's stand-in for a Bus: the driver touches no register there; anything that still tried
// would read all-ones (a master abort) and change nothing.
class NoBus final : public Bus {
 public:
  const gpu::PciIdentity& pci() const override { return pci_; }
  uint64_t Read(Bar, uint64_t, Width) override { return ~uint64_t{0}; }
  void Write(Bar, uint64_t, Width, uint64_t) override {}
  Status ReadBlock(Bar, uint64_t, void*, uint64_t) override { return Unavailable(); }
  Status WriteBlock(Bar, uint64_t, const void*, uint64_t) override { return Unavailable(); }
  Result<std::unique_ptr<DmaMapping>> MapDma(void*, uint64_t) override { return Unavailable(); }
  Result<std::unique_ptr<DmaMapping>> AllocDma(uint64_t) override { return Unavailable(); }
  Result<std::unique_ptr<DmaMapping>> AllocDmaAt(uint64_t, void*) override { return Unavailable(); }
  Status SetInterruptHandler(std::function<void(bool)>) override { return Unavailable(); }

 private:
  static Status Unavailable() { return Status::Unavailable("a DRM driver has no bus of its own"); }
  gpu::PciIdentity pci_;
};

std::string DeviceName(uint16_t device_id) {
  return device_id == gf100::pci::kDeviceId ? "Quadro 6000"
                                            : "GF100 (10de:" + Hex(device_id).substr(2) + ")";
}

NoBus* TheNoBus() {
  static NoBus* bus = new NoBus();  // never destroyed: drivers may outlive static destruction
  return bus;
}

}  // namespace

// ---- Backoff
// --------------------------------------------------------------------------------------------

void WaitClock::Step() {
  const auto now = std::chrono::steady_clock::now();
  waited_ += std::min<std::chrono::nanoseconds>(now - last_, kMaxStep);
  last_ = now;
}

Result<std::chrono::nanoseconds> WaitClock::Tick() {
  Step();
  if (driver_->drm() == nullptr && driver_->bus()->remote() &&
      waited_ - probed_at_ >= kProbeEvery) {
    probed_at_ = waited_;
    // Blocks while the path to the GPU is stalled: that step is capped like any other.
    const bool gone = GpuGone(driver_->bus());
    Step();
    if (gone) {
      return Status::Unavailable("the GPU is gone: PMC_BOOT_0 reads all-ones");
    }
  }
  return waited_;
}

Result<bool> WaitClock::Expired(std::chrono::nanoseconds timeout) {
  GPUVM_ASSIGN_OR_RETURN(const std::chrono::nanoseconds waited, Tick());
  return timeout != kWaitForever && waited > timeout;
}

void Backoff::Pause() {
  ++rounds_;
  if (rounds_ < 64) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
    return;
  }
  if (rounds_ < 96) {
    std::this_thread::yield();
    return;
  }
  const int step = std::min(rounds_ - 96, 6);
  // The pause as asked: Linux stretches a thread's sleeps by its timer slack (50 us by default), so
  // a 5 us pause would take ~55 us — longer than most of what a wait for a short kernel has left
  // once the spinning is over, and in a VM, where the answer takes a few hops, nearly every wait
  // ends in that first sleep. The caller's own slack is put back afterwards.
  const int slack = ::prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  const bool tightened = slack > kPauseSlackNs && ::prctl(PR_SET_TIMERSLACK, kPauseSlackNs) == 0;
  std::this_thread::sleep_for(std::chrono::microseconds(std::min(200, 5 << step)));
  if (tightened) (void)::prctl(PR_SET_TIMERSLACK, slack);
}

// ---- BusCounters
// ----------------------------------------------------------------------------------------

uint64_t BusCounters::total() const {
  uint64_t t = 0;
  for (int i = 0; i < 3; ++i) t += reads[i] + writes[i] + block_reads[i] + block_writes[i];
  return t;
}

BusCounters BusCounters::operator-(const BusCounters& e) const {
  BusCounters d;
  for (int i = 0; i < 3; ++i) {
    d.reads[i] = reads[i] - e.reads[i];
    d.writes[i] = writes[i] - e.writes[i];
    d.block_reads[i] = block_reads[i] - e.block_reads[i];
    d.block_writes[i] = block_writes[i] - e.block_writes[i];
  }
  d.block_bytes = block_bytes - e.block_bytes;
  d.dma_maps = dma_maps - e.dma_maps;
  return d;
}

// ---- Driver::Impl: init
// ---------------------------------------------------------------------------------

Result<std::unique_ptr<Driver::Impl>> Driver::Impl::Create(Bus* bus, const DriverOptions& options) {
  if (bus == nullptr) return Status::InvalidArgument("no bus");
  if (options.error_poll_interval.count() <= 0) {
    return Status::InvalidArgument("the error poll interval must be positive");
  }
  // The device's para-virtual window (docs/PARAVIRT.md): looked for only without a writer of the
  // caller's, and by default only on a remote Bus (in a VM; a native GPU has none).
  std::unique_ptr<PvCalls> pv;
  using ParaVirtual = DriverOptions::ParaVirtual;
  if (!options.page_table_writer &&
      (options.para_virtual == ParaVirtual::kOn ||
       (options.para_virtual == ParaVirtual::kAuto && bus->remote()))) {
    Result<std::unique_ptr<PvCalls>> calls = PvCalls::Open(bus);
    if (calls.ok()) {
      pv = std::move(*calls);
    } else if (calls.status().code() != StatusCode::kNotFound) {
      return calls.status();
    }
  }
  std::unique_ptr<Impl> impl(new Impl(bus, options, std::move(pv)));
  GPUVM_RETURN_IF_ERROR(impl->Init());
  return impl;
}

Result<std::unique_ptr<Driver::Impl>> Driver::Impl::CreateOnDrm(DrmDevice* drm,
                                                                const DriverOptions& options) {
  if (drm == nullptr) return Status::InvalidArgument("no DRM device");
  std::unique_ptr<Impl> impl(new Impl(TheNoBus(), options, nullptr));
  impl->drm_ = drm;
  GPUVM_RETURN_IF_ERROR(impl->InitOnDrm());
  return impl;
}

Status Driver::Impl::InitOnDrm() {
  GPUVM_ASSIGN_OR_RETURN(const DrmDevice::Identity id, drm_->Identify());
  if (id.chipset != pmc::kChipsetGf100) {
    return Status::FailedPrecondition("the DRM device is chipset " + Hex(id.chipset) +
                                      ", not GF100 (0xc0)");
  }
  info_.pci.vendor_id = id.pci_vendor;
  info_.pci.device_id = id.pci_device;
  info_.chipset = id.chipset;
  info_.vram_bytes = id.vram_bytes;
  info_.name = DeviceName(id.pci_device);
  info_.large_page_bytes = uint64_t{1} << large_page_shift_;
  info_.channels = pf::kChannels;
  return Status::Ok();
}

Driver::Impl::Impl(Bus* bus, const DriverOptions& options, std::unique_ptr<PvCalls> pv)
    : pv_(std::move(pv)),
      pv_bus_(pv_ ? std::make_unique<PvSyncBus>(bus, pv_.get()) : nullptr),
      bus_(pv_bus_ ? pv_bus_.get() : bus),
      options_(options) {}

ParaVirtualCounters Driver::Impl::pv_counters() const {
  if (!pv_) return {};
  const PvCounters c = pv_->counters();
  return {static_cast<uint32_t>(pv_->mode()), c.calls, c.doorbells};
}

Status Driver::Impl::Probe() {
  const gpu::PciIdentity& pci = bus_.pci();
  if (pci.vendor_id != gf100::pci::kVendorId) {
    return Status::FailedPrecondition("not an NVIDIA device (vendor " + Hex(pci.vendor_id) + ")");
  }
  info_.pci = pci;
  info_.boot0 = bus_.ReadReg(pmc::kBoot0);
  info_.chipset = (info_.boot0 >> pmc::kBoot0ChipsetShift) & 0x1ff;  // bits 20-28
  info_.stepping = info_.boot0 & 0xff;
  if (info_.chipset != pmc::kChipsetGf100) {
    return Status::FailedPrecondition("PMC_BOOT_0 " + Hex(info_.boot0) + " names chipset " +
                                      Hex(info_.chipset) + ", not GF100 (0xc0)");
  }
  info_.name = DeviceName(pci.device_id);
  info_.channels = pf::kChannels;

  // Engines on: PFIFO, PGRAPH (M2MF, compute) and both copy engines.
  const uint32_t enable = bus_.ReadReg(pmc::kEnable);
  bus_.WriteReg(pmc::kEnable, enable | pmc::kEnablePfifo | pmc::kEnablePgraph | pmc::kEnablePcopy0 |
                                  pmc::kEnablePcopy1);

  // VRAM: the sum over enabled FB partitions (nouveau gf100_ram_probe_fbp).
  namespace pfb = gf100::pfb;
  const uint32_t fbps = bus_.ReadReg(pfb::kFbpCount);
  if (fbps == 0 || fbps > pfb::kMaxFbps) {
    return Status::FailedPrecondition("PFB reports " + std::to_string(fbps) +
                                      " FB partitions; cannot size VRAM");
  }
  const uint32_t disabled = bus_.ReadReg(pfb::kFbpDisabledMask);
  uint64_t vram = 0;
  for (uint32_t i = 0; i < fbps; ++i) {
    if (disabled & (1u << i)) continue;
    vram += uint64_t(bus_.ReadReg(pfb::kFbpAmount + i * pfb::kFbpStride)) << pfb::kAmountShift;
    ++info_.fb_partitions;
  }
  vram = std::min(vram, vm::kVaLimit);
  if (vram <= options_.reserved_vram || vram < (16ull << 20)) {
    return Status::FailedPrecondition(
        "PFB reports " + std::to_string(vram >> 20) +
        " MiB of VRAM; at least 16 MiB beyond the reserved area needed");
  }
  info_.vram_bytes = vram;

  // 128 KiB large pages (VM_CFG bit 0 clear), nouveau's default on GF100.
  const uint32_t cfg = bus_.ReadReg(vm::kCfg);
  bus_.WriteReg(vm::kCfg, cfg & ~vm::kCfgLargePage64K);
  large_page_shift_ = vm::kLargePageShift128K;
  info_.large_page_bytes = 1ull << large_page_shift_;
  return Status::Ok();
}

Status Driver::Impl::Init() {
  GPUVM_RETURN_IF_ERROR(Probe());
  vram_ =
      std::make_unique<VramHeap>(options_.reserved_vram, info_.vram_bytes - options_.reserved_vram);
  if (options_.page_table_writer) {
    GPUVM_ASSIGN_OR_RETURN(writer_, options_.page_table_writer(&bus_));
    if (writer_ == nullptr)
      return Status::InvalidArgument("the page-table writer factory gave none");
  } else if (pv_) {
    writer_ = std::make_unique<PvPageTableWriter>(pv_.get());
  } else {
    writer_ = std::make_unique<NativePageTableWriter>(&bus_);
  }
  GPUVM_ASSIGN_OR_RETURN(instmem_,
                         InstMem::Create(&bus_, vram_.get(), writer_.get(), large_page_shift_));
  GPUVM_RETURN_IF_ERROR(SetUpBar1());
  GPUVM_RETURN_IF_ERROR(SetUpFifo());
  return Status::Ok();
}

Status Driver::Impl::SetUpBar1() {
  const uint64_t size = std::min(bus_.pci().bar1_size, vm::kVaLimit);
  const uint64_t user_bytes = uint64_t(pf::kChannels) * pf::kUserPageSize;
  if (size < 2 * user_bytes) {
    return Status::FailedPrecondition("BAR1 is too small for the USER area");
  }
  GPUVM_ASSIGN_OR_RETURN(bar1_, VmSpace::Create(instmem_.get(), writer_.get(), size - 1,
                                                large_page_shift_, SpaceKind::kBar1));
  GPUVM_ASSIGN_OR_RETURN(bar1_inst_, instmem_->Allocate(gf100::ramin::kSize));
  uint32_t words[4];
  bar1_->InstanceWords(words);
  GPUVM_RETURN_IF_ERROR(
      instmem_->Write(bar1_inst_, gf100::ramin::kPageDirLo, words, sizeof(words)));
  bus_.WriteReg(
      gf100::pbus::kBar1Inst,
      gf100::pbus::kBarInstVmMode | uint32_t(bar1_inst_.vram >> gf100::pbus::kBarInstShift));
  bar1_va_ = RangeAllocator(0, size);

  // The USER area: one page per channel, in VRAM, mapped at the start of BAR1; PFIFO polls IB_PUT
  // there (nouveau: fifo->user.mem mapped through BAR1, 0x2254 = 0x10000000 | offset >> 12).
  GPUVM_ASSIGN_OR_RETURN(user_vram_, vram_->Allocate(user_bytes, kPage));
  GPUVM_ASSIGN_OR_RETURN(user_bar1_, bar1_va_.Allocate(user_bytes, kPage));
  std::vector<uint64_t> ptes(user_bytes / kPage);
  for (size_t i = 0; i < ptes.size(); ++i) ptes[i] = vm::pte::Make(user_vram_ + i * kPage);
  GPUVM_RETURN_IF_ERROR(bar1_->Map(user_bar1_, ptes, false));
  GPUVM_RETURN_IF_ERROR(bar1_->Flush());
  // Not zeroed here: PFIFO only reads the USER pages of channels on the playlist, and each channel
  // zeroes its own page before it is bound (channel.cc). Zeroing all 128 pages up front cost 512
  // KiB of BAR1 writes — 128 trapped page blocks per driver start in a VM, most of pt's init time.
  bus_.WriteReg(pf::kPollArea, pf::kPollAreaEnable | uint32_t(user_bar1_ >> 12));
  return Status::Ok();
}

Status Driver::Impl::SetUpFifo() {
  for (InstObject& p : playlist_) {
    GPUVM_ASSIGN_OR_RETURN(p, instmem_->Allocate(pf::kChannels * pf::kPlaylistEntrySize));
  }
  // Interrupts: acknowledge anything stale, enable the error sources (nouveau gf100_fifo_init and
  // gf100_gr_init). Playlist-done and non-stall interrupts stay off: the driver polls for both.
  bus_.WriteReg(pf::kIntr, kAllBits);
  bus_.WriteReg(pf::kIntrEn,
                pf::kIntrChanTableError | pf::kIntrPlaylist | pf::kIntrVmFault | pf::kIntrSubfifo);
  for (uint32_t n = 0; n < pf::kSubfifos; ++n) {
    const uint32_t base = pf::kSubfifo + n * pf::kSubfifoStride;
    bus_.WriteReg(base + pf::kSubfifoIntr, kAllBits);
    bus_.WriteReg(base + pf::kSubfifoIntrEn, kAllBits);
  }
  bus_.WriteReg(gf100::pgraph::kIntr, kAllBits);
  bus_.WriteReg(gf100::pgraph::kIntrEn, kAllBits);
  if (options_.use_interrupts) {
    bus_.WriteReg(pmc::kIntrEnHost, pmc::kIntrEnHardware);
    Status s = bus_.SetInterruptHandler(
        [this](bool asserted) { irq_pending_.store(asserted, std::memory_order_release); });
    interrupts_ = s.ok();
    if (!interrupts_) bus_.WriteReg(pmc::kIntrEnHost, 0);
  }
  return Status::Ok();
}

void Driver::Impl::Quarantine(std::shared_ptr<AllocRecord> record) {
  std::lock_guard lock(quarantine_mu_);
  quarantine_.push_back(std::move(record));
}

Driver::Impl::~Impl() {
  {
    std::lock_guard lock(quarantine_mu_);
    quarantine_.clear();  // the GPU is idle or gone by now
  }
  if (interrupts_) {
    (void)bus_.SetInterruptHandler(nullptr);
    bus_.WriteReg(pmc::kIntrEnHost, 0);
  }
  if (bar1_ != nullptr) {
    bus_.WriteReg(pf::kPollArea, 0);
    bus_.WriteReg(gf100::pbus::kBar1Inst, 0);
  }
  if (instmem_ != nullptr) {
    for (InstObject& p : playlist_) instmem_->Free(p);
    instmem_->Free(bar1_inst_);
  }
  if (user_vram_ != 0) vram_->Free(user_vram_);
  bar1_.reset();
  instmem_.reset();
}

// ---- BAR1
// -----------------------------------------------------------------------------------------------

uint64_t Driver::Impl::userd_vram(uint32_t chid) const {
  return user_vram_ + uint64_t(chid) * pf::kUserPageSize;
}
uint64_t Driver::Impl::user_bar1(uint32_t chid) const {
  return user_bar1_ + uint64_t(chid) * pf::kUserPageSize;
}

Result<uint64_t> Driver::Impl::MapBar1(uint64_t vram, uint64_t bytes) {
  if (bytes == 0 || (bytes & (kPage - 1)) || (vram & (kPage - 1))) {
    return Status::InvalidArgument("BAR1 mappings are whole pages");
  }
  uint64_t offset;
  {
    std::lock_guard lock(bar1_mu_);
    GPUVM_ASSIGN_OR_RETURN(offset, bar1_va_.Allocate(bytes, kPage));
  }
  std::vector<uint64_t> ptes(bytes / kPage);
  for (size_t i = 0; i < ptes.size(); ++i) ptes[i] = vm::pte::Make(vram + i * kPage);
  Status s = bar1_->Map(offset, ptes, false);
  if (s.ok()) s = bar1_->Flush();
  if (!s.ok()) {
    (void)bar1_->Unmap(offset, ptes.size(), false);
    ReleaseBar1(offset);
    return s;
  }
  return offset;
}

void Driver::Impl::UnmapBar1(uint64_t offset, uint64_t bytes) {
  (void)bar1_->Unmap(offset, bytes / kPage, false);
}

void Driver::Impl::ReleaseBar1(uint64_t offset) {
  std::lock_guard lock(bar1_mu_);
  (void)bar1_va_.Free(offset);
}

// ---- PFIFO
// ----------------------------------------------------------------------------------------------

Result<uint32_t> Driver::Impl::AllocateChannelId() {
  std::lock_guard lock(fifo_mu_);
  for (uint32_t c = 0; c < pf::kChannels; ++c) {
    if (!chid_used_[c]) {
      chid_used_[c] = true;
      return c;
    }
  }
  return Status::ResourceExhausted("all 128 channels are in use");
}

void Driver::Impl::ReleaseChannelId(uint32_t chid) {
  std::lock_guard lock(fifo_mu_);
  if (chid < pf::kChannels) chid_used_[chid] = false;
}

Status Driver::Impl::CommitPlaylist() {
  std::vector<uint32_t> entries;
  for (uint32_t c = 0; c < pf::kChannels; ++c) {
    if (!on_playlist_[c]) continue;
    entries.push_back(c);
    entries.push_back(pf::kPlaylistEntryWord1);
  }
  const InstObject& buffer = playlist_[playlist_next_];
  playlist_next_ ^= 1;  // nouveau alternates two buffers so the GPU never reads a half-written one
  if (!entries.empty()) {
    GPUVM_RETURN_IF_ERROR(instmem_->Write(buffer, 0, entries.data(), entries.size() * 4));
  }
  const uint32_t count = uint32_t(entries.size() / 2);
  bus_.WriteReg(pf::kPlaylistWr, uint32_t(buffer.vram >> 12));  // target VRAM (bits 28-29 = 0)
  bus_.WriteReg(pf::kPlaylistWrLen, kPlaylistWrLenNouveau | count);
  if (!PollReg(&bus_, pf::kPlaylistRdLen, [](uint32_t v) { return !(v & pf::kPlaylistBusy); })) {
    return Status::Unavailable("playlist update still busy after 2 s");
  }
  // nouveau acknowledges "update done" in its interrupt handler; the driver keeps that interrupt
  // disabled and acknowledges here.
  bus_.WriteReg(pf::kRunlistIntr, pf::kRunlistIntrUpdateDone);
  return Status::Ok();
}

Status Driver::Impl::EnableChannel(uint32_t chid, uint64_t inst_vram, Channel::Impl* owner) {
  std::lock_guard lock(fifo_mu_);
  channels_[chid] = owner;
  channel_inst_[chid] = inst_vram;
  const uint32_t table = pf::kChanTable + chid * pf::kChanTableStride;
  bus_.WriteReg(table, pf::kChanValid | pf::kChanPollEnable | uint32_t(inst_vram >> 12));
  bus_.WriteReg(table + 4,
                (uint32_t(pf::Engine::kNone) << pf::kStateEngineShift) | pf::kStateRunnable);
  on_playlist_[chid] = true;
  return CommitPlaylist();
}

Status Driver::Impl::DisableChannel(uint32_t chid) {
  std::lock_guard lock(fifo_mu_);
  const uint32_t table = pf::kChanTable + chid * pf::kChanTableStride;
  bus_.WriteReg(table + 4, uint32_t(pf::Engine::kNone) << pf::kStateEngineShift);
  on_playlist_[chid] = false;
  Status s = CommitPlaylist();
  bus_.WriteReg(pf::kKickChid, chid);
  if (!PollReg(&bus_, pf::kKickChid, [](uint32_t v) { return !(v & kKickPending); }) && s.ok()) {
    s = Status::Unavailable("channel kick still pending after 2 s");
  }
  bus_.WriteReg(table, 0);
  channels_[chid] = nullptr;
  channel_inst_[chid] = 0;
  return s;
}

// ---- errors
// ---------------------------------------------------------------------------------------------

void Driver::Impl::MaybeService() {
  if (drm_ != nullptr) return;  // no registers: contexts ask the kernel (Context::Impl::PollDrm)
  if (interrupts_) {
    if (irq_pending_.load(std::memory_order_acquire)) ServiceInterrupts();
    return;
  }
  const int64_t now = NowNs();
  const int64_t interval =
      std::chrono::duration_cast<std::chrono::nanoseconds>(options_.error_poll_interval).count();
  if (now - last_service_ns_.load(std::memory_order_relaxed) >= interval) ServiceInterrupts();
}

size_t Driver::Impl::ServiceInterrupts() {
  if (drm_ != nullptr) return 0;
  std::lock_guard lock(irq_mu_);
  last_service_ns_.store(NowNs(), std::memory_order_relaxed);
  size_t decoded = 0;
  // A few rounds: sources may stay asserted or new ones arrive while we work.
  for (int round = 0; round < 4; ++round) {
    const uint32_t pending = bus_.ReadReg(pmc::kIntrHost);
    if (pending == 0) break;
    uint32_t unknown = pending & ~(pmc::kIntrPfifo | pmc::kIntrPgraph);
    if (pending & pmc::kIntrPfifo) {
      const uint32_t intr = bus_.ReadReg(pf::kIntr);
      if (intr & pf::kIntrVmFault) {
        DecodeVmFaults();
        ++decoded;
      }
      if (intr & pf::kIntrSubfifo) {
        DecodeSubfifo();
        ++decoded;
      }
      const uint32_t edge = intr & (pf::kIntrChanTableError | pf::kIntrPlaylist);
      if (edge != 0) {
        // The driver's own table/playlist writes were refused: nothing to attribute to a context.
        bus_.WriteReg(pf::kIntr, edge);
        ++decoded;
      }
      if (intr & pf::kIntrRunlist) bus_.WriteReg(pf::kRunlistIntr, bus_.ReadReg(pf::kRunlistIntr));
      if (intr & pf::kIntrEngine) {
        const uint32_t engines = bus_.ReadReg(pf::kEngineIntrSource);
        for (uint32_t e = 0; e < pf::kEngineSlots; ++e) {
          if (engines & (1u << e)) bus_.WriteReg(pf::kEngineIntr + 4 * e, kAllBits);
        }
      }
    }
    if (pending & pmc::kIntrPgraph) {
      DecodeGraphTrap();
      ++decoded;
    }
    if (unknown != 0) {
      // A source this driver does not handle would hold the line forever: mask it.
      bus_.WriteReg(pmc::kIntrMaskHost, bus_.ReadReg(pmc::kIntrMaskHost) & ~unknown);
    }
  }
  return decoded;
}

void Driver::Impl::DecodeVmFaults() {
  const uint32_t source = bus_.ReadReg(pf::kVmFaultSource);
  for (uint32_t u = 0; u < pf::kVmFaultUnits; ++u) {
    if (!(source & (1u << u))) continue;
    const uint32_t base = pf::kVmFault + u * pf::kVmFaultStride;
    const uint32_t inst = bus_.ReadReg(base + pf::kVmFaultInst);
    const uint32_t lo = bus_.ReadReg(base + pf::kVmFaultAddrLo);
    const uint32_t hi = bus_.ReadReg(base + pf::kVmFaultAddrHi);
    const uint32_t flags = bus_.ReadReg(base + pf::kVmFaultFlags);
    bus_.WriteReg(pf::kVmFaultSource, 1u << u);
    GpuFault f;
    f.kind = GpuFault::Kind::kMmuFault;
    f.address = lo | (uint64_t(hi) << 32);
    f.write = (flags & pf::kVmFaultWrite) != 0;
    f.reason = flags & pf::kVmFaultReasonMask;
    f.unit = u;
    f.message = std::string("MMU fault: ") + (f.write ? "write" : "read") + " at " +
                Hex(f.address) + " (" + FaultReasonName(f.reason) + ") by " + FaultUnitName(u);
    Attribute(uint64_t(inst) << 12, -1, std::move(f));
  }
}

void Driver::Impl::DecodeSubfifo() {
  const uint32_t source = bus_.ReadReg(pf::kSubfifoIntrSource);
  for (uint32_t n = 0; n < pf::kSubfifos; ++n) {
    if (!(source & (1u << n))) continue;
    const uint32_t base = pf::kSubfifo + n * pf::kSubfifoStride;
    const uint32_t intr = bus_.ReadReg(base + pf::kSubfifoIntr);
    const uint32_t channel = bus_.ReadReg(base + pf::kSubfifoChannel);
    const uint32_t addr = bus_.ReadReg(base + pf::kSubfifoCacheAddr);
    const uint32_t data = bus_.ReadReg(base + pf::kSubfifoCacheData);
    bus_.WriteReg(base + pf::kSubfifoIntr, intr);
    GpuFault f;
    f.kind = GpuFault::Kind::kCommandError;
    f.subfifo_intr = intr;
    f.method = addr & 0x3ffc;           // CACHE_ADDR bits 2-13: the method
    f.subchannel = (addr >> 16) & 0x7;  // bits 16-18: its subchannel
    f.data = data;
    if (intr & (pf::kSubfifoIntrGpuvmKilled | pf::kSubfifoIntrGpuvmTimeLimit)) {
      // gpuvm's host failed this channel's work: there is no method to name.
      f.message = "channel error: " + SubfifoIntrNames(intr) +
                  ((intr & pf::kSubfifoIntrGpuvmTimeLimit)
                       ? " (the host stopped a kernel that ran past this VM's time limit)"
                       : " (the host's operator killed this VM's GPU work)");
      Attribute(0, int(channel & kChidMask), std::move(f));
      continue;
    }
    f.message = "channel error: " + SubfifoIntrNames(intr) + " at method " + Hex(f.method) +
                " subchannel " + std::to_string(f.subchannel) + " data " + Hex(data);
    Attribute(0, int(channel & kChidMask), std::move(f));
  }
}

void Driver::Impl::DecodeGraphTrap() {
  namespace pg = gf100::pgraph;
  const uint32_t intr = bus_.ReadReg(pg::kIntr);
  if (intr & pg::kIntrTrap) {
    // The channel on PGRAPH when it trapped (nouveau reads the engine's current context) and the
    // reason, read before the acknowledgement below lets the device present the next trap.
    const uint32_t ch = bus_.ReadReg(pf::kEngineChannel + 4 * uint32_t(pf::Engine::kPgraph));
    GpuFault f;
    f.kind = GpuFault::Kind::kComputeTrap;
    const uint32_t trap = bus_.ReadReg(pg::kTrap);
    if (trap & pg::kTrapGpc) {
      // gf100_gr_trap_intr / gf100_gr_trap_mp: the GPC 0 / TPC 0 / MP chain, innermost first.
      if (bus_.ReadReg(pg::kTpc0TrapStatus) & pg::kTpcTrapMp) {
        f.warp_error = bus_.ReadReg(pg::kTpc0MpWarpError) & pg::kMpWarpErrorMask;
        f.global_error = bus_.ReadReg(pg::kTpc0MpGlobalError);
        bus_.WriteReg(pg::kTpc0MpWarpError, 0);
        bus_.WriteReg(pg::kTpc0MpGlobalError, f.global_error);
      }
      bus_.WriteReg(pg::kGpc0TrapStatus, bus_.ReadReg(pg::kGpc0TrapStatus));
      bus_.WriteReg(pg::kTrapGpcMask, bus_.ReadReg(pg::kTrapGpcMask));
    }
    if (trap != 0) bus_.WriteReg(pg::kTrap, trap);
    f.message = "compute trap (PGRAPH TRAP): " + MpTrapReason(f.warp_error, f.global_error);
    if (ch & pf::kEngineChannelValid) Attribute(uint64_t(ch & pf::kChanInstMask) << 12, -1, f);
  }
  bus_.WriteReg(pg::kIntr, intr);
}

void Driver::Impl::Attribute(uint64_t inst_vram, int chid, GpuFault fault) {
  std::lock_guard lock(fifo_mu_);
  if (chid < 0) {
    for (uint32_t c = 0; c < pf::kChannels; ++c) {
      if (channels_[c] != nullptr && channel_inst_[c] == inst_vram) chid = int(c);
    }
  }
  // Faults of BAR1/BAR3 accesses or of channels already gone have no context to report to.
  if (chid < 0 || channels_[chid] == nullptr) return;
  fault.channel = uint32_t(chid);
  fault.message = "channel " + std::to_string(chid) + ": " + fault.message;
  channels_[chid]->context()->SetFault(fault);
}

// ---- Driver
// ---------------------------------------------------------------------------------------------

Driver::Driver(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Driver::~Driver() = default;

Result<std::unique_ptr<Driver>> Driver::Create(Bus* bus, const DriverOptions& options) {
  GPUVM_ASSIGN_OR_RETURN(auto impl, Impl::Create(bus, options));
  return std::unique_ptr<Driver>(new Driver(std::move(impl)));
}

Result<std::unique_ptr<Driver>> Driver::CreateOnDrm(DrmDevice* drm, const DriverOptions& options) {
  GPUVM_ASSIGN_OR_RETURN(auto impl, Impl::CreateOnDrm(drm, options));
  return std::unique_ptr<Driver>(new Driver(std::move(impl)));
}

const DeviceInfo& Driver::info() const { return impl_->info(); }

Result<std::unique_ptr<Context>> Driver::CreateContext(const ContextOptions& options) {
  return Context::Impl::Create(impl_.get(), options);
}

uint64_t Driver::vram_free() const {
  const uint64_t recycled = impl_->recycled_vram.load(std::memory_order_relaxed);
  if (impl_->drm() != nullptr) {
    const uint64_t used = impl_->drm_vram_used.load(std::memory_order_relaxed);
    const uint64_t size = impl_->info().vram_bytes;
    return (used > size ? 0 : size - used) + recycled;
  }
  return impl_->vram()->free_bytes() + recycled;
}
BusCounters Driver::bus_counters() const { return impl_->counters(); }
ParaVirtualCounters Driver::para_virtual_counters() const { return impl_->pv_counters(); }
size_t Driver::ServiceInterrupts() { return impl_->ServiceInterrupts(); }
void Driver::PollErrors() { impl_->MaybeService(); }

}  // namespace gpuvm::guest
