#include "qemu-device/trap_counters.h"

#include "base/enum_names.h"
namespace gpuvm::dm {

namespace {

constexpr EnumName<Refusal> kRefusalNames[] = {
    {Refusal::kWrongDevice, "wrong-device"},     {Refusal::kBadSize, "bad-size"},
    {Refusal::kUnaligned, "unaligned"},          {Refusal::kOutsideBars, "outside-bars"},
    {Refusal::kOutsideConfig, "outside-config"}, {Refusal::kBadRepetition, "bad-rep"},
    {Refusal::kBadPointer, "bad-pointer"},       {Refusal::kBufferedRead, "buffered-read"},
    {Refusal::kUnknownSpace, "unknown-space"},   {Refusal::kAggregatorError, "aggregator-error"},
    {Refusal::kBarConflict, "bar-conflict"},
};
static_assert(std::size(kRefusalNames) == static_cast<size_t>(Refusal::kCount),
              "every refusal has a name");

}  // namespace

std::string_view RefusalName(Refusal refusal) { return NameOf(kRefusalNames, refusal, "?"); }

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
