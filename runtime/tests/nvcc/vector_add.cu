// A vector add written the way a CUDA tutorial writes it. runtime/tests/nvcc_test.sh builds it with stock
// nvcc (`-cudart shared`, default flags) and runs it on gpuvm's libcudart.so.13.
#include <cstdio>
#include <cstdlib>

__global__ void vectorAdd(const float* a, const float* b, float* c, int n) {
  int i = blockDim.x * blockIdx.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

#define CHECK(call)                                                                   \
  do {                                                                                \
    cudaError_t err = (call);                                                         \
    if (err != cudaSuccess) {                                                         \
      fprintf(stderr, "%s failed: %s (%s)\n", #call, cudaGetErrorString(err),         \
              cudaGetErrorName(err));                                                 \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

int main() {
  const int n = 50000;
  const size_t bytes = n * sizeof(float);
  float* h_a = (float*)malloc(bytes);
  float* h_b = (float*)malloc(bytes);
  float* h_c = (float*)malloc(bytes);
  for (int i = 0; i < n; ++i) {
    h_a[i] = rand() / (float)RAND_MAX;
    h_b[i] = rand() / (float)RAND_MAX;
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("device: %s\n", prop.name);

  float *d_a, *d_b, *d_c;
  CHECK(cudaMalloc(&d_a, bytes));
  CHECK(cudaMalloc(&d_b, bytes));
  CHECK(cudaMalloc(&d_c, bytes));
  CHECK(cudaMemcpy(d_a, h_a, bytes, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_b, h_b, bytes, cudaMemcpyHostToDevice));

  int threads = 256;
  int blocks = (n + threads - 1) / threads;
  vectorAdd<<<blocks, threads>>>(d_a, d_b, d_c, n);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(h_c, d_c, bytes, cudaMemcpyDeviceToHost));

  for (int i = 0; i < n; ++i) {
    if (h_a[i] + h_b[i] != h_c[i]) {
      fprintf(stderr, "mismatch at %d: %f + %f != %f\n", i, h_a[i], h_b[i], h_c[i]);
      return 1;
    }
  }
  CHECK(cudaFree(d_a));
  CHECK(cudaFree(d_b));
  CHECK(cudaFree(d_c));
  free(h_a);
  free(h_b);
  free(h_c);
  printf("PASSED\n");
  return 0;
}
