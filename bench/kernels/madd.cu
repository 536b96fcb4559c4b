// madd: integer matrix addition C = A + B over an n x n row-major matrix, one thread per element
// (the Gdev/GPUvm "madd" micro-benchmark, written for this corpus).
extern "C" __global__ void madd(const int* a, const int* b, int* c, int n) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < n && col < n) c[row * n + col] = a[row * n + col] + b[row * n + col];
}
