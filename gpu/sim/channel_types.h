// Small vocabulary shared by the channel, its engines and PFIFO: who made a memory access (for
// fault records and privilege), a view of a channel's address space, and the channel error record.
//
// Threading: value types and a stateless view; VmView is as thread-safe as Mmu (fully).
#ifndef GPUVM_GPU_SIM_CHANNEL_TYPES_H_
#define GPUVM_GPU_SIM_CHANNEL_TYPES_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "gpu/hw/mmu_fault.h"
#include "gpu/hw/pfifo.h"
#include "gpu/sim/compute_engine.h"
#include "gpu/sim/mmu.h"

namespace gpuvm::sim {

// Who accesses memory: which VM_FAULT unit and client a fault is recorded under, and whether the
// access is privileged. (our choice) Host-side clients (the BAR apertures and PFIFO's command fetch
// and semaphores) are privileged and may touch supervisor-only pages; the engines (copy, M2MF,
// compute) are not.
struct FaultSource {
  gf100::FaultUnit unit;
  bool hub;        // VM_FAULT flags bit 6
  uint8_t client;  // hub or GPC client id
  bool privileged;
};
inline constexpr FaultSource kPfifoSource{gf100::FaultUnit::kPsubfifo0, true,
                                          uint8_t(gf100::FaultHubClient::kPfifo), true};
inline constexpr FaultSource kCopySource{gf100::FaultUnit::kPcopy0, true,
                                         uint8_t(gf100::FaultHubClient::kPcopy0), false};
inline constexpr FaultSource kM2mfSource{gf100::FaultUnit::kPgraph, true,
                                         uint8_t(gf100::FaultHubClient::kDispatch), false};
inline constexpr FaultSource kComputeSource{gf100::FaultUnit::kPgraph, false,
                                            uint8_t(gf100::FaultGpcClient::kTpc0L1), false};
inline constexpr FaultSource kBar1Source{gf100::FaultUnit::kBar1, true,
                                         uint8_t(gf100::FaultHubClient::kBar), true};
inline constexpr FaultSource kBar3Source{gf100::FaultUnit::kBar3, true,
                                         uint8_t(gf100::FaultHubClient::kBar), true};

// One address space as a channel (or BAR) sees it: the space and the highest valid address.
struct VmView {
  Mmu* mmu = nullptr;
  AddressSpace* space = nullptr;
  uint64_t limit = 0;

  uint8_t* Run(uint64_t va, uint64_t length, bool write, bool privileged, uint64_t* run,
               MemoryFault* fault) const {
    return mmu->TranslateRun(space, limit, va, length, write, privileged, run, fault);
  }
  // Copies between the VM and host buffers, page by page. False (and *fault) at the first failing
  // page; bytes before it have been transferred.
  bool Read(uint64_t va, void* dst, uint64_t length, bool privileged, MemoryFault* fault) const {
    auto* out = static_cast<uint8_t*>(dst);
    while (length > 0) {
      uint64_t run;
      const uint8_t* p = Run(va, length, false, privileged, &run, fault);
      if (p == nullptr) return false;
      std::memcpy(out, p, run);
      out += run;
      va += run;
      length -= run;
    }
    return true;
  }
  bool Write(uint64_t va, const void* src, uint64_t length, bool privileged,
             MemoryFault* fault) const {
    auto* in = static_cast<const uint8_t*>(src);
    while (length > 0) {
      uint64_t run;
      uint8_t* p = Run(va, length, true, privileged, &run, fault);
      if (p == nullptr) return false;
      if (run == 4 && length == 4) {
        uint32_t v;
        std::memcpy(&v, in, 4);
        Store32(p, v);  // a lone word (semaphores, queries) is written atomically
      } else {
        std::memcpy(p, in, run);
      }
      in += run;
      va += run;
      length -= run;
    }
    return true;
  }
};

// Why a channel stopped. The first error kills the channel (it runs no more work) until the driver
// rebinds its CHAN_TABLE entry; other channels go on.
struct ChannelError {
  enum class Kind : uint8_t {
    kNone,
    kMmuFault,          // a translation failed (also recorded in VM_FAULT); see `fault`
    kBadInstance,       // the instance block / RAMFC is unreadable or malformed (SIG_MISMATCH)
    kIbPutOverflow,     // IB_PUT beyond the IB ring
    kIllegalCommand,    // a pushbuffer header the decoder rejects
    kIllegalMethod,     // unknown class, bad method argument, unmodelled layout
    kEmptySubchannel,   // a class method on a subchannel with no object bound
    kIllegalSemaphore,  // SEMAPHORED with an unknown operation
    kNoComputeEngine,   // compute LAUNCH while no compute engine is injected
    kComputeFault,      // the compute job faulted (not through the MMU); see `message`
  };
  Kind kind = Kind::kNone;
  uint32_t subchannel = 0;
  uint32_t method = 0;
  uint32_t data = 0;
  MemoryFault fault;
  std::string message;

  bool ok() const { return kind == Kind::kNone; }
};

const char* ChannelErrorKindName(ChannelError::Kind kind);

// Outcome of executing one method.
enum class MethodStatus : uint8_t {
  kDone,   // go on with the next word
  kYield,  // the method started work that must finish (or a wait that must be satisfied) first
  kError,  // the channel's error record is filled; stop
};

// Per-channel accounting, for the scheduler's GPU-time bookkeeping and the benchmark.
struct ChannelStats {
  // Wall time the device spent running this channel, each slice counted up to its budget plus
  // PfifoConfig::max_slice_overrun_ns (an engine thread that was stopped did no work).
  uint64_t busy_ns = 0;
  uint64_t engine_busy_ns[gf100::pfifo::kEngineSlots] = {};  // of which on each engine
  uint64_t ib_entries = 0;
  uint64_t methods = 0;
  uint64_t ignored_methods = 0;  // methods of unmodelled classes or unknown host methods
  uint64_t slices = 0;
  // Preemption (Channel::Preempt): grids switched out and restored, the bytes of the last context
  // saved, and the time the last restore took (parse, validate, rebuild; in the slice that ran it).
  uint64_t context_saves = 0;
  uint64_t context_restores = 0;
  uint64_t last_context_bytes = 0;
  uint64_t last_restore_ns = 0;
};

}  // namespace gpuvm::sim

#endif  // GPUVM_GPU_SIM_CHANNEL_TYPES_H_
