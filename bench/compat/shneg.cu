// compat-shneg: shared-memory addressing that nvcc -O3 forms "below" its base. Each thread reads
// the 16-int row before its own, `sh[tid*16 - 16 + k]`: unrolled, nvcc keeps one 32-bit register
// per thread (the row's address) and puts the -16 into the accesses' immediates,
// `ld.shared.u32 [%r+-64]` ... `[%r+-4]`, so register + immediate must wrap at 2^32. With a
// run-time offset instead (`sh[tid*16 - off + k]`) it forms the base with `sub.s32` and reads
// `[%r+imm]`. shneg_ptx_check.sh proves the PTX really has both shapes. Rows of 16 ints per thread,
// blocks of 64 threads; thread 0 has no row before it and reads its own.
#include <vector>

#include "bench/compat/compat.h"

namespace gpuvm::compat {
namespace {

constexpr int kRow = 16, kThreads = 64;

// Each thread's row of the block's part of `in` into shared memory; returns the thread's index.
__device__ int LoadRows(const int* in, int* sh) {
  const int tid = threadIdx.x;
  const int* block_in = in + blockIdx.x * kThreads * kRow;
  for (int k = 0; k < kRow; ++k) sh[tid * kRow + k] = block_in[tid * kRow + k];
  __syncthreads();
  return tid;
}

__global__ void row_before(const int* in, int* out) {
  __shared__ int sh[kThreads * kRow];
  const int tid = LoadRows(in, sh);
  int acc = 0;
  if (tid > 0) {
#pragma unroll
    for (int k = 0; k < kRow; ++k) acc += sh[tid * 16 - 16 + k] * (k + 1);
  } else {
#pragma unroll
    for (int k = 0; k < kRow; ++k) acc += sh[k] * (k + 1);
  }
  out[blockIdx.x * kThreads + tid] = acc;
}

__global__ void row_at_offset(const int* in, int* out, int off) {
  __shared__ int sh[kThreads * kRow];
  const int tid = LoadRows(in, sh);
  int acc = 0;
  if (tid * 16 >= off) {
#pragma unroll
    for (int k = 0; k < kRow; ++k) acc += sh[tid * 16 - off + k] ^ (k * 3);
  }
  out[blockIdx.x * kThreads + tid] = acc;
}

int Blocks(Size size) { return size == Size::kTest ? 8 : 2048; }

void Run(Size size, Report& report) {
  const int blocks = Blocks(size);
  const int n = blocks * kThreads;
  std::vector<int> in(size_t(n) * kRow), out1(n), out2(n);
  for (size_t i = 0; i < in.size(); ++i) in[i] = int((i * 2654435761u) >> 20) - 2048;
  const int off = 32;  // two rows back, a kernel argument: nvcc cannot fold it into immediates

  report.Enter(Phase::kInit);
  CHECK_CUDA(report, cudaSetDevice(0));
  int *d_in = nullptr, *d_out1 = nullptr, *d_out2 = nullptr;
  CHECK_CUDA(report, cudaMalloc(&d_in, in.size() * sizeof(int)));
  CHECK_CUDA(report, cudaMalloc(&d_out1, n * sizeof(int)));
  CHECK_CUDA(report, cudaMalloc(&d_out2, n * sizeof(int)));
  report.Enter(Phase::kHtoD);
  CHECK_CUDA(report, cudaMemcpy(d_in, in.data(), in.size() * sizeof(int), cudaMemcpyHostToDevice));
  report.Enter(Phase::kLaunch);
  row_before<<<blocks, kThreads>>>(d_in, d_out1);
  CHECK_LAUNCH(report);
  row_at_offset<<<blocks, kThreads>>>(d_in, d_out2, off);
  CHECK_LAUNCH(report);
  CHECK_CUDA(report, cudaDeviceSynchronize());
  report.Enter(Phase::kDtoH);
  CHECK_CUDA(report, cudaMemcpy(out1.data(), d_out1, n * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK_CUDA(report, cudaMemcpy(out2.data(), d_out2, n * sizeof(int), cudaMemcpyDeviceToHost));
  report.Enter(Phase::kClose);
  CHECK_CUDA(report, cudaFree(d_in));
  CHECK_CUDA(report, cudaFree(d_out1));
  CHECK_CUDA(report, cudaFree(d_out2));
  CHECK_CUDA(report, cudaDeviceReset());
  report.End();

  for (int b = 0; b < blocks; ++b) {
    const int* sh = &in[size_t(b) * kThreads * kRow];
    for (int t = 0; t < kThreads; ++t) {
      int want1 = 0, want2 = 0;
      for (int k = 0; k < kRow; ++k) want1 += sh[(t > 0 ? t * 16 - 16 : 0) + k] * (k + 1);
      if (t * 16 >= off) {
        for (int k = 0; k < kRow; ++k) want2 += sh[t * 16 - off + k] ^ (k * 3);
      }
      const int i = b * kThreads + t;
      CHECK_VALUE(report, out1[i] == want1, Mismatch("row_before", i, out1[i], want1));
      CHECK_VALUE(report, out2[i] == want2, Mismatch("row_at_offset", i, out2[i], want2));
    }
  }
}

}  // namespace
}  // namespace gpuvm::compat

int main(int argc, char** argv) {
  using namespace gpuvm::compat;
  return CompatMain(
      argc, argv, "shneg",
      [](Size size) {
        return std::to_string(Blocks(size)) + " blocks x 64 threads, rows of 16 ints in shared";
      },
      Run);
}
