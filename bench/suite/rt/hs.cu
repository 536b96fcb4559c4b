// hs, runtime-API build (stock nvcc): the twin of ../hs.cc — Rodinia's hotspot in the kernel
// corpus's form, explicit time steps ping-ponging between two temperature grids.
#include <cstring>

#include "bench/kernels/hotspot.cu"
#include "bench/suite/problems.h"
#include "bench/suite/rt/rt.h"

namespace gpuvm::suite {
namespace {

void Run(const HotspotProblem& p, Report& report, HotspotProblem::Outputs* out) {
  const size_t bytes = p.temp.size() * sizeof(float);
  HotspotParams params;
  static_assert(sizeof params == sizeof p.params, "HotspotParams is five floats");
  std::memcpy(&params, p.params, sizeof params);
  if (!OpenDevice(report, hotspot)) return;
  float *d_power, *d_a, *d_b;
  GPUVM_SUITE_RT(report, cudaMalloc(&d_power, bytes));
  GPUVM_SUITE_RT(report, cudaMalloc(&d_a, bytes));
  GPUVM_SUITE_RT(report, cudaMalloc(&d_b, bytes));

  report.Enter(Phase::kHtoD);
  GPUVM_SUITE_RT(report, cudaMemcpy(d_power, p.power.data(), bytes, cudaMemcpyHostToDevice));
  GPUVM_SUITE_RT(report, cudaMemcpy(d_a, p.temp.data(), bytes, cudaMemcpyHostToDevice));
  GPUVM_SUITE_RT(report, cudaMemset(d_b, 0, bytes));

  report.Enter(Phase::kLaunch);
  for (int s = 0; s < p.steps; ++s) {
    const float* from = s % 2 == 0 ? d_a : d_b;
    float* to = s % 2 == 0 ? d_b : d_a;
    hotspot<<<dim3(Blocks(p.cols, 16), Blocks(p.rows, 16)), dim3(16, 16)>>>(d_power, from, to,
                                                                            p.rows, p.cols, params);
    GPUVM_SUITE_RT_LAUNCHED(report);
  }
  GPUVM_SUITE_RT(report, cudaDeviceSynchronize());

  report.Enter(Phase::kDtoH);
  p.SizeOutputs(out);
  GPUVM_SUITE_RT(report, cudaMemcpy(out->a.data(), d_a, bytes, cudaMemcpyDeviceToHost));
  GPUVM_SUITE_RT(report, cudaMemcpy(out->b.data(), d_b, bytes, cudaMemcpyDeviceToHost));

  CloseDevice(report, {d_power, d_a, d_b});
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  return ProgramMain<HotspotProblem>(argc, argv, "hs", "runtime", MakeHotspot, Run);
}
