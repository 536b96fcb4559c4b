#include "bench/kernels/reference.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>

namespace gpuvm::kernels::ref {
namespace {

// Two's-complement wrapping arithmetic, as the GPU does it (signed overflow is UB in C++).
int32_t WrapAdd(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}
int32_t WrapMul(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
}

}  // namespace

void VectorAdd(const float* a, const float* b, float* c, int n) {
  for (int i = 0; i < n; ++i) c[i] = a[i] + b[i];
}

void Madd(const int32_t* a, const int32_t* b, int32_t* c, int n) {
  for (int i = 0; i < n * n; ++i) c[i] = WrapAdd(a[i], b[i]);
}

void Fmadd(const float* a, const float* b, float* c, int n) {
  for (int i = 0; i < n * n; ++i) c[i] = a[i] + b[i];
}

void Mmul(const int32_t* a, const int32_t* b, int32_t* c, int n) {
  for (int r = 0; r < n; ++r) {
    for (int col = 0; col < n; ++col) {
      int32_t sum = 0;
      for (int k = 0; k < n; ++k) sum = WrapAdd(sum, WrapMul(a[r * n + k], b[k * n + col]));
      c[r * n + col] = sum;
    }
  }
}

void Fmmul(const float* a, const float* b, float* c, int n) {
  for (int r = 0; r < n; ++r) {
    for (int col = 0; col < n; ++col) {
      float sum = 0.0f;
      for (int k = 0; k < n; ++k) sum = std::fma(a[r * n + k], b[k * n + col], sum);
      c[r * n + col] = sum;
    }
  }
}

void ReduceSum(const int32_t* in, int32_t* out, int n) {
  const int per_block = 512;
  const int blocks = (n + per_block - 1) / per_block;
  for (int b = 0; b < blocks; ++b) {
    int32_t sum = 0;
    for (int i = b * per_block; i < std::min(n, (b + 1) * per_block); ++i)
      sum = WrapAdd(sum, in[i]);
    out[b] = sum;
  }
}

void ReduceSumF32(const float* in, float* out, int n, int block) {
  const int blocks = (n + block - 1) / block;
  std::vector<float> partial(static_cast<size_t>(block));
  for (int b = 0; b < blocks; ++b) {
    for (int t = 0; t < block; ++t) {
      const int i = b * block + t;
      partial[t] = i < n ? in[i] : 0.0f;
    }
    for (int stride = block / 2; stride > 0; stride >>= 1) {
      for (int t = 0; t < stride; ++t) partial[t] += partial[t + stride];
    }
    out[b] = partial[0];
  }
}

void Histogram(const uint8_t* data, uint32_t* bins, int n) {
  for (int i = 0; i < n; ++i) ++bins[data[i]];
}

void Loop(uint32_t* out, int threads, int iterations) {
  for (int i = 0; i < threads; ++i) {
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u + 1;
    for (int it = 0; it < iterations; ++it) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      for (uint32_t k = 0; k < (x & 3); ++k) x += k * 7 + static_cast<uint32_t>(it);
    }
    out[i] = x;
  }
}

void BpLayerForward(const float* input, const float* w, float* partial, int in, int hid) {
  const int kB = 16;
  const int blocks_y = (in + kB - 1) / kB;
  for (int by = 0; by < blocks_y; ++by) {
    for (int j = 1; j <= hid; ++j) {
      float prod[16];
      for (int ty = 0; ty < kB; ++ty) {
        const int i = by * kB + ty + 1;
        prod[ty] = i <= in ? input[i] * w[i * (hid + 1) + j] : 0.0f;
      }
      for (int step = kB / 2; step > 0; step /= 2) {
        for (int ty = 0; ty < step; ++ty) prod[ty] += prod[ty + step];
      }
      partial[by * hid + (j - 1)] = prod[0];
    }
  }
}

void BpLayerSquash(const float* partial, const float* input, const float* w, float* hidden,
                   int blocks, int hid) {
  for (int j = 1; j <= hid; ++j) {
    float sum = input[0] * w[j];
    for (int b = 0; b < blocks; ++b) sum += partial[b * hid + (j - 1)];
    hidden[j] = 1.0f / (1.0f + std::exp(-sum));
  }
}

