// compat-longk: one kernel that runs for a long time — about 90 s at bench size, about 1.5 s at
// test size — and must finish with the right answer. CUDA waits for a kernel as long as it runs;
// the program's cudaDeviceSynchronize is the wait that must not give up (docs/GUEST-DRIVER.md,
// "Waits"). Each thread steps a 32-bit linear congruential generator `iters` times; the host
// checks every thread's value by jumping the generator ahead (O(log iters)). A short launch first
// measures the device's speed, so the long one lasts about the target time on any machine, in any
// mode. GPUVM_COMPAT_LONG_SECONDS overrides the target (tests of longer waits).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "bench/compat/compat.h"

namespace gpuvm::compat {
namespace {

constexpr uint32_t kA = 1664525u, kC = 1013904223u;
constexpr int kBlocks = 2, kThreads = 64;

__global__ void lcg(uint32_t* out, uint32_t seed, long long iters) {
  const int tid = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t x = seed ^ static_cast<uint32_t>(tid * 0x9e3779b9u);
  for (long long i = 0; i < iters; ++i) x = x * kA + kC;
  out[tid] = x;
}

// x after n steps: the affine map x -> a*x + c composed n times, by squaring.
uint32_t JumpAhead(uint32_t x, unsigned long long n) {
  uint32_t mul = 1, add = 0, a = kA, c = kC;
  while (n != 0) {
    if (n & 1) {
      mul = mul * a;
      add = add * a + c;
    }
    c = c * a + c;
    a = a * a;
    n >>= 1;
  }
  return x * mul + add;
}

double TargetSeconds(Size size) {
  if (const char* env = std::getenv("GPUVM_COMPAT_LONG_SECONDS"); env != nullptr) {
    const double s = std::atof(env);
    if (s > 0 && s < 3600) return s;
  }
  return size == Size::kTest ? 1.5 : 90.0;
}

// One launch of `iters` steps, waited for; its wall seconds in `*seconds`.
void Launch(Report& report, uint32_t* d_out, uint32_t seed, long long iters, double* seconds) {
  const auto start = std::chrono::steady_clock::now();
  lcg<<<kBlocks, kThreads>>>(d_out, seed, iters);
  CHECK_LAUNCH(report);
  CHECK_CUDA(report, cudaDeviceSynchronize());
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void Check(Report& report, const std::vector<uint32_t>& out, uint32_t seed, long long iters) {
  for (int t = 0; t < kBlocks * kThreads; ++t) {
    const uint32_t want = JumpAhead(seed ^ static_cast<uint32_t>(t * 0x9e3779b9u), iters);
    CHECK_VALUE(report, out[t] == want, Mismatch("x", t, out[t], want));
  }
}

void Run(Size size, Report& report) {
  const int n = kBlocks * kThreads;
  std::vector<uint32_t> out(n);
  report.Enter(Phase::kInit);
  CHECK_CUDA(report, cudaSetDevice(0));
  uint32_t* d_out = nullptr;
  CHECK_CUDA(report, cudaMalloc(&d_out, n * sizeof(uint32_t)));

  // Calibration: grow a probe until it takes 1/100 of the target (at least 50 ms; a longer probe
  // is less at the mercy of the machine's load), then scale to the target.
  report.Enter(Phase::kLaunch);
  const double target = TargetSeconds(size);
  long long probe = 2000;
  double probe_s = 0;
  for (;;) {
    Launch(report, d_out, 7, probe, &probe_s);
    if (report.failed()) return;
    if (probe_s >= std::max(0.05, target / 100) || probe > (1ll << 40)) break;
    probe *= 4;
  }
  CHECK_CUDA(report, cudaMemcpy(out.data(), d_out, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  Check(report, out, 7, probe);
  if (report.failed()) return;
  const long long iters =
      std::max<long long>(probe, static_cast<long long>(double(probe) * target / probe_s));
  double seconds = 0;
  Launch(report, d_out, 12345, iters, &seconds);
  if (report.failed()) return;
  std::printf("one kernel of %lld steps per thread ran %.2f s (target %.1f s)\n", iters, seconds,
              target);
  report.Enter(Phase::kDtoH);
  CHECK_CUDA(report, cudaMemcpy(out.data(), d_out, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  report.Enter(Phase::kClose);
  CHECK_CUDA(report, cudaFree(d_out));
  CHECK_CUDA(report, cudaDeviceReset());
  report.End();
  Check(report, out, 12345, iters);
}

}  // namespace
}  // namespace gpuvm::compat

int main(int argc, char** argv) {
  using namespace gpuvm::compat;
  return CompatMain(
      argc, argv, "longk",
      [](Size size) {
        return "one kernel of about " +
               std::to_string(static_cast<int>(TargetSeconds(size) + 0.5)) + " s (128 threads)";
      },
      Run);
}
