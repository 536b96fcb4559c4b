#include "aggregator/pci_gpu.h"

#include <pciaccess.h>

#include <cstring>
#include <fstream>

#include "gpu/hw/pci.h"
#include "gpu/hw/pmc.h"
#include "gpu/mmio.h"

namespace gpuvm::aggregator {
namespace {

// GF100 family chipsets are 0xc0..0xcf in PMC_BOOT_0 bits 20-28 (envytools docs/hw/pmc.rst:
// NVC0 family = Fermi).
constexpr uint32_t kFermiFirst = 0xc0;
constexpr uint32_t kFermiLast = 0xcf;
constexpr uint32_t kChipsetMask = 0x1ff;

}  // namespace

// ---- MappedBarDevice ----------------------------------------------------------------------------

MappedBarDevice::MappedBarDevice(const gpu::PciIdentity& identity, std::span<uint8_t> bar0,
                                 std::span<uint8_t> bar1, std::span<uint8_t> bar3,
                                 std::chrono::milliseconds irq_poll)
    : identity_(identity), bar0_(bar0), bar1_(bar1), bar3_(bar3), irq_poll_(irq_poll) {}

MappedBarDevice::~MappedBarDevice() { SetInterruptHandler(nullptr); }

std::span<uint8_t> MappedBarDevice::BarBytes(gpu::Bar bar) const {
  switch (bar) {
    case gpu::Bar::k0:
      return bar0_;
    case gpu::Bar::k1:
      return bar1_;
    case gpu::Bar::k3:
      return bar3_;
  }
  return {};
}

uint64_t MappedBarDevice::Read(gpu::Bar bar, uint64_t offset, gpu::Width width) {
  const std::span<uint8_t> bytes = BarBytes(bar);
  const uint64_t size = static_cast<uint64_t>(width);
  uint64_t value = 0;
  // Naturally aligned and inside the BAR, or nothing (gpu::Device: reads of nothing return 0).
  if (offset < bytes.size() && size <= bytes.size() - offset && offset % size == 0) {
    value = gpu::LoadMmio(bytes.data() + offset, width);
  }
  if (observing_.load(std::memory_order_acquire)) {
    Observe({bar, false, false, offset, size, value});
  }
  return value;
}

void MappedBarDevice::Write(gpu::Bar bar, uint64_t offset, gpu::Width width, uint64_t value) {
  const std::span<uint8_t> bytes = BarBytes(bar);
  const uint64_t size = static_cast<uint64_t>(width);
  if (offset < bytes.size() && size <= bytes.size() - offset && offset % size == 0) {
    gpu::StoreMmio(bytes.data() + offset, width, value);
  }
  if (observing_.load(std::memory_order_acquire)) {
    Observe({bar, true, false, offset, size, value});
  }
}

Status MappedBarDevice::ReadBlock(gpu::Bar bar, uint64_t offset, void* dst, uint64_t length) {
  if (bar == gpu::Bar::k0) return Status::InvalidArgument("block transfers go through BAR1/BAR3");
  const std::span<uint8_t> bytes = BarBytes(bar);
  if (offset > bytes.size() || length > bytes.size() - offset) {
    return Status::OutOfRange("block transfer past the end of the BAR");
  }
  auto* out = static_cast<uint8_t*>(dst);
  for (uint64_t i = 0; i < length; ++i) out[i] = gpu::LoadMmio<uint8_t>(bytes.data() + offset + i);
  if (observing_.load(std::memory_order_acquire)) Observe({bar, false, true, offset, length, 0});
  return Status::Ok();
}

Status MappedBarDevice::WriteBlock(gpu::Bar bar, uint64_t offset, const void* src,
                                   uint64_t length) {
  if (bar == gpu::Bar::k0) return Status::InvalidArgument("block transfers go through BAR1/BAR3");
  const std::span<uint8_t> bytes = BarBytes(bar);
  if (offset > bytes.size() || length > bytes.size() - offset) {
    return Status::OutOfRange("block transfer past the end of the BAR");
  }
  const auto* in = static_cast<const uint8_t*>(src);
  for (uint64_t i = 0; i < length; ++i) gpu::StoreMmio<uint8_t>(bytes.data() + offset + i, in[i]);
  if (observing_.load(std::memory_order_acquire)) Observe({bar, true, true, offset, length, 0});
  return Status::Ok();
}

void MappedBarDevice::SetInterruptHandler(gpu::InterruptHandler handler) {
  // Stop the poller outside the lock (it takes the lock to call the handler).
  if (poller_.joinable()) {
    stop_poller_ = true;
    poller_.join();
    stop_poller_ = false;
  }
  {
    std::lock_guard lock(irq_mu_);
    handler_ = std::move(handler);
    if (!handler_) return;
    line_ = (Read(gpu::Bar::k0, gf100::pmc::kIntrHost, gpu::Width::k32) != 0);
    handler_(line_.load());
  }
  poller_ = std::thread([this] { PollInterrupts(); });
}

void MappedBarDevice::PollInterrupts() {
  while (!stop_poller_.load(std::memory_order_acquire)) {
    std::this_thread::sleep_for(irq_poll_);
    const bool level = Read(gpu::Bar::k0, gf100::pmc::kIntrHost, gpu::Width::k32) != 0;
    if (level == line_.load(std::memory_order_relaxed)) continue;
    std::lock_guard lock(irq_mu_);
    line_.store(level, std::memory_order_release);
    if (handler_) handler_(level);
  }
}

void MappedBarDevice::SetAccessObserver(gpu::AccessObserver observer) {
  std::lock_guard lock(observer_mu_);
  observer_ = std::move(observer);
  observing_.store(static_cast<bool>(observer_), std::memory_order_release);
}

void MappedBarDevice::Observe(const gpu::BarAccess& access) {
  std::lock_guard lock(observer_mu_);
  if (observer_) observer_(access);
}

// ---- PciGpu -------------------------------------------------------------------------------------

struct PciGpu::Mapping {
  pci_device* device = nullptr;
  struct Region {
    void* memory = nullptr;
    uint64_t size = 0;
  } regions[3];  // BAR0, BAR1, BAR3

