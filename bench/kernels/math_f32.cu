// math_f32: single-precision math that compiles to PTX's approximate instructions (sin/cos/lg2/ex2/
// rsqrt/div .approx), copysign, and a signed remainder. out has 8 floats per element:
//   __sinf(x), __cosf(x), __log2f(|x| + 1), rsqrtf(|x| + 1), __expf(x / 16), copysignf(|x|, -x),
//   __fdividef(x, 3), fmaxf(x, 0.5)
// and rem[i] = k[i] % divisor (rem.s32). Inputs are read through the read-only path (ld.global.nc).

extern "C" __global__ void math_f32(const float* __restrict__ xs, const int* __restrict__ ks,
                                    float* __restrict__ out, int* __restrict__ rem, int divisor,
                                    int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = xs[i];
  float* o = out + 8 * i;
  o[0] = __sinf(x);
  o[1] = __cosf(x);
  o[2] = __log2f(fabsf(x) + 1.0f);
  o[3] = rsqrtf(fabsf(x) + 1.0f);
  o[4] = __expf(x / 16.0f);
  o[5] = copysignf(fabsf(x), -x);
  o[6] = __fdividef(x, 3.0f);
  o[7] = fmaxf(x, 0.5f);
  rem[i] = ks[i] % divisor;
}
