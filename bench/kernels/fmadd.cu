// fmadd: float matrix addition C = A + B over an n x n row-major matrix, one thread per element.
extern "C" __global__ void fmadd(const float* a, const float* b, float* c, int n) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row < n && col < n) c[row * n + col] = a[row * n + col] + b[row * n + col];
}
