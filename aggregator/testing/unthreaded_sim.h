// The software GPU as the aggregator's unit tests use it: no engine threads (a test runs the
// channels itself, RunUntilIdle) and no compute engine, with `vram_bytes` of VRAM. One place for
// the options the tests of sessions, pt, fv, VRAM maps and guest RAM share.
//
// Threading: a pure function.
#ifndef GPUVM_AGGREGATOR_TESTING_UNTHREADED_SIM_H_
#define GPUVM_AGGREGATOR_TESTING_UNTHREADED_SIM_H_

#include <cstdint>

#include "aggregator/sim_gpu.h"

namespace gpuvm::aggregator::testing {

inline SimGpuOptions UnthreadedSim(uint64_t vram_bytes) {
  SimGpuOptions o;
  o.vram_bytes = vram_bytes;
  o.threaded = false;
  o.compute_engine = false;
  return o;
}

}  // namespace gpuvm::aggregator::testing

#endif  // GPUVM_AGGREGATOR_TESTING_UNTHREADED_SIM_H_
