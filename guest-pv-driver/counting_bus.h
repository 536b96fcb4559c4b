// A Bus decorator that counts every operation the driver makes (BusCounters in driver.h), so tests
// and benchmarks can report the BAR accesses each driver operation costs — the number that becomes
// VM exits under full virtualization.
//
// Threading: as thread-safe as the Bus it wraps; the counters are relaxed atomics.
#ifndef GPUVM_GUEST_PV_DRIVER_COUNTING_BUS_H_
#define GPUVM_GUEST_PV_DRIVER_COUNTING_BUS_H_

#include <array>
#include <atomic>

#include "guest-pv-driver/bus.h"
#include "guest-pv-driver/driver.h"

namespace gpuvm::guest {

class CountingBus final : public Bus {
 public:
  explicit CountingBus(Bus* inner) : inner_(inner) {}

  const gpu::PciIdentity& pci() const override { return inner_->pci(); }
  bool remote() const override { return inner_->remote(); }
  uint64_t Read(Bar bar, uint64_t offset, Width width) override {
    Bump(reads_, bar);
    return inner_->Read(bar, offset, width);
  }
  void Write(Bar bar, uint64_t offset, Width width, uint64_t value) override {
    Bump(writes_, bar);
    inner_->Write(bar, offset, width, value);
  }
  Status ReadBlock(Bar bar, uint64_t offset, void* dst, uint64_t length) override {
    Bump(block_reads_, bar);
    block_bytes_.fetch_add(length, std::memory_order_relaxed);
    return inner_->ReadBlock(bar, offset, dst, length);
  }
  Status WriteBlock(Bar bar, uint64_t offset, const void* src, uint64_t length) override {
    Bump(block_writes_, bar);
    block_bytes_.fetch_add(length, std::memory_order_relaxed);
    return inner_->WriteBlock(bar, offset, src, length);
  }
  Status FillBlock(Bar bar, uint64_t offset, uint8_t byte, uint64_t length) override {
    Bump(block_writes_, bar);
    block_bytes_.fetch_add(length, std::memory_order_relaxed);
    return inner_->FillBlock(bar, offset, byte, length);
  }
  void WriteRegs(uint64_t offset, std::span<const uint32_t> values) override {
    writes_[0].fetch_add(values.size(), std::memory_order_relaxed);  // one write each, as natively
    inner_->WriteRegs(offset, values);
  }
  Result<std::unique_ptr<DmaMapping>> MapDma(void* host, uint64_t length) override {
    dma_maps_.fetch_add(1, std::memory_order_relaxed);
    return inner_->MapDma(host, length);
  }
  Result<std::unique_ptr<DmaMapping>> AllocDma(uint64_t length) override {
    dma_maps_.fetch_add(1, std::memory_order_relaxed);
    return inner_->AllocDma(length);
  }
  Result<std::unique_ptr<DmaMapping>> AllocDmaAt(uint64_t length, void* at) override {
    dma_maps_.fetch_add(1, std::memory_order_relaxed);
    return inner_->AllocDmaAt(length, at);
  }
  Status SetInterruptHandler(std::function<void(bool)> handler) override {
    return inner_->SetInterruptHandler(std::move(handler));
  }

  BusCounters counters() const {
    BusCounters c;
    for (int i = 0; i < 3; ++i) {
      c.reads[i] = reads_[i].load(std::memory_order_relaxed);
      c.writes[i] = writes_[i].load(std::memory_order_relaxed);
      c.block_reads[i] = block_reads_[i].load(std::memory_order_relaxed);
      c.block_writes[i] = block_writes_[i].load(std::memory_order_relaxed);
    }
    c.block_bytes = block_bytes_.load(std::memory_order_relaxed);
    c.dma_maps = dma_maps_.load(std::memory_order_relaxed);
    return c;
  }

 private:
  using Counters = std::array<std::atomic<uint64_t>, 3>;
  static int Index(Bar bar) { return bar == Bar::k0 ? 0 : bar == Bar::k1 ? 1 : 2; }
  static void Bump(Counters& c, Bar bar) { c[Index(bar)].fetch_add(1, std::memory_order_relaxed); }

  Bus* const inner_;
  Counters reads_{}, writes_{}, block_reads_{}, block_writes_{};
  std::atomic<uint64_t> block_bytes_{0};
  std::atomic<uint64_t> dma_maps_{0};
};

}  // namespace gpuvm::guest

#endif  // GPUVM_GUEST_PV_DRIVER_COUNTING_BUS_H_
