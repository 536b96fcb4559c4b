// The guest's side of para-virtualization (docs/PARAVIRT.md): page-table updates as calls the host
// validates and applies, instead of BAR3 stores and MMIO TLB flushes.
//
//   PvCalls            the device's PV window and the call area: discovery (PV_ID), the area's
//                      registration, the batch being built, the doorbell, the answers read back
//                      and turned into Status. pv-naive rings once per call; pv-multicall queues
//                      calls (page-table calls and small aperture stores alike) and rings only
//                      when the device could depend on them: at a Commit (the driver's
//                      submissions), before any other access to the device (Sync, from
//                      PvSyncBus: a register, a read, a single store such as IB_PUT), when the
//                      area is full, and at teardown.
//   PvPageTableWriter  the page_table_writer.h seam on PvCalls: AttachSpace -> ATTACH (with the
//                      space's kind), WriteEntries -> WRITE / WRITE_LINEAR (runs of consecutive
//                      pages become one call), ClearEntries -> CLEAR, Flush -> FLUSH, DetachSpace
//                      -> DETACH.
//   PvSyncBus          a Bus in front of the driver's: BAR1/BAR3 block stores and fills of whole
//                      words (instance blocks, USER pages, small uploads) become BAR_WRITE /
//                      BAR_FILL calls, and so do register (BAR0) stores while something is
//                      queued (keeping their order); every other access — reads, single aperture
//                      stores such as IB_PUT — sends the queued calls first.
// The driver builds these itself when the device offers a PV window (DriverOptions::para_virtual,
// driver.h), so the same unmodified driver — and CUDA binary — runs in every mode.
//
// Errors: in pv-naive a call the host refuses is the Status of the call that rang. In pv-multicall
// a call returns OK when queued; a refusal found when the batch goes is kept and returned by the
// next Commit — the driver commits before every submission, so the submission that would have
// used the refused update fails with it. The calls queued after a refused one are sent again
// (each call stands alone, as in pv-naive); a batch the host refuses whole (a driver bug) is not.
// Threading: thread-safe (one lock around the batch and the doorbell; a quick atomic check on the
// bus's hot path when nothing is queued).
#ifndef GPUVM_GUEST_PV_DRIVER_PV_CALLS_H_
#define GPUVM_GUEST_PV_DRIVER_PV_CALLS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "guest-pv-driver/bus.h"
#include "guest-pv-driver/page_table_writer.h"
#include "pv/call_page.h"
#include "pv/protocol.h"

namespace gpuvm::guest {

struct PvCounters {
  uint64_t calls = 0;      // calls the host applied
  uint64_t doorbells = 0;  // batches rung
};

class PvCalls {
 public:
  // Probes `bus` for a PV window (PV_ID); NotFound when the device has none, FailedPrecondition
  // for a version we do not speak, else registers a call area of DMA memory with the host. `bus`
  // must outlive the object.
  static Result<std::unique_ptr<PvCalls>> Open(Bus* bus);
  // Sends what is queued, then withdraws the area (the host writes into it no more).
  ~PvCalls();

  pv::Mode mode() const { return mode_; }
  bool pending() const { return pending_.load(std::memory_order_acquire); }
  PvCounters counters() const;

  // The calls (PvPageTableWriter's): each appends one op (ringing first when it does not fit),
  // then rings at once in pv-naive.
  Status Attach(uint64_t directory, uint64_t limit, pv::SpaceKind kind);
  Status Detach(uint64_t directory);
  Status Write(uint64_t space, uint64_t table, uint64_t first, std::span<const uint64_t> entries);
  Status Clear(uint64_t space, uint64_t table, uint64_t first, uint64_t count);
  Status Flush(uint64_t space);
  // BAR_WRITE / BAR_FILL (`bar` 1 or 3; whole 4-byte words; a fill is split into calls of at most
  // pv::kMaxBarStoreBytes).
  Status BarWrite(uint32_t bar, uint64_t offset, std::span<const uint8_t> data);
  Status BarFill(uint32_t bar, uint64_t offset, uint64_t bytes, uint32_t pattern);
  // Sends the queued calls (nothing when none): before any other access to the device. A refusal
  // is kept for the next Commit.
  void Sync();
  // Sends the queued calls and returns the first refusal since the last Commit (OK when none).
  Status Commit();

