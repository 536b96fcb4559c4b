// warp: warp-level primitives (all lanes of every warp active; blockDim a multiple of 32).
//   warp_reduce: per-warp sum with shfl.sync.down, then lane 0 of each warp writes it
//   warp_shuffle: up/xor/idx shuffles written per lane
//   warp_vote:  ballot / all / any over a data-dependent predicate, __activemask, and __syncwarp

extern "C" __global__ void warp_reduce(const int* in, int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[i];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  if ((threadIdx.x & 31) == 0) out[i / 32] = v;
}

extern "C" __global__ void warp_shuffle(const int* in, int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[i];
  out[4 * i] = __shfl_up_sync(0xffffffffu, v, 3);
  out[4 * i + 1] = __shfl_xor_sync(0xffffffffu, v, 5);
  out[4 * i + 2] = __shfl_sync(0xffffffffu, v, (threadIdx.x * 7) & 31);
  out[4 * i + 3] = __shfl_down_sync(0xffffffffu, v, 1, 8);  // width 8: segments of 8 lanes
}

extern "C" __global__ void warp_vote(const int* in, unsigned* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = in[i];
  unsigned ballot = __ballot_sync(0xffffffffu, v > 0);
  int all = __all_sync(0xffffffffu, v > -1000);
  int any = __any_sync(0xffffffffu, v == 7);
  __syncwarp();
  unsigned active = __activemask();
  out[4 * i] = ballot;
  out[4 * i + 1] = all;
  out[4 * i + 2] = any;
  out[4 * i + 3] = active;
}
