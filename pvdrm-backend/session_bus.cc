#include "pvdrm-backend/session_bus.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

namespace gpuvm::pvdrm {
namespace {

constexpr uint64_t kPage = 4096;

dm::BarIndex ToBarIndex(gpu::Bar bar) {
  return bar == gpu::Bar::k0   ? dm::BarIndex::kBar0
         : bar == gpu::Bar::k1 ? dm::BarIndex::kBar1
                               : dm::BarIndex::kBar3;
}

uint64_t AllOnes(gpu::Width width) {
  const unsigned bits = unsigned(width) * 8;
  return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
}

// The widest element (8, 4, 2 or 1 bytes) both `offset` and `length` are multiples of.
uint32_t ElementSize(uint64_t offset, uint64_t length) {
  for (uint32_t size : {8u, 4u, 2u}) {
    if (offset % size == 0 && length % size == 0) return size;
  }
  return 1;
}

}  // namespace

// Pages of the pool: freed back to it when the mapping goes.
class SessionBus::PoolPages final : public guest::DmaMapping {
 public:
  PoolPages(SessionBus* bus, uint64_t offset, uint8_t* host, uint64_t length)
      : bus_(bus), offset_(offset), host_(host), length_(length) {}
  ~PoolPages() override { bus_->FreePool(offset_); }
  uint8_t* host() const override { return host_; }
  uint64_t length() const override { return length_; }
  uint64_t PageBusAddress(uint64_t offset) const override {
    return bus_->frames_.GuestPhysical(host_ + offset / kPage * kPage).value_or(0);
  }

 private:
  SessionBus* const bus_;
  const uint64_t offset_;
  uint8_t* const host_;
  const uint64_t length_;
};

// Guest frames mapped by someone else (a GART object): their addresses, looked up once.
class SessionBus::FramePages final : public guest::DmaMapping {
 public:
  FramePages(uint8_t* host, uint64_t length, std::vector<uint64_t> bus)
      : host_(host), length_(length), bus_(std::move(bus)) {}
  uint8_t* host() const override { return host_; }
  uint64_t length() const override { return length_; }
  uint64_t PageBusAddress(uint64_t offset) const override { return bus_[offset / kPage]; }