 private:
  PvCalls(Bus* bus, pv::Mode mode, std::unique_ptr<DmaMapping> area,
          std::unique_ptr<DmaMapping> list, uint32_t pages);
  struct Queued {
    uint32_t offset;   // in the batch: where the host answers
    uint64_t entries;  // what it counts against pv::kMaxBatchEntries
  };
  // Makes room for an op of `bytes` touching `entries` entries (ringing what is queued if needed).
  Status Room(uint32_t bytes, uint64_t entries);
  // After appending the op at `offset`: ring in pv-naive.
  Status Appended(uint32_t offset, uint64_t entries);
  // Rings until nothing is queued (calls after a refused one go again); the first refusal.
  Status Ring();      // mu_ held
  Status RingOnce();  // mu_ held

  Bus* const bus_;
  const pv::Mode mode_;
  std::unique_ptr<DmaMapping> area_;
  std::unique_ptr<DmaMapping> list_;
  const uint32_t pages_;
  std::mutex mu_;
  pv::BatchBuilder batch_;   // guarded by mu_
  std::vector<Queued> ops_;  // guarded by mu_
  Status deferred_;          // the first refusal not yet returned by Commit; guarded by mu_
  std::atomic<bool> pending_{false};
  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> doorbells_{0};
};

class PvPageTableWriter final : public PageTableWriter {
 public:
  explicit PvPageTableWriter(PvCalls* calls) : calls_(calls) {}

  Status AttachSpace(const PageTableRef& directory, uint64_t limit) override;
  Status DetachSpace(const PageTableRef& directory) override;
  Status WriteEntries(const PageTableRef& space, const PageTableRef& table, uint64_t first,
                      std::span<const uint64_t> entries) override;
  Status ClearEntries(const PageTableRef& space, const PageTableRef& table, uint64_t first,
                      uint64_t count) override;
  Status Flush(const PageTableRef& space) override;
  Status Commit() override;
  // The host zeroes every channel directory and table it registers (docs/PARAVIRT.md).
  bool ZeroesChannelTables() const override { return true; }

 private:
  PvCalls* const calls_;
};

class PvSyncBus final : public Bus {
 public:
  PvSyncBus(Bus* inner, PvCalls* calls) : inner_(inner), calls_(calls) {}

  const gpu::PciIdentity& pci() const override { return inner_->pci(); }
  uint64_t Read(Bar bar, uint64_t offset, Width width) override;
  void Write(Bar bar, uint64_t offset, Width width, uint64_t value) override;
  Status ReadBlock(Bar bar, uint64_t offset, void* dst, uint64_t length) override;
  Status WriteBlock(Bar bar, uint64_t offset, const void* src, uint64_t length) override;
  Status FillBlock(Bar bar, uint64_t offset, uint8_t byte, uint64_t length) override;
  void WriteRegs(uint64_t offset, std::span<const uint32_t> values) override;
  // (our choice) the largest block store sent as a call: bigger ones are bulk data, cheaper as one
  // trapped rep than copied through the call area.
  static constexpr uint64_t kMaxCallWrite = 16 * 1024;
  static constexpr uint64_t kMaxCallFill = 1024 * 1024;
  Result<std::unique_ptr<DmaMapping>> MapDma(void* host, uint64_t length) override {
    return inner_->MapDma(host, length);
  }
  Result<std::unique_ptr<DmaMapping>> AllocDma(uint64_t length) override {
    return inner_->AllocDma(length);
  }
  Result<std::unique_ptr<DmaMapping>> AllocDmaAt(uint64_t length, void* at) override {
    return inner_->AllocDmaAt(length, at);
  }
  Status SetInterruptHandler(std::function<void(bool)> handler) override {
    return inner_->SetInterruptHandler(std::move(handler));
  }
  bool remote() const override { return inner_->remote(); }

 private:
  static bool Callable(Bar bar, uint64_t offset, uint64_t length, uint64_t max);
  bool RegisterCallable(uint64_t offset, uint64_t length);
  // Rings the queued calls; a refusal is kept for the next Commit.
  void Sync() {
    if (calls_->pending()) calls_->Sync();
  }
  Bus* const inner_;
  PvCalls* const calls_;
};

}  // namespace gpuvm::guest

#endif  // GPUVM_GUEST_PV_DRIVER_PV_CALLS_H_
