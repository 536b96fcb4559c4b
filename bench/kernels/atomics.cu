// atomics: every atom/red operation on global and shared memory under contention (many threads, few
// addresses). Every result is order-independent (checked exactly) except the final values of exchange and
// CAS targets, which the reference checks by range.
//   atomics_global: counters[0..12] updated by all threads with add/sub/min/max/inc/dec/and/or/xor/exch/cas
//                   (32-bit), plus 64-bit add/min/max/cas and float/double add
//   atomics_shared: the same 32-bit set on shared counters per block, then folded into out[block][..]

struct Counters {
  int add;              // += 1 per thread
  unsigned sub;         // -= 2 per thread (atomicSub: an add of -2)
  int min;              // min over values
  int max;              // max over values
  unsigned inc;         // atomicInc with wrap at limit
  unsigned dec;         // atomicDec with wrap
  unsigned and_bits;    // &= ~(1 << (i % 32))
  unsigned or_bits;     // |= 1 << (i % 32)
  unsigned xor_bits;    // ^= value
  int exch_seen;        // number of threads whose exchange returned a valid old value
  int cas_winners;      // number of threads that won a CAS on `cas_slot`
  int cas_slot;         // one-shot CAS target (0 -> the winner's id + 1)
  unsigned long long add64;
  long long min64;
  unsigned long long max64;
  unsigned long long cas64;  // CAS-loop increment: ends at the number of threads
  float addf;           // += 1.0f (exact for small counts)
  double addd;          // += 0.5
  int red_add;          // atomicAdd whose result is unused (nvcc emits red.global.add)
  unsigned red_or;
};

extern "C" __global__ void atomics_global(const int* values, Counters* c, int* exch_slot, int n,
                                          unsigned wrap) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = values[i];
  atomicAdd(&c->red_add, 3);
  atomicOr(&c->red_or, 1u << (v & 31));
  int old = atomicAdd(&c->add, 1);
  if (old < 0) c->add = -1000000;  // never taken: keeps the returned value live (atom, not red)
  atomicSub(&c->sub, 2u);
  atomicMin(&c->min, v);
  atomicMax(&c->max, v);
  atomicInc(&c->inc, wrap);
  atomicDec(&c->dec, wrap);
  atomicAnd(&c->and_bits, ~(1u << (i % 32)));
  atomicOr(&c->or_bits, 1u << (i % 32));
  atomicXor(&c->xor_bits, (unsigned)v);
  int prev = atomicExch(exch_slot, i);
  if (prev >= -1 && prev < n) atomicAdd(&c->exch_seen, 1);
  if (atomicCAS(&c->cas_slot, 0, i + 1) == 0) atomicAdd(&c->cas_winners, 1);
  atomicAdd(&c->add64, (unsigned long long)(v & 0xff) << 32);
  atomicMin(&c->min64, (long long)v * 1000000007LL);
  atomicMax(&c->max64, (unsigned long long)(unsigned)v << 20);
  unsigned long long seen = c->cas64, assumed;
  do {
    assumed = seen;
    seen = atomicCAS(&c->cas64, assumed, assumed + 1);
  } while (seen != assumed);
  atomicAdd(&c->addf, 1.0f);
  atomicAdd(&c->addd, 0.5);
}

constexpr int kSlots = 9;
constexpr int kSharedOut = kSlots + 3;

// out[block * kSharedOut + ...]: the 9 counters, then the exchange slot's final value (some tid + 1), the
// CAS owner (some tid + 1) and the number of CAS winners (1).
extern "C" __global__ void atomics_shared(const int* values, int* out, int n, unsigned wrap) {
  __shared__ int s[kSlots];
  __shared__ unsigned exch_slot, cas_owner;
  __shared__ int cas_winners;
  int tid = threadIdx.x;
  if (tid < kSlots) s[tid] = 0;
  if (tid == 0) {
    s[2] = 0x7fffffff;       // min starts high
    s[3] = -0x7fffffff - 1;  // max starts low
    s[6] = -1;               // and starts with all bits
    exch_slot = 0;
    cas_owner = 0;
    cas_winners = 0;
  }
  __syncthreads();
  int i = blockIdx.x * blockDim.x + tid;
  if (i < n) {
    int v = values[i];
    atomicAdd(&s[0], v & 0xff);
    atomicSub(&s[1], 1);
    atomicMin(&s[2], v);
    atomicMax(&s[3], v);
    atomicInc((unsigned*)&s[4], wrap);
    atomicDec((unsigned*)&s[5], wrap);
    atomicAnd(&s[6], ~(1 << (tid % 32)));
    atomicOr(&s[7], 1 << (v & 31));
    atomicXor(&s[8], v);
    atomicExch(&exch_slot, (unsigned)tid + 1);
    if (atomicCAS(&cas_owner, 0u, (unsigned)tid + 1) == 0) atomicAdd(&cas_winners, 1);
  }
  __syncthreads();
  int* o = out + blockIdx.x * kSharedOut;
  if (tid < kSlots) o[tid] = s[tid];
  if (tid == 0) {
    o[kSlots] = (int)exch_slot;
    o[kSlots + 1] = (int)cas_owner;
    o[kSlots + 2] = cas_winners;
  }
}

