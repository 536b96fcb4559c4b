// compat-churn: the small-copy and allocation churn of programs that manage memory per step. Each
// iteration allocates a buffer (cudaMalloc), fills it with small pageable copies of 4 to 256 bytes
// (cudaMemcpy host to device), runs a kernel over it, reads small pieces back (device to host) and
// frees it. Everything read back is checked. The report carries the iteration count, so gpuvm-bench
// shows traps and page-table scans per iteration for the VM modes (docs/BENCHMARKS.md).
#include <cstdint>
#include <cstring>
#include <vector>

#include "bench/compat/compat.h"

namespace gpuvm::compat {
namespace {

constexpr int kPieces = 6;
constexpr int kPieceBytes[kPieces] = {4, 12, 32, 64, 128, 256};
constexpr int kBufferBytes = 4 + 12 + 32 + 64 + 128 + 256;  // 496

// Every byte b of the buffer becomes b * 3 + salt (mod 256).
__global__ void mix(uint8_t* buf, int n, int salt) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = uint8_t(buf[i] * 3 + salt);
}

int Iterations(Size size) { return size == Size::kTest ? 20 : 1000; }

void Run(Size size, Report& report) {
  const int iterations = Iterations(size);
  report.SetIterations(iterations);
  report.Enter(Phase::kInit);
  CHECK_CUDA(report, cudaSetDevice(0));
  CHECK_CUDA(report, cudaFree(nullptr));
  uint8_t host[kBufferBytes], back[kBufferBytes];
  for (int it = 0; it < iterations; ++it) {
    for (int i = 0; i < kBufferBytes; ++i) host[i] = uint8_t(i * 31 + it * 7);
    report.Enter(Phase::kInit);
    uint8_t* d = nullptr;
    // Sizes vary so the allocator sees different requests.
    const size_t alloc = kBufferBytes + size_t(it % 5) * 4096;
    CHECK_CUDA(report, cudaMalloc(&d, alloc));
    report.Enter(Phase::kHtoD);
    for (int p = 0, at = 0; p < kPieces; at += kPieceBytes[p], ++p) {
      CHECK_CUDA(report, cudaMemcpy(d + at, host + at, kPieceBytes[p], cudaMemcpyHostToDevice));
    }
    report.Enter(Phase::kLaunch);
    mix<<<1, 128>>>(d, kBufferBytes, it & 0xff);
    CHECK_LAUNCH(report);
    report.Enter(Phase::kDtoH);
    std::memset(back, 0, sizeof back);
    for (int p = kPieces - 1, at = kBufferBytes; p >= 0; --p) {
      at -= kPieceBytes[p];
      CHECK_CUDA(report, cudaMemcpy(back + at, d + at, kPieceBytes[p], cudaMemcpyDeviceToHost));
    }
    report.Enter(Phase::kClose);
    CHECK_CUDA(report, cudaFree(d));
    report.End();
    for (int i = 0; i < kBufferBytes; ++i) {
      const int want = uint8_t(host[i] * 3 + (it & 0xff));
      CHECK_VALUE(report, back[i] == want,
                  "iteration " + std::to_string(it) + ": " + Mismatch("byte", i, back[i], want));
    }
  }
  report.Enter(Phase::kClose);
  CHECK_CUDA(report, cudaDeviceReset());
  report.End();
}

}  // namespace
}  // namespace gpuvm::compat

int main(int argc, char** argv) {
  using namespace gpuvm::compat;
  return CompatMain(
      argc, argv, "churn",
      [](Size size) {
        return std::to_string(Iterations(size)) +
               " iterations of malloc, 6+6 copies of 4-256 B, a kernel, free";
      },
      Run);
}
