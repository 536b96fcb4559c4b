// lud: Rodinia's LU decomposition in the kernel corpus's form (bench/kernels/lud.cu) — for each
// pivot, a column scaling launch and a trailing-matrix update launch: 2 (n - 1) small launches, the
// suite's launch-heavy benchmark.
#include "bench/suite/driver.h"
#include "bench/suite/problems.h"

namespace gpuvm::suite {
namespace {

void Run(const LudProblem& p, Report& report, LudProblem::Outputs* out) {
  const size_t bytes = p.a.size() * sizeof(float);
  Session session(report);
  CUfunction column, update;
  if (!session.Open("lud.ptx", {{"lud_column", &column}, {"lud_update", &update}})) return;
  CUdeviceptr d_a;
  if (!session.Alloc({{&d_a, bytes}})) return;

  report.Enter(Phase::kHtoD);
  if (!session.CopyIn({{d_a, p.a.data(), bytes}})) return;

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
  session.CopyOut({{out->data(), d_a, bytes}});
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  return ProgramMain<LudProblem>(argc, argv, "lud", "driver", MakeLud, Run);
}
