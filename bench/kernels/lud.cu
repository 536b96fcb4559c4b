// lud: LU decomposition without pivoting (Doolittle, in place: L below the diagonal with an implicit unit
// diagonal, U on and above it) of an n x n row-major matrix, in the style of Rodinia's lud (written for
// this corpus). The host runs, for k = 0 .. n-2:
//   lud_column(a, n, k):  a[i][k] /= a[k][k] for i > k                      (1D grid)
//   lud_update(a, n, k):  a[i][j] -= a[i][k] * a[k][j] for i, j > k         (16 x 16 blocks; the pivot
//                         row and column segments are staged in shared memory)

constexpr int kB = 16;

extern "C" __global__ void lud_column(float* a, int n, int k) {
  int i = k + 1 + blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) a[i * n + k] /= a[k * n + k];
}

extern "C" __global__ void lud_update(float* a, int n, int k) {
  __shared__ float row[kB];
  __shared__ float col[kB];
  int tx = threadIdx.x, ty = threadIdx.y;
  int j = k + 1 + blockIdx.x * kB + tx;
  int i = k + 1 + blockIdx.y * kB + ty;
  if (ty == 0) row[tx] = j < n ? a[k * n + j] : 0.0f;
  if (tx == 0) col[ty] = i < n ? a[i * n + k] : 0.0f;
  __syncthreads();
  if (i < n && j < n) a[i * n + j] -= col[ty] * row[tx];
}
