// reduction: per-block sums with a shared-memory tree and bar.sync between levels. Each block of 256
// threads reduces 2 * 256 consecutive inputs into out[blockIdx.x].

constexpr int kBlock = 256;

extern "C" __global__ void reduce_sum(const int* in, int* out, int n) {
  __shared__ int partial[kBlock];
  unsigned tid = threadIdx.x;
  unsigned i = blockIdx.x * (kBlock * 2) + tid;
  int v = 0;
  if (i < n) v = in[i];
  if (i + kBlock < n) v += in[i + kBlock];
  partial[tid] = v;
  __syncthreads();
  for (unsigned stride = kBlock / 2; stride > 0; stride >>= 1) {
    if (tid < stride) partial[tid] += partial[tid + stride];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = partial[0];
}

// The same in float, with a dynamically sized shared array (extern __shared__).
extern "C" __global__ void reduce_sum_f32(const float* in, float* out, int n) {
  extern __shared__ float fpartial[];
  unsigned tid = threadIdx.x;
  unsigned i = blockIdx.x * blockDim.x + tid;
  fpartial[tid] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (tid < stride) fpartial[tid] += fpartial[tid + stride];
    __syncthreads();
  }
  if (tid == 0) out[blockIdx.x] = fpartial[0];
}
