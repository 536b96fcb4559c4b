// The software GPU as the aggregator's unit tests use it: no engine threads (a test runs the
// channels itself, RunUntilIdle) and no compute engine, with `vram_bytes` of VRAM. One place for
// the options the tests of sessions, pt, fv, VRAM maps and guest RAM share, and the fixture of the
// tests that reach VRAM through a VramAccess.
//
// Threading: UnthreadedSim is a pure function; UnthreadedSimTest belongs to its test's thread.
#ifndef GPUVM_AGGREGATOR_TESTING_UNTHREADED_SIM_H_
#define GPUVM_AGGREGATOR_TESTING_UNTHREADED_SIM_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>

#include "aggregator/sim_gpu.h"
#include "aggregator/vram_access.h"

namespace gpuvm::aggregator::testing {

inline SimGpuOptions UnthreadedSim(uint64_t vram_bytes) {
  SimGpuOptions o;
  o.vram_bytes = vram_bytes;
  o.threaded = false;
  o.compute_engine = false;
  return o;
}

// A fixture whose SetUp calls MakeSim: an unthreaded software GPU and a VramAccess over it.
class UnthreadedSimTest : public ::testing::Test {
 protected:
  void MakeSim(uint64_t vram_bytes) {
    auto gpu = SimGpu::Create(UnthreadedSim(vram_bytes));
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    gpu_ = std::move(*gpu);
    vram_ = std::make_unique<VramAccess>(gpu_.get());
  }

  std::unique_ptr<SimGpu> gpu_;
  std::unique_ptr<VramAccess> vram_;
};

}  // namespace gpuvm::aggregator::testing

#endif  // GPUVM_AGGREGATOR_TESTING_UNTHREADED_SIM_H_
