// compat-half: half precision as cuda_fp16.h offers it — __hadd, __hsub, __hmul, __hfma, __hneg,
// __habs, __hlt, and the __half2 forms (__hadd2, __hfma2, __hmul2, __hlt2), which nvcc compiles to
// PTX f16/f16x2 arithmetic. Every result is compared bit for bit with the host's: the same values
// widened to double, computed, and rounded once with __double2half. The inputs are random f16
// bit patterns (NaNs and infinities excluded: their encodings are not specified bit for bit).
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "bench/compat/compat.h"

namespace gpuvm::compat {
namespace {

constexpr int kResults = 10;  // per element

__global__ void half_ops(const __half* a, const __half* b, const __half* c, __half* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const __half x = a[i], y = b[i], z = c[i];
  __half* o = out + kResults * i;
  o[0] = __hadd(x, y);
  o[1] = __hsub(x, y);
  o[2] = __hmul(x, y);
  o[3] = __hfma(x, y, z);
  o[4] = __hneg(x);
  o[5] = __habs(y);
  o[6] = __hlt(x, y) ? __float2half(1.0f) : __float2half(0.0f);
  const __half2 p = __halves2half2(x, y), q = __halves2half2(y, z);
  const __half2 r = __hfma2(p, q, __hadd2(p, q));
  o[7] = __low2half(r);
  o[8] = __high2half(__hmul2(p, q));
  o[9] = __hbeq2(__hlt2(p, q), __hlt2(p, q)) ? __low2half(__hlt2(p, q)) : __float2half(-1.0f);
}

int Elements(Size size) { return size == Size::kTest ? 4096 : 1 << 20; }

double Value(__half h) { return static_cast<double>(__half2float(h)); }
uint16_t Bits(__half h) {
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

void Run(Size size, Report& report) {
  const int n = Elements(size);
  std::vector<__half> a(n), b(n), c(n), out(size_t{kResults} * n);
  uint32_t x = 2024;
  auto random_half = [&] {
    x = x * 1103515245u + 12345u;
    uint16_t u = static_cast<uint16_t>(x >> 8);
    if (((u >> 10) & 0x1f) == 0x1f) u &= 0xbfff;  // no NaN or infinity
    __half h;
    std::memcpy(&h, &u, 2);
    return h;
  };
  for (int i = 0; i < n; ++i) {
    a[i] = random_half();
    b[i] = random_half();
    c[i] = random_half();
  }
  report.Enter(Phase::kInit);
  CHECK_CUDA(report, cudaSetDevice(0));
  __half *d_a, *d_b, *d_c, *d_out;
  const size_t bytes = sizeof(__half) * n;
  CHECK_CUDA(report, cudaMalloc(&d_a, bytes));
  CHECK_CUDA(report, cudaMalloc(&d_b, bytes));
  CHECK_CUDA(report, cudaMalloc(&d_c, bytes));
  CHECK_CUDA(report, cudaMalloc(&d_out, bytes * kResults));
  report.Enter(Phase::kHtoD);
  CHECK_CUDA(report, cudaMemcpy(d_a, a.data(), bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(report, cudaMemcpy(d_b, b.data(), bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(report, cudaMemcpy(d_c, c.data(), bytes, cudaMemcpyHostToDevice));
  report.Enter(Phase::kLaunch);
  half_ops<<<(n + 255) / 256, 256>>>(d_a, d_b, d_c, d_out, n);
  CHECK_LAUNCH(report);
  CHECK_CUDA(report, cudaDeviceSynchronize());
  report.Enter(Phase::kDtoH);
  CHECK_CUDA(report, cudaMemcpy(out.data(), d_out, bytes * kResults, cudaMemcpyDeviceToHost));
  report.Enter(Phase::kClose);
  for (void* p : {(void*)d_a, (void*)d_b, (void*)d_c, (void*)d_out})
    CHECK_CUDA(report, cudaFree(p));
  report.End();

  for (int i = 0; i < n; ++i) {
    const double X = Value(a[i]), Y = Value(b[i]), Z = Value(c[i]);
    const __half sum_xy = __double2half(X + Y);
    const __half want[kResults] = {
        __double2half(X + Y),
        __double2half(X - Y),
        __double2half(X * Y),
        __double2half(std::fma(X, Y, Z)),
        __hneg(a[i]),
        __habs(b[i]),
        __float2half(X < Y ? 1.0f : 0.0f),
        __double2half(std::fma(X, Y, Value(sum_xy))),
        __double2half(Y * Z),
        __float2half(X < Y ? 1.0f : 0.0f),
    };
    for (int k = 0; k < kResults; ++k) {
      const __half got = out[size_t{kResults} * i + k];
      CHECK_VALUE(report, Bits(got) == Bits(want[k]),
                  "result " + std::to_string(k) + " of element " + std::to_string(i) + " is 0x" +
                      std::to_string(Bits(got)) + ", want 0x" + std::to_string(Bits(want[k])) +
                      " (x " + std::to_string(X) + ", y " + std::to_string(Y) + ", z " +
                      std::to_string(Z) + ")");
    }
  }
}

}  // namespace
}  // namespace gpuvm::compat

int main(int argc, char** argv) {
  using namespace gpuvm::compat;
  return CompatMain(
      argc, argv, "half",
      [](Size size) { return std::to_string(Elements(size)) + " f16 triples, 10 results each"; },
      Run);
}
