// Fuzz target: random bytes handed to SimtEngine::Resume as a saved grid context (what
// ComputeJob::SaveContext writes, docs/SOFTWARE-GPU.md "Preemption"). Every input must end in a
// clean outcome: the image refused (the job's first slice faults), or a grid that runs — to
// completion, to a fault, or still running after a few slices (then the job is dropped). Seeds:
// contexts saved from a kernel using shared and local memory, barriers and divergence.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "gpu/sim/compute/simt_engine.h"
#include "gpu/sim/compute/test_support.h"

using namespace gpuvm;
using namespace gpuvm::sim;
using namespace gpuvm::sim::compute;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::unique_ptr<SimtEngine> engine = SimtEngine::Create(
      {.workers = 2, .slice = std::chrono::microseconds(200), .code_cache_entries = 4});
  FakeChannelMemory memory;
  memory.Map(kTestDataAddress, 0x100000);
  memory.Map(kTestParamAddress, 0x1000);
  const std::vector<uint8_t> image(data, data + size);
  std::unique_ptr<ComputeJob> job = engine->Resume(image, &memory);
  if (job == nullptr) abort();  // the engine restores contexts: never null
  SliceOutcome o = SliceOutcome::kMore;
  for (int i = 0; i < 4 && o == SliceOutcome::kMore; ++i) o = job->RunSlice();
  if (o == SliceOutcome::kMore) {
    // A running grid can be switched out again, and what it saves must restore.
    std::vector<uint8_t> again;
    if (job->SaveContext(&again)) {
      std::unique_ptr<ComputeJob> resumed = engine->Resume(again, &memory);
      if (resumed->RunSlice() == SliceOutcome::kFaulted &&
          resumed->fault().kind == ComputeFault::Kind::kInvalidLaunch)
        abort();  // a context the engine saved itself was refused
    }
  }
  return 0;
}
