// fmmul: float matrix multiplication C = A * B (n x n, row-major), naive and shared-memory tiled.
// Both accumulate k = 0 .. n-1 in order with fused multiply-add, which the CPU reference mirrors.

extern "C" __global__ void fmmul(const float* a, const float* b, float* c, int n) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= n || col >= n) return;
  float sum = 0.0f;
  for (int k = 0; k < n; ++k) sum += a[row * n + k] * b[k * n + col];
  c[row * n + col] = sum;
}

// A template, so its entry name is C++-mangled the way most real kernels are.
template <int kTile>
__global__ void fmmul_tiled(const float* a, const float* b, float* c, int n) {
  __shared__ float ta[kTile][kTile];
  __shared__ float tb[kTile][kTile];
  int tx = threadIdx.x, ty = threadIdx.y;
  int col = blockIdx.x * kTile + tx;
  int row = blockIdx.y * kTile + ty;
  float sum = 0.0f;
  for (int t = 0; t < n; t += kTile) {
    ta[ty][tx] = (row < n && t + tx < n) ? a[row * n + t + tx] : 0.0f;
    tb[ty][tx] = (col < n && t + ty < n) ? b[(t + ty) * n + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTile; ++k) sum += ta[ty][k] * tb[k][tx];
    __syncthreads();
  }
  if (row < n && col < n) c[row * n + col] = sum;
}

template __global__ void fmmul_tiled<16>(const float*, const float*, float*, int);
