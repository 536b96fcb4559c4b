// The compute object (class 0x90c0) of the software GPU's PGRAPH: latches the launch state its
// methods program (grid/block dimensions, shared size, code address and entry, constant buffers and
// their uploads, local/shared windows, temp memory) into a sim::ComputeLaunch, and on LAUNCH hands
// it to the channel, which starts a job on the injected ComputeEngine (gpu/sim/compute_engine.h)
// and runs it slice by slice. QUERY_GET writes the sequence once everything before it has finished
// (channels execute in order).
//
// Threading: not thread-safe; one object per channel, run by the device's engine thread.
#ifndef GPUVM_GPU_SIM_COMPUTE_CLASS_H_
#define GPUVM_GPU_SIM_COMPUTE_CLASS_H_

#include <cstdint>

#include "gpu/sim/compute_engine.h"
#include "gpu/sim/object_context.h"

namespace gpuvm::sim {

class ComputeObject {
 public:
  explicit ComputeObject(uint32_t channel) { launch_.channel = channel; }
  MethodStatus Method(uint32_t method, uint32_t data, ObjectContext* ctx, bool* ignored);
  const ComputeLaunch& launch_state() const { return launch_; }

 private:
  MethodStatus UploadConstant(uint32_t data, ObjectContext* ctx);

  ComputeLaunch launch_;
  uint32_t cb_size_ = 0;
  uint64_t cb_address_ = 0;
  uint32_t cb_pos_ = 0;
  uint64_t query_address_ = 0;
  uint32_t query_sequence_ = 0;
  uint32_t watchdog_ = 0;
};

}  // namespace gpuvm::sim

#endif  // GPUVM_GPU_SIM_COMPUTE_CLASS_H_