void BpAdjustWeights(const float* delta, const float* x, float* w, float* old_w, int in, int hid) {
  const float eta = 0.3f, momentum = 0.3f;
  for (int i = 0; i <= in; ++i) {
    for (int j = 1; j <= hid; ++j) {
      const int k = i * (hid + 1) + j;
      const float dw = std::fma(eta * delta[j], x[i], momentum * old_w[k]);
      w[k] += dw;
      old_w[k] = dw;
    }
  }
}

void Hotspot(const float* power, const float* temp, float* out, int rows, int cols,
             const HotspotParams& p) {
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const int rn = r > 0 ? r - 1 : r, rs = r < rows - 1 ? r + 1 : r;
      const int cw = c > 0 ? c - 1 : c, ce = c < cols - 1 ? c + 1 : c;
      const float t = temp[r * cols + c];
      const float two_t = t + t;
      float acc = std::fma(p.ry_1, (temp[rs * cols + c] + temp[rn * cols + c]) - two_t,
                           power[r * cols + c]);
      acc = std::fma(p.rx_1, (temp[r * cols + ce] + temp[r * cols + cw]) - two_t, acc);
      acc = std::fma(p.rz_1, p.ambient - t, acc);
      out[r * cols + c] = std::fma(p.step_div_cap, acc, t);
    }
  }
}

void LudColumn(float* a, int n, int k) {
  for (int i = k + 1; i < n; ++i) a[i * n + k] /= a[k * n + k];
}

void LudUpdate(float* a, int n, int k) {
  for (int i = k + 1; i < n; ++i) {
    for (int j = k + 1; j < n; ++j) a[i * n + j] -= a[i * n + k] * a[k * n + j];
  }
}

void NnDistance(const float* records, float* dist, int n, float lat, float lng) {
  for (int i = 0; i < n; ++i) {
    const float dx = records[2 * i] - lat, dy = records[2 * i + 1] - lng;
    dist[i] = std::sqrt(std::fma(dx, dx, dy * dy));
  }
}

void NnArgmin(const float* dist, float* block_min, int32_t* block_index, int n) {
  const int kBlock = 256;
  const int blocks = (n + kBlock - 1) / kBlock;
  for (int b = 0; b < blocks; ++b) {
    float best = 3.0e38f;
    int32_t where = INT32_MAX;
    for (int t = 0; t < kBlock; ++t) {
      const int i = b * kBlock + t;
      const float d = i < n ? dist[i] : 3.0e38f;
      const int32_t at = i < n ? i : INT32_MAX;
      if (d < best || (d == best && at < where)) {
        best = d;
        where = at;
      }
    }
    block_min[b] = best;
    block_index[b] = where;
  }
}

void SradCoeff(const float* j, float* c, float* dn, float* ds, float* dw, float* de, int rows,
               int cols, float q0sqr) {
  for (int y = 0; y < rows; ++y) {
    for (int x = 0; x < cols; ++x) {
      const int k = y * cols + x;
      const float jc = j[k];
      const float n = j[(y > 0 ? y - 1 : 0) * cols + x] - jc;
      const float s = j[(y < rows - 1 ? y + 1 : rows - 1) * cols + x] - jc;
      const float w = j[y * cols + (x > 0 ? x - 1 : 0)] - jc;
      const float e = j[y * cols + (x < cols - 1 ? x + 1 : cols - 1)] - jc;
      const float g2 = std::fma(e, e, std::fma(w, w, std::fma(n, n, s * s))) / (jc * jc);
      const float l = (((n + s) + w) + e) / jc;
      const float num = std::fma(g2, 0.5f, (l * l) * -0.0625f);
      const float den = std::fma(l, 0.25f, 1.0f);
      const float qsqr = num / (den * den);
      const float den2 = (qsqr - q0sqr) / ((q0sqr + 1.0f) * q0sqr);
      const float coeff = 1.0f / (den2 + 1.0f);
      c[k] = coeff < 0.0f ? 0.0f : (coeff > 1.0f ? 1.0f : coeff);
      dn[k] = n;
      ds[k] = s;
      dw[k] = w;
      de[k] = e;
    }
  }
}