// red (reductions without a result). nvcc 13 emits atom even when the result is unused, so the red forms
// come from inline PTX, as hand-tuned CUDA code writes them. red_out (global): add, min, max, inc, dec,
// and, or, xor (32-bit), add.u64, add.f32; then the same 32-bit set on shared memory per block, folded into
// red_out[12 + block * 8 ...].

extern "C" __global__ void atomics_red(const int* values, unsigned* red_out, int n, unsigned wrap) {
  __shared__ unsigned s[8];
  int tid = threadIdx.x;
  if (tid < 8) s[tid] = 0;
  if (tid == 0) {
    s[1] = 0xffffffffu;  // min
    s[5] = 0xffffffffu;  // and
  }
  __syncthreads();
  int i = blockIdx.x * blockDim.x + tid;
  if (i < n) {
    unsigned v = (unsigned)values[i];
    unsigned* g = red_out;
    asm volatile("red.global.add.u32 [%0], %1;" ::"l"(g + 0), "r"(v & 0xff) : "memory");
    asm volatile("red.global.min.u32 [%0], %1;" ::"l"(g + 1), "r"(v) : "memory");
    asm volatile("red.global.max.u32 [%0], %1;" ::"l"(g + 2), "r"(v) : "memory");
    asm volatile("red.global.inc.u32 [%0], %1;" ::"l"(g + 3), "r"(wrap) : "memory");
    asm volatile("red.global.dec.u32 [%0], %1;" ::"l"(g + 4), "r"(wrap) : "memory");
    asm volatile("red.global.and.b32 [%0], %1;" ::"l"(g + 5), "r"(~(1u << (i % 32))) : "memory");
    asm volatile("red.global.or.b32 [%0], %1;" ::"l"(g + 6), "r"(1u << (v & 31)) : "memory");
    asm volatile("red.global.xor.b32 [%0], %1;" ::"l"(g + 7), "r"(v) : "memory");
    asm volatile("red.global.add.u64 [%0], %1;" ::"l"(g + 8), "l"((unsigned long long)v << 8)
                 : "memory");
    asm volatile("red.global.add.f32 [%0], %1;" ::"l"(g + 10), "f"(0.25f) : "memory");
    asm volatile("red.shared.add.u32 [%0], %1;" ::"r"((unsigned)__cvta_generic_to_shared(&s[0])),
                 "r"(v & 0xff) : "memory");
    asm volatile("red.shared.min.u32 [%0], %1;" ::"r"((unsigned)__cvta_generic_to_shared(&s[1])),
                 "r"(v) : "memory");
    asm volatile("red.shared.max.u32 [%0], %1;" ::"r"((unsigned)__cvta_generic_to_shared(&s[2])),
                 "r"(v) : "memory");
    asm volatile("red.shared.inc.u32 [%0], %1;" ::"r"((unsigned)__cvta_generic_to_shared(&s[3])),
                 "r"(wrap) : "memory");
    asm volatile("red.shared.dec.u32 [%0], %1;" ::"r"((unsigned)__cvta_generic_to_shared(&s[4])),
                 "r"(wrap) : "memory");
    asm volatile("red.shared.and.b32 [%0], %1;" ::"r"((unsigned)__cvta_generic_to_shared(&s[5])),
                 "r"(~(1u << (tid % 32))) : "memory");
    asm volatile("red.shared.or.b32 [%0], %1;" ::"r"((unsigned)__cvta_generic_to_shared(&s[6])),
                 "r"(1u << (v & 31)) : "memory");
    asm volatile("red.shared.xor.b32 [%0], %1;" ::"r"((unsigned)__cvta_generic_to_shared(&s[7])),
                 "r"(v) : "memory");
  }
  __syncthreads();
  if (tid < 8) red_out[12 + blockIdx.x * 8 + tid] = s[tid];
}
