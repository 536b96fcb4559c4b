// divergence: control flow that stresses SIMT reconvergence.
//   nested_divergence: three levels of data-dependent if/else inside a warp, plus a divergent loop
//   early_exit:        threads leave at different points (before and inside a loop); the rest keep going
//   barrier_loop:      bar.sync inside a loop with a uniform trip count, neighbours exchanged through shared
//                      memory on every iteration

extern "C" __global__ void nested_divergence(const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = in[i];
  int r;
  if (v & 1) {
    if (v & 2) {
      if (v & 4) {
        r = v * 3;
      } else {
        r = v - 7;
      }
    } else {
      r = v ^ 0x55;
    }
  } else {
    if (v & 8) {
      r = 0;
      for (int k = 0; k < (v & 0x70) >> 4; ++k) r += k * v;  // trip count differs per lane
    } else {
      r = -v;
    }
  }
  out[i] = r;
}

extern "C" __global__ void early_exit(const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = in[i];
  out[i] = -1;
  if (v % 5 == 0) return;  // leaves before the loop
  int acc = 0;
  for (int k = 0; k < 32; ++k) {
    acc += v + k;
    if (acc > 1000 + (i & 63)) {  // leaves from inside the loop
      out[i] = k;
      return;
    }
  }
  out[i] = acc;
}

constexpr int kBlock = 128;

extern "C" __global__ void barrier_loop(const int* in, int* out, int rounds) {
  __shared__ int cur[kBlock];
  int tid = threadIdx.x;
  int base = blockIdx.x * kBlock;
  cur[tid] = in[base + tid];
  __syncthreads();
  for (int r = 0; r < rounds; ++r) {
    int left = cur[(tid + kBlock - 1) % kBlock];
    int right = cur[(tid + 1) % kBlock];
    __syncthreads();
    cur[tid] = left + right + (tid & r);
    __syncthreads();
  }
  out[base + tid] = cur[tid];
}