void SradUpdate(float* j, const float* c, const float* dn, const float* ds, const float* dw,
                const float* de, int rows, int cols, float lambda) {
  for (int y = 0; y < rows; ++y) {
    for (int x = 0; x < cols; ++x) {
      const int k = y * cols + x;
      const float cn = c[k];
      const float cs = c[(y < rows - 1 ? y + 1 : rows - 1) * cols + x];
      const float cw = c[k];
      const float ce = c[y * cols + (x < cols - 1 ? x + 1 : cols - 1)];
      const float d = std::fma(ce, de[k], std::fma(cw, dw[k], std::fma(cn, dn[k], cs * ds[k])));
      j[k] = std::fma(lambda * 0.25f, d, j[k]);
    }
  }
}

float SradQ0sqr(const float* j, int count) {
  double sum = 0, sum2 = 0;
  for (int i = 0; i < count; ++i) {
    sum += j[i];
    sum2 += static_cast<double>(j[i]) * j[i];
  }
  const double mean = sum / count;
  const double var = sum2 / count - mean * mean;
  return static_cast<float>(var / (mean * mean));
}

void NestedDivergence(const int32_t* in, int32_t* out, int n) {
  for (int i = 0; i < n; ++i) {
    const int32_t v = in[i];
    int32_t r;
    if (v & 1) {
      if (v & 2) {
        r = (v & 4) ? WrapMul(v, 3) : WrapAdd(v, -7);
      } else {
        r = v ^ 0x55;
      }
    } else if (v & 8) {
      r = 0;
      for (int k = 0; k < ((v & 0x70) >> 4); ++k) r = WrapAdd(r, WrapMul(k, v));
    } else {
      r = static_cast<int32_t>(0u - static_cast<uint32_t>(v));
    }
    out[i] = r;
  }
}

void EarlyExit(const int32_t* in, int32_t* out, int n) {
  for (int i = 0; i < n; ++i) {
    const int32_t v = in[i];
    out[i] = -1;
    if (v % 5 == 0) continue;
    int32_t acc = 0;
    bool left = false;
    for (int k = 0; k < 32; ++k) {
      acc = WrapAdd(acc, WrapAdd(v, k));
      if (acc > 1000 + (i & 63)) {
        out[i] = k;
        left = true;
        break;
      }
    }
    if (!left) out[i] = acc;
  }
}

void BarrierLoop(const int32_t* in, int32_t* out, int blocks, int rounds) {
  const int kBlock = 128;
  std::vector<int32_t> cur(kBlock), next(kBlock);
  for (int b = 0; b < blocks; ++b) {
    std::copy(in + b * kBlock, in + (b + 1) * kBlock, cur.begin());
    for (int r = 0; r < rounds; ++r) {
      for (int t = 0; t < kBlock; ++t) {
        next[t] = WrapAdd(WrapAdd(cur[(t + kBlock - 1) % kBlock], cur[(t + 1) % kBlock]), t & r);
      }
      cur.swap(next);
    }
    std::copy(cur.begin(), cur.end(), out + b * kBlock);
  }
}

uint32_t AtomicIncRepeat(uint32_t start, uint32_t wrap, uint64_t count) {
  uint32_t v = start;
  for (uint64_t i = 0; i < count; ++i) v = v >= wrap ? 0 : v + 1;
  return v;
}

uint32_t AtomicDecRepeat(uint32_t start, uint32_t wrap, uint64_t count) {
  uint32_t v = start;
  for (uint64_t i = 0; i < count; ++i) v = (v == 0 || v > wrap) ? wrap : v - 1;
  return v;
}

void LocalArray(const int32_t* in, int32_t* out, int n) {
  for (int i = 0; i < n; ++i) {
    const int32_t v = in[i];
    int32_t buf[64];
    for (int k = 0; k < 64; ++k) buf[k] = WrapAdd(WrapMul(v, k), k ^ v);
    for (int k = 0; k < 64; ++k) {
      const int j = WrapAdd(v, k * 13) & 63;
      std::swap(buf[k], buf[j]);
    }
    int32_t sum = 0;
    for (int k = 0; k < 64; ++k) sum = WrapAdd(sum, WrapMul(buf[WrapAdd(k * 7, v) & 63], k + 1));
    out[i] = sum;
  }
}

