// What the runtime-API programs of the suite (bench/suite/rt/*.cu, built by stock nvcc with
// -cudart shared) share: CUDA runtime error reporting into a Report, and bringing the device up in
// the init phase. They are the driver-API programs' twins (same problems, same checks, same
// phases); the kernels are the corpus's own sources (bench/kernels/*.cu), compiled by nvcc into the
// program's fat binary, which gpuvm's libcudart.so.13 JIT-compiles from the embedded PTX.
//
// The runtime loads a fat binary on its first use (CUDA's lazy loading), so init asks for every
// kernel's attributes: the JIT then happens in init, as cuModuleLoad does in the driver-API
// programs, and not in the first launch.
//
// Plain C++17 plus the CUDA runtime header (nvcc compiles this).
//
// Threading: the program's main thread.
#ifndef GPUVM_BENCH_SUITE_RT_RT_H_
#define GPUVM_BENCH_SUITE_RT_RT_H_

#include <cuda_runtime.h>

#include <initializer_list>
#include <string>

#include "bench/suite/report.h"

namespace gpuvm::suite {

// "<call>: <cudaError name> (<code>): <description>".
inline std::string RtError(cudaError_t error, const char* call) {
  return std::string(call) + ": " + cudaGetErrorName(error) + " (" +
         std::to_string(static_cast<int>(error)) + "): " + cudaGetErrorString(error);
}

// Records the failure of `call` in `report` and returns from the enclosing void function.
#define GPUVM_SUITE_RT(report, call) \
  GPUVM_SUITE_CHECK(report, (call), #call, cudaSuccess, ::gpuvm::suite::RtError)

// A kernel launch (<<<...>>>) reports configuration errors through cudaGetLastError.
#define GPUVM_SUITE_RT_LAUNCHED(report) GPUVM_SUITE_RT(report, cudaGetLastError())

// Device 0, its primary context created now (cudaFree(nullptr) is the customary way).
#define GPUVM_SUITE_RT_OPEN(report)            \
  do {                                         \
    GPUVM_SUITE_RT(report, cudaSetDevice(0));  \
    GPUVM_SUITE_RT(report, cudaFree(nullptr)); \
  } while (0)

// Loads the module of `kernel` now (see above).
#define GPUVM_SUITE_RT_LOAD(report, kernel)                                    \
  do {                                                                         \
    cudaFuncAttributes suite_attributes_;                                      \
    GPUVM_SUITE_RT(report, cudaFuncGetAttributes(&suite_attributes_, kernel)); \
  } while (0)

namespace internal {
// The init phase: device 0 and its primary context, then `kernel`'s module. Records the first
// failure; the caller stops when `*ok` is false.
template <typename Kernel>
void OpenDevice(Report& report, Kernel* kernel, bool* ok) {
  report.Enter(Phase::kInit);
  GPUVM_SUITE_RT_OPEN(report);
  GPUVM_SUITE_RT_LOAD(report, kernel);
  *ok = true;
}
}  // namespace internal

// Enters Phase::kInit, brings device 0 up and loads the module of `kernel` (GPUVM_SUITE_RT_OPEN,
// GPUVM_SUITE_RT_LOAD). False, with the failure recorded in `report`, when a call fails.
template <typename Kernel>
bool OpenDevice(Report& report, Kernel* kernel) {
  bool ok = false;
  internal::OpenDevice(report, kernel, &ok);
  return ok;
}

// The close phase: frees `buffers` in order and resets the device (the runtime's context
// destruction), then ends the phase.
inline void CloseDevice(Report& report, std::initializer_list<void*> buffers) {
  report.Enter(Phase::kClose);
  for (void* buffer : buffers) GPUVM_SUITE_RT(report, cudaFree(buffer));
  GPUVM_SUITE_RT(report, cudaDeviceReset());
  report.End();
}

}  // namespace gpuvm::suite

#endif  // GPUVM_BENCH_SUITE_RT_RT_H_
