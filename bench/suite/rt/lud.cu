// lud, runtime-API build (stock nvcc): the twin of ../lud.cc — LU decomposition in the kernel
// corpus's form, 2 (n - 1) small launches.
#include "bench/kernels/lud.cu"
#include "bench/suite/problems.h"
#include "bench/suite/rt/rt.h"

namespace gpuvm::suite {
namespace {

void Run(const LudProblem& p, Report& report, LudProblem::Outputs* out) {
  const size_t bytes = p.a.size() * sizeof(float);
  if (!OpenDevice(report, lud_column)) return;
  float* d_a;
  GPUVM_SUITE_RT(report, cudaMalloc(&d_a, bytes));

  report.Enter(Phase::kHtoD);
  GPUVM_SUITE_RT(report, cudaMemcpy(d_a, p.a.data(), bytes, cudaMemcpyHostToDevice));

  report.Enter(Phase::kLaunch);
  for (int k = 0; k + 1 < p.n; ++k) {
    const int rest = p.n - k - 1;
    lud_column<<<Blocks(rest, 64), 64>>>(d_a, p.n, k);
    GPUVM_SUITE_RT_LAUNCHED(report);
    lud_update<<<dim3(Blocks(rest, 16), Blocks(rest, 16)), dim3(16, 16)>>>(d_a, p.n, k);
    GPUVM_SUITE_RT_LAUNCHED(report);
  }
  GPUVM_SUITE_RT(report, cudaDeviceSynchronize());

  report.Enter(Phase::kDtoH);
  out->resize(p.a.size());
  GPUVM_SUITE_RT(report, cudaMemcpy(out->data(), d_a, bytes, cudaMemcpyDeviceToHost));

  CloseDevice(report, {d_a});
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  return ProgramMain<LudProblem>(argc, argv, "lud", "runtime", MakeLud, Run);
}