namespace {
int32_t Mix(int32_t a, int32_t b) { return WrapAdd(WrapMul(a, 31), b ^ 0x5a5a); }
int32_t Chain(int32_t a) { return WrapAdd(Mix(a, WrapAdd(a, 1)), Mix(WrapAdd(a, 2), a)); }
}  // namespace

void NestedCalls(const int32_t* in, int32_t* out_i, float* out_f, double* out_d, int n) {
  for (int i = 0; i < n; ++i) {
    const int32_t v = in[i];
    int32_t* o = out_i + 5 * i;
    o[0] = Chain(v);
    out_f[i] = std::fma(static_cast<float>(i & 7), static_cast<float>(v), 0.5f);
    out_d[i] = std::fma(static_cast<double>(static_cast<float>(v)), 2.0,
                        static_cast<double>(static_cast<int64_t>(
                            static_cast<uint64_t>(static_cast<int64_t>(v)) << 33)));
    const int32_t lo = WrapMul(v, 3);
    const float hi = static_cast<float>(v) * 0.25f;
    o[1] = WrapAdd(lo, static_cast<int32_t>(hi));
    o[2] = (v & 1) ? Mix(v, i) : Chain(i);
    o[3] = v ^ 0x1234;
    o[4] = v ^ 0x1234;
  }
}

uint32_t Fib(uint32_t k) { return k < 2 ? k : Fib(k - 1) + Fib(k - 2); }

void F64Math(const double* a, const double* b, const double* c, double* out, int n) {
  for (int i = 0; i < n; ++i) {
    const double x = a[i], y = b[i], z = c[i];
    double* o = out + 12 * i;
    o[0] = x + y;
    o[1] = x * y;
    o[2] = x / y;
    o[3] = std::fma(x, y, z);
    o[4] = std::sqrt(std::fabs(x));
    o[5] = 1.0 / y;
    o[6] = std::fmin(x, y);
    o[7] = std::fmax(x, y);
    o[8] = static_cast<double>(static_cast<float>(x));
    o[9] = std::floor(x);
    o[10] = std::exp(x / 8.0);
    o[11] = std::sin(x);
  }
}

void WarpReduce(const int32_t* in, int32_t* out, int threads) {
  for (int w = 0; w < threads / 32; ++w) {
    int32_t sum = 0;
    for (int l = 0; l < 32; ++l) sum = WrapAdd(sum, in[w * 32 + l]);
    out[w] = sum;
  }
}

void WarpShuffle(const int32_t* in, int32_t* out, int threads) {
  for (int i = 0; i < threads; ++i) {
    const int lane = i % 32, base = i - lane;
    int32_t* o = out + 4 * i;
    o[0] = lane >= 3 ? in[base + lane - 3] : in[i];
    o[1] = in[base + (lane ^ 5)];
    o[2] = in[base + ((lane * 7) & 31)];
    o[3] = (lane % 8) + 1 < 8 ? in[i + 1] : in[i];
  }
}

void WarpVote(const int32_t* in, uint32_t* out, int threads) {
  for (int w = 0; w < threads / 32; ++w) {
    uint32_t ballot = 0;
    bool all = true, any = false;
    for (int l = 0; l < 32; ++l) {
      const int32_t v = in[w * 32 + l];
      if (v > 0) ballot |= 1u << l;
      all = all && v > -1000;
      any = any || v == 7;
    }
    for (int l = 0; l < 32; ++l) {
      uint32_t* o = out + 4 * (w * 32 + l);
      o[0] = ballot;
      o[1] = all ? 1 : 0;
      o[2] = any ? 1 : 0;
      o[3] = 0xffffffffu;
    }
  }
}

