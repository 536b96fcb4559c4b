// Which physical GPU the aggregator owns: the value of `--gpu`.
//   sim            the software GF100 in the aggregator's process (the default)
//   pci:BDF        a real card through libpciaccess; BDF as "ssss:bb:dd.f" or "bb:dd.f"
//
// Threading: plain values and a factory the owner thread calls.
#ifndef GPUVM_AGGREGATOR_GPU_SPEC_H_
#define GPUVM_AGGREGATOR_GPU_SPEC_H_

#include <memory>
#include <string>
#include <string_view>

#include "aggregator/pci_gpu.h"
#include "aggregator/physical_gpu.h"
#include "aggregator/sim_gpu.h"
#include "hypervisor/types.h"

namespace gpuvm::aggregator {

struct GpuSpec {
  enum class Kind { kSim, kPci };
  Kind kind = Kind::kSim;
  hv::Sbdf pci;  // kPci only
};

// InvalidArgument with the accepted forms for anything else.
Result<GpuSpec> ParseGpuSpec(std::string_view text);

Result<std::unique_ptr<PhysicalGpu>> OpenPhysicalGpu(const GpuSpec& spec,
                                                     const SimGpuOptions& sim = {},
                                                     const PciGpuOptions& pci = {});

}  // namespace gpuvm::aggregator

#endif  // GPUVM_AGGREGATOR_GPU_SPEC_H_
