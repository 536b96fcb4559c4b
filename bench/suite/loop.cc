// loop: a long compute loop with almost no data — 1024 threads iterate an integer recurrence
// (bench/kernels/loop.cu); their 4 KB of results go to the GPU and back, as in GPUvm's loop.
#include <vector>

#include "bench/suite/driver.h"
#include "bench/suite/problems.h"

namespace gpuvm::suite {
namespace {

void Run(const LoopProblem& p, Report& report, std::vector<uint32_t>* out) {
  const size_t bytes = p.initial.size() * sizeof(uint32_t);
  report.Enter(Phase::kInit);
  CUcontext context;
  std::string failed_call;
  if (const CUresult r = OpenContext(&context, &failed_call); r != CUDA_SUCCESS) {
    report.Fail(CuError(r, failed_call.c_str()));
    return;
  }
  CUmodule module;
  GPUVM_SUITE_CU(report, LoadCorpusModule(&module, "loop.ptx"));
  CUfunction loop;
  GPUVM_SUITE_CU(report, cuModuleGetFunction(&loop, module, "loop"));
  CUdeviceptr d_out;
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_out, bytes));

  report.Enter(Phase::kHtoD);
  GPUVM_SUITE_CU(report, cuMemcpyHtoD(d_out, p.initial.data(), bytes));

  report.Enter(Phase::kLaunch);
  int iterations = p.iterations;
  void* args[] = {&d_out, &iterations};
  GPUVM_SUITE_CU(report, cuLaunchKernel(loop, Blocks(p.threads, 256), 1, 1, 256, 1, 1, 0, nullptr,
                                        args, nullptr));
  GPUVM_SUITE_CU(report, cuCtxSynchronize());

  report.Enter(Phase::kDtoH);
  out->resize(p.initial.size());
  GPUVM_SUITE_CU(report, cuMemcpyDtoH(out->data(), d_out, bytes));

  report.Enter(Phase::kClose);
  GPUVM_SUITE_CU(report, cuMemFree(d_out));
  GPUVM_SUITE_CU(report, cuModuleUnload(module));
  GPUVM_SUITE_CU(report, cuCtxDestroy(context));
  report.End();
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  const Size size = ParseCommandLine(argc, argv, "loop");
  const LoopProblem problem = MakeLoop(size);
  Report report("loop", "driver", size, problem.Describe());
  std::vector<uint32_t> out;
  Run(problem, report, &out);
  if (!report.failed()) report.Verify(problem.Check(out));
  return report.Finish();
}