void MathF32(const float* xs, const int32_t* ks, float* out, int32_t* rem, int32_t divisor, int n) {
  for (int i = 0; i < n; ++i) {
    const float x = xs[i];
    float* o = out + 8 * i;
    o[0] = std::sin(x);
    o[1] = std::cos(x);
    o[2] = std::log2(std::fabs(x) + 1.0f);
    o[3] = 1.0f / std::sqrt(std::fabs(x) + 1.0f);
    o[4] = std::exp(x * 0.0625f);
    o[5] = std::copysign(std::fabs(x), -x);
    o[6] = x / 3.0f;
    o[7] = std::fmax(x, 0.5f);
    rem[i] = ks[i] % divisor;
  }
}

float RoundDoubleToFloat(double d, int mode) {
  float f = static_cast<float>(d);  // nearest-even
  if (mode == 0 || std::isnan(d) || static_cast<double>(f) == d) return f;
  const float inf = INFINITY;
  switch (mode) {
    case 1:  // toward zero
      if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
      break;
    case 2:  // down
      if (static_cast<double>(f) > d) f = std::nextafter(f, -inf);
      break;
    case 3:  // up
      if (static_cast<double>(f) < d) f = std::nextafter(f, inf);
      break;
    default:
      break;
  }
  return f;
}

uint16_t FloatToHalfRn(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant != 0 ? 0x200u : 0));
  const int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1)))
    ++half;  // may carry into the exponent: correct
  return static_cast<uint16_t>(sign | half);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

void CvtKernel(const float* xs, const int32_t* ks, const double* ds, uint32_t* out, int n) {
  auto u = [](float f) { return std::bit_cast<uint32_t>(f); };
  auto hi32 = [](double d) { return static_cast<uint32_t>(std::bit_cast<uint64_t>(d) >> 32); };
  for (int i = 0; i < n; ++i) {
    const float x = xs[i];
    const int32_t k = ks[i];
    const double d = ds[i];
    uint32_t* o = out + 32 * i;
    o[0] = static_cast<uint32_t>(static_cast<int32_t>(std::nearbyint(x)));
    o[1] = static_cast<uint32_t>(static_cast<int32_t>(std::trunc(x)));
    o[2] = static_cast<uint32_t>(static_cast<int32_t>(std::floor(x)));
    o[3] = static_cast<uint32_t>(static_cast<int32_t>(std::ceil(x)));
    for (int m = 0; m < 4; ++m) o[4 + m] = u(RoundDoubleToFloat(static_cast<double>(k), m));
    o[8] = u(std::nearbyint(x));
    o[9] = u(std::trunc(x));
    o[10] = u(std::floor(x));
    o[11] = u(std::ceil(x));
    o[12] = u(std::isnan(x) ? 0.0f : std::min(std::max(x, 0.0f), 1.0f));
    for (int m = 0; m < 4; ++m) o[13 + m] = u(RoundDoubleToFloat(d, m));
    o[17] = hi32(static_cast<double>(x));
    o[18] = static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(k)));
    o[19] = static_cast<uint32_t>(static_cast<uint8_t>(k));
    o[20] = static_cast<uint32_t>(static_cast<int32_t>(static_cast<int16_t>(k)));
    o[21] = static_cast<uint32_t>(static_cast<uint16_t>(k));
    o[22] = static_cast<uint32_t>(static_cast<uint64_t>(static_cast<int64_t>(k) * 3) >> 32);
    o[23] = static_cast<uint32_t>(std::fabs(x));
    o[24] = u(static_cast<float>(static_cast<uint32_t>(k)));
    o[25] = static_cast<uint32_t>(static_cast<int64_t>(d * 1e6));
    o[26] = static_cast<uint32_t>(
        std::bit_cast<uint64_t>(static_cast<double>(static_cast<uint32_t>(k))) >> 20);
    o[27] = u(HalfToFloat(FloatToHalfRn(x)));
    o[28] = static_cast<uint32_t>(static_cast<int32_t>(std::nearbyint(d)));
    o[29] = static_cast<uint32_t>(std::trunc(std::fabs(d)));
    o[30] = hi32(static_cast<double>(k));
    o[31] = u(RoundDoubleToFloat(static_cast<double>(static_cast<uint32_t>(k)), 2));
  }
}

