#include "aggregator/gpu_spec.h"

namespace gpuvm::aggregator {

Result<GpuSpec> ParseGpuSpec(std::string_view text) {
  GpuSpec spec;
  if (text == "sim") return spec;
  constexpr std::string_view kPci = "pci:";
  if (text.substr(0, kPci.size()) == kPci) {
    Result<hv::Sbdf> address = hv::Sbdf::Parse(text.substr(kPci.size()));
    if (!address.ok() || !address->valid()) {
      return Status::InvalidArgument("--gpu " + std::string(text) +
                                     ": expected pci:ssss:bb:dd.f or pci:bb:dd.f");
    }
    spec.kind = GpuSpec::Kind::kPci;
    spec.pci = *address;
    return spec;
  }
  return Status::InvalidArgument("--gpu " + std::string(text) +
                                 ": expected sim or pci:BDF (e.g. pci:0000:01:00.0)");
}

Result<std::unique_ptr<PhysicalGpu>> OpenPhysicalGpu(const GpuSpec& spec, const SimGpuOptions& sim,
                                                     const PciGpuOptions& pci) {
  if (spec.kind == GpuSpec::Kind::kSim) {
    GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<SimGpu> gpu, SimGpu::Create(sim));
    return std::unique_ptr<PhysicalGpu>(std::move(gpu));
  }
  GPUVM_ASSIGN_OR_RETURN(std::unique_ptr<PciGpu> gpu, PciGpu::Open(spec.pci, pci));
  return std::unique_ptr<PhysicalGpu>(std::move(gpu));
}

}  // namespace gpuvm::aggregator
