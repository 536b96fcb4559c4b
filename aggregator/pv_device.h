// The PV register window of one pv VM's virtual GPU (docs/PARAVIRT.md): identity, mode, the call
// area's registration, the doorbell, the last batch's result and the counters. A doorbell runs a
// batch: its bytes copied out of the guest's call area once (pv/call_area.h), decoded
// (pv/call_page.h), each call validated and applied in order by PvTables until one is refused, and
// the answers written back into the guest's area and the registers — all before the trapped write
// completes.
//
// Threading: the aggregator's owner thread only (as FullVirtGpu, which owns it).
#ifndef GPUVM_AGGREGATOR_PV_DEVICE_H_
#define GPUVM_AGGREGATOR_PV_DEVICE_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "aggregator/pv_tables.h"
#include "pv/call_area.h"
#include "pv/protocol.h"

namespace gpuvm::aggregator {

struct PvDeviceCounters {
  uint64_t doorbells = 0;
  uint64_t batches_refused = 0;  // refused whole: no area, bad length, malformed (nothing applied)
  uint64_t calls_refused = 0;    // calls refused by validation (the rest of their batch not run)
  uint64_t area_registrations = 0;
  uint64_t areas_refused = 0;
};

class PvDevice {
 public:
  // `refused` hears of every refused batch, call and area registration, with the reason.
  PvDevice(pv::Mode mode, VramMap* vram, PvTables::Hooks hooks,
           std::function<void(const std::string&)> refused);

  // One 32-bit access to the window (`offset`: the BAR0 offset, inside pv::kWindow). Unknown
  // offsets read 0; writes to them return false (the caller counts a refused register).
  uint32_t Read(uint32_t offset) const;
  // `ram`: the VM's RAM (empty before GUEST_MEMORY: a registration then fails); `layout`: its
  // memory as PvTables needs it.
  bool Write(uint32_t offset, uint32_t value, std::span<uint8_t> ram, const VmMemoryLayout& layout);

  PvTables& tables() { return tables_; }
  const PvTables& tables() const { return tables_; }
  pv::Mode mode() const { return mode_; }
  const PvDeviceCounters& counters() const { return counters_; }

 private:
  void Register(uint32_t pages, std::span<uint8_t> ram);
  void Ring(uint32_t length, std::span<uint8_t> ram, const VmMemoryLayout& layout);
  void Answer(std::span<uint8_t> ram, uint64_t batch_bytes, const pv::DecodedBatch& decoded,
              const std::vector<pv::CallResult>& results, pv::CallResult status, uint32_t done);

  const pv::Mode mode_;
  PvTables tables_;
  std::function<void(const std::string&)> refused_;
  pv::CallArea area_;
  uint64_t list_ = 0;
  uint32_t area_status_ = 0;
  uint32_t batch_status_ = 0;
  uint32_t batch_done_ = 0;
  PvDeviceCounters counters_;
};

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_PV_DEVICE_H_