namespace {
uint32_t BytePerm(uint32_t a, uint32_t b, uint32_t s) {
  const uint64_t bytes = (static_cast<uint64_t>(b) << 32) | a;
  uint32_t r = 0;
  for (int k = 0; k < 4; ++k) {
    const uint32_t sel = (s >> (4 * k)) & 7;
    r |= static_cast<uint32_t>((bytes >> (8 * sel)) & 0xff) << (8 * k);
  }
  return r;
}
int32_t SignExtend24(uint32_t v) { return static_cast<int32_t>(v << 8) >> 8; }
}  // namespace

void Bitops(const uint32_t* as, const uint32_t* bs, uint32_t* out, int n) {
  for (int i = 0; i < n; ++i) {
    const uint32_t a = as[i], b = bs[i];
    uint32_t* o = out + 30 * i;
    o[0] = static_cast<uint32_t>(std::popcount(a));
    o[1] = static_cast<uint32_t>(std::countl_zero(a));
    o[2] = 0;
    for (int k = 0; k < 32; ++k) o[2] |= ((a >> k) & 1u) << (31 - k);
    o[3] = a == 0 ? 0 : static_cast<uint32_t>(std::countr_zero(a)) + 1;
    o[4] = BytePerm(a, b, 0x3210u ^ (b & 0x7777u));
    const uint64_t pair = (static_cast<uint64_t>(b) << 32) | a;
    o[5] = static_cast<uint32_t>((pair << (b & 31)) >> 32);
    o[6] = static_cast<uint32_t>(pair >> std::min<uint32_t>(b & 63, 32));
    o[7] = static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
    o[8] = static_cast<uint32_t>(
        static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(a)) *
                              static_cast<int64_t>(static_cast<int32_t>(b))) >>
        32);
    o[9] = static_cast<uint32_t>(static_cast<int64_t>(SignExtend24(a)) * SignExtend24(b));
    const int32_t sa = static_cast<int32_t>(a), sb = static_cast<int32_t>(b);
    o[10] = (sa < sb ? b - a : a - b) + 7u;
    o[11] = (a & b) | (~a & (b ^ 0x0f0f0f0fu));
    const uint32_t r = b & 31;
    o[12] = (a >> r) | (a << ((32 - r) & 31));
    o[13] = static_cast<uint32_t>(sa >> r);
    o[14] = (a >> 8) & 0xfffu;
    o[15] = (a & ~(0xffu << 8)) | ((b & 0xffu) << 8);
    const uint64_t wide = static_cast<uint64_t>(a) * b;
    o[16] = static_cast<uint32_t>(wide >> 32);
    o[17] = static_cast<uint32_t>(std::popcount(wide));
    o[18] = static_cast<uint32_t>(std::countl_zero(wide | 1));
    const unsigned __int128 big = static_cast<unsigned __int128>(wide) * wide + a;
    o[19] = static_cast<uint32_t>(big >> 96);
    o[20] = static_cast<uint32_t>(big >> 64);
    int32_t dp = 5;
    for (int k = 0; k < 4; ++k) {
      dp += static_cast<int32_t>(static_cast<int8_t>(a >> (8 * k))) *
            static_cast<int32_t>(static_cast<int8_t>(b >> (8 * k)));
    }
    o[21] = static_cast<uint32_t>(dp);
    o[22] = a / (b | 1) + a % (b | 1);
    o[23] = static_cast<uint32_t>(sa < sb ? -1 : (sa == sb ? 0 : 1));
    o[24] = static_cast<uint32_t>((static_cast<uint64_t>(a) >> (b & 31)) & 0xff);
    o[25] = static_cast<uint32_t>(static_cast<int32_t>(a << 16) >> 20);
    o[26] = (a & ~(0xfffu << 8)) | ((b & 0xfffu) << 8);
    o[27] = a ^ b ^ 0x0f0f0f0fu;
    o[28] = (a & 0xffffffu) * (b & 0xffffffu);
    o[29] = std::isfinite(std::bit_cast<float>(a)) ? 1 : 0;
  }
}

}  // namespace gpuvm::kernels::ref
