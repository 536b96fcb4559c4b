// loop: a long compute loop with almost no data — 1024 threads iterate an integer recurrence
// (bench/kernels/loop.cu); their 4 KB of results go to the GPU and back, as in GPUvm's loop.
#include "bench/suite/driver.h"
#include "bench/suite/problems.h"

namespace gpuvm::suite {
namespace {

void Run(const LoopProblem& p, Report& report, LoopProblem::Outputs* out) {
  const size_t bytes = p.initial.size() * sizeof(uint32_t);
  Session session(report);
  CUfunction loop;
  if (!session.Open("loop.ptx", {{"loop", &loop}})) return;
  CUdeviceptr d_out;
  if (!session.Alloc({{&d_out, bytes}})) return;

  report.Enter(Phase::kHtoD);
  if (!session.CopyIn({{d_out, p.initial.data(), bytes}})) return;

  report.Enter(Phase::kLaunch);
  int iterations = p.iterations;
  void* args[] = {&d_out, &iterations};
  GPUVM_SUITE_CU(report, cuLaunchKernel(loop, Blocks(p.threads, 256), 1, 1, 256, 1, 1, 0, nullptr,
                                        args, nullptr));
  GPUVM_SUITE_CU(report, cuCtxSynchronize());

  report.Enter(Phase::kDtoH);
  out->resize(p.initial.size());
  session.CopyOut({{out->data(), d_out, bytes}});
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  return ProgramMain<LoopProblem>(argc, argv, "loop", "driver", MakeLoop, Run);
}
