// What the device model counts: trapped accesses per BAR, configuration-space accesses, and every
// access it refused, by reason. These are the "trap counts per BAR" of gpuvm-bench's tables, and
// how an operator sees a misbehaving guest (it never crashes the device model; it only moves these
// numbers).
//
// Threading: the device model thread writes; any thread may read (relaxed atomics, so a reader sees
// each counter exactly but not all counters at one instant).
#ifndef GPUVM_QEMU_DEVICE_TRAP_COUNTERS_H_
#define GPUVM_QEMU_DEVICE_TRAP_COUNTERS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "qemu-device/virtual_gpu.h"

namespace gpuvm::dm {

// Why an access was refused (read answered with all-ones, write dropped).
enum class Refusal : uint8_t {
  kWrongDevice,      // config access to a PCI function that is not ours
  kBadSize,          // size not 1/2/4/8 (MMIO) or 1/2/4 (config)
  kUnaligned,        // BAR0 or config access not naturally aligned
  kOutsideBars,      // address not inside one decoding BAR (or straddling its end)
  kOutsideConfig,    // config offset beyond the 4 KiB configuration space
  kBadRepetition,    // rep count 0, too large, or a rep read without a buffer
  kBadPointer,       // data_is_ptr buffer outside guest memory (or no guest memory to use)
  kBufferedRead,     // a read in the buffered (posted-write) ring
  kUnknownSpace,     // port I/O or an unknown request type: we claim neither
  kAggregatorError,  // the aggregator refused or failed the access
  kBarConflict,  // a BAR programmed over another BAR (left unmapped), or the hypervisor refused it
  kCount,
};
std::string_view RefusalName(Refusal refusal);

struct TrapCounterValues {
  std::array<uint64_t, 3> bar_reads{};  // per BarSlot()
  std::array<uint64_t, 3> bar_writes{};
  uint64_t config_reads = 0;
  uint64_t config_writes = 0;
  uint64_t housekeeping = 0;  // hypervisor broadcasts (time offset, map-cache invalidation)
  std::array<uint64_t, static_cast<size_t>(Refusal::kCount)> refused{};
  // BAR remap (fv): aperture ranges the aggregator had mapped straight to memory, and back; maps
  // refused (by us or the hypervisor) — the range keeps trapping. Not part of ToString().
  uint64_t bar_maps = 0;
  uint64_t bar_unmaps = 0;
  uint64_t bar_maps_refused = 0;

  uint64_t traps(BarIndex bar) const { return bar_reads[BarSlot(bar)] + bar_writes[BarSlot(bar)]; }
  uint64_t refused_total() const;
  // "BAR0 r=.. w=.. | BAR1 ... | config r=.. w=.. | refused: reason=n ..."
  std::string ToString() const;
};

class TrapCounters {
 public:
  void CountBarRead(BarIndex bar) { Bump(bar_reads_[BarSlot(bar)]); }
  void CountBarWrite(BarIndex bar) { Bump(bar_writes_[BarSlot(bar)]); }
  void CountBarWrites(BarIndex bar, uint64_t n) {
    bar_writes_[BarSlot(bar)].fetch_add(n, std::memory_order_relaxed);
  }
  void CountConfigRead() { Bump(config_reads_); }
  void CountConfigWrite() { Bump(config_writes_); }
  void CountHousekeeping() { Bump(housekeeping_); }
  void CountRefusal(Refusal r) { Bump(refused_[static_cast<size_t>(r)]); }
  void CountBarMap(bool ok) { Bump(ok ? bar_maps_ : bar_maps_refused_); }
  void CountBarUnmap() { Bump(bar_unmaps_); }
  TrapCounterValues Snapshot() const;

 private:
  static void Bump(std::atomic<uint64_t>& c) { c.fetch_add(1, std::memory_order_relaxed); }
  std::array<std::atomic<uint64_t>, 3> bar_reads_{};
  std::array<std::atomic<uint64_t>, 3> bar_writes_{};
  std::atomic<uint64_t> config_reads_{0};
  std::atomic<uint64_t> config_writes_{0};
  std::atomic<uint64_t> housekeeping_{0};
  std::atomic<uint64_t> bar_maps_{0};
  std::atomic<uint64_t> bar_unmaps_{0};
  std::atomic<uint64_t> bar_maps_refused_{0};
  std::array<std::atomic<uint64_t>, static_cast<size_t>(Refusal::kCount)> refused_{};
};

}  // namespace gpuvm::dm

#endif  // GPUVM_QEMU_DEVICE_TRAP_COUNTERS_H_