  ~Mapping() {
    for (Region& r : regions) {
      if (r.memory != nullptr) pci_device_unmap_range(device, r.memory, r.size);
    }
    pci_system_cleanup();
  }
};

Result<std::unique_ptr<PciGpu>> PciGpu::Open(const hv::Sbdf& address,
                                             const PciGpuOptions& options) {
  if (!address.valid()) return Status::InvalidArgument("not a PCI address: " + address.ToString());
  if (int err = pci_system_init(); err != 0) {
    return Status::FromErrno(err, "libpciaccess: pci_system_init").WithContext("--gpu pci");
  }
  std::unique_ptr<PciGpu> gpu(new PciGpu());
  gpu->address_ = address;
  gpu->options_ = options;
  gpu->mapping_ = std::make_unique<Mapping>();  // from here on, pci_system_cleanup on failure
  pci_device* dev =
      pci_device_find_by_slot(address.segment, address.bus, address.device, address.function);
  if (dev == nullptr) return Status::NotFound("no PCI device at " + address.ToString());
  gpu->mapping_->device = dev;
  if (int err = pci_device_probe(dev); err != 0) {
    return Status::FromErrno(err, "libpciaccess: probing " + address.ToString());
  }
  char id[16];
  std::snprintf(id, sizeof(id), "%04x:%04x", dev->vendor_id, dev->device_id);
  if (dev->vendor_id != gf100::pci::kVendorId || (dev->device_class >> 16) != 0x03) {
    return Status::FailedPrecondition(address.ToString() + " (" + id +
                                      ") is not an NVIDIA display controller");
  }
  const int bar_slots[3] = {0, 1, 3};
  std::span<uint8_t> bars[3];
  for (int i = 0; i < 3; ++i) {
    const pci_mem_region& region = dev->regions[bar_slots[i]];
    if (region.size == 0 || region.base_addr == 0) {
      return Status::FailedPrecondition(address.ToString() + " has no BAR" +
                                        std::to_string(bar_slots[i]));
    }
    void* memory = nullptr;
    if (int err = pci_device_map_range(dev, region.base_addr, region.size,
                                       PCI_DEV_MAP_FLAG_WRITABLE, &memory);
        err != 0) {
      return Status::FromErrno(err, "libpciaccess: mapping BAR" + std::to_string(bar_slots[i]) +
                                        " of " + address.ToString())
          .WithContext("--gpu pci");
    }
    gpu->mapping_->regions[i] = {memory, region.size};
    bars[i] = {static_cast<uint8_t*>(memory), static_cast<size_t>(region.size)};
  }
  gpu::PciIdentity identity;
  identity.vendor_id = dev->vendor_id;
  identity.device_id = dev->device_id;
  identity.class_code = dev->device_class;
  identity.revision = dev->revision;
  identity.bar0_size = bars[0].size();
  identity.bar1_size = bars[1].size();
  identity.bar3_size = bars[2].size();
  gpu->device_ = std::make_unique<MappedBarDevice>(identity, bars[0], bars[1], bars[2]);
  const uint32_t boot0 = gpu->device_->ReadReg(gf100::pmc::kBoot0);
  const uint32_t chipset = (boot0 >> gf100::pmc::kBoot0ChipsetShift) & kChipsetMask;
  if (chipset < kFermiFirst || chipset > kFermiLast) {
    char text[64];
    std::snprintf(text, sizeof(text), "PMC_BOOT_0 0x%08x: chipset 0x%x", boot0, chipset);
    return Status::FailedPrecondition(address.ToString() + " is not a GF100-class GPU (" + text +
                                      ")");
  }
  gpu->vram_bytes_ = ProbeVramBytes(*gpu->device_);
  if (gpu->vram_bytes_ == 0) {
    return Status::FailedPrecondition(address.ToString() + ": the FB registers report no VRAM");
  }
  return gpu;
}

PciGpu::~PciGpu() {
  device_.reset();  // stops the interrupt poller before the BARs are unmapped
  mapping_.reset();
}

std::string PciGpu::Describe() const {
  char id[16];
  std::snprintf(id, sizeof(id), "%04x:%04x", device_->pci().vendor_id, device_->pci().device_id);
  return "pci " + address_.ToString() + " (" + id + ", " + std::to_string(vram_bytes_ >> 20) +
         " MiB VRAM)";
}

Status PciGpu::Reset() {
  QuiesceChannels(*device_);
  if (options_.function_reset) {
    const std::string path = options_.sysfs_devices + "/" + address_.ToString() + "/reset";
    std::ofstream reset(path);
    if (!(reset << "1" << std::flush)) {
      return Status::Unavailable("cannot reset " + address_.ToString() + " through " + path);
    }
  }
  if (options_.scrub_vram_on_reset) ScrubVramThroughPramin(*device_, vram_bytes_);
  ++resets_;
  return Status::Ok();
}

void PciGpu::SetInterruptHandler(gpu::InterruptHandler handler) {
  device_->SetInterruptHandler(std::move(handler));
}

}  // namespace gpuvm::aggregator
