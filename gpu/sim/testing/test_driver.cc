#include "gpu/sim/testing/test_driver.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/align.h"
#include "gpu/hw/gpfifo.h"
#include "gpu/hw/pbus.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pgraph.h"
#include "gpu/hw/pmc.h"
#include "gpu/hw/ramin.h"

namespace gpuvm::sim::testing {

namespace vm = gf100::vm;
namespace pf = gf100::pfifo;
using gpu::Bar;

namespace {

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "TestDriver: %s\n", what);
  std::abort();
}

int LargeShift(gpu::Device* device) {
  return (device->ReadReg(vm::kCfg) & vm::kCfgLargePage64K) ? vm::kLargePageShift64K
                                                            : vm::kLargePageShift128K;
}

}  // namespace

// ---- TestDriver: VRAM
// ----------------------------------------------------------------------------------

TestDriver::TestDriver(gpu::Device* device, uint64_t vram_size, uint64_t reserved, bool zero_fill)
    : device_(device),
      vram_size_(vram_size),
      next_vram_(AlignUp(reserved, 0x1000)),
      zero_fill_(zero_fill) {}

TestDriver::~TestDriver() = default;

uint64_t TestDriver::AllocVram(uint64_t size, uint64_t align) {
  const uint64_t at = AlignUp(next_vram_, align);
  if (size == 0 || at > vram_size_ || size > vram_size_ - at) Die("out of VRAM");
  next_vram_ = at + size;
  if (zero_fill_) Fill32(at, 0, AlignUp(size, 4));
  return at;
}

uint64_t TestDriver::PraminOffset(uint64_t vram) {
  const uint64_t base = vram & ~0xffffull;
  if (base != pramin_base_) {
    device_->WriteReg(gf100::pbus::kPraminBase, uint32_t(base >> gf100::pbus::kPraminBaseShift));
    pramin_base_ = base;
  }
  return gf100::pbus::kPraminWindow + (vram - base);
}

uint32_t TestDriver::Read32(uint64_t vram) { return device_->Read32(Bar::k0, PraminOffset(vram)); }
void TestDriver::Write32(uint64_t vram, uint32_t value) {
  device_->Write32(Bar::k0, PraminOffset(vram), value);
}
uint64_t TestDriver::Read64(uint64_t vram) {
  return Read32(vram) | (uint64_t(Read32(vram + 4)) << 32);
}
void TestDriver::Write64(uint64_t vram, uint64_t value) {
  Write32(vram, uint32_t(value));
  Write32(vram + 4, uint32_t(value >> 32));
}

void TestDriver::WriteBytes(uint64_t vram, const void* data, uint64_t length) {
  const auto* in = static_cast<const uint8_t*>(data);
  uint64_t i = 0;
  for (; i + 4 <= length && ((vram + i) & 3) == 0; i += 4) {
    uint32_t w;
    std::memcpy(&w, in + i, 4);
    Write32(vram + i, w);
  }
  for (; i < length; ++i) device_->Write8(Bar::k0, PraminOffset(vram + i), in[i]);
}

void TestDriver::ReadBytes(uint64_t vram, void* data, uint64_t length) {
  auto* out = static_cast<uint8_t*>(data);
  uint64_t i = 0;
  for (; i + 4 <= length && ((vram + i) & 3) == 0; i += 4) {
    const uint32_t w = Read32(vram + i);
    std::memcpy(out + i, &w, 4);
  }
  for (; i < length; ++i) out[i] = device_->Read8(Bar::k0, PraminOffset(vram + i));
}

void TestDriver::Fill32(uint64_t vram, uint32_t value, uint64_t length) {
  for (uint64_t i = 0; i + 4 <= length; i += 4) Write32(vram + i, value);
}

// ---- Vm
// ---------------------------------------------------------------------------------------------------

Vm* TestDriver::CreateVm(uint64_t limit) {
  const int large_shift = LargeShift(device_);
  const uint64_t pd_bytes = vm::kPdeCount(large_shift) * vm::kEntrySize;
  const uint64_t pd = AllocVram(pd_bytes, 0x1000);
  vms_.push_back(std::unique_ptr<Vm>(new Vm(this, pd, limit)));
  return vms_.back().get();
}

