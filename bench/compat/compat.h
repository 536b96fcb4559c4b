// What the compatibility corpus's runtime-API programs (bench/compat/*.cu, built by stock nvcc 13
// with -cudart shared) share: the error-checking macro CUDA's samples teach (every call checked,
// the failure named with its file and line), and the suite's report (bench/suite/report.h) so that
// gpuvm-bench runs them like the suite's programs. The programs are ours, written in the style of
// CUDA programs found in the wild; none is copied from anywhere.
//
// A failed check records the failure in the program's Report and returns from the enclosing void
// function; main() then prints the verdict and exits non-zero (Report::Finish).
//
// Plain C++17 plus the CUDA runtime header (nvcc compiles this).
//
// Threading: the program's main thread.
#ifndef GPUVM_BENCH_COMPAT_COMPAT_H_
#define GPUVM_BENCH_COMPAT_COMPAT_H_

#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "bench/suite/report.h"

namespace gpuvm::compat {

using suite::Phase;
using suite::Report;
using suite::Size;

// "<file>:<line>: <call> failed: <cudaError name> (<code>): <description>".
inline std::string CudaFailure(cudaError_t error, const char* call, const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line) + ": " + call +
         " failed: " + cudaGetErrorName(error) + " (" + std::to_string(static_cast<int>(error)) +
         "): " + cudaGetErrorString(error);
}

// The samples' checkCudaErrors, reporting into `report` instead of exiting.
#define CHECK_CUDA(report, call)                                                             \
  do {                                                                                       \
    const cudaError_t compat_error_ = (call);                                                \
    if (compat_error_ != cudaSuccess) {                                                      \
      (report).Fail(::gpuvm::compat::CudaFailure(compat_error_, #call, __FILE__, __LINE__)); \
      return;                                                                                \
    }                                                                                        \
  } while (0)

// After a <<<>>> launch: configuration errors come from cudaGetLastError.
#define CHECK_LAUNCH(report) CHECK_CUDA(report, cudaGetLastError())

// Records a wrong value (the first one) and returns from the enclosing void function.
#define CHECK_VALUE(report, ok, what) \
  do {                                \
    if (!(ok)) {                      \
      (report).Verify(what);          \
      return;                         \
    }                                 \
  } while (0)

// "x[i] = got, want want" for a wrong element.
inline std::string Mismatch(const char* name, long long i, long long got, long long want) {
  return std::string(name) + "[" + std::to_string(i) + "] = " + std::to_string(got) + ", want " +
         std::to_string(want);
}

// The program's main: parses `--size test|bench`, runs `run(size, report)` and prints the verdict
// (exit status 0 only when every check passed). `problem(size)` describes the scale in words.
template <typename Problem, typename Run>
int CompatMain(int argc, char** argv, const char* bench, Problem problem, Run run) {
  const Size size = suite::ParseCommandLine(argc, argv, bench);
  Report report(bench, "runtime", size, problem(size));
  run(size, report);
  return report.Finish();
}

}  // namespace gpuvm::compat

#endif  // GPUVM_BENCH_COMPAT_COMPAT_H_
