// Fuzz target: random bytes written into GPU memory as a kernel image and launched. Every input
// must end in a clean outcome: a decode error (kInvalidCode), a fault, completion, or — for kernels
// that loop — still running after a few slices (then the job is dropped, which must be safe too). A
// decodable image must also survive disassembly and reassembly to the same bytes.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "gpu/isa/assembler.h"
#include "gpu/isa/disassembler.h"
#include "gpu/isa/encoding.h"
#include "gpu/sim/compute/simt_engine.h"
#include "gpu/sim/compute/test_support.h"

using namespace gpuvm;
using namespace gpuvm::sim;
using namespace gpuvm::sim::compute;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static std::unique_ptr<SimtEngine> engine = SimtEngine::Create(
      {.workers = 1, .slice = std::chrono::microseconds(200), .code_cache_entries = 4});
  std::span<const uint8_t> image(data, size);

  uint32_t shared = 4096;
  Result<isa::Kernel> kernel = isa::DecodeKernel(image);
  if (kernel.ok()) {
    shared = std::max(shared, kernel->header.shared_bytes);
    std::string text = isa::DisassembleKernel(*kernel);
    Result<std::vector<uint8_t>> again = isa::Assemble(text);
    if (!again.ok() || *again != std::vector<uint8_t>(data, data + size)) abort();
  }

  FakeChannelMemory memory;
  memory.Map(kTestDataAddress, 0x4000);
  if (size > 0) {
    memory.Map(kTestCodeAddress, size);
    memory.Write(kTestCodeAddress, data, size);
  }
  ParamBuffer params;
  params.Add(kTestDataAddress).Add(kTestDataAddress + 0x2000).Add(uint32_t{64}).Add(uint32_t{7});
  memory.Map(kTestParamAddress, 0x1000);
  memory.Write(kTestParamAddress, params.bytes().data(), params.bytes().size());

  ComputeLaunch launch;
  launch.grid_x = 2;
  launch.block_x = 40;  // a full and a partial warp
  launch.shared_size = shared;
  launch.code_address = kTestCodeAddress;
  launch.shared_base = kTestSharedBase;
  launch.local_base = kTestLocalBase;
  launch.const_buffers[0] = {true, kTestParamAddress, 64};
  launch.const_buffers[1] = {true, kTestDataAddress, 256};
  std::unique_ptr<ComputeJob> job = engine->Start(launch, &memory);
  for (int slice = 0; slice < 3; ++slice) {
    SliceOutcome outcome = job->RunSlice();
    if (outcome != SliceOutcome::kMore) {
      if (outcome == SliceOutcome::kFaulted && job->fault().message.empty()) abort();
      break;
    }
  }
  return 0;
}
