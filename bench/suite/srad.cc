// srad and srad2: speckle-reducing anisotropic diffusion (bench/kernels/srad.cu), iterations of a
// coefficient launch and an update launch. srad runs on a structured image (a phantom under
// speckle), srad2 on random inputs — GPUvm's "srad" and "srad2". GPUVM_SUITE_NAME picks which.
#include <string>
#include <string_view>

#include "bench/suite/driver.h"
#include "bench/suite/problems.h"

#ifndef GPUVM_SUITE_NAME
#error "GPUVM_SUITE_NAME must name the benchmark (srad or srad2)"
#endif

namespace gpuvm::suite {
namespace {

constexpr std::string_view kName = GPUVM_SUITE_NAME;

void Run(const SradProblem& p, Report& report, SradProblem::Outputs* out) {
  const size_t bytes = p.image.size() * sizeof(float);
  Session session(report);
  CUfunction coeff, update;
  if (!session.Open("srad.ptx", {{"srad_coeff", &coeff}, {"srad_update", &update}})) return;
  // The image, the coefficient and the four directional derivatives.
  CUdeviceptr d[6];
  for (CUdeviceptr& buffer : d) {
    if (!session.Alloc({{&buffer, bytes}})) return;
  }

  report.Enter(Phase::kHtoD);
  if (!session.CopyIn({{d[0], p.image.data(), bytes}})) return;

  report.Enter(Phase::kLaunch);
  int rows = p.rows, cols = p.cols;
  float q0sqr = p.q0sqr, lambda = p.lambda;
  void* coeff_args[] = {&d[0], &d[1], &d[2], &d[3], &d[4], &d[5], &rows, &cols, &q0sqr};
  void* update_args[] = {&d[0], &d[1], &d[2], &d[3], &d[4], &d[5], &rows, &cols, &lambda};
  for (int it = 0; it < p.iterations; ++it) {
    GPUVM_SUITE_CU(report, cuLaunchKernel(coeff, Blocks(cols, 16), Blocks(rows, 16), 1, 16, 16, 1,
                                          0, nullptr, coeff_args, nullptr));
    GPUVM_SUITE_CU(report, cuLaunchKernel(update, Blocks(cols, 16), Blocks(rows, 16), 1, 16, 16, 1,
                                          0, nullptr, update_args, nullptr));
  }
  GPUVM_SUITE_CU(report, cuCtxSynchronize());

  report.Enter(Phase::kDtoH);
  p.SizeOutputs(out);
  session.CopyOut({{out->j.data(), d[0], bytes}, {out->c.data(), d[1], bytes}});
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  return ProgramMain<SradProblem>(
      argc, argv, std::string(kName), "driver",
      [](Size size) { return MakeSrad(size, kName == "srad2"); }, Run);
}
