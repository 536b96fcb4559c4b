// gpuvm-fairness-guest: the workload of the fairness experiment inside a VM. Loops "launch madd,
// wait for it" for a number of seconds and prints how many kernels it ran:
//
//   gpuvm-fairness-guest madd|long-madd SECONDS [N]
//
// madd adds two N x N int matrices (N = 256 by default, one thread per element, GPUvm's madd);
// long-madd adds matrices with 15x the elements (N' = N x sqrt(15)), the paper's "15 times the
// work". Each launch is one submission (one IB_PUT) the aggregator's dispatcher schedules.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/suite/driver.h"
#include "bench/suite/problems.h"

namespace {

#define CHECK_CU(call)                                        \
  do {                                                        \
    const CUresult r_ = (call);                               \
    if (r_ != CUDA_SUCCESS) {                                 \
      std::fprintf(stderr, "gpuvm-fairness-guest: %s\n",      \
                   gpuvm::suite::CuError(r_, #call).c_str()); \
      return 1;                                               \
    }                                                         \
  } while (0)

int Run(bool long_madd, double seconds, int n) {
  if (long_madd) n = static_cast<int>(std::lround(n * std::sqrt(15.0)));
  const size_t bytes = size_t(n) * size_t(n) * sizeof(int);
  CUcontext context;
  std::string failed;
  if (const CUresult r = gpuvm::suite::OpenContext(&context, &failed); r != CUDA_SUCCESS) {
    std::fprintf(stderr, "gpuvm-fairness-guest: %s\n",
                 gpuvm::suite::CuError(r, failed.c_str()).c_str());
    return 1;
  }
  CUmodule module;
  CHECK_CU(gpuvm::suite::LoadCorpusModule(&module, "madd.ptx"));
  CUfunction function;
  CHECK_CU(cuModuleGetFunction(&function, module, "madd"));
  CUdeviceptr a, b, c;
  CHECK_CU(cuMemAlloc(&a, bytes));
  CHECK_CU(cuMemAlloc(&b, bytes));
  CHECK_CU(cuMemAlloc(&c, bytes));
  std::vector<int> host(size_t(n) * size_t(n), 1);
  CHECK_CU(cuMemcpyHtoD(a, host.data(), bytes));
  CHECK_CU(cuMemcpyHtoD(b, host.data(), bytes));
  void* args[] = {&a, &b, &c, &n};
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  uint64_t launches = 0;
  while (std::chrono::steady_clock::now() < end) {
    CHECK_CU(cuLaunchKernel(function, gpuvm::suite::Blocks(n, 16), gpuvm::suite::Blocks(n, 16), 1,
                            16, 16, 1, 0, nullptr, args, nullptr));
    CHECK_CU(cuCtxSynchronize());
    ++launches;
  }
  CHECK_CU(cuMemcpyDtoH(host.data(), c, bytes));
  const bool correct = host.front() == 2 && host.back() == 2;
  std::printf("%s n=%d launches=%llu %s\n", long_madd ? "long-madd" : "madd", n,
              static_cast<unsigned long long>(launches), correct ? "PASSED" : "FAILED");
  cuCtxDestroy(context);
  return correct ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if ((what != "madd" && what != "long-madd") || argc < 3) {
    std::fprintf(stderr, "usage: gpuvm-fairness-guest madd|long-madd SECONDS [N]\n");
    return 2;
  }
  const double seconds = std::atof(argv[2]);
  const int n = argc > 3 ? std::atoi(argv[3]) : 256;
  if (seconds <= 0 || seconds > 3600 || n < 16 || n > 4096) return 2;
  return Run(what == "long-madd", seconds, n);
}
