// The kernels of compat-gdev (gdev.cc), compiled by `nvcc -ptx` at build time and loaded by the
// program with cuModuleLoad, as Gdev's test programs load the .cubin/.ptx files they ship with.
// extern "C": the program looks them up by their plain names.

// Gdev's madd shape: c = a + b over an n x n integer matrix, one thread per element, 2D grid.
extern "C" __global__ void gdev_madd(const unsigned* a, const unsigned* b, unsigned* c,
                                     unsigned n) {
  const unsigned i = blockIdx.y * blockDim.y + threadIdx.y;
  const unsigned j = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && j < n) c[i * n + j] = a[i * n + j] + b[i * n + j];
}

// A float parameter set with cuParamSetf and an int after it: y[i] = x[i] * scale + bias.
extern "C" __global__ void gdev_scale(const float* x, float* y, float scale, int bias, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * scale + float(bias);
}
