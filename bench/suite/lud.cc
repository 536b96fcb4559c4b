// lud: Rodinia's LU decomposition in the kernel corpus's form (bench/kernels/lud.cu) — for each
// pivot, a column scaling launch and a trailing-matrix update launch: 2 (n - 1) small launches, the
// suite's launch-heavy benchmark.
#include <vector>

#include "bench/suite/driver.h"
#include "bench/suite/problems.h"

namespace gpuvm::suite {
namespace {

void Run(const LudProblem& p, Report& report, std::vector<float>* out) {
  const size_t bytes = p.a.size() * sizeof(float);
  report.Enter(Phase::kInit);
  CUcontext context;
  std::string failed_call;
  if (const CUresult r = OpenContext(&context, &failed_call); r != CUDA_SUCCESS) {
    report.Fail(CuError(r, failed_call.c_str()));
    return;
  }
  CUmodule module;
  GPUVM_SUITE_CU(report, LoadCorpusModule(&module, "lud.ptx"));
  CUfunction column, update;
  GPUVM_SUITE_CU(report, cuModuleGetFunction(&column, module, "lud_column"));
  GPUVM_SUITE_CU(report, cuModuleGetFunction(&update, module, "lud_update"));
  CUdeviceptr d_a;
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_a, bytes));

  report.Enter(Phase::kHtoD);
  GPUVM_SUITE_CU(report, cuMemcpyHtoD(d_a, p.a.data(), bytes));

  report.Enter(Phase::kLaunch);
  int n = p.n;
  for (int k = 0; k + 1 < n; ++k) {
    const int rest = n - k - 1;
    void* args[] = {&d_a, &n, &k};
    GPUVM_SUITE_CU(report, cuLaunchKernel(column, Blocks(rest, 64), 1, 1, 64, 1, 1, 0, nullptr,
                                          args, nullptr));
    GPUVM_SUITE_CU(report, cuLaunchKernel(update, Blocks(rest, 16), Blocks(rest, 16), 1, 16, 16, 1,
                                          0, nullptr, args, nullptr));
  }
  GPUVM_SUITE_CU(report, cuCtxSynchronize());

  report.Enter(Phase::kDtoH);
  out->resize(p.a.size());
  GPUVM_SUITE_CU(report, cuMemcpyDtoH(out->data(), d_a, bytes));

  report.Enter(Phase::kClose);
  GPUVM_SUITE_CU(report, cuMemFree(d_a));
  GPUVM_SUITE_CU(report, cuModuleUnload(module));
  GPUVM_SUITE_CU(report, cuCtxDestroy(context));
  report.End();
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  const Size size = ParseCommandLine(argc, argv, "lud");
  const LudProblem problem = MakeLud(size);
  Report report("lud", "driver", size, problem.Describe());
  std::vector<float> out;
  Run(problem, report, &out);
  if (!report.failed()) report.Verify(problem.Check(out));
  return report.Finish();
}
