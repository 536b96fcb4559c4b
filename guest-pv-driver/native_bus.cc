#include "guest-pv-driver/native_bus.h"

#include <iterator>

#include "guest-pv-driver/range_allocator.h"

namespace gpuvm::guest {

namespace {
constexpr uint64_t kPage = 4096;
}  // namespace

// One registered range: contiguous on the bus.
class NativeBus::Mapping final : public DmaMapping {
 public:
  Mapping(NativeBus* bus, uint8_t* host, uint64_t length, uint64_t bus_address)
      : bus_(bus), host_(host), length_(length), bus_address_(bus_address) {}
  ~Mapping() override { bus_->Unmap(bus_address_, length_); }

  uint8_t* host() const override { return host_; }
  uint64_t length() const override { return length_; }
  uint64_t PageBusAddress(uint64_t offset) const override {
    return bus_address_ + (offset & ~(kPage - 1));
  }

 private:
  NativeBus* const bus_;
  uint8_t* const host_;
  const uint64_t length_;
  const uint64_t bus_address_;
};

NativeBus::NativeBus(gpu::Device* device, sim::PinnedHostMemory* host_memory)
    : device_(device), host_memory_(host_memory) {
  free_[kBusBase] = kBusLimit - kBusBase;
}

NativeBus::~NativeBus() = default;

uint64_t NativeBus::Read(Bar bar, uint64_t offset, Width width) {
  return device_->Read(bar, offset, width);
}

void NativeBus::Write(Bar bar, uint64_t offset, Width width, uint64_t value) {
  device_->Write(bar, offset, width, value);
}

Status NativeBus::ReadBlock(Bar bar, uint64_t offset, void* dst, uint64_t length) {
  return device_->ReadBlock(bar, offset, dst, length);
}

Status NativeBus::WriteBlock(Bar bar, uint64_t offset, const void* src, uint64_t length) {
  return device_->WriteBlock(bar, offset, src, length);
}

Result<std::unique_ptr<DmaMapping>> NativeBus::MapDma(void* host, uint64_t length) {
  const auto addr = reinterpret_cast<uintptr_t>(host);
  if (host == nullptr || length == 0 || (addr & (kPage - 1)) || (length & (kPage - 1))) {
    return Status::InvalidArgument("DMA mappings need 4 KiB aligned, non-empty host memory");
  }
  uint64_t bus_address = 0;
  {
    std::lock_guard lock(mu_);
    auto it = free_.begin();
    for (; it != free_.end() && it->second < length; ++it) {
    }
    if (it == free_.end()) return Status::ResourceExhausted("bus address space exhausted");
    bus_address = it->first;
    const uint64_t rest = it->second - length;
    free_.erase(it);
    if (rest > 0) free_[bus_address + length] = rest;
    mapped_ += length;
  }
  Status s = host_memory_->Register(bus_address, static_cast<uint8_t*>(host), length);
  if (!s.ok()) {
    Unmap(bus_address, length);
    return s;
  }
  return std::unique_ptr<DmaMapping>(
      new Mapping(this, static_cast<uint8_t*>(host), length, bus_address));
}

void NativeBus::Unmap(uint64_t bus_address, uint64_t length) {
  (void)host_memory_->Unregister(bus_address);
  std::lock_guard lock(mu_);
  mapped_ -= length;
  InsertFreeRange(free_, bus_address, length);
}

uint64_t NativeBus::mapped_bytes() const {
  std::lock_guard lock(mu_);
  return mapped_;
}

Status NativeBus::SetInterruptHandler(std::function<void(bool asserted)> handler) {
  device_->SetInterruptHandler(std::move(handler));
  return Status::Ok();
}

// ---- NativeGpu
// ------------------------------------------------------------------------------------------

Result<std::unique_ptr<NativeGpu>> NativeGpu::Create(const NativeGpuOptions& options) {
  std::unique_ptr<NativeGpu> gpu(new NativeGpu());
  gpu->host_memory_ = std::make_unique<sim::PinnedHostMemory>();
  sim::SimDeviceOptions device_options = options.device;
  device_options.host_memory = gpu->host_memory_.get();
  GPUVM_ASSIGN_OR_RETURN(gpu->device_, sim::SimDevice::Create(device_options));
  gpu->bus_ = std::make_unique<NativeBus>(gpu->device_.get(), gpu->host_memory_.get());
  return gpu;
}

NativeGpu::~NativeGpu() {
  bus_.reset();
  device_.reset();
  host_memory_.reset();
}

}  // namespace gpuvm::guest
