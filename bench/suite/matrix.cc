// madd, fmadd, mmul, fmmul: GPUvm's matrix benchmarks — n x n integer or float matrices, C = A + B
// or C = A * B, one thread per element of C in 16 x 16 blocks (bench/kernels/{madd,fmadd,mmul,
// fmmul}.cu). One source, four programs: GPUVM_SUITE_NAME (set by CMake) picks which.
#include <cstring>
#include <string_view>
#include <type_traits>
#include <vector>

#include "bench/suite/driver.h"
#include "bench/suite/problems.h"

#ifndef GPUVM_SUITE_NAME
#error "GPUVM_SUITE_NAME must name the benchmark (madd, fmadd, mmul or fmmul)"
#endif

namespace gpuvm::suite {
namespace {

constexpr std::string_view kName = GPUVM_SUITE_NAME;

template <typename T>
void Run(const MatrixProblem<T>& p, const char* kernel, Report& report, std::vector<T>* c) {
  const size_t bytes = p.a.size() * sizeof(T);
  std::string ptx_file = std::string(kernel) + ".ptx";
  report.Enter(Phase::kInit);
  CUcontext context;
  std::string failed_call;
  if (const CUresult r = OpenContext(&context, &failed_call); r != CUDA_SUCCESS) {
    report.Fail(CuError(r, failed_call.c_str()));
    return;
  }
  CUmodule module;
  GPUVM_SUITE_CU(report, LoadCorpusModule(&module, ptx_file.c_str()));
  CUfunction function;
  GPUVM_SUITE_CU(report, cuModuleGetFunction(&function, module, kernel));
  CUdeviceptr d_a, d_b, d_c;
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_a, bytes));
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_b, bytes));
  GPUVM_SUITE_CU(report, cuMemAlloc(&d_c, bytes));

  report.Enter(Phase::kHtoD);
  GPUVM_SUITE_CU(report, cuMemcpyHtoD(d_a, p.a.data(), bytes));
  GPUVM_SUITE_CU(report, cuMemcpyHtoD(d_b, p.b.data(), bytes));

  report.Enter(Phase::kLaunch);
  int n = p.n;
  void* args[] = {&d_a, &d_b, &d_c, &n};
  GPUVM_SUITE_CU(report, cuLaunchKernel(function, Blocks(n, 16), Blocks(n, 16), 1, 16, 16, 1, 0,
                                        nullptr, args, nullptr));
  GPUVM_SUITE_CU(report, cuCtxSynchronize());

  report.Enter(Phase::kDtoH);
  c->resize(p.a.size());
  GPUVM_SUITE_CU(report, cuMemcpyDtoH(c->data(), d_c, bytes));

  report.Enter(Phase::kClose);
  GPUVM_SUITE_CU(report, cuMemFree(d_a));
  GPUVM_SUITE_CU(report, cuMemFree(d_b));
  GPUVM_SUITE_CU(report, cuMemFree(d_c));
  GPUVM_SUITE_CU(report, cuModuleUnload(module));
  GPUVM_SUITE_CU(report, cuCtxDestroy(context));
  report.End();
}

template <typename T>
int Main(Size size, const MatrixProblem<T>& problem, const char* op) {
  const std::string name(kName);
  Report report(name, "driver", size, problem.Describe(op));
  std::vector<T> c;
  Run(problem, name.c_str(), report, &c);
  if (!report.failed()) report.Verify(problem.Check(c));
  return report.Finish();
}

}  // namespace
}  // namespace gpuvm::suite

int main(int argc, char** argv) {
  using namespace gpuvm::suite;
  const Size size = ParseCommandLine(argc, argv, GPUVM_SUITE_NAME);
  if (kName == "madd") return Main(size, MakeMadd(size), "add");
  if (kName == "fmadd") return Main(size, MakeFmadd(size), "add");
  if (kName == "mmul") return Main(size, MakeMmul(size), "multiply");
  if (kName == "fmmul") return Main(size, MakeFmmul(size), "multiply");
  return 2;
}
