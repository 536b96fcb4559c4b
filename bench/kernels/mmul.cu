// mmul: integer matrix multiplication C = A * B (n x n, row-major), naive and shared-memory tiled.
// Integer products wrap modulo 2^32 exactly like the CPU reference.

// One thread per element of C; every operand comes from global memory.
extern "C" __global__ void mmul(const int* a, const int* b, int* c, int n) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= n || col >= n) return;
  int sum = 0;
  for (int k = 0; k < n; ++k) sum += a[row * n + k] * b[k * n + col];
  c[row * n + col] = sum;
}

constexpr int kTile = 16;

// Tiles of A and B staged through shared memory; blockDim must be kTile x kTile. Handles n that is not a
// multiple of the tile by padding with zeros.
extern "C" __global__ void mmul_tiled(const int* a, const int* b, int* c, int n) {
  __shared__ int ta[kTile][kTile];
  __shared__ int tb[kTile][kTile];
  int tx = threadIdx.x, ty = threadIdx.y;
  int col = blockIdx.x * kTile + tx;
  int row = blockIdx.y * kTile + ty;
  int sum = 0;
  for (int t = 0; t < n; t += kTile) {
    ta[ty][tx] = (row < n && t + tx < n) ? a[row * n + t + tx] : 0;
    tb[ty][tx] = (col < n && t + ty < n) ? b[(t + ty) * n + col] : 0;
    __syncthreads();
    for (int k = 0; k < kTile; ++k) sum += ta[ty][k] * tb[k][tx];
    __syncthreads();
  }
  if (row < n && col < n) c[row * n + col] = sum;
}