 private:
  uint8_t* const host_;
  const uint64_t length_;
  const std::vector<uint64_t> bus_;
};

Result<std::unique_ptr<SessionBus>> SessionBus::Create(dm::AggregatorConnection& connection,
                                                       const gpu::PciIdentity& pci,
                                                       GuestFrames& frames,
                                                       std::vector<uint32_t> pool) {
  if (pool.empty()) return Status::InvalidArgument("the backend's DMA pool has no frames");
  std::unique_ptr<SessionBus> bus(new SessionBus(connection, pci, frames));
  Result<std::unique_ptr<hv::GuestMapping>> mapped = frames.Map(pool);
  if (!mapped.ok()) return mapped.status().WithContext("mapping the backend's DMA pool");
  bus->pool_ = std::move(*mapped);
  bus->pool_space_ = guest::RangeAllocator(0, pool.size() * kPage);
  return bus;
}

SessionBus::~SessionBus() = default;

uint64_t SessionBus::failed_accesses() const {
  std::lock_guard lock(mu_);
  return failed_;
}

uint64_t SessionBus::Read(gpu::Bar bar, uint64_t offset, gpu::Width width) {
  std::lock_guard lock(mu_);
  SettleLocked();
  Result<uint64_t> value = connection_.Read(ToBarIndex(bar), offset, uint32_t(width), 0);
  if (!value.ok()) {
    ++failed_;
    return AllOnes(width);  // a master abort: the GPU is gone
  }
  return *value;
}

void SessionBus::Write(gpu::Bar bar, uint64_t offset, gpu::Width width, uint64_t value) {
  std::lock_guard lock(mu_);
  SettleLocked();
  if (bar == gpu::Bar::k1 && posted_writes_) {
    // A channel's doorbell (its USER page's GP_PUT) above all: nothing the driver does next
    // needs its acknowledgement, and every later access settles it first (docs/IPC.md).
    if (!connection_.PostWrite(ToBarIndex(bar), offset, uint32_t(width), value, 0).ok()) {
      ++failed_;
    } else {
      write_posted_ = true;
    }
    return;
  }
  if (!connection_.Write(ToBarIndex(bar), offset, uint32_t(width), value, 0).ok()) ++failed_;
}

void SessionBus::SettleLocked() {
  if (!write_posted_) return;
  write_posted_ = false;
  if (!connection_.Settle().ok()) ++failed_;
}

Status SessionBus::CheckBlock(gpu::Bar bar, uint64_t offset, uint64_t length) const {
  if (bar == gpu::Bar::k0)
    return Status::InvalidArgument("block transfers go through BAR1 or BAR3");
  const uint64_t size = bar == gpu::Bar::k1 ? pci_.bar1_size : pci_.bar3_size;
  if (offset > size || length > size - offset) {
    return Status::OutOfRange("block transfer past the end of the BAR");
  }
  return Status::Ok();
}

Status SessionBus::ReadBlock(gpu::Bar bar, uint64_t offset, void* dst, uint64_t length) {
  GPUVM_RETURN_IF_ERROR(CheckBlock(bar, offset, length));
  if (length == 0) return Status::Ok();
  std::lock_guard lock(mu_);
  SettleLocked();
  const Status s = connection_.ReadElements(ToBarIndex(bar), offset, ElementSize(offset, length),
                                            {static_cast<uint8_t*>(dst), length}, 0);
  if (!s.ok()) ++failed_;
  return s;
}

Status SessionBus::WriteBlock(gpu::Bar bar, uint64_t offset, const void* src, uint64_t length) {
  GPUVM_RETURN_IF_ERROR(CheckBlock(bar, offset, length));
  if (length == 0) return Status::Ok();
  std::lock_guard lock(mu_);
  SettleLocked();
  const Status s = connection_.WriteElements(ToBarIndex(bar), offset, ElementSize(offset, length),
                                             {static_cast<const uint8_t*>(src), length}, 0);
  if (!s.ok()) ++failed_;
  return s;
}

Status SessionBus::FillBlock(gpu::Bar bar, uint64_t offset, uint8_t byte, uint64_t length) {
  GPUVM_RETURN_IF_ERROR(CheckBlock(bar, offset, length));
  if (length == 0) return Status::Ok();
  const uint32_t size = ElementSize(offset, length);
  uint64_t value = 0;
  std::memset(&value, byte, sizeof(value));
  std::lock_guard lock(mu_);
  SettleLocked();
  // FillElements counts in 32 bits: a huge fill goes in pieces.
  for (uint64_t done = 0; done < length;) {
    const uint64_t count = std::min<uint64_t>((length - done) / size, 1u << 30);
    const Status s =
        connection_.FillElements(ToBarIndex(bar), offset + done, size, value, uint32_t(count), 0);
    if (!s.ok()) {
      ++failed_;
      return s;
    }
    done += count * size;
  }
  return Status::Ok();
}

void SessionBus::WriteRegs(uint64_t offset, std::span<const uint32_t> values) {
  if (values.empty()) return;
  std::lock_guard lock(mu_);
  SettleLocked();
  const Status s = connection_.WriteElements(
      dm::BarIndex::kBar0, offset, 4,
      {reinterpret_cast<const uint8_t*>(values.data()), values.size_bytes()}, 0);
  if (!s.ok()) ++failed_;
}

Result<std::unique_ptr<guest::DmaMapping>> SessionBus::MapDma(void* host, uint64_t length) {
  const auto address = reinterpret_cast<uintptr_t>(host);
  if (address % kPage != 0 || length == 0 || length % kPage != 0) {
    return Status::InvalidArgument("DMA mappings are whole pages");
  }
  std::vector<uint64_t> bus;
  bus.reserve(length / kPage);
  for (uint64_t at = 0; at < length; at += kPage) {
    std::optional<uint64_t> gpa = frames_.GuestPhysical(static_cast<uint8_t*>(host) + at);
    if (!gpa.has_value()) {
      return Status::InvalidArgument(
          "only the guest's own frames can be reached by its GPU (not guest memory)");
    }
    bus.push_back(*gpa);
  }
  return std::unique_ptr<guest::DmaMapping>(
      new FramePages(static_cast<uint8_t*>(host), length, std::move(bus)));
}

Result<std::unique_ptr<guest::DmaMapping>> SessionBus::AllocDma(uint64_t length) {
  if (length == 0 || length % kPage != 0) {
    return Status::InvalidArgument("DMA allocations are whole pages");
  }
  uint64_t offset = 0;
  {
    std::lock_guard lock(pool_mu_);
    Result<uint64_t> got = pool_space_.Allocate(length, kPage);
    if (!got.ok()) return got.status().WithContext("the backend's DMA pool");
    offset = *got;
  }
  uint8_t* host = pool_->bytes().data() + offset;
  std::memset(host, 0, length);
  return std::unique_ptr<guest::DmaMapping>(new PoolPages(this, offset, host, length));
}

Result<std::unique_ptr<guest::DmaMapping>> SessionBus::AllocDmaAt(uint64_t, void*) {
  return Status::Unimplemented("the backend places no DMA memory in its own address space");
}

void SessionBus::FreePool(uint64_t offset) {
  std::lock_guard lock(pool_mu_);
  (void)pool_space_.Free(offset);
}

Status SessionBus::SetInterruptHandler(std::function<void(bool)>) {
  return Status::Unimplemented("the backend's session has no interrupt line: the driver polls");
}

}  // namespace gpuvm::pvdrm
