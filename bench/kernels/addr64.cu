// addr64: 64-bit address arithmetic.
//   addr64_gather: out[i] = base[idx[i]] with 64-bit indices and a base pointer that arrives biased by
//                  -bias bytes (bias > 4 GiB, so the carry into the upper 32 bits matters)
//   addr64_split:  the pointer arrives as two 32-bit halves and is put back together in the kernel

extern "C" __global__ void addr64_gather(const long long* idx, const char* biased_base,
                                         unsigned long long bias, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int* base = reinterpret_cast<const int*>(biased_base + bias);
  out[i] = base[idx[i]];
}

extern "C" __global__ void addr64_split(unsigned lo, unsigned hi, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int* p = reinterpret_cast<int*>((static_cast<unsigned long long>(hi) << 32) | lo);
  if (i < n) p[i] = p[i] * 2 + i;
}
