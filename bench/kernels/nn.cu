// nn: nearest neighbour search, in the style of Rodinia's nn (written for this corpus).
//   nn_distance: dist[i] = Euclidean distance from record i (a float2 of latitude, longitude) to the target
//   nn_argmin:   per block of 256, the smallest distance and its index (shared-memory tree reduction;
//                ties go to the smaller index), written to block_min/block_index[blockIdx.x]

extern "C" __global__ void nn_distance(const float2* records, float* dist, int n, float lat, float lng) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float2 r = records[i];
  float dx = r.x - lat, dy = r.y - lng;
  dist[i] = sqrtf(dx * dx + dy * dy);
}

constexpr int kBlock = 256;

extern "C" __global__ void nn_argmin(const float* dist, float* block_min, int* block_index, int n) {
  __shared__ float best[kBlock];
  __shared__ int where[kBlock];
  int tid = threadIdx.x;
  int i = blockIdx.x * kBlock + tid;
  best[tid] = i < n ? dist[i] : 3.0e38f;
  where[tid] = i < n ? i : 0x7fffffff;
  __syncthreads();
  for (int stride = kBlock / 2; stride > 0; stride >>= 1) {
    if (tid < stride) {
      float other = best[tid + stride];
      int other_at = where[tid + stride];
      if (other < best[tid] || (other == best[tid] && other_at < where[tid])) {
        best[tid] = other;
        where[tid] = other_at;
      }
    }
    __syncthreads();
  }
  if (tid == 0) {
    block_min[blockIdx.x] = best[0];
    block_index[blockIdx.x] = where[0];
  }
}
