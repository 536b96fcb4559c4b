#include "aggregator/pv_device.h"

#include <vector>

namespace gpuvm::aggregator {

using pv::CallResult;

PvDevice::PvDevice(pv::Mode mode, VramMap* vram, PvTables::Hooks hooks,
                   std::function<void(const std::string&)> refused)
    : mode_(mode), tables_(vram, std::move(hooks)), refused_(std::move(refused)) {}

uint32_t PvDevice::Read(uint32_t offset) const {
  const uint64_t calls = tables_.counters().calls;
  switch (offset) {
    case pv::kRegId:
      return pv::kIdValue;
    case pv::kRegVersion:
      return pv::kVersion;
    case pv::kRegMode:
      return static_cast<uint32_t>(mode_);
    case pv::kRegAreaMaxPages:
      return pv::kMaxAreaPages;
    case pv::kRegAreaListLo:
      return uint32_t(list_);
    case pv::kRegAreaListHi:
      return uint32_t(list_ >> 32);
    case pv::kRegAreaPages:
      return area_.pages();
    case pv::kRegAreaStatus:
      return area_status_;
    case pv::kRegBatchStatus:
      return batch_status_;
    case pv::kRegBatchDone:
      return batch_done_;
    case pv::kRegCallsLo:
      return uint32_t(calls);
    case pv::kRegCallsHi:
      return uint32_t(calls >> 32);
    case pv::kRegDoorbellsLo:
      return uint32_t(counters_.doorbells);
    case pv::kRegDoorbellsHi:
      return uint32_t(counters_.doorbells >> 32);
    default:
      return 0;
  }
}

bool PvDevice::Write(uint32_t offset, uint32_t value, std::span<uint8_t> ram,
                     const VmMemoryLayout& layout) {
  switch (offset) {
    case pv::kRegAreaListLo:
      list_ = (list_ & ~0xffffffffull) | value;
      return true;
    case pv::kRegAreaListHi:
      list_ = (list_ & 0xffffffffull) | (uint64_t{value} << 32);
      return true;
    case pv::kRegAreaPages:
      Register(value, ram);
      return true;
    case pv::kRegDoorbell:
      Ring(value, ram, layout);
      return true;
    default:
      return false;
  }
}

void PvDevice::Register(uint32_t pages, std::span<uint8_t> ram) {
  area_ = {};
  if (pages == 0) {  // unregistered: doorbells fail until the next registration
    area_status_ = 0;
    return;
  }
  Result<pv::CallArea> area = pv::CallArea::Register(ram, list_, pages);
  if (!area.ok()) {
    ++counters_.areas_refused;
    area_status_ = static_cast<uint32_t>(CallResult::kBadArea);
    if (refused_) refused_("call area refused: " + area.status().message());
    return;
  }
  area_ = std::move(*area);
  area_status_ = 0;
  ++counters_.area_registrations;
  // A registration is a new driver instance (the guest driver registers once, when it starts): what
  // the previous one (the VM's last program) left attached is released, so the new one can attach
  // the same directories again; what a bound channel still uses stays guarded.
  tables_.ReleaseUnused();
}

void PvDevice::Ring(uint32_t length, std::span<uint8_t> ram, const VmMemoryLayout& layout) {
  ++counters_.doorbells;
  batch_done_ = 0;
  if (!area_.registered()) {
    ++counters_.batches_refused;
    batch_status_ = static_cast<uint32_t>(CallResult::kNoArea);
    if (refused_) refused_("doorbell without a call area");
    return;
  }
  const CallResult length_ok = pv::CheckBatchLength(length, area_.bytes());
  if (length_ok != CallResult::kOk) {
    ++counters_.batches_refused;
    batch_status_ = static_cast<uint32_t>(length_ok);
    if (area_.bytes() >= pv::kHeaderBytes) area_.Store32(ram, pv::kHeaderStatus, batch_status_);
    if (refused_) refused_("doorbell with a batch of " + std::to_string(length) + " bytes");
    return;
  }
  // The one read of the batch: everything below looks at this copy only.
  const std::vector<uint8_t> batch = area_.Copy(ram, length);
  const pv::DecodedBatch decoded = pv::DecodeBatch(batch);
  std::vector<CallResult> results(decoded.calls.size(), CallResult::kNotRun);
  if (decoded.status != CallResult::kOk) {
    ++counters_.batches_refused;
    if (refused_) refused_(decoded.error);
    Answer(ram, batch.size(), decoded, results, decoded.status, 0);
    return;
  }
  CallResult status = CallResult::kOk;
  uint32_t done = 0;
  for (size_t i = 0; i < decoded.calls.size(); ++i) {
    results[i] = tables_.Apply(decoded.calls[i], batch, layout);
    if (results[i] != CallResult::kOk) {
      status = results[i];
      ++counters_.calls_refused;
      if (refused_) refused_("call " + std::to_string(i) + " refused: " + tables_.last_refusal());
      break;
    }
    ++done;
  }
  Answer(ram, batch.size(), decoded, results, status, done);
}

void PvDevice::Answer(std::span<uint8_t> ram, uint64_t batch_bytes, const pv::DecodedBatch& decoded,
                      const std::vector<CallResult>& results, CallResult status, uint32_t done) {
  batch_status_ = static_cast<uint32_t>(status);
  batch_done_ = done;
  // Offsets from the host's copy; the guest may have rewritten its pages, which only changes what
  // it reads back.
  for (size_t i = 0; i < decoded.calls.size(); ++i) {
    area_.Store32(ram, decoded.calls[i].offset + pv::kOpResult, static_cast<uint32_t>(results[i]));
  }
  if (decoded.bad_offset >= 0 && uint64_t(decoded.bad_offset) + pv::kOpHeaderBytes <= batch_bytes) {
    area_.Store32(ram, uint64_t(decoded.bad_offset) + pv::kOpResult,
                  static_cast<uint32_t>(decoded.status));
  }
  area_.Store32(ram, pv::kHeaderStatus, batch_status_);
  area_.Store32(ram, pv::kHeaderDone, done);
}

}  // namespace gpuvm::aggregator
