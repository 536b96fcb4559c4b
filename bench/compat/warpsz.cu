// compat-warpsz: the warp size seen three ways — PTX's WARP_SZ constant in inline assembly, the
// warpSize built-in, and a warp-synchronous reduction with __shfl_down_sync whose lane count comes
// from warpSize. Each thread reports its lane and warp, and each warp its sum; the host checks them
// against the device's cudaDevAttrWarpSize.
#include <vector>

#include "bench/compat/compat.h"

namespace gpuvm::compat {
namespace {

__device__ unsigned PtxWarpSize() {
  unsigned w;
  asm("mov.u32 %0, WARP_SZ;" : "=r"(w));
  return w;
}

__global__ void warp_facts(const int* in, int* lane_warp, int* warp_sums, unsigned* sizes) {
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned ptx_warp = PtxWarpSize();
  const int lane = threadIdx.x % warpSize;
  const int warp = threadIdx.x / ptx_warp;
  lane_warp[tid] = (warp << 8) | lane;
  int v = in[tid];
  for (int offset = warpSize / 2; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  if (lane == 0) warp_sums[tid / warpSize] = v;
  if (tid == 0) {
    sizes[0] = ptx_warp;
    sizes[1] = warpSize;
  }
}

int Blocks(Size size) { return size == Size::kTest ? 4 : 4096; }
constexpr int kThreads = 256;

void Run(Size size, Report& report) {
  const int blocks = Blocks(size), n = blocks * kThreads;
  std::vector<int> in(n), lane_warp(n), sums(n / 32);
  unsigned sizes[2] = {0, 0};
  for (int i = 0; i < n; ++i) in[i] = (i * 37) % 101 - 50;

  report.Enter(Phase::kInit);
  CHECK_CUDA(report, cudaSetDevice(0));
  int warp = 0;
  CHECK_CUDA(report, cudaDeviceGetAttribute(&warp, cudaDevAttrWarpSize, 0));
  CHECK_VALUE(report, warp == 32, "cudaDevAttrWarpSize is " + std::to_string(warp));
  int *d_in, *d_lane_warp, *d_sums;
  unsigned* d_sizes;
  CHECK_CUDA(report, cudaMalloc(&d_in, n * sizeof(int)));
  CHECK_CUDA(report, cudaMalloc(&d_lane_warp, n * sizeof(int)));
  CHECK_CUDA(report, cudaMalloc(&d_sums, n / 32 * sizeof(int)));
  CHECK_CUDA(report, cudaMalloc(&d_sizes, sizeof sizes));
  report.Enter(Phase::kHtoD);
  CHECK_CUDA(report, cudaMemcpy(d_in, in.data(), n * sizeof(int), cudaMemcpyHostToDevice));
  report.Enter(Phase::kLaunch);
  warp_facts<<<blocks, kThreads>>>(d_in, d_lane_warp, d_sums, d_sizes);
  CHECK_LAUNCH(report);
  CHECK_CUDA(report, cudaDeviceSynchronize());
  report.Enter(Phase::kDtoH);
  CHECK_CUDA(report,
             cudaMemcpy(lane_warp.data(), d_lane_warp, n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(report, cudaMemcpy(sums.data(), d_sums, n / 32 * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(report, cudaMemcpy(sizes, d_sizes, sizeof sizes, cudaMemcpyDeviceToHost));
  report.Enter(Phase::kClose);
  for (void* p : {(void*)d_in, (void*)d_lane_warp, (void*)d_sums, (void*)d_sizes}) {
    CHECK_CUDA(report, cudaFree(p));
  }
  CHECK_CUDA(report, cudaDeviceReset());
  report.End();

  CHECK_VALUE(report, sizes[0] == 32, "WARP_SZ is " + std::to_string(sizes[0]));
  CHECK_VALUE(report, sizes[1] == 32, "warpSize is " + std::to_string(sizes[1]));
  for (int i = 0; i < n; ++i) {
    const int t = i % kThreads, want = ((t / 32) << 8) | (t % 32);
    CHECK_VALUE(report, lane_warp[i] == want, Mismatch("lane_warp", i, lane_warp[i], want));
  }
  for (int w = 0; w < n / 32; ++w) {
    int want = 0;
    for (int i = w * 32; i < w * 32 + 32; ++i) want += in[i];
    CHECK_VALUE(report, sums[w] == want, Mismatch("warp_sum", w, sums[w], want));
  }
}

}  // namespace
}  // namespace gpuvm::compat

int main(int argc, char** argv) {
  using namespace gpuvm::compat;
  return CompatMain(
      argc, argv, "warpsz",
      [](Size size) { return std::to_string(Blocks(size)) + " blocks x 256 threads"; }, Run);
}