void Vm::WritePde(uint64_t index) {
  const Pde& p = pdes_[index];
  const uint64_t pde =
      vm::pde::Make(p.large_table ? vm::PdeTarget::kVram : vm::PdeTarget::kNone, p.large_table,
                    p.small_table ? vm::PdeTarget::kVram : vm::PdeTarget::kNone, p.small_table);
  driver_->Write64(pd_ + index * vm::kEntrySize, pde);
}

uint64_t Vm::PteAddress(uint64_t va, bool large, bool create) {
  const int large_shift = LargeShift(driver_->device_);
  const int pde_shift = vm::kPdeShift(large_shift);
  const uint64_t index = va >> pde_shift;
  if (index >= vm::kPdeCount(large_shift)) Die("virtual address past 2^40");
  Pde& p = pdes_[index];
  uint64_t& table = large ? p.large_table : p.small_table;
  if (table == 0) {
    if (!create) return 0;
    const uint64_t entries = large ? vm::kLargeTableEntries : vm::kSmallTableEntries(large_shift);
    table = driver_->AllocVram(entries * vm::kEntrySize, 0x1000);
    WritePde(index);
  }
  const uint64_t in_pde = va & ((1ull << pde_shift) - 1);
  return table + (in_pde >> (large ? large_shift : vm::kSmallPageShift)) * vm::kEntrySize;
}

void Vm::Map(uint64_t va, uint64_t physical, uint64_t size, const MapFlags& flags) {
  const uint64_t page = flags.large ? (1ull << LargeShift(driver_->device_)) : vm::kSmallPageSize;
  if ((va | physical | size) & (page - 1)) Die("Map arguments not page aligned");
  vm::pte::Flags f{flags.read_only, flags.supervisor_only, flags.target, 0};
  for (uint64_t off = 0; off < size; off += page) {
    driver_->Write64(PteAddress(va + off, flags.large, true), vm::pte::Make(physical + off, f));
  }
}

void Vm::Unmap(uint64_t va, uint64_t size) {
  for (uint64_t off = 0; off < size; off += vm::kSmallPageSize) {
    if (uint64_t a = PteAddress(va + off, false, false)) driver_->Write64(a, 0);
  }
}

uint64_t Vm::AllocVa(uint64_t size, uint64_t align) {
  const uint64_t va = AlignUp(next_va_, align);
  next_va_ = va + AlignUp(size, vm::kSmallPageSize);
  return va;
}

uint64_t Vm::AllocMapped(uint64_t size, uint64_t* physical, const MapFlags& flags) {
  size = AlignUp(size, vm::kSmallPageSize);
  const uint64_t phys = driver_->AllocVram(size, 0x1000);
  const uint64_t va = AllocVa(size);
  MapFlags f = flags;
  f.target = vm::Target::kVram;
  f.large = false;
  Map(va, phys, size, f);
  if (physical != nullptr) *physical = phys;
  return va;
}

uint64_t Vm::ReadPte(uint64_t va, bool large) {
  const uint64_t a = PteAddress(va, large, false);
  return a ? driver_->Read64(a) : 0;
}

void Vm::WritePte(uint64_t va, uint64_t pte, bool large) {
  driver_->Write64(PteAddress(va, large, true), pte);
}

void Vm::Flush() {
  gpu::Device* d = driver_->device_;
  for (int i = 0; i < 1000 && !(d->ReadReg(vm::kCfg) & vm::kCfgFlushSlotsMask); ++i) {
  }
  d->WriteReg(vm::kTlbFlushVspace, uint32_t(pd_ >> 8));  // VRAM target: bits 0-1 = 0
  d->WriteReg(vm::kTlbFlushTrigger, vm::kFlushTrigger | vm::kFlushPageAll);
  for (int i = 0; i < 1000 && !(d->ReadReg(vm::kCfg) & vm::kCfgFlushQueued); ++i) {
  }
}

void Vm::BindTo(uint64_t inst) {
  namespace ri = gf100::ramin;
  driver_->Write32(inst + ri::kPageDirLo, uint32_t(pd_));  // target VRAM
  driver_->Write32(inst + ri::kPageDirHi, uint32_t(pd_ >> 32));
  driver_->Write32(inst + ri::kVmLimitLo, uint32_t(limit_));
  driver_->Write32(inst + ri::kVmLimitHi, uint32_t(limit_ >> 32));
}

