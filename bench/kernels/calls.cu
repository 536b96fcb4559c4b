// calls: device-function calls that stay calls in the PTX (__noinline__): arguments and results of
// several types, a call chain, a call under divergence, a struct returned by value, and recursion.

struct Pair {
  int lo;
  float hi;
};

__device__ __noinline__ int mix(int a, int b) { return a * 31 + (b ^ 0x5a5a); }
__device__ __noinline__ float scale(float x, int k) { return x * (float)k + 0.5f; }
__device__ __noinline__ double widen(float x, long long y) { return (double)x * 2.0 + (double)y; }
__device__ __noinline__ int chain(int a) { return mix(a, a + 1) + mix(a + 2, a); }
__device__ __noinline__ Pair make_pair(int v) { return Pair{v * 3, (float)v * 0.25f}; }
__device__ __noinline__ unsigned fib(unsigned k) { return k < 2 ? k : fib(k - 1) + fib(k - 2); }
__device__ __noinline__ void store_twice(int* p, int v) {
  p[0] = v;
  p[1] = v;
}

extern "C" __global__ void calls(const int* in, int* out_i, float* out_f, double* out_d, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = in[i];
  int* o = out_i + 5 * i;
  o[0] = chain(v);
  out_f[i] = scale((float)v, i & 7);
  out_d[i] = widen((float)v, (long long)v << 33);
  Pair p = make_pair(v);
  o[1] = p.lo + (int)p.hi;
  if (v & 1) {
    o[2] = mix(v, i);  // a call on one side of a branch
  } else {
    o[2] = chain(i);
  }
  store_twice(o + 3, v ^ 0x1234);
}

// Recursion: the callee calls itself, so the call stack must be real.
extern "C" __global__ void calls_recursive(unsigned* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = fib(i % 12);
}
