#include "gpu/sim/device.h"

#include <algorithm>
#include <cstring>

#include "gpu/hw/pbus.h"
#include "gpu/hw/pfb.h"
#include "gpu/hw/pfifo.h"
#include "gpu/hw/pgraph.h"
#include "gpu/hw/pmc.h"
#include "gpu/hw/ramin.h"
#include "gpu/hw/vm.h"

namespace gpuvm::sim {

namespace pbus = gf100::pbus;
namespace vm = gf100::vm;
using gpu::Bar;

namespace {

// Units by BAR0 range.
constexpr uint32_t kPmcEnd = 0x001000;
constexpr uint32_t kPbusEnd = 0x002000;
constexpr uint32_t kPfifoBegin = 0x002000;
constexpr uint32_t kPfifoEnd = 0x004000;
constexpr uint32_t kSubfifoBegin = gf100::pfifo::kSubfifo;
constexpr uint32_t kSubfifoEnd =
    gf100::pfifo::kSubfifo + gf100::pfifo::kSubfifos * gf100::pfifo::kSubfifoStride;
constexpr uint32_t kMmuBegin = vm::kCfg;
constexpr uint32_t kMmuEnd = vm::kTlbFlushTrigger + 4;

bool IsPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// The device (if any) whose interrupt handler this thread is running: a handler that touches its
// device must not re-enter delivery (the delivering loop picks the new level up when the handler
// returns).
thread_local SimDevice* t_delivering = nullptr;

}  // namespace

Result<std::unique_ptr<SimDevice>> SimDevice::Create(const SimDeviceOptions& options) {
  for (uint64_t size : {options.bar1_size, options.bar3_size}) {
    if (!IsPowerOfTwo(size) || size < vm::kSmallPageSize || size > vm::kVaLimit) {
      return Status::InvalidArgument("BAR1/BAR3 sizes must be powers of two from 4 KiB to 1 TiB");
    }
  }
  if (options.time_slice.count() <= 0) {
    return Status::InvalidArgument("the time slice must be positive");
  }
  std::unique_ptr<SimDevice> device(new SimDevice(options));
  GPUVM_RETURN_IF_ERROR(device->Init());
  return device;
}

SimDevice::SimDevice(const SimDeviceOptions& options) : options_(options) {
  pci_.vendor_id = gf100::pci::kVendorId;
  pci_.device_id = gf100::pci::kDeviceId;
  pci_.class_code = gf100::pci::kClassCode;
  pci_.revision = gf100::pci::kRevision;
  pci_.bar0_size = gf100::pci::kBar0Size;
  pci_.bar1_size = options.bar1_size;
  pci_.bar3_size = options.bar3_size;
}

Status SimDevice::Init() {
  GPUVM_ASSIGN_OR_RETURN(vram_, options_.vram_file.empty()
                                    ? Vram::Create(options_.vram_size)
                                    : Vram::Open(options_.vram_file, options_.vram_size));
  memory_ = std::make_unique<PhysicalMemory>(vram_.get(), options_.host_memory);
  mmu_ = std::make_unique<Mmu>(memory_.get());
  PfifoConfig config;
  config.memory = memory_.get();
  config.mmu = mmu_.get();
  config.pmc = &pmc_;
  config.register_lock = &register_lock_;
  config.interrupts = this;
  config.compute_engine = options_.compute_engine.get();
  config.time_slice_ns = uint64_t(options_.time_slice.count());
  config.on_channel_drained = options_.on_channel_drained;
  pfifo_ = std::make_unique<Pfifo>(config);
  if (options_.threaded) pfifo_->StartThread();
  return Status::Ok();
}

SimDevice::~SimDevice() {
  if (pfifo_) pfifo_->StopThread();
}

// ---- BAR0
// -------------------------------------------------------------------------------------------------

bool SimDevice::ReadRegister(uint32_t offset, uint32_t* value) {
  if (offset < kPmcEnd) return pmc_.Read(offset, value);
  if (offset < kPbusEnd) {
    switch (offset) {
      case pbus::kPraminBase:
        *value = uint32_t(pramin_base_.load(std::memory_order_relaxed) >> pbus::kPraminBaseShift);
        return true;
      case pbus::kBar1Inst:
        *value = bar1_.reg;
        return true;
      case pbus::kBar3Inst:
        *value = bar3_.reg;
        return true;
    }
    return false;
  }
  if ((offset >= kPfifoBegin && offset < kPfifoEnd) ||
      (offset >= kSubfifoBegin && offset < kSubfifoEnd)) {
    return pfifo_->Read(offset, value);
  }
  if (offset >= kMmuBegin && offset < kMmuEnd) {
    if (offset != vm::kCfg && offset != vm::kTlbFlushPage && offset != vm::kTlbFlushVspace &&
        offset != vm::kTlbFlushTrigger) {
      return false;
    }
    *value = mmu_->ReadRegister(offset);
    return true;
  }
  // PFB VRAM sizing (gpu/hw/pfb.h). (our choice) one partition holding all of VRAM, as the GPUvm
  // authors' Quadro 6000 model exposes; sizes are whole MiB.
  switch (offset) {
    case gf100::pfb::kFbpCount:
      *value = 1;
      return true;
    case gf100::pfb::kFbpDisabledMask:
      *value = 0;
      return true;
    case gf100::pfb::kFbpAmount:
      *value = uint32_t(vram_->size() >> gf100::pfb::kAmountShift);
      return true;
  }
  return pfifo_->ReadGraph(offset, value);
}

bool SimDevice::WriteRegister(uint32_t offset, uint32_t value) {
  if (offset < kPmcEnd) return pmc_.Write(offset, value);
  if (offset < kPbusEnd) {
    switch (offset) {
      case pbus::kPraminBase:
        pramin_base_.store(uint64_t(value & pbus::kPraminBaseMask) << pbus::kPraminBaseShift,
                           std::memory_order_relaxed);
        return true;
      case pbus::kBar1Inst:
        BindAperture(&bar1_, value);
        return true;
      case pbus::kBar3Inst:
        BindAperture(&bar3_, value);
        return true;
    }
    return false;
  }
  if ((offset >= kPfifoBegin && offset < kPfifoEnd) ||
      (offset >= kSubfifoBegin && offset < kSubfifoEnd)) {
    return pfifo_->Write(offset, value);
  }
  if (offset >= kMmuBegin && offset < kMmuEnd) {
    if (offset != vm::kCfg && offset != vm::kTlbFlushPage && offset != vm::kTlbFlushVspace &&
        offset != vm::kTlbFlushTrigger) {
      return false;
    }
    mmu_->WriteRegister(offset, value);
    return true;
  }
  return pfifo_->WriteGraph(offset, value);
}

void SimDevice::BindAperture(Aperture* aperture, uint32_t value) {
  aperture->reg = value;
  const uint64_t inst = uint64_t(value & pbus::kBarInstAddrMask) << pbus::kBarInstShift;
  AddressSpace* space = nullptr;
  uint64_t limit = 0;
  // The BAR's instance block is read when the register is written (our choice: later changes to it
  // take effect on the next write of the register, like a context load).
  if (const uint8_t* ramin = vram_->At(inst, gf100::ramin::kSize)) {
    namespace ri = gf100::ramin;
    const uint32_t pd_lo = Load32(ramin + ri::kPageDirLo);
    const uint32_t pd_hi = Load32(ramin + ri::kPageDirHi);
    PageDirectory pd{
        vm::Target(pd_lo & ri::kPageDirTargetMask),
        (pd_lo & ri::kPageDirAddrLoMask) | (uint64_t(pd_hi & ri::kPageDirAddrHiMask) << 32)};
    space = mmu_->GetSpace(pd);  // null when unreachable: accesses fault with NO_CHANNEL
    limit = Load32(ramin + ri::kVmLimitLo) | (uint64_t(Load32(ramin + ri::kVmLimitHi)) << 32);
  }
  aperture->space.store(space, std::memory_order_relaxed);
  aperture->limit.store(limit, std::memory_order_relaxed);
  aperture->inst.store(inst, std::memory_order_relaxed);
  aperture->vm_mode.store((value & pbus::kBarInstVmMode) != 0, std::memory_order_release);
}

uint64_t SimDevice::ReadBar0(uint64_t offset, unsigned width) {
  if (offset >= pci_.bar0_size || width > pci_.bar0_size - offset) {
    unknown_reads_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  if (offset >= pbus::kPraminWindow && offset < pbus::kPraminWindow + pbus::kPraminWindowSize) {
    if (offset + width > pbus::kPraminWindow + pbus::kPraminWindowSize) {
      unknown_reads_.fetch_add(1, std::memory_order_relaxed);
      return 0;
    }
    const uint64_t address =
        pramin_base_.load(std::memory_order_relaxed) + (offset - pbus::kPraminWindow);
    const uint8_t* p = vram_->At(address, width);
    if (p == nullptr) {  // (our choice) the window past the end of VRAM reads 0
      unknown_reads_.fetch_add(1, std::memory_order_relaxed);
      return 0;
    }
    return LoadN(p, width);
  }
  // Registers are 32-bit. (our choice) A 64-bit access is two 32-bit accesses, low word first;
  // 8/16-bit reads return the addressed bytes of the register; unaligned accesses hit nothing.
  const uint32_t reg = uint32_t(offset & ~3ull);
  if ((width == 8 && (offset & 7) != 0) || (width == 4 && (offset & 3) != 0) ||
      (width == 2 && (offset & 1) != 0)) {
    unknown_reads_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  uint32_t lo = 0, hi = 0;
  bool known;
  {
    std::lock_guard lock(register_lock_);
    known = ReadRegister(reg, &lo);
    if (known && width == 8) known = ReadRegister(reg + 4, &hi);
  }
  if (!known) {
    unknown_reads_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  switch (width) {
    case 8:
      return lo | (uint64_t(hi) << 32);
    case 4:
      return lo;
    case 2:
      return (lo >> ((offset & 2) * 8)) & 0xffff;
    default:
      return (lo >> ((offset & 3) * 8)) & 0xff;
  }
}

void SimDevice::WriteBar0(uint64_t offset, unsigned width, uint64_t value) {
  if (offset >= pci_.bar0_size || width > pci_.bar0_size - offset) {
    unknown_writes_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (offset >= pbus::kPraminWindow && offset < pbus::kPraminWindow + pbus::kPraminWindowSize) {
    uint8_t* p = nullptr;
    if (offset + width <= pbus::kPraminWindow + pbus::kPraminWindowSize) {
      p = vram_->At(pramin_base_.load(std::memory_order_relaxed) + (offset - pbus::kPraminWindow),
                    width);
    }
    if (p == nullptr) {
      unknown_writes_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    StoreN(p, width, value);
    return;
  }
  // (our choice) 8/16-bit and unaligned register writes are dropped: read-modify-write would clear
  // write-1-to-clear bits the driver did not mean to touch.
  if ((width != 4 && width != 8) || (offset & (width - 1)) != 0) {
    unknown_writes_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  bool known;
  {
    std::lock_guard lock(register_lock_);
    known = WriteRegister(uint32_t(offset), uint32_t(value));
    if (width == 8) known = WriteRegister(uint32_t(offset) + 4, uint32_t(value >> 32)) && known;
    UpdateInterrupts();
  }
  DeliverInterrupt();
  if (!known) unknown_writes_.fetch_add(1, std::memory_order_relaxed);
}

// ---- BAR1 / BAR3
// ------------------------------------------------------------------------------------------

uint8_t* SimDevice::TranslateAperture(Bar bar, uint64_t offset, uint64_t length, bool write) {
  Aperture* a = ApertureFor(bar);
  if (!a->vm_mode.load(std::memory_order_acquire)) {
    unmapped_aperture_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  AddressSpace* space = a->space.load(std::memory_order_relaxed);
  const uint64_t limit = a->limit.load(std::memory_order_relaxed);
  MemoryFault fault;
  uint8_t* p = mmu_->Translate(space, limit, offset, uint32_t(length), write,
                               /*privileged=*/true, &fault);
  if (p == nullptr) {
    aperture_faults_.fetch_add(1, std::memory_order_relaxed);
    {
      std::lock_guard lock(register_lock_);
      pfifo_->RecordBarFault(bar == Bar::k1 ? kBar1Source : kBar3Source,
                             a->inst.load(std::memory_order_relaxed), fault);
      UpdateInterrupts();
    }
    DeliverInterrupt();
  }
  return p;
}

uint64_t SimDevice::ReadAperture(Bar bar, uint64_t offset, unsigned width) {
  const uint64_t size = pci_.BarSize(bar);
  if (offset >= size || width > size - offset) {
    unmapped_aperture_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  if ((offset & (vm::kSmallPageSize - 1)) + width > vm::kSmallPageSize) {
    uint64_t v = 0;  // an access straddling two pages: byte by byte
    for (unsigned i = 0; i < width; ++i) v |= ReadAperture(bar, offset + i, 1) << (8 * i);
    return v;
  }
  const uint8_t* p = TranslateAperture(bar, offset, width, false);
  return p != nullptr ? LoadN(p, width) : 0;
}

void SimDevice::WriteAperture(Bar bar, uint64_t offset, unsigned width, uint64_t value) {
  const uint64_t size = pci_.BarSize(bar);
  if (offset >= size || width > size - offset) {
    unmapped_aperture_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if ((offset & (vm::kSmallPageSize - 1)) + width > vm::kSmallPageSize) {
    for (unsigned i = 0; i < width; ++i) WriteAperture(bar, offset + i, 1, value >> (8 * i));
    return;
  }
  if (uint8_t* p = TranslateAperture(bar, offset, width, true)) {
    StoreN(p, width, value);
    if (bar == Bar::k1) pfifo_->SnoopBar1Write(offset, width);
  }
}

// ---- gpu::Device
// ------------------------------------------------------------------------------------------

uint64_t SimDevice::Read(Bar bar, uint64_t offset, gpu::Width width) {
  const unsigned w = static_cast<unsigned>(width);
  uint64_t v = 0;
  if (w == 1 || w == 2 || w == 4 || w == 8) {
    v = bar == Bar::k0 ? ReadBar0(offset, w) : ReadAperture(bar, offset, w);
  }
  if (observing_.load(std::memory_order_relaxed)) Observe(bar, false, false, offset, w, v);
  return v;
}

void SimDevice::Write(Bar bar, uint64_t offset, gpu::Width width, uint64_t value) {
  const unsigned w = static_cast<unsigned>(width);
  if (w == 1 || w == 2 || w == 4 || w == 8) {
    if (w < 8) value &= (1ull << (8 * w)) - 1;
    if (bar == Bar::k0) {
      WriteBar0(offset, w, value);
    } else {
      WriteAperture(bar, offset, w, value);
    }
  }
  if (observing_.load(std::memory_order_relaxed)) Observe(bar, true, false, offset, w, value);
}

Status SimDevice::ReadBlock(Bar bar, uint64_t offset, void* dst, uint64_t length) {
  if (bar == Bar::k0) return Status::InvalidArgument("block reads go through BAR1 or BAR3");
  const uint64_t size = pci_.BarSize(bar);
  if (offset > size || length > size - offset) {
    return Status::OutOfRange("block read past the end of the BAR");
  }
  auto* out = static_cast<uint8_t*>(dst);
  uint64_t done = 0;
  while (done < length) {
    const uint64_t at = offset + done;
    const uint64_t n =
        std::min(length - done, vm::kSmallPageSize - (at & (vm::kSmallPageSize - 1)));
    if (const uint8_t* p = TranslateAperture(bar, at, n, false)) {
      std::memcpy(out + done, p, n);
    } else {
      std::memset(out + done, 0, n);
    }
    done += n;
  }
  if (observing_.load(std::memory_order_relaxed)) Observe(bar, false, true, offset, length, 0);
  return Status::Ok();
}

Status SimDevice::WriteBlock(Bar bar, uint64_t offset, const void* src, uint64_t length) {
  if (bar == Bar::k0) return Status::InvalidArgument("block writes go through BAR1 or BAR3");
  const uint64_t size = pci_.BarSize(bar);
  if (offset > size || length > size - offset) {
    return Status::OutOfRange("block write past the end of the BAR");
  }
  const auto* in = static_cast<const uint8_t*>(src);
  uint64_t done = 0;
  while (done < length) {
    const uint64_t at = offset + done;
    const uint64_t n =
        std::min(length - done, vm::kSmallPageSize - (at & (vm::kSmallPageSize - 1)));
    if (uint8_t* p = TranslateAperture(bar, at, n, true)) std::memcpy(p, in + done, n);
    done += n;
  }
  if (bar == Bar::k1) pfifo_->SnoopBar1Write(offset, length);
  if (observing_.load(std::memory_order_relaxed)) Observe(bar, true, true, offset, length, 0);
  return Status::Ok();
}

void SimDevice::WriteElements(Bar bar, uint64_t offset, gpu::Width width, const uint8_t* data,
                              uint64_t count, bool repeat) {
  const uint64_t w = static_cast<uint64_t>(width);
  const bool valid_width = w == 1 || w == 2 || w == 4 || w == 8;
  const uint64_t bar_size = pci_.BarSize(bar);
  uint64_t i = 0;
  // One element the slow way: exactly Write.
  const auto single = [&] {
    uint64_t value = 0;
    std::memcpy(&value, data + (repeat ? 0 : i * w), w);
    Write(bar, offset + i * w, width, value);
    ++i;
  };
  if (bar == Bar::k0 || !valid_width || observing_.load(std::memory_order_relaxed)) {
    while (i < count) single();
    return;
  }
  // A pattern of one repeated byte (zeroing, above all) is a memset.
  bool one_byte = repeat;
  for (uint64_t k = 1; one_byte && k < w; ++k) one_byte = data[k] == data[0];
  Aperture* a = ApertureFor(bar);
  while (i < count) {
    const uint64_t at = offset + i * w;
    const uint64_t in_page = vm::kSmallPageSize - (at & (vm::kSmallPageSize - 1));
    const uint64_t n = std::min(count - i, in_page / w);  // whole elements left in this page
    if (n == 0 || at >= bar_size || n * w > bar_size - at ||
        !a->vm_mode.load(std::memory_order_acquire)) {
      single();  // straddles a page, leaves the BAR, or the aperture is off: as Write does it
      continue;
    }
    MemoryFault fault;
    uint8_t* p = mmu_->Translate(a->space.load(std::memory_order_relaxed),
                                 a->limit.load(std::memory_order_relaxed), at, uint32_t(n * w),
                                 /*write=*/true, /*privileged=*/true, &fault);
    if (p == nullptr) {  // the page faults: every element records it, as single writes would
      const uint64_t end = i + n;
      while (i < end) single();
      continue;
    }
    if (!repeat) {
      std::memcpy(p, data + i * w, n * w);
    } else if (one_byte) {
      std::memset(p, data[0], n * w);
    } else {
      for (uint64_t k = 0; k < n; ++k) std::memcpy(p + k * w, data, w);
    }
    if (bar == Bar::k1) pfifo_->SnoopBar1Write(at, n * w);
    i += n;
  }
}

void SimDevice::Observe(Bar bar, bool write, bool block, uint64_t offset, uint64_t size,
                        uint64_t value) {
  std::lock_guard lock(observer_mu_);
  if (observer_) observer_(gpu::BarAccess{bar, write, block, offset, size, value});
}

void SimDevice::SetAccessObserver(gpu::AccessObserver observer) {
  std::lock_guard lock(observer_mu_);
  observer_ = std::move(observer);
  observing_.store(bool(observer_), std::memory_order_relaxed);
}

// ---- interrupts
// -------------------------------------------------------------------------------------------

void SimDevice::UpdateInterrupts() {
  pmc_.SetSource(gf100::pmc::kIntrPfifo, pfifo_->pending());
  pmc_.SetSource(gf100::pmc::kIntrPgraph, pfifo_->graph_pending());
  line_.store(pmc_.line(), std::memory_order_seq_cst);
}

void SimDevice::DeliverInterrupt() {
  if (t_delivering == this) return;  // our handler's own change: the loop below picks it up
  if (line_.load(std::memory_order_seq_cst) == delivered_.load(std::memory_order_seq_cst)) return;
  std::lock_guard lock(irq_mu_);
  SimDevice* const outer = t_delivering;
  t_delivering = this;
  for (;;) {
    const bool level = line_.load(std::memory_order_seq_cst);
    if (level == delivered_.load(std::memory_order_relaxed)) break;
    delivered_.store(level, std::memory_order_seq_cst);
    if (handler_) handler_(level);
  }
  t_delivering = outer;
}

void SimDevice::SetInterruptHandler(gpu::InterruptHandler handler) {
  std::lock_guard lock(irq_mu_);
  SimDevice* const outer = t_delivering;
  t_delivering = this;
  handler_ = std::move(handler);
  for (bool first = true;; first = false) {
    const bool level = line_.load(std::memory_order_seq_cst);
    if (!first && level == delivered_.load(std::memory_order_relaxed)) break;
    delivered_.store(level, std::memory_order_seq_cst);
    if (handler_) handler_(level);
  }
  t_delivering = outer;
}

// ---- execution and introspection
// ---------------------------------------------------------------------------

size_t SimDevice::RunUntilIdle(size_t max_slices) {
  if (options_.threaded) {
    WaitIdle(std::chrono::minutes(1));
    return 0;
  }
  size_t slices = 0;
  while (slices < max_slices && pfifo_->Step()) ++slices;
  return slices;
}

bool SimDevice::WaitIdle(std::chrono::nanoseconds timeout) {
  if (!options_.threaded) return true;
  return pfifo_->WaitIdle(uint64_t(timeout.count()));
}

DeviceStats SimDevice::stats() const {
  DeviceStats s;
  s.unknown_register_reads = unknown_reads_.load(std::memory_order_relaxed);
  s.unknown_register_writes = unknown_writes_.load(std::memory_order_relaxed);
  s.unmapped_aperture_accesses = unmapped_aperture_.load(std::memory_order_relaxed);
  s.aperture_faults = aperture_faults_.load(std::memory_order_relaxed);
  s.page_walks = mmu_->walks();
  s.tlb_flushes = mmu_->flushes();
  return s;
}

}  // namespace gpuvm::sim
