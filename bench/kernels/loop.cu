// loop: a compute-bound loop per thread (integer recurrence with data-dependent trip counts in the inner
// loop), the Gdev "loop" micro-benchmark in spirit.
extern "C" __global__ void loop(unsigned* out, int iterations) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned x = i * 2654435761u + 1;
  for (int it = 0; it < iterations; ++it) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    for (unsigned k = 0; k < (x & 3); ++k) x += k * 7 + it;
  }
  out[i] = x;
}