void TestDriver::BindBar(Bar bar, Vm* vm) {
  const uint64_t inst = AllocVram(gf100::ramin::kSize, 0x1000);
  vm->BindTo(inst);
  const uint32_t value = gf100::pbus::kBarInstVmMode | uint32_t(inst >> gf100::pbus::kBarInstShift);
  if (bar == Bar::k1) {
    bar1_vm_ = vm;
    device_->WriteReg(gf100::pbus::kBar1Inst, value);
  } else if (bar == Bar::k3) {
    bar3_vm_ = vm;
    device_->WriteReg(gf100::pbus::kBar3Inst, value);
  } else {
    Die("BAR0 has no VM");
  }
}

// ---- channels
// ---------------------------------------------------------------------------------------------

void TestDriver::SetupUserArea() {
  if (bar1_vm_ == nullptr) {
    BindBar(Bar::k1, CreateVm(device_->pci().bar1_size - 1));
  }
  const uint64_t bytes = uint64_t(pf::kChannels) * pf::kUserPageSize;
  user_area_ = AllocVram(bytes, 0x1000);
  user_area_bar1_ = bar1_vm_->AllocVa(bytes);
  bar1_vm_->Map(user_area_bar1_, user_area_, bytes);
  bar1_vm_->Flush();
  device_->WriteReg(pf::kPollArea, pf::kPollAreaEnable | uint32_t(user_area_bar1_ >> 12));
  playlist_buffer_ = AllocVram(0x1000, 0x1000);
}

Channel* TestDriver::CreateChannel(uint32_t chid, Vm* vm, const ChannelOptions& options) {
  namespace ri = gf100::ramin;
  if (chid >= pf::kChannels) Die("channel id past 127");
  if (options.ib_entries == 0 || (options.ib_entries & (options.ib_entries - 1))) {
    Die("IB entries must be a power of two");
  }
  if (user_area_ == 0) SetupUserArea();
  auto ch = std::unique_ptr<Channel>(new Channel());
  ch->driver_ = this;
  ch->id_ = chid;
  ch->vm_ = vm;
  ch->inst_ = AllocVram(ri::kSize, 0x1000);
  ch->userd_ = user_area_ + uint64_t(chid) * pf::kUserPageSize;
  ch->user_bar1_ = user_area_bar1_ + uint64_t(chid) * pf::kUserPageSize;
  ch->ib_entries_ = options.ib_entries;
  ch->ib_va_ =
      vm->AllocMapped(uint64_t(options.ib_entries) * gf100::gpfifo::kIbEntrySize, &ch->ib_phys_);
  ch->pb_size_ = AlignUp(options.pushbuffer_size, 0x1000);
  ch->pb_va_ = vm->AllocMapped(ch->pb_size_, &ch->pb_phys_);
  vm->Flush();
  if (zero_fill_) Fill32(ch->userd_, 0, pf::kUserPageSize);

  // RAMFC, as nouveau's gf100 gpfifo constructor writes it.
  uint32_t order = 0;
  while ((1u << order) < options.ib_entries) ++order;
  Write32(ch->inst_ + ri::kUserdLo, uint32_t(ch->userd_));
  Write32(ch->inst_ + ri::kUserdHi, uint32_t(ch->userd_ >> 32));
  Write32(ch->inst_ + ri::kSignature, ri::kSignatureValue);
  Write32(ch->inst_ + ri::kIbBaseLo, uint32_t(ch->ib_va_));
  Write32(ch->inst_ + ri::kIbBaseHi, uint32_t(ch->ib_va_ >> 32) | (order << ri::kIbOrderShift));
  vm->BindTo(ch->inst_);

  // CHAN_TABLE: valid + poll enable + instance, then runnable (nouveau's 0xc0000000 / 0x001f0001).
  device_->WriteReg(pf::kChanTable + chid * pf::kChanTableStride,
                    pf::kChanValid | pf::kChanPollEnable | uint32_t(ch->inst_ >> 12));
  device_->WriteReg(pf::kChanTable + chid * pf::kChanTableStride + 4,
                    (uint32_t(pf::Engine::kNone) << pf::kStateEngineShift) | pf::kStateRunnable);
  channels_.push_back(std::move(ch));
  playlist_.push_back(chid);
  CommitPlaylist();
  return channels_.back().get();
}

