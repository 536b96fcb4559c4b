// hs, runtime-API build (stock nvcc): the twin of ../hs.cc — Rodinia's hotspot in the kernel
// corpus's form, explicit time steps ping-ponging between two temperature grids.
#include <cstring>
#include <vector>

#include "bench/kernels/hotspot.cu"
#include "bench/suite/problems.h"
#include "bench/suite/rt/rt.h"

namespace gpuvm::suite {
namespace {

void Run(const HotspotProblem& p, Report& report, std::vector<float>* a, std::vector<float>* b) {
  const size_t bytes = p.temp.size() * sizeof(float);
  HotspotParams params;
  static_assert(sizeof params == sizeof p.params, "HotspotParams is five floats");
  std::memcpy(&params, p.params, sizeof params);
  report.Enter(Phase::kInit);
  GPUVM_SUITE_RT_OPEN(report);
  GPUVM_SUITE_RT_LOAD(report, hotspot);
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
  a->resize(p.temp.size());
  b->resize(p.temp.size());
  GPUVM_SUITE_RT(report, cudaMemcpy(a->data(), d_a, bytes, cudaMemcpyDeviceToHost));
  GPUVM_SUITE_RT(report, cudaMemcpy(b->data(), d_b, bytes, cudaMemcpyDeviceToHost));

  report.Enter(Phase::kClose);
  for (float* d : {d_power, d_a, d_b}) GPUVM_SUITE_RT(report, cudaFree(d));
  GPUVM_SUITE_RT(report, cudaDeviceReset());
  report.End();
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  const Size size = ParseCommandLine(argc, argv, "hs");
  const HotspotProblem problem = MakeHotspot(size);
  Report report("hs", "runtime", size, problem.Describe());
  std::vector<float> a, b;
  Run(problem, report, &a, &b);
  if (!report.failed()) report.Verify(problem.Check(a, b));
  return report.Finish();
}
