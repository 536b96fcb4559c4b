// srad and srad2, runtime-API build (stock nvcc): the twins of ../srad.cc — iterations of a
// coefficient launch and an update launch, on a structured image (srad) or random inputs (srad2).
// GPUVM_SUITE_NAME picks which.
#include <cstring>

#include "bench/kernels/srad.cu"
#include "bench/suite/problems.h"
#include "bench/suite/rt/rt.h"

#ifndef GPUVM_SUITE_NAME
#error "GPUVM_SUITE_NAME must name the benchmark (srad or srad2)"
#endif

namespace gpuvm::suite {
namespace {

const bool kRandomInputs = std::strcmp(GPUVM_SUITE_NAME, "srad2") == 0;

void Run(const SradProblem& p, Report& report, SradProblem::Outputs* out) {
  const size_t bytes = p.image.size() * sizeof(float);
  if (!OpenDevice(report, srad_coeff)) return;
  // The image, the coefficient and the four directional derivatives.
  float* d[6];
  for (float*& buffer : d) GPUVM_SUITE_RT(report, cudaMalloc(&buffer, bytes));

  report.Enter(Phase::kHtoD);
  GPUVM_SUITE_RT(report, cudaMemcpy(d[0], p.image.data(), bytes, cudaMemcpyHostToDevice));

  report.Enter(Phase::kLaunch);
  const dim3 grid(Blocks(p.cols, 16), Blocks(p.rows, 16)), block(16, 16);
  for (int it = 0; it < p.iterations; ++it) {
    srad_coeff<<<grid, block>>>(d[0], d[1], d[2], d[3], d[4], d[5], p.rows, p.cols, p.q0sqr);
    GPUVM_SUITE_RT_LAUNCHED(report);
    srad_update<<<grid, block>>>(d[0], d[1], d[2], d[3], d[4], d[5], p.rows, p.cols, p.lambda);
    GPUVM_SUITE_RT_LAUNCHED(report);
  }
  GPUVM_SUITE_RT(report, cudaDeviceSynchronize());

  report.Enter(Phase::kDtoH);
  p.SizeOutputs(out);
  GPUVM_SUITE_RT(report, cudaMemcpy(out->j.data(), d[0], bytes, cudaMemcpyDeviceToHost));
  GPUVM_SUITE_RT(report, cudaMemcpy(out->c.data(), d[1], bytes, cudaMemcpyDeviceToHost));

  CloseDevice(report, {d[0], d[1], d[2], d[3], d[4], d[5]});
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  return ProgramMain<SradProblem>(
      argc, argv, GPUVM_SUITE_NAME, "runtime",
      [](Size size) { return MakeSrad(size, kRandomInputs); }, Run);
}
