// srad and srad2: speckle-reducing anisotropic diffusion (bench/kernels/srad.cu), iterations of a
// coefficient launch and an update launch. srad runs on a structured image (a phantom under
// speckle), srad2 on random inputs — GPUvm's "srad" and "srad2". GPUVM_SUITE_NAME picks which.
#include <string_view>
#include <vector>

#include "bench/suite/driver.h"
#include "bench/suite/problems.h"

#ifndef GPUVM_SUITE_NAME
#error "GPUVM_SUITE_NAME must name the benchmark (srad or srad2)"
#endif

namespace gpuvm::suite {
namespace {

constexpr std::string_view kName = GPUVM_SUITE_NAME;

void Run(const SradProblem& p, Report& report, std::vector<float>* j, std::vector<float>* c) {
  const size_t bytes = p.image.size() * sizeof(float);
  report.Enter(Phase::kInit);
  CUcontext context;
  std::string failed_call;
  if (const CUresult r = OpenContext(&context, &failed_call); r != CUDA_SUCCESS) {
    report.Fail(CuError(r, failed_call.c_str()));
    return;
  }
  CUmodule module;
  GPUVM_SUITE_CU(report, LoadCorpusModule(&module, "srad.ptx"));
  CUfunction coeff, update;
  GPUVM_SUITE_CU(report, cuModuleGetFunction(&coeff, module, "srad_coeff"));
  GPUVM_SUITE_CU(report, cuModuleGetFunction(&update, module, "srad_update"));
  // The image, the coefficient and the four directional derivatives.
  CUdeviceptr d[6];
  for (CUdeviceptr& buffer : d) GPUVM_SUITE_CU(report, cuMemAlloc(&buffer, bytes));

  report.Enter(Phase::kHtoD);
  GPUVM_SUITE_CU(report, cuMemcpyHtoD(d[0], p.image.data(), bytes));

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
  j->resize(p.image.size());
  c->resize(p.image.size());
  GPUVM_SUITE_CU(report, cuMemcpyDtoH(j->data(), d[0], bytes));
  GPUVM_SUITE_CU(report, cuMemcpyDtoH(c->data(), d[1], bytes));

  report.Enter(Phase::kClose);
  for (CUdeviceptr buffer : d) GPUVM_SUITE_CU(report, cuMemFree(buffer));
  GPUVM_SUITE_CU(report, cuModuleUnload(module));
  GPUVM_SUITE_CU(report, cuCtxDestroy(context));
  report.End();
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  const Size size = ParseCommandLine(argc, argv, GPUVM_SUITE_NAME);
  const SradProblem problem = MakeSrad(size, kName == "srad2");
  Report report(std::string(kName), "driver", size, problem.Describe());
  std::vector<float> j, c;
  Run(problem, report, &j, &c);
  if (!report.failed()) report.Verify(problem.Check(j, c));
  return report.Finish();
}
