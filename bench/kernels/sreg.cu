// sreg: special registers and block-wide primitives. out has 20 words per thread (linear thread id over
// the whole grid):
//   0-2 %tid.xyz  3-5 %ntid.xyz  6-8 %ctaid.xyz  9-11 %nctaid.xyz  12 %laneid  13 %warpid
//   14 clock64 delta >= 0 (1 when the second reading is not earlier)  15 %clock delta >= 0 likewise
//   16 __syncthreads_count(tid odd) (bar.red.popc)  17 __syncthreads_or(tid == 3) (bar.red.or)
//   18 __syncthreads_and(tid < 1000) (bar.red.and)  19 1 after __threadfence (membar) and __nanosleep
// %warpid and the clocks are implementation-specific: the reference only checks %warpid < 32 * 1024.

__device__ unsigned lane_id() {
  unsigned r;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(r));
  return r;
}
__device__ unsigned clock32() {
  unsigned r;
  asm volatile("mov.u32 %0, %%clock;" : "=r"(r));
  return r;
}
__device__ unsigned warp_id() {
  unsigned r;
  asm volatile("mov.u32 %0, %%warpid;" : "=r"(r));
  return r;
}

extern "C" __global__ void sreg(unsigned* out) {
  unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned linear = block * blockDim.x * blockDim.y * blockDim.z + thread;
  unsigned* o = out + 20 * linear;
  long long t0 = clock64();
  unsigned c0 = clock32();
  o[0] = threadIdx.x;
  o[1] = threadIdx.y;
  o[2] = threadIdx.z;
  o[3] = blockDim.x;
  o[4] = blockDim.y;
  o[5] = blockDim.z;
  o[6] = blockIdx.x;
  o[7] = blockIdx.y;
  o[8] = blockIdx.z;
  o[9] = gridDim.x;
  o[10] = gridDim.y;
  o[11] = gridDim.z;
  o[12] = lane_id();
  o[13] = warp_id();
  long long t1 = clock64();
  unsigned c1 = clock32();
  o[14] = t1 >= t0 ? 1u : 0u;
  o[15] = (c1 - c0) < 0x80000000u ? 1u : 0u;
  o[16] = __syncthreads_count(thread & 1);
  o[17] = __syncthreads_or(thread == 3);
  o[18] = __syncthreads_and(thread < 1000);
  __threadfence();
  __nanosleep(50);
  o[19] = 1;
}
