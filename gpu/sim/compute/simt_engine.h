// SimtEngine: the software GPU's compute engine. It implements the ComputeEngine contract of
// gpu/sim/compute_engine.h: a launch becomes a job whose first slice fetches the kernel (GVISA,
// gpu/isa) from the channel's address space, validates and decodes it (through a cache keyed by
// address space and address, re-verified byte for byte on every launch), snapshots the constant
// banks the kernel reads, and then runs thread blocks on a pool of worker threads ("SMs") in
// bounded slices. docs/ISA.md describes the execution model.
//
// Threading: Start, FlushCodeCache and the jobs' RunSlice are called from one thread (the device's
// engine thread), as the contract says; RunSlice fans out to the worker pool and returns when every
// worker has stopped. A job must not outlive the engine that started it.
#ifndef GPUVM_GPU_SIM_COMPUTE_SIMT_ENGINE_H_
#define GPUVM_GPU_SIM_COMPUTE_SIMT_ENGINE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "gpu/sim/compute/exec_state.h"
#include "gpu/sim/compute/program.h"
#include "gpu/sim/compute/worker_pool.h"
#include "gpu/sim/compute_engine.h"

namespace gpuvm::sim::compute {

struct EngineOptions {
  int workers = 0;  // worker threads ("SMs"); 0 = std::thread::hardware_concurrency()
  std::chrono::microseconds slice{1000};  // a slice stops taking new work after this long
  size_t code_cache_entries = 64;
  InterpreterVariant interpreter = InterpreterVariant::kBest;
};

class SimtEngine final : public ComputeEngine {
 public:
  static std::unique_ptr<SimtEngine> Create(const EngineOptions& options = {});
  ~SimtEngine() override;

  std::unique_ptr<ComputeJob> Start(const ComputeLaunch& launch, ChannelMemory* memory) override;
  void FlushCodeCache() override;
  // Continues a job from its SaveContext image (docs/SOFTWARE-GPU.md "Preemption"): the image is
  // parsed and validated in full here, on the engine thread; when it does not hold, the job's
  // first slice faults (kInvalidLaunch).
  std::unique_ptr<ComputeJob> Resume(const std::vector<uint8_t>& image,
                                     ChannelMemory* memory) override;

  void RequestYield() override { yield_.store(true, std::memory_order_relaxed); }
  void ClearYield() override { yield_.store(false, std::memory_order_relaxed); }

  int workers() const { return pool_.size(); }
  const char* interpreter_name() const { return interpreter_name_; }

  struct CacheStats {
    uint64_t hits = 0;    // the bytes matched a cached decode
    uint64_t misses = 0;  // decoded afresh
    uint64_t stale = 0;   // an entry for the address existed but the bytes differed
    size_t entries = 0;
  };
  CacheStats cache_stats() const;

 private:
  friend class SimtJob;
  explicit SimtEngine(const EngineOptions& options);

  // The decoded program for the image `bytes` found at (address space, address); decodes on a miss.
  Result<std::shared_ptr<const Program>> LookUpOrDecode(uint64_t space_id, uint64_t address,
                                                        std::vector<uint8_t> bytes);

  struct CacheEntry {
    uint64_t space_id = 0;
    uint64_t address = 0;
    std::vector<uint8_t> bytes;  // the exact image that was decoded
    std::shared_ptr<const Program> program;
    uint64_t last_use = 0;
  };

  const EngineOptions options_;
  WorkerPool pool_;
  RunWarpFn run_warp_ = nullptr;
  const char* interpreter_name_ = "";
  uint32_t next_grid_id_ = 1;       // engine thread only
  std::atomic<bool> yield_{false};  // RequestYield: the slice in flight parks at its next check

  mutable std::mutex cache_mu_;
  std::vector<CacheEntry> cache_;  // guarded by cache_mu_
  uint64_t cache_clock_ = 0;       // guarded by cache_mu_
  CacheStats stats_;               // guarded by cache_mu_
};

}  // namespace gpuvm::sim::compute

#endif  // GPUVM_GPU_SIM_COMPUTE_SIMT_ENGINE_H_