void TestDriver::CommitPlaylist() {
  for (size_t i = 0; i < playlist_.size(); ++i) {
    Write32(playlist_buffer_ + i * pf::kPlaylistEntrySize, playlist_[i]);
    Write32(playlist_buffer_ + i * pf::kPlaylistEntrySize + 4, pf::kPlaylistEntryWord1);
  }
  device_->WriteReg(pf::kPlaylistWr, uint32_t(playlist_buffer_ >> 12));  // target VRAM
  device_->WriteReg(pf::kPlaylistWrLen, pf::kPlaylistWrLenNouveau | uint32_t(playlist_.size()));
  for (int i = 0; i < 1000 && (device_->ReadReg(pf::kPlaylistRdLen) & pf::kPlaylistBusy); ++i) {
  }
  // nouveau acknowledges "playlist update done" in its interrupt handler; we do it here.
  device_->WriteReg(pf::kRunlistIntr, pf::kRunlistIntrUpdateDone);
}

void TestDriver::RemoveFromPlaylist(uint32_t chid) {
  std::erase(playlist_, chid);
  CommitPlaylist();
}

void TestDriver::EnableInterrupts() {
  device_->WriteReg(gf100::pmc::kIntrEnHost, gf100::pmc::kIntrEnHardware);
  device_->WriteReg(pf::kIntrEn, 0xffffffff);
  device_->WriteReg(gf100::pgraph::kIntrEn, 0xffffffff);
}

// ---- Channel
// ------------------------------------------------------------------------------------------------

Channel& Channel::Inc(uint32_t subchannel, uint32_t method, std::initializer_list<uint32_t> data) {
  return Inc(subchannel, method, std::vector<uint32_t>(data));
}

Channel& Channel::Inc(uint32_t subchannel, uint32_t method, const std::vector<uint32_t>& data) {
  pending_.push_back(gf100::gpfifo::IncHeader(subchannel, method, uint32_t(data.size())));
  pending_.insert(pending_.end(), data.begin(), data.end());
  return *this;
}

Channel& Channel::NonInc(uint32_t subchannel, uint32_t method, const std::vector<uint32_t>& data) {
  pending_.push_back(gf100::gpfifo::NonIncHeader(subchannel, method, uint32_t(data.size())));
  pending_.insert(pending_.end(), data.begin(), data.end());
  return *this;
}

Channel& Channel::OneInc(uint32_t subchannel, uint32_t method, const std::vector<uint32_t>& data) {
  pending_.push_back(gf100::gpfifo::OneIncHeader(subchannel, method, uint32_t(data.size())));
  pending_.insert(pending_.end(), data.begin(), data.end());
  return *this;
}

Channel& Channel::Immediate(uint32_t subchannel, uint32_t method, uint32_t value) {
  pending_.push_back(gf100::gpfifo::ImmediateHeader(subchannel, method, value));
  return *this;
}

Channel& Channel::Raw(uint32_t word) {
  pending_.push_back(word);
  return *this;
}

void Channel::Submit() {
  const uint64_t bytes = pending_.size() * 4;
  if (bytes > pb_size_) Die("pushbuffer too small for one submission");
  if (pb_pos_ + bytes > pb_size_) pb_pos_ = 0;  // wrap (tests wait for completion between rounds)
  driver_->WriteBytes(pb_phys_ + pb_pos_, pending_.data(), bytes);
  const uint64_t va = pb_va_ + pb_pos_;
  pb_pos_ += bytes;
  const uint32_t words = uint32_t(pending_.size());
  pending_.clear();
  SubmitIbEntry(va, words);
}

void Channel::SubmitIbEntry(uint64_t va, uint32_t words) {
  driver_->Write64(ib_phys_ + uint64_t(ib_put_) * gf100::gpfifo::kIbEntrySize,
                   gf100::gpfifo::EncodeIbEntry(va, words));
  ib_put_ = (ib_put_ + 1) & (ib_entries_ - 1);
  WriteIbPut(ib_put_);
}

void Channel::WriteIbPut(uint32_t put) {
  driver_->device_->Write32(Bar::k1, user_bar1_ + gf100::userd::kIbPut, put);
}

uint32_t Channel::ReadIbGet() {
  return driver_->device_->Read32(Bar::k1, user_bar1_ + gf100::userd::kIbGet);
}

uint32_t Channel::ReadReference() {
  return driver_->device_->Read32(Bar::k1, user_bar1_ + gf100::userd::kRef);
}

}  // namespace gpuvm::sim::testing
