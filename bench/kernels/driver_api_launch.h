// Launching a kernel corpus case's launch through the CUDA driver API (what the runtime's corpus
// test and the pt benchmark's guest program do): the arguments packed into one parameter buffer
// (PackArgs) and passed with CU_LAUNCH_PARAM_BUFFER_POINTER, as nvcc's host code does.
//
// Header-only; its users link libcuda.so.1 (ours). Threading: as cuLaunchKernel.
#ifndef GPUVM_BENCH_KERNELS_DRIVER_API_LAUNCH_H_
#define GPUVM_BENCH_KERNELS_DRIVER_API_LAUNCH_H_

#include <cstdint>
#include <vector>

#include "bench/kernels/kernel_corpus.h"
#include "runtime/include/cuda.h"

namespace gpuvm::kernels {

// `launch` of `f` with the case's buffers at `buffers`, on the default stream.
inline CUresult LaunchWithDriverApi(CUfunction f, const Launch& launch,
                                    const std::vector<CUdeviceptr>& buffers) {
  std::vector<uint8_t> packed = PackArgs(launch, buffers);
  size_t size = packed.size();
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed.data(), CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &size, CU_LAUNCH_PARAM_END};
  return cuLaunchKernel(f, launch.grid[0], launch.grid[1], launch.grid[2], launch.block[0],
                        launch.block[1], launch.block[2], launch.dynamic_shared, nullptr, nullptr,
                        extra);
}

}  // namespace gpuvm::kernels

#endif  // GPUVM_BENCH_KERNELS_DRIVER_API_LAUNCH_H_
