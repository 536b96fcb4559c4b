// What the objects bound to a channel's subchannels (M2MF, PCOPY, compute) may ask of their
// channel, and the report format their completions write.
//
// Threading: called only from the thread running the channel.
#ifndef GPUVM_GPU_SIM_OBJECT_CONTEXT_H_
#define GPUVM_GPU_SIM_OBJECT_CONTEXT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "gpu/hw/pfifo.h"
#include "gpu/sim/channel_types.h"
#include "gpu/sim/compute_engine.h"

namespace gpuvm::sim {

class CopyJob;

// What a finished operation writes: nothing, a 4-byte value, or a 16-byte report {value, 0,
// timestamp}.
struct Report {
  enum class Size : uint8_t { kNone, kShort, kLong };
  Size size = Size::kNone;
  uint64_t address = 0;
  uint32_t value = 0;
};

// What an object method asks of its channel.
class ObjectContext {
 public:
  virtual ~ObjectContext() = default;
  virtual const VmView& vm() const = 0;
  // Writes a report; on an MMU fault records it under `source` and fails the channel (returns
  // kError).
  virtual MethodStatus WriteReport(const FaultSource& source, const Report& report) = 0;
  // Records an MMU fault under `source` and fails the channel. Returns kError.
  virtual MethodStatus Fault(const FaultSource& source, const MemoryFault& fault) = 0;
  // Fails the channel with `kind`. Returns kError.
  virtual MethodStatus Fail(ChannelError::Kind kind, std::string message) = 0;
  virtual void RaiseNonStall(gf100::pfifo::Engine engine) = 0;
  // Hands a copy to the channel, which runs it before its next method. Returns kYield.
  virtual MethodStatus StartCopy(std::unique_ptr<CopyJob> job) = 0;
  // Starts a compute grid on the injected compute engine (or fails the channel if there is none);
  // the channel runs it before its next method. Returns kYield or kError.
  virtual MethodStatus StartCompute(const ComputeLaunch& launch) = 0;
  // FLUSH.CODE: the engine must forget decoded code.
  virtual void FlushCode() = 0;
  virtual uint64_t NowNs() = 0;
};

}  // namespace gpuvm::sim

#endif  // GPUVM_GPU_SIM_OBJECT_CONTEXT_H_
