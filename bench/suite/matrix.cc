// madd, fmadd, mmul, fmmul: GPUvm's matrix benchmarks — n x n integer or float matrices, C = A + B
// or C = A * B, one thread per element of C in 16 x 16 blocks (bench/kernels/{madd,fmadd,mmul,
// fmmul}.cu). One source, four programs: GPUVM_SUITE_NAME (set by CMake) picks which.
#include <string>
#include <string_view>

#include "bench/suite/driver.h"
#include "bench/suite/problems.h"

#ifndef GPUVM_SUITE_NAME
#error "GPUVM_SUITE_NAME must name the benchmark (madd, fmadd, mmul or fmmul)"
#endif

namespace gpuvm::suite {
namespace {

constexpr std::string_view kName = GPUVM_SUITE_NAME;

// The kernel is the benchmark's namesake in the corpus (madd.ptx's madd, ...).
template <typename T>
void Run(const MatrixProblem<T>& p, Report& report, std::vector<T>* c) {
  const size_t bytes = p.a.size() * sizeof(T);
  const std::string kernel(kName);
  Session session(report);
  CUfunction function;
  if (!session.Open((kernel + ".ptx").c_str(), {{kernel.c_str(), &function}})) return;
  CUdeviceptr d_a, d_b, d_c;
  if (!session.Alloc({{&d_a, bytes}, {&d_b, bytes}, {&d_c, bytes}})) return;

  report.Enter(Phase::kHtoD);
  if (!session.CopyIn({{d_a, p.a.data(), bytes}, {d_b, p.b.data(), bytes}})) return;

  report.Enter(Phase::kLaunch);
  int n = p.n;
  void* args[] = {&d_a, &d_b, &d_c, &n};
  GPUVM_SUITE_CU(report, cuLaunchKernel(function, Blocks(n, 16), Blocks(n, 16), 1, 16, 16, 1, 0,
                                        nullptr, args, nullptr));
  GPUVM_SUITE_CU(report, cuCtxSynchronize());

  report.Enter(Phase::kDtoH);
  c->resize(p.a.size());
  session.CopyOut({{c->data(), d_c, bytes}});
}

template <typename T>
int Main(int argc, char** argv, MatrixProblem<T> (*make)(Size)) {
  return ProgramMain<MatrixProblem<T>>(argc, argv, std::string(kName), "driver", make, Run<T>);
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  if (kName == "madd") return Main(argc, argv, MakeMadd);
  if (kName == "fmadd") return Main(argc, argv, MakeFmadd);
  if (kName == "mmul") return Main(argc, argv, MakeMmul);
  if (kName == "fmmul") return Main(argc, argv, MakeFmmul);
  return 2;
}
