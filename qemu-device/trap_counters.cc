#include "qemu-device/trap_counters.h"

namespace gpuvm::dm {

std::string_view RefusalName(Refusal refusal) {
  switch (refusal) {
    case Refusal::kWrongDevice:
      return "wrong-device";
    case Refusal::kBadSize:
      return "bad-size";
    case Refusal::kUnaligned:
      return "unaligned";
    case Refusal::kOutsideBars:
      return "outside-bars";
    case Refusal::kOutsideConfig:
      return "outside-config";
    case Refusal::kBadRepetition:
      return "bad-rep";
    case Refusal::kBadPointer:
      return "bad-pointer";
    case Refusal::kBufferedRead:
      return "buffered-read";
    case Refusal::kUnknownSpace:
      return "unknown-space";
    case Refusal::kAggregatorError:
      return "aggregator-error";
    case Refusal::kBarConflict:
      return "bar-conflict";
    case Refusal::kCount:
      break;
  }
  return "?";
}

uint64_t TrapCounterValues::refused_total() const {
  uint64_t total = 0;
  for (uint64_t n : refused) total += n;
  return total;
}

std::string TrapCounterValues::ToString() const {
  std::string out;
  for (BarIndex bar : kBars) {
    out += std::string(BarName(bar)) + " r=" + std::to_string(bar_reads[BarSlot(bar)]) +
           " w=" + std::to_string(bar_writes[BarSlot(bar)]) + " | ";
  }
  out += "config r=" + std::to_string(config_reads) + " w=" + std::to_string(config_writes);
  out += " | refused:";
  bool any = false;
  for (size_t i = 0; i < refused.size(); ++i) {
    if (refused[i] == 0) continue;
    out +=
        " " + std::string(RefusalName(static_cast<Refusal>(i))) + "=" + std::to_string(refused[i]);
    any = true;
  }
  if (!any) out += " none";
  return out;
}

TrapCounterValues TrapCounters::Snapshot() const {
  TrapCounterValues v;
  for (size_t i = 0; i < 3; ++i) {
    v.bar_reads[i] = bar_reads_[i].load(std::memory_order_relaxed);
    v.bar_writes[i] = bar_writes_[i].load(std::memory_order_relaxed);
  }
  v.config_reads = config_reads_.load(std::memory_order_relaxed);
  v.config_writes = config_writes_.load(std::memory_order_relaxed);
  v.housekeeping = housekeeping_.load(std::memory_order_relaxed);
  v.bar_maps = bar_maps_.load(std::memory_order_relaxed);
  v.bar_unmaps = bar_unmaps_.load(std::memory_order_relaxed);
  v.bar_maps_refused = bar_maps_refused_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < v.refused.size(); ++i) {
    v.refused[i] = refused_[i].load(std::memory_order_relaxed);
  }
  return v;
}

}  // namespace gpuvm::dm
