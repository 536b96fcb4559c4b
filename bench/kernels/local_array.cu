// local_array: a per-thread array indexed with run-time values, which nvcc must place in .local memory.
// out[i] = sum over k of buf[(k * 7 + v) % 64] after a data-dependent fill and shuffle.

extern "C" __global__ void local_array(const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = in[i];
  int buf[64];
  for (int k = 0; k < 64; ++k) buf[k] = v * k + (k ^ v);
  for (int k = 0; k < 64; ++k) {
    int j = (v + k * 13) & 63;  // run-time index: not promotable to registers
    int t = buf[k];
    buf[k] = buf[j];
    buf[j] = t;
  }
  int sum = 0;
  for (int k = 0; k < 64; ++k) sum += buf[(k * 7 + v) & 63] * (k + 1);
  out[i] = sum;
}
