// histogram: 256-bin byte histograms.
//   histogram_shared: each block counts into shared memory with shared atomics, then merges its bins into
//                     the global histogram with global atomics.
//   histogram_global: every thread increments the global bins directly (heavy contention).

constexpr int kBins = 256;

extern "C" __global__ void histogram_shared(const unsigned char* data, unsigned* bins, int n) {
  __shared__ unsigned local[kBins];
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    atomicAdd(&local[data[i]], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < kBins; b += blockDim.x) {
    if (local[b] != 0) atomicAdd(&bins[b], local[b]);
  }
}

extern "C" __global__ void histogram_global(const unsigned char* data, unsigned* bins, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
    atomicAdd(&bins[data[i]], 1u);
  }
}
