// hs: Rodinia's hotspot in the kernel corpus's form (bench/kernels/hotspot.cu) — explicit time
// steps of a 2D thermal simulation, ping-ponging between two temperature grids.
#include <vector>

#include "bench/suite/driver.h"
#include "bench/suite/problems.h"

namespace gpuvm::suite {
namespace {

void Run(const HotspotProblem& p, Report& report, std::vector<float>* a, std::vector<float>* b) {
  const size_t bytes = p.temp.size() * sizeof(float);
  report.Enter(Phase::kInit);
  CUcontext context;
  std::string failed_call;
  if (const CUresult r = OpenContext(&context, &failed_call); r != CUDA_SUCCESS) {
    report.Fail(CuError(r, failed_call.c_str()));
    return;
  }
  CUmodule module;
  GPUVM_SUITE_CU(report, LoadCorpusModule(&module, "hotspot.ptx"));
  CUfunction hotspot;
  GPUVM_SUITE_CU(report, cuModuleGetFunction(&hotspot, module, "hotspot"));
  CUdeviceptr d_power, d_a, d_b;
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_power, bytes));
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_a, bytes));
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_b, bytes));

  report.Enter(Phase::kHtoD);
  GPUVM_SUITE_CU(report, cuMemcpyHtoD(d_power, p.power.data(), bytes));
  GPUVM_SUITE_CU(report, cuMemcpyHtoD(d_a, p.temp.data(), bytes));
  GPUVM_SUITE_CU(report, cuMemsetD32(d_b, 0, p.temp.size()));

  report.Enter(Phase::kLaunch);
  int rows = p.rows, cols = p.cols;
  // The 20-byte HotspotParams struct is passed by value (its PTX parameter is a .b8 array).
  float params[5];
  for (int i = 0; i < 5; ++i) params[i] = p.params[i];
  for (int s = 0; s < p.steps; ++s) {
    CUdeviceptr from = s % 2 == 0 ? d_a : d_b, to = s % 2 == 0 ? d_b : d_a;
    void* args[] = {&d_power, &from, &to, &rows, &cols, params};
    GPUVM_SUITE_CU(report, cuLaunchKernel(hotspot, Blocks(cols, 16), Blocks(rows, 16), 1, 16, 16, 1,
                                          0, nullptr, args, nullptr));
  }
  GPUVM_SUITE_CU(report, cuCtxSynchronize());

  report.Enter(Phase::kDtoH);
  a->resize(p.temp.size());
  b->resize(p.temp.size());
  GPUVM_SUITE_CU(report, cuMemcpyDtoH(a->data(), d_a, bytes));
  GPUVM_SUITE_CU(report, cuMemcpyDtoH(b->data(), d_b, bytes));

  report.Enter(Phase::kClose);
  GPUVM_SUITE_CU(report, cuMemFree(d_power));
  GPUVM_SUITE_CU(report, cuMemFree(d_a));
  GPUVM_SUITE_CU(report, cuMemFree(d_b));
  GPUVM_SUITE_CU(report, cuModuleUnload(module));
  GPUVM_SUITE_CU(report, cuCtxDestroy(context));
  report.End();
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  const Size size = ParseCommandLine(argc, argv, "hs");
  const HotspotProblem problem = MakeHotspot(size);
  Report report("hs", "driver", size, problem.Describe());
  std::vector<float> a, b;
  Run(problem, report, &a, &b);
  if (!report.failed()) report.Verify(problem.Check(a, b));
  return report.Finish();
}
