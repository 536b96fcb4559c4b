// compat-pools: stream-ordered allocation as CUDA 11.2+ programs use it — cudaMallocAsync and
// cudaFreeAsync around each step's kernels on a stream with no synchronization inside the loop;
// the default pool told to keep its memory (cudaMemPoolAttrReleaseThreshold, the usual idiom for
// speed); the pool's used and reserved sizes read back; a pool of the program's own
// (cudaMemPoolCreate, cudaMallocFromPoolAsync) on a second stream; cudaFree of a stream-ordered
// allocation. Each step writes its own results into pinned memory; the host checks every element
// of every step at the end.
#include <cstdint>
#include <string>
#include <vector>

#include "bench/compat/compat.h"

namespace gpuvm::compat {
namespace {

__global__ void combine(int n, int step, const int* a, const int* b, int* out) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    out[i] = a[i] * step + b[i];
  }
}

__global__ void iota(int n, int base, int* a) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    a[i] = base + i;
  }
}

struct Scale {
  int n, steps;
};
Scale ScaleOf(Size size) { return size == Size::kTest ? Scale{1 << 12, 16} : Scale{1 << 18, 200}; }

void Run(Size size, Report& report) {
  const Scale s = ScaleOf(size);
  const int n = s.n;
  const size_t bytes = size_t(n) * sizeof(int);
  const int blocks = 32, threads = 128;

  report.Enter(Phase::kInit);
  int supported = 0;
  CHECK_CUDA(report, cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, 0));
  CHECK_VALUE(report, supported == 1, "cudaDevAttrMemoryPoolsSupported is 0");
  cudaMemPool_t pool;
  CHECK_CUDA(report, cudaDeviceGetDefaultMemPool(&pool, 0));
  uint64_t threshold = UINT64_MAX;
  CHECK_CUDA(report, cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
  cudaStream_t stream;
  CHECK_CUDA(report, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int* results;
  CHECK_CUDA(report, cudaMallocHost(&results, bytes * s.steps));
  std::vector<int> b_host(n);
  for (int i = 0; i < n; ++i) b_host[i] = (i * 31) % 1000;
  int* b_pinned;
  CHECK_CUDA(report, cudaMallocHost(&b_pinned, bytes));
  std::copy(b_host.begin(), b_host.end(), b_pinned);

  // Every step allocates its buffers, computes, copies out and frees, all on the stream.
  report.Enter(Phase::kLaunch);
  for (int step = 0; step < s.steps; ++step) {
    int *a, *b, *out;
    CHECK_CUDA(report, cudaMallocAsync(&a, bytes, stream));
    CHECK_CUDA(report, cudaMallocAsync(&b, bytes, stream));
    CHECK_CUDA(report, cudaMallocAsync(&out, bytes, stream));
    iota<<<blocks, threads, 0, stream>>>(n, step, a);
    CHECK_LAUNCH(report);
    CHECK_CUDA(report, cudaMemcpyAsync(b, b_pinned, bytes, cudaMemcpyHostToDevice, stream));
    combine<<<blocks, threads, 0, stream>>>(n, step, a, b, out);
    CHECK_LAUNCH(report);
    CHECK_CUDA(report, cudaMemcpyAsync(results + size_t(step) * n, out, bytes,
                                       cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(report, cudaFreeAsync(a, stream));
    CHECK_CUDA(report, cudaFreeAsync(b, stream));
    CHECK_CUDA(report, cudaFreeAsync(out, stream));
  }
  CHECK_CUDA(report, cudaStreamSynchronize(stream));

  report.Enter(Phase::kDtoH);
  for (int step = 0; step < s.steps; ++step) {
    for (int i = 0; i < n; ++i) {
      const int want = (step + i) * step + b_host[i];
      const int got = results[size_t(step) * n + i];
      CHECK_VALUE(report, got == want,
                  Mismatch(("step " + std::to_string(step) + " out").c_str(), i, got, want));
    }
  }
  uint64_t used = 1, used_high = 0, reserved = 0;
  CHECK_CUDA(report, cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
  CHECK_CUDA(report, cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &used_high));
  CHECK_CUDA(report, cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  CHECK_VALUE(report, used == 0, "the pool still has " + std::to_string(used) + " bytes in use");
  CHECK_VALUE(report, used_high >= 3 * bytes,
              "the pool's high-water mark is " + std::to_string(used_high) + " bytes");
  CHECK_VALUE(report, reserved >= 3 * bytes,
              "the pool kept " + std::to_string(reserved) + " bytes despite its threshold");
  // Each step's frees make room for the next step's allocations on the same stream.
  CHECK_VALUE(report, reserved <= 6 * bytes,
              "the pool grew to " + std::to_string(reserved) + " bytes: freed memory not reused");
  std::printf("default pool: %llu bytes kept, %llu at most in use, for %d steps of 3 x %zu\n",
              static_cast<unsigned long long>(reserved),
              static_cast<unsigned long long>(used_high), s.steps, bytes);

  // A pool of the program's own, on a second stream; and cudaFree of a stream-ordered pointer.
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t own;
  CHECK_CUDA(report, cudaMemPoolCreate(&own, &props));
  cudaStream_t other;
  CHECK_CUDA(report, cudaStreamCreate(&other));
  int* tmp;
  CHECK_CUDA(report, cudaMallocFromPoolAsync(reinterpret_cast<void**>(&tmp), bytes, own, other));
  iota<<<blocks, threads, 0, other>>>(n, 1000, tmp);
  CHECK_LAUNCH(report);
  CHECK_CUDA(report, cudaMemcpyAsync(results, tmp, bytes, cudaMemcpyDeviceToHost, other));
  CHECK_CUDA(report, cudaFreeAsync(tmp, other));
  CHECK_CUDA(report, cudaStreamSynchronize(other));
  for (int i = 0; i < n; ++i) {
    CHECK_VALUE(report, results[i] == 1000 + i, Mismatch("own pool", i, results[i], 1000 + i));
  }
  int* direct;
  CHECK_CUDA(report, cudaMallocAsync(&direct, bytes, stream));
  CHECK_CUDA(report, cudaStreamSynchronize(stream));
  CHECK_CUDA(report, cudaFree(direct));

  report.Enter(Phase::kClose);
  CHECK_CUDA(report, cudaMemPoolDestroy(own));
  CHECK_CUDA(report, cudaStreamDestroy(other));
  CHECK_CUDA(report, cudaStreamDestroy(stream));
  CHECK_CUDA(report, cudaMemPoolTrimTo(pool, 0));
  CHECK_CUDA(report, cudaFreeHost(results));
  CHECK_CUDA(report, cudaFreeHost(b_pinned));
  report.End();
  CHECK_CUDA(report, cudaDeviceReset());
}

}  // namespace
}  // namespace gpuvm::compat

int main(int argc, char** argv) {
  using namespace gpuvm::compat;
  return CompatMain(
      argc, argv, "pools",
      [](Size size) {
        const Scale s = ScaleOf(size);
        return std::to_string(s.steps) + " steps of 3 stream-ordered allocations of " +
               std::to_string(s.n) + " ints";
      },
      Run);
}
