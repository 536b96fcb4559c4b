// cvt: conversions between types with every rounding mode. out has kOut words per input pair (a float x
// and an int k); see reference.cc for the exact list. Inputs avoid NaN and out-of-range float->int cases,
// whose results PTX leaves to the hardware (saturating), so the reference can be exact.
#include <cuda_fp16.h>

constexpr int kOut = 32;

extern "C" __global__ void cvt_kernel(const float* xs, const int* ks, const double* ds, unsigned* out,
                                      int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = xs[i];
  int k = ks[i];
  double d = ds[i];
  unsigned* o = out + kOut * i;
  // float -> int with the four integer roundings (cvt.rni/rzi/rmi/rpi.s32.f32)
  o[0] = (unsigned)__float2int_rn(x);
  o[1] = (unsigned)__float2int_rz(x);
  o[2] = (unsigned)__float2int_rd(x);
  o[3] = (unsigned)__float2int_ru(x);
  // int -> float with the four float roundings (cvt.rn/rz/rm/rp.f32.s32)
  o[4] = __float_as_uint(__int2float_rn(k));
  o[5] = __float_as_uint(__int2float_rz(k));
  o[6] = __float_as_uint(__int2float_rd(k));
  o[7] = __float_as_uint(__int2float_ru(k));
  // float -> float rounding to integral (cvt.rni/rzi/rmi/rpi.f32.f32)
  o[8] = __float_as_uint(rintf(x));
  o[9] = __float_as_uint(truncf(x));
  o[10] = __float_as_uint(floorf(x));
  o[11] = __float_as_uint(ceilf(x));
  // saturate to [0, 1] (cvt.sat.f32.f32)
  o[12] = __float_as_uint(__saturatef(x));
  // double <-> float with roundings (cvt.rn/rz/rm/rp.f32.f64, cvt.f64.f32)
  o[13] = __float_as_uint(__double2float_rn(d));
  o[14] = __float_as_uint(__double2float_rz(d));
  o[15] = __float_as_uint(__double2float_rd(d));
  o[16] = __float_as_uint(__double2float_ru(d));
  double back = (double)x;
  o[17] = (unsigned)(__double_as_longlong(back) >> 32);
  // narrow and widen integers (cvt.s8/u8/s16/u16 and sign/zero extension)
  o[18] = (unsigned)(int)(signed char)k;
  o[19] = (unsigned)(unsigned char)k;
  o[20] = (unsigned)(int)(short)k;
  o[21] = (unsigned)(unsigned short)k;
  long long wide = (long long)k * 3;
  o[22] = (unsigned)(wide >> 32);
  // unsigned conversions and 64-bit ones (cvt.rzi.u32.f32, cvt.rn.f32.u32, cvt.rzi.s64.f64, cvt.rn.f64.u64)
  o[23] = (unsigned)fabsf(x);
  o[24] = __float_as_uint((float)(unsigned)k);
  o[25] = (unsigned)(long long)(d * 1e6);
  o[26] = (unsigned)(__double_as_longlong((double)(unsigned long long)(unsigned)k) >> 20);
  // half precision (cvt.rn.f16.f32 and back)
  o[27] = __float_as_uint(__half2float(__float2half_rn(x)));
  // float -> int rounding of a double (cvt.rni.s32.f64) and of the int -> double (cvt.rn.f64.s32)
  o[28] = (unsigned)__double2int_rn(d);
  o[29] = (unsigned)__double2uint_rz(fabs(d));
  o[30] = (unsigned)(__double_as_longlong((double)k) >> 32);
  o[31] = __float_as_uint(__uint2float_rd((unsigned)k));
}
