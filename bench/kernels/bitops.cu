// bitops: bit manipulation and the integer instructions nvcc emits for intrinsics. out has kOut words per
// input pair (a, b); see reference.cc for the list.

constexpr int kOut = 30;

extern "C" __global__ void bitops(const unsigned* as, const unsigned* bs, unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned a = as[i], b = bs[i];
  unsigned* o = out + kOut * i;
  o[0] = __popc(a);
  o[1] = __clz(a);
  o[2] = __brev(a);
  o[3] = __ffs(a);                         // bfind-based
  o[4] = __byte_perm(a, b, 0x3210 ^ (b & 0x7777));  // prmt with a run-time selector
  o[5] = __funnelshift_l(a, b, b & 31);   // shf.l.wrap
  o[6] = __funnelshift_rc(a, b, b & 63);  // shf.r.clamp
  o[7] = __umulhi(a, b);                   // mul.hi.u32
  o[8] = (unsigned)__mulhi((int)a, (int)b);
  o[9] = __mul24(a, b);
  o[10] = __sad(a, b, 7);
  o[11] = (a & b) | (~a & (b ^ 0x0f0f0f0f));  // lop3 on sm_75
  o[12] = (a >> (b & 31)) | (a << ((32 - (b & 31)) & 31));
  o[13] = (unsigned)((int)a >> (b & 31));  // shr.s32
  o[14] = (a >> 8) & 0xfff;               // bfe-shaped
  o[15] = (a & ~(0xffu << 8)) | ((b & 0xff) << 8);  // bfi-shaped
  unsigned long long wide = (unsigned long long)a * b;
  o[16] = (unsigned)(wide >> 32);
  o[17] = __popcll(wide);
  o[18] = __clzll(wide | 1);
  unsigned __int128 big = (unsigned __int128)wide * wide + a;  // add.cc / addc / mad.hi chains
  o[19] = (unsigned)(big >> 96);
  o[20] = (unsigned)(big >> 64);
  o[21] = (unsigned)__dp4a((int)a, (int)b, 5);  // dp4a.s32.s32
  o[22] = a / (b | 1) + a % (b | 1);
  o[23] = (unsigned)(((int)a < (int)b) ? -1 : ((int)a == (int)b ? 0 : 1));
  // Instructions nvcc leaves to ptxas (or emits only for some intrinsics), written as inline PTX.
  unsigned r;
  asm("bfe.u32 %0, %1, %2, 8;" : "=r"(r) : "r"(a), "r"(b & 31));
  o[24] = r;
  asm("bfe.s32 %0, %1, 4, 12;" : "=r"(r) : "r"(a));
  o[25] = r;
  asm("bfi.b32 %0, %1, %2, 8, 12;" : "=r"(r) : "r"(b), "r"(a));
  o[26] = r;
  asm("lop3.b32 %0, %1, %2, %3, 0x96;" : "=r"(r) : "r"(a), "r"(b), "r"(0x0f0f0f0fu));
  o[27] = r;
  asm("mul24.lo.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  o[28] = r;
  asm("{ .reg .pred %%p; testp.finite.f32 %%p, %1; selp.u32 %0, 1, 0, %%p; }" : "=r"(r) : "f"(__uint_as_float(a)));
  o[29] = r;
}
