// CPU references for the kernel corpus (bench/kernels/*.cu): each function computes on host arrays
// what the kernel of the same name computes on the GPU, with the same layouts, so a test can
// compare outputs. Float code mirrors the PTX nvcc emitted — the same operation order and the same
// fused multiply-adds (std::fma where the .ptx has fma.rn) — so IEEE-exact engines match bit for
// bit; the tolerances kernel_corpus.h attaches cover only approximate instructions (ex2.approx,
// ...) and documented engine freedoms.
//
// Layouts and parameters are described per function; "n x n" matrices are row-major.
//
// Threading: pure functions.
#ifndef GPUVM_BENCH_KERNELS_REFERENCE_H_
#define GPUVM_BENCH_KERNELS_REFERENCE_H_

#include <cstdint>
#include <vector>

namespace gpuvm::kernels::ref {

void VectorAdd(const float* a, const float* b, float* c, int n);
void Madd(const int32_t* a, const int32_t* b, int32_t* c, int n);  // n x n
void Fmadd(const float* a, const float* b, float* c, int n);       // n x n
void Mmul(const int32_t* a, const int32_t* b, int32_t* c, int n);  // n x n, wraps mod 2^32
void Fmmul(const float* a, const float* b, float* c, int n);       // n x n, fma in k order

// Per block of 512 inputs (reduce_sum) or of `block` inputs (reduce_sum_f32): the sum.
void ReduceSum(const int32_t* in, int32_t* out, int n);
void ReduceSumF32(const float* in, float* out, int n, int block);  // tree order of the kernel

void Histogram(const uint8_t* data, uint32_t* bins, int n);  // 256 bins, adds to bins
void Loop(uint32_t* out, int threads, int iterations);

// backprop (see backprop.cu for the layout): partial is blocks x hid, hidden has hid + 1 entries.
void BpLayerForward(const float* input, const float* w, float* partial, int in, int hid);
void BpLayerSquash(const float* partial, const float* input, const float* w, float* hidden,
                   int blocks, int hid);
void BpAdjustWeights(const float* delta, const float* x, float* w, float* old_w, int in, int hid);

struct HotspotParams {
  float step_div_cap, rx_1, ry_1, rz_1, ambient;
};
void Hotspot(const float* power, const float* temp, float* out, int rows, int cols,
             const HotspotParams& p);

void LudColumn(float* a, int n, int k);
void LudUpdate(float* a, int n, int k);

void NnDistance(const float* records /* n pairs */, float* dist, int n, float lat, float lng);
// Per block of 256: min distance and its index (ties: smaller index); unused slots are +3e38 /
// INT_MAX.
void NnArgmin(const float* dist, float* block_min, int32_t* block_index, int n);

void SradCoeff(const float* j, float* c, float* dn, float* ds, float* dw, float* de, int rows,
               int cols, float q0sqr);
void SradUpdate(float* j, const float* c, const float* dn, const float* ds, const float* dw,
                const float* de, int rows, int cols, float lambda);
// The speckle scale the host computes before each iteration: variance / mean^2 over the whole
// image.
float SradQ0sqr(const float* j, int count);

void NestedDivergence(const int32_t* in, int32_t* out, int n);
void EarlyExit(const int32_t* in, int32_t* out, int n);
void BarrierLoop(const int32_t* in, int32_t* out, int blocks, int rounds);  // 128 threads per block

// atomicInc / atomicDec applied `count` times to `start` with limit `wrap`.
uint32_t AtomicIncRepeat(uint32_t start, uint32_t wrap, uint64_t count);
uint32_t AtomicDecRepeat(uint32_t start, uint32_t wrap, uint64_t count);

void LocalArray(const int32_t* in, int32_t* out, int n);
void NestedCalls(const int32_t* in, int32_t* out_i /* 5 per element */, float* out_f, double* out_d,
                 int n);
uint32_t Fib(uint32_t k);

void F64Math(const double* a, const double* b, const double* c, double* out /* 12 per element */,
             int n);

// warp_* with full warps: in/out indexed by global thread id.
void WarpReduce(const int32_t* in, int32_t* out, int threads);
void WarpShuffle(const int32_t* in, int32_t* out /* 4 per thread */, int threads);
void WarpVote(const int32_t* in, uint32_t* out /* 4 per thread */, int threads);

// math_f32: 8 floats per element (see math_f32.cu) and rem[i] = ks[i] % divisor.
void MathF32(const float* xs, const int32_t* ks, float* out, int32_t* rem, int32_t divisor, int n);

void CvtKernel(const float* xs, const int32_t* ks, const double* ds,
               uint32_t* out /* 32 per element */, int n);
void Bitops(const uint32_t* as, const uint32_t* bs, uint32_t* out /* 30 per element */, int n);

// Helpers shared with the tests.
float RoundDoubleToFloat(double d, int mode);  // mode: 0 nearest-even, 1 toward zero, 2 down, 3 up
uint16_t FloatToHalfRn(float f);
float HalfToFloat(uint16_t h);

}  // namespace gpuvm::kernels::ref

#endif  // GPUVM_BENCH_KERNELS_REFERENCE_H_
