// The warp interpreter. This file is included by interpreter_generic.cc (baseline x86-64) and
// interpreter_avx2.cc (AVX2 + FMA), each with GPUVM_INTERP_NS set to its own namespace; everything
// here except RunWarp has internal linkage, so the two copies never mix. interpreter.cc picks one
// at run time.
//
// Design (docs/ISA.md "Execution model"): registers are structure-of-arrays rows (regs[row][lane]);
// a handler computes all 32 lanes into a local array with a branch-free loop the compiler
// vectorises, then stores the lanes the instruction executes (a plain copy when all 32 do).
// Divergence is min-PC: the warp runs the group of lanes with the smallest pc; other groups wait in
// Warp::pending and merge back when the running group reaches their pc. Memory handlers resolve
// each lane's address (page cache for global memory) and fault cleanly on anything out of bounds.
#ifndef GPUVM_INTERP_NS
#error "define GPUVM_INTERP_NS before including interpreter_impl.h"
#endif

#include <cmath>
#include <cstring>
#include <ctime>
#include <type_traits>

#include "gpu/sim/compute/exec_state.h"
#include "gpu/sim/compute/semantics.h"

namespace gpuvm::sim::compute::GPUVM_INTERP_NS {
namespace {

#define GPUVM_INLINE inline __attribute__((always_inline))

using isa::kPredTrue;

template <typename T>
GPUVM_INLINE T* RowPtr(uint8_t* regs, uint32_t row) {
  return reinterpret_cast<T*>(__builtin_assume_aligned(regs + size_t{row} * kRowBytes, 64));
}

GPUVM_INLINE uint32_t Popcount(uint32_t m) { return static_cast<uint32_t>(__builtin_popcount(m)); }

// Stores the executing lanes of `tmp` into `d`.
template <typename T>
GPUVM_INLINE void StoreLanes(uint32_t exec, T* d, const T* tmp) {
  if (exec == kFullMask) {
    for (int l = 0; l < kLanes; ++l) d[l] = tmp[l];
  } else {
    for (int l = 0; l < kLanes; ++l) d[l] = ((exec >> l) & 1) ? tmp[l] : d[l];
  }
}

template <typename D, typename A, typename F>
GPUVM_INLINE void Map1(uint8_t* regs, const Op& op, uint32_t exec, F f) {
  const A* a = RowPtr<const A>(regs, op.a);
  alignas(64) D t[kLanes];
  for (int l = 0; l < kLanes; ++l) t[l] = f(a[l]);
  StoreLanes(exec, RowPtr<D>(regs, op.d), t);
}

template <typename D, typename A, typename B, typename F>
GPUVM_INLINE void Map2(uint8_t* regs, const Op& op, uint32_t exec, F f) {
  const A* a = RowPtr<const A>(regs, op.a);
  const B* b = RowPtr<const B>(regs, op.b);
  alignas(64) D t[kLanes];
  for (int l = 0; l < kLanes; ++l) t[l] = f(a[l], b[l]);
  StoreLanes(exec, RowPtr<D>(regs, op.d), t);
}

template <typename D, typename A, typename B, typename C, typename F>
GPUVM_INLINE void Map3(uint8_t* regs, const Op& op, uint32_t exec, F f) {
  const A* a = RowPtr<const A>(regs, op.a);
  const B* b = RowPtr<const B>(regs, op.b);
  const C* c = RowPtr<const C>(regs, op.c);
  alignas(64) D t[kLanes];
  for (int l = 0; l < kLanes; ++l) t[l] = f(a[l], b[l], c[l]);
  StoreLanes(exec, RowPtr<D>(regs, op.d), t);
}

// ---- scalar semantics that the fast handlers share
// --------------------------------------------------

template <typename S, typename U>
GPUVM_INLINE S WrapNeg(S a) {
  return static_cast<S>(U(0) - static_cast<U>(a));
}
template <typename S, typename U>
GPUVM_INLINE S DivSigned(S a, S b) {
  if (b == 0) return S(-1);
  if (b == S(-1)) return WrapNeg<S, U>(a);  // also INT_MIN / -1 = INT_MIN, without overflow
  return a / b;
}
template <typename S>
GPUVM_INLINE S RemSigned(S a, S b) {
  if (b == 0) return a;
  if (b == S(-1)) return 0;
  return a % b;
}
template <typename U>
GPUVM_INLINE U DivUnsigned(U a, U b) {
  return b ? a / b : ~U(0);
}
template <typename U>
GPUVM_INLINE U RemUnsigned(U a, U b) {
  return b ? a % b : a;
}
template <typename F>
GPUVM_INLINE F FMin(F a, F b) {
  if (a != a) return b;
  if (b != b) return a;
  return a < b ? a : b;
}
template <typename F>
GPUVM_INLINE F FMax(F a, F b) {
  if (a != a) return b;
  if (b != b) return a;
  return a > b ? a : b;
}
GPUVM_INLINE uint32_t Brev32(uint32_t v) {
  v = ((v >> 1) & 0x55555555u) | ((v & 0x55555555u) << 1);
  v = ((v >> 2) & 0x33333333u) | ((v & 0x33333333u) << 2);
  v = ((v >> 4) & 0x0f0f0f0fu) | ((v & 0x0f0f0f0fu) << 4);
  v = ((v >> 8) & 0x00ff00ffu) | ((v & 0x00ff00ffu) << 8);
  return (v >> 16) | (v << 16);
}
GPUVM_INLINE uint64_t Brev64(uint64_t v) {
  return (uint64_t{Brev32(static_cast<uint32_t>(v))} << 32) |
         Brev32(static_cast<uint32_t>(v >> 32));
}
// PTX bfe: bits [pos, pos + len) of a, sign-extended from the last extracted bit for signed types.
template <typename U, bool kSigned>
GPUVM_INLINE U Bfe(U a, uint32_t pos_raw, uint32_t len_raw) {
  constexpr uint32_t kBits = sizeof(U) * 8;
  const uint32_t pos = pos_raw & 0xff;
  const uint32_t len = len_raw & 0xff;
  U sign = 0;
  if (kSigned && len != 0) {
    uint32_t top = pos + len - 1;
    if (top > kBits - 1) top = kBits - 1;
    sign = ((a >> top) & 1) ? ~U(0) : U(0);
  }
  if (len == 0) return 0;
  if (pos >= kBits) return sign;
  U shifted = a >> pos;
  uint32_t avail = kBits - pos;
  uint32_t n = len < avail ? len : avail;
  U mask = n >= kBits ? ~U(0) : ((U(1) << n) - 1);
  U v = shifted & mask;
  if (kSigned && n < kBits) v |= sign & ~mask;  // bits at and above n take the sign bit
  return v;
}
template <typename U>
GPUVM_INLINE U Bfi(U a, U b, uint32_t pos_raw, uint32_t len_raw) {
  constexpr uint32_t kBits = sizeof(U) * 8;
  const uint32_t pos = pos_raw & 0xff;
  const uint32_t len = len_raw & 0xff;
  if (len == 0 || pos >= kBits) return b;
  uint32_t n = len < kBits - pos ? len : kBits - pos;
  U mask = n >= kBits ? ~U(0) : ((U(1) << n) - 1);
  return (b & ~(mask << pos)) | ((a & mask) << pos);
}
GPUVM_INLINE uint32_t Prmt(uint32_t a, uint32_t b, uint32_t sel, uint32_t mode) {
  const uint64_t src = uint64_t{a} | (uint64_t{b} << 32);
  auto byte = [&](uint32_t i) { return static_cast<uint32_t>((src >> ((i & 7) * 8)) & 0xff); };
  uint32_t out = 0;
  const uint32_t s = sel & 3;
  for (uint32_t i = 0; i < 4; ++i) {
    uint32_t v = 0;
    switch (mode) {
      case 0: {  // generic: a nibble per byte, bit 3 replicates the sign bit
        uint32_t nib = (sel >> (4 * i)) & 0xf;
        v = byte(nib & 7);
        if (nib & 8) v = (v & 0x80) ? 0xff : 0;
        break;
      }
      case 1:
        v = byte(s + i);
        break;  // f4e
      case 2:
        v = byte(s - i);
        break;  // b4e
      case 3:
        v = byte(s);
        break;  // rc8
      case 4:
        v = byte(i > s ? i : s);
        break;  // ecl
      case 5:
        v = byte(i < s ? i : s);
        break;  // ecr
      default:
        v = byte((s & 1) * 2 + (i & 1));
        break;  // rc16
    }
    out |= v << (8 * i);
  }
  return out;
}
GPUVM_INLINE uint32_t Shf(uint32_t a, uint32_t b, uint32_t c, uint32_t mode) {
  uint32_t n = (mode & isa::kShfClamp) ? (c > 32 ? 32 : c) : (c & 31);
  uint64_t v = (uint64_t{b} << 32) | a;
  if (mode & isa::kShfRight) return static_cast<uint32_t>(v >> n);
  return static_cast<uint32_t>((v << n) >> 32);
}
GPUVM_INLINE int32_t F32ToS32(float f) {
  if (f != f) return 0;
  if (f >= 2147483648.0f) return INT32_MAX;
  if (f <= -2147483648.0f) return INT32_MIN;
  return static_cast<int32_t>(f);
}
template <typename F>
GPUVM_INLINE bool Testp(F v, uint32_t mode) {
  switch (static_cast<isa::TestpMode>(mode)) {
    case isa::TestpMode::kFinite:
      return std::isfinite(v);
    case isa::TestpMode::kInfinite:
      return std::isinf(v);
    case isa::TestpMode::kNumber:
      return !std::isnan(v);
    case isa::TestpMode::kNotANumber:
      return std::isnan(v);
    case isa::TestpMode::kNormal:
      return std::isnormal(v);
    default:
      return std::fpclassify(v) == FP_SUBNORMAL;
  }
}

// Comparison of all 32 lanes into a lane mask.
template <typename T>
GPUVM_INLINE uint32_t CompareLanes(const T* a, const T* b, uint32_t cmp) {
  alignas(64) uint8_t r[kLanes];
  using C = isa::Compare;
  switch (static_cast<C>(cmp)) {
    case C::kEq:
      for (int l = 0; l < kLanes; ++l) r[l] = a[l] == b[l];
      break;
    case C::kNe:
      for (int l = 0; l < kLanes; ++l) r[l] = (a[l] < b[l]) | (a[l] > b[l]);
      break;
    case C::kLt:
      for (int l = 0; l < kLanes; ++l) r[l] = a[l] < b[l];
      break;
    case C::kLe:
      for (int l = 0; l < kLanes; ++l) r[l] = a[l] <= b[l];
      break;
    case C::kGt:
      for (int l = 0; l < kLanes; ++l) r[l] = a[l] > b[l];
      break;
    case C::kGe:
      for (int l = 0; l < kLanes; ++l) r[l] = a[l] >= b[l];
      break;
    case C::kEqu:
      for (int l = 0; l < kLanes; ++l) r[l] = !(a[l] < b[l]) & !(a[l] > b[l]);
      break;
    case C::kNeu:
      for (int l = 0; l < kLanes; ++l) r[l] = a[l] != b[l];
      break;
    case C::kLtu:
      for (int l = 0; l < kLanes; ++l) r[l] = !(a[l] >= b[l]);
      break;
    case C::kLeu:
      for (int l = 0; l < kLanes; ++l) r[l] = !(a[l] > b[l]);
      break;
    case C::kGtu:
      for (int l = 0; l < kLanes; ++l) r[l] = !(a[l] <= b[l]);
      break;
    case C::kGeu:
      for (int l = 0; l < kLanes; ++l) r[l] = !(a[l] < b[l]);
      break;
    case C::kNum:
      for (int l = 0; l < kLanes; ++l) r[l] = (a[l] == a[l]) & (b[l] == b[l]);
      break;
    default:
      for (int l = 0; l < kLanes; ++l) r[l] = (a[l] != a[l]) | (b[l] != b[l]);
      break;
  }
  uint32_t m = 0;
  for (int l = 0; l < kLanes; ++l) m |= uint32_t{r[l]} << l;
  return m;
}

GPUVM_INLINE void SetPred(Warp& w, uint32_t p, uint32_t exec, uint32_t value) {
  w.preds[p] = (w.preds[p] & ~exec) | (value & exec);
}

// ---- divergence bookkeeping
// --------------------------------------------------------------------------

void RecomputeJoin(Warp& w) {
  uint32_t m = kNoPc;
  for (uint32_t i = 0; i < w.pending_count; ++i) {
    const Group& g = w.pending[i];
    if (g.barrier == 0 && g.pc < m) m = g.pc;
  }
  w.next_join = m;
}

void RemoveGroup(Warp& w, uint32_t i) { w.pending[i] = w.pending[--w.pending_count]; }

// Adds lanes waiting at `pc` (runnable, or blocked at barrier `barrier` - 1), merging with a group
// already there.
void PushGroup(Warp& w, uint32_t pc, uint32_t mask, uint32_t barrier = 0) {
  for (uint32_t i = 0; i < w.pending_count; ++i) {
    Group& g = w.pending[i];
    if (g.pc == pc && g.barrier == barrier) {
      g.mask |= mask;
      return;
    }
  }
  w.pending[w.pending_count++] = Group{pc, mask, barrier};
  if (barrier == 0 && pc < w.next_join) w.next_join = pc;
}

// Makes the runnable group with the smallest pc current. False when there is none.
bool PopMin(Warp& w, uint32_t* pc, uint32_t* active) {
  uint32_t best = kNoPc, best_pc = kNoPc;
  for (uint32_t i = 0; i < w.pending_count; ++i) {
    const Group& g = w.pending[i];
    if (g.barrier == 0 && g.pc < best_pc) {
      best_pc = g.pc;
      best = i;
    }
  }
  if (best == kNoPc) return false;
  *pc = best_pc;
  *active = w.pending[best].mask;
  RemoveGroup(w, best);
  RecomputeJoin(w);
  return true;
}

// Removes and returns the lanes of runnable groups waiting at `pc`.
uint32_t TakeAt(Warp& w, uint32_t pc) {
  uint32_t mask = 0;
  for (uint32_t i = 0; i < w.pending_count;) {
    Group& g = w.pending[i];
    if (g.barrier == 0 && g.pc == pc) {
      mask |= g.mask;
      RemoveGroup(w, i);
    } else {
      ++i;
    }
  }
  RecomputeJoin(w);
  return mask;
}

void ReleaseBarrier(BlockState& block, uint32_t id) {
  block.bar_arrived[id] = 0;
  for (Warp& w : block.warps) {
    bool any = false;
    for (uint32_t i = 0; i < w.pending_count; ++i) {
      if (w.pending[i].barrier == id + 1) {
        w.pending[i].barrier = 0;
        any = true;
      }
    }
    if (!any) continue;
    // Merge released groups with runnable groups at the same pc.
    for (uint32_t i = 0; i < w.pending_count; ++i) {
      for (uint32_t j = i + 1; j < w.pending_count;) {
        Group& a = w.pending[i];
        Group& b = w.pending[j];
        if (a.barrier == 0 && b.barrier == 0 && a.pc == b.pc) {
          a.mask |= b.mask;
          RemoveGroup(w, j);
        } else {
          ++j;
        }
      }
    }
    RecomputeJoin(w);
    w.waiting = false;
  }
}

// After threads exit, barriers they no longer have to reach may be complete.
void CheckBarriers(BlockState& block) {
  for (uint32_t id = 0; id < isa::kMaxBarriers; ++id) {
    if (block.bar_arrived[id] != 0 && block.bar_arrived[id] >= block.live_threads)
      ReleaseBarrier(block, id);
  }
}

// ---- memory
// -----------------------------------------------------------------------------------------

GPUVM_INLINE bool Fail(ExecContext& ctx, ComputeFault::Kind kind, const char* what, uint32_t lane,
                       uint64_t address) {
  FaultRecord& f = ctx.worker->fault;
  f.kind = kind;
  f.what = what;
  f.lane = lane;
  f.address = address;
  return false;
}

GPUVM_INLINE uint64_t LaneAddress(uint8_t* regs, const Op& op, int l) {
  if (op.aux & kAuxAddr64) return RowPtr<const uint64_t>(regs, op.a)[l] + op.imm;
  return uint64_t{RowPtr<const uint32_t>(regs, op.a)[l]} + op.imm;
}

GPUVM_INLINE uint8_t* GlobalPtr(WorkerState& ws, uint64_t va, bool write) {
  const uint64_t page = va >> 12;
  PageCache::Entry& e = (write ? ws.pages.write : ws.pages.read)[page & (PageCache::kEntries - 1)];
  if (__builtin_expect(e.page == page, 1)) return e.base + (va & 4095);
  return GlobalMiss(ws, va, write);
}

struct GlobalSpace {
  static GPUVM_INLINE uint8_t* Resolve(ExecContext& ctx, Warp&, const Op&, uint32_t lane,
                                       uint64_t addr, uint32_t, bool write) {
    uint8_t* p = GlobalPtr(*ctx.worker, addr, write);
    if (!p) {
      ctx.worker->fault.lane = lane;
      ctx.worker->fault.address = addr;
    }
    return p;
  }
};
struct SharedSpace {
  static GPUVM_INLINE uint8_t* Resolve(ExecContext& ctx, Warp&, const Op&, uint32_t lane,
                                       uint64_t addr, uint32_t n, bool) {
    const uint64_t size = ctx.launch->shared_size;
    if (addr > size || size - addr < n) {
      Fail(ctx, ComputeFault::Kind::kOutOfRange, "shared memory access outside the block's window",
           lane, addr);
      return nullptr;
    }
    return ctx.block->shared.data.get() + addr;
  }
};
struct LocalSpace {
  static GPUVM_INLINE uint8_t* Resolve(ExecContext& ctx, Warp& w, const Op&, uint32_t lane,
                                       uint64_t addr, uint32_t n, bool) {
    const uint64_t size = ctx.block->local_bytes;
    if (addr > size || size - addr < n) {
      Fail(ctx, ComputeFault::Kind::kOutOfRange, "local memory access outside the thread's window",
           lane, addr);
      return nullptr;
    }
    return ctx.block->local.data.get() + (size_t{w.index} * kLanes + lane) * size + addr;
  }
};
struct ConstSpace {
  static GPUVM_INLINE uint8_t* Resolve(ExecContext& ctx, Warp&, const Op& op, uint32_t lane,
                                       uint64_t addr, uint32_t n, bool) {
    const uint32_t bank = (op.aux >> kAuxBankShift) & 0xf;
    const uint64_t size = ctx.launch->bank_size[bank];
    if (addr > size || size - addr < n) {
      Fail(ctx, ComputeFault::Kind::kOutOfRange, "constant bank access outside the bound buffer",
           lane, addr);
      return nullptr;
    }
    return const_cast<uint8_t*>(ctx.launch->bank_data[bank]) + addr;
  }
};
struct GenericSpace {
  static GPUVM_INLINE uint8_t* Resolve(ExecContext& ctx, Warp& w, const Op& op, uint32_t lane,
                                       uint64_t addr, uint32_t n, bool write) {
    const LaunchConstants& lc = *ctx.launch;
    if (lc.shared_window != 0 && addr - lc.shared_window < isa::kWindowBytes) {
      return SharedSpace::Resolve(ctx, w, op, lane, addr - lc.shared_window, n, write);
    }
    if (lc.local_window != 0 && addr - lc.local_window < isa::kWindowBytes) {
      return LocalSpace::Resolve(ctx, w, op, lane, addr - lc.local_window, n, write);
    }
    return GlobalSpace::Resolve(ctx, w, op, lane, addr, n, write);
  }
};

// The warp-wide fast path: when every executing lane's access lies in one contiguous host range
// (one shared/local/constant window, or one 4 KiB global page) and is aligned, one check covers the
// warp and the accesses become a plain gather/scatter. host(lane) = base + lane * lane_stride +
// addr[lane] - sub.
struct BulkView {
  uint8_t* base = nullptr;
  uint64_t lane_stride = 0;
  uint64_t sub = 0;
};

// Lane addresses (vectorised), and their min/max/or over the executing lanes.
GPUVM_INLINE void LaneAddresses(uint8_t* regs, const Op& op, uint32_t exec, uint64_t* addr,
                                uint64_t* lo, uint64_t* hi, uint64_t* bits) {
  if (op.aux & kAuxAddr64) {
    const uint64_t* a = RowPtr<const uint64_t>(regs, op.a);
    for (int l = 0; l < kLanes; ++l) addr[l] = a[l] + op.imm;
  } else {
    const uint32_t* a = RowPtr<const uint32_t>(regs, op.a);
    for (int l = 0; l < kLanes; ++l) addr[l] = uint64_t{a[l]} + op.imm;
  }
  uint64_t mn = ~uint64_t{0}, mx = 0, orr = 0;
  if (exec == kFullMask) {
    for (int l = 0; l < kLanes; ++l) {
      mn = addr[l] < mn ? addr[l] : mn;
      mx = addr[l] > mx ? addr[l] : mx;
      orr |= addr[l];
    }
  } else {
    for (int l = 0; l < kLanes; ++l) {
      const bool on = (exec >> l) & 1;
      const uint64_t v = addr[l];
      mn = (on && v < mn) ? v : mn;
      mx = (on && v > mx) ? v : mx;
      orr |= on ? v : 0;
    }
  }
  *lo = mn;
  *hi = mx;
  *bits = orr;
}

GPUVM_INLINE bool InWindow(uint64_t lo, uint64_t hi, uint64_t base) {
  return base != 0 && lo - base < isa::kWindowBytes && hi - base < isa::kWindowBytes;
}

// Fills `view` when the warp's accesses [lo, hi + n) can go through it; false means "take the
// per-lane path" (which also produces the exact fault).
template <typename Space>
GPUVM_INLINE bool Bulk(ExecContext& ctx, Warp& w, const Op& op, uint64_t lo, uint64_t hi,
                       uint32_t n, bool write, BulkView* view) {
  const LaunchConstants& lc = *ctx.launch;
  uint64_t size = 0;
  if constexpr (std::is_same_v<Space, GenericSpace>) {
    if (InWindow(lo, hi, lc.shared_window)) {
      if (!Bulk<SharedSpace>(ctx, w, op, lo - lc.shared_window, hi - lc.shared_window, n, write,
                             view))
        return false;
      view->sub += lc.shared_window;
      return true;
    }
    if (InWindow(lo, hi, lc.local_window)) {
      if (!Bulk<LocalSpace>(ctx, w, op, lo - lc.local_window, hi - lc.local_window, n, write, view))
        return false;
      view->sub += lc.local_window;
      return true;
    }
    // A single page outside both windows (windows are 16 MiB-aligned, pages 4 KiB: a page is wholly
    // in or out of a window).
    if (lc.shared_window != 0 && lo - lc.shared_window < isa::kWindowBytes) return false;
    if (lc.local_window != 0 && lo - lc.local_window < isa::kWindowBytes) return false;
    return Bulk<GlobalSpace>(ctx, w, op, lo, hi, n, write, view);
  } else if constexpr (std::is_same_v<Space, GlobalSpace>) {
    if ((lo >> 12) != (hi >> 12)) return false;
    uint8_t* p = GlobalPtr(*ctx.worker, lo, write);
    if (!p) return false;
    view->base = p - (lo & 4095);
    view->lane_stride = 0;
    view->sub = lo & ~uint64_t{4095};
    return true;
  } else {
    if constexpr (std::is_same_v<Space, SharedSpace>) {
      size = lc.shared_size;
      view->base = ctx.block->shared.data.get();
      view->lane_stride = 0;
    } else if constexpr (std::is_same_v<Space, LocalSpace>) {
      size = ctx.block->local_bytes;
      view->base = ctx.block->local.data.get() + size_t{w.index} * kLanes * size;
      view->lane_stride = size;
    } else {
      const uint32_t bank = (op.aux >> kAuxBankShift) & 0xf;
      size = lc.bank_size[bank];
      view->base = const_cast<uint8_t*>(lc.bank_data[bank]);
      view->lane_stride = 0;
    }
    view->sub = 0;
    return size >= n && hi <= size - n;
  }
}

template <typename T, bool kCrossThreadAccess>
GPUVM_INLINE T LoadAt(const uint8_t* p) {
  if constexpr (kCrossThreadAccess) {
    return __atomic_load_n(reinterpret_cast<const T*>(p), __ATOMIC_RELAXED);
  } else {
    T v;
    memcpy(&v, p, sizeof v);
    return v;
  }
}
template <typename T, bool kCrossThreadAccess>
GPUVM_INLINE void StoreAt(uint8_t* p, T v) {
  if constexpr (kCrossThreadAccess) {
    __atomic_store_n(reinterpret_cast<T*>(p), v, __ATOMIC_RELAXED);
  } else {
    memcpy(p, &v, sizeof v);
  }
}

// Global memory (and generic, which may be global) is shared with other workers: accessed with
// relaxed atomics. Shared, local and constant memory belong to this worker while it runs the block.
template <typename Space>
inline constexpr bool kCrossThread =
    std::is_same_v<Space, GlobalSpace> || std::is_same_v<Space, GenericSpace>;

template <typename MemT, typename RegT, typename Space>
bool LoadLanes(ExecContext& ctx, Warp& w, const Op& op, uint32_t exec) {
  alignas(64) uint64_t addr[kLanes];
  uint64_t lo, hi, bits;
  LaneAddresses(w.regs, op, exec, addr, &lo, &hi, &bits);
  alignas(64) RegT t[kLanes];
  BulkView view;
  if ((bits & (sizeof(MemT) - 1)) == 0 &&
      Bulk<Space>(ctx, w, op, lo, hi, sizeof(MemT), false, &view)) {
    const uint8_t* base = view.base - view.sub;
    if constexpr (!kCrossThread<Space>) {
      if (view.lane_stride == 0) {
        if (lo == hi) {  // one address for the warp (a broadcast, e.g. a tile row every lane reads)
          const RegT v = static_cast<RegT>(LoadAt<MemT, false>(base + lo));
          for (uint32_t l = 0; l < kLanes; ++l) t[l] = v;
          StoreLanes(exec, RowPtr<RegT>(w.regs, op.d), t);
          return true;
        }
        if (exec == kFullMask && hi - lo == (kLanes - 1) * sizeof(MemT)) {
          bool unit_stride = true;
          for (uint32_t l = 0; l < kLanes; ++l) unit_stride &= addr[l] == lo + l * sizeof(MemT);
          if (unit_stride) {  // consecutive elements, lane order: a block copy
            alignas(64) MemT m[kLanes];
            memcpy(m, base + lo, sizeof m);
            for (uint32_t l = 0; l < kLanes; ++l) t[l] = static_cast<RegT>(m[l]);
            StoreLanes(exec, RowPtr<RegT>(w.regs, op.d), t);
            return true;
          }
        }
      }
    }
    for (uint32_t l = 0; l < kLanes; ++l) {
      const uint64_t a = ((exec >> l) & 1) ? addr[l] : lo;
      t[l] = static_cast<RegT>(LoadAt<MemT, kCrossThread<Space>>(base + l * view.lane_stride + a));
    }
  } else {
    for (uint32_t m = exec; m; m &= m - 1) {
      const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
      const uint64_t a = addr[l];
      if (a & (sizeof(MemT) - 1))
        return Fail(ctx, ComputeFault::Kind::kMisaligned, "misaligned load", l, a);
      const uint8_t* p = Space::Resolve(ctx, w, op, l, a, sizeof(MemT), false);
      if (!p) return false;
      t[l] = static_cast<RegT>(LoadAt<MemT, true>(p));
    }
  }
  StoreLanes(exec, RowPtr<RegT>(w.regs, op.d), t);
  return true;
}

template <typename MemT, typename RegT, typename Space>
bool StoreLanesTo(ExecContext& ctx, Warp& w, const Op& op, uint32_t exec) {
  alignas(64) uint64_t addr[kLanes];
  uint64_t lo, hi, bits;
  LaneAddresses(w.regs, op, exec, addr, &lo, &hi, &bits);
  const RegT* v = RowPtr<const RegT>(w.regs, op.b);
  BulkView view;
  if ((bits & (sizeof(MemT) - 1)) == 0 &&
      Bulk<Space>(ctx, w, op, lo, hi, sizeof(MemT), true, &view)) {
    uint8_t* base = view.base - view.sub;
    // Lane order: when lanes collide, the highest lane's value stays (deterministic).
    for (uint32_t m = exec; m; m &= m - 1) {
      const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
      StoreAt<MemT, kCrossThread<Space>>(base + l * view.lane_stride + addr[l],
                                         static_cast<MemT>(v[l]));
    }
    return true;
  }
  for (uint32_t m = exec; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
    const uint64_t a = addr[l];
    if (a & (sizeof(MemT) - 1))
      return Fail(ctx, ComputeFault::Kind::kMisaligned, "misaligned store", l, a);
    uint8_t* p = Space::Resolve(ctx, w, op, l, a, sizeof(MemT), true);
    if (!p) return false;
    StoreAt<MemT, true>(p, static_cast<MemT>(v[l]));
  }
  return true;
}

template <typename Space>
bool Load(ExecContext& ctx, Warp& w, const Op& op, uint32_t exec) {
  switch (static_cast<AccessKind>(op.aux & kAuxKindMask)) {
    case AccessKind::kU8R32:
      return LoadLanes<uint8_t, uint32_t, Space>(ctx, w, op, exec);
    case AccessKind::kS8R32:
      return LoadLanes<int8_t, uint32_t, Space>(ctx, w, op, exec);
    case AccessKind::kU16R32:
      return LoadLanes<uint16_t, uint32_t, Space>(ctx, w, op, exec);
    case AccessKind::kS16R32:
      return LoadLanes<int16_t, uint32_t, Space>(ctx, w, op, exec);
    case AccessKind::kB32R32:
      return LoadLanes<uint32_t, uint32_t, Space>(ctx, w, op, exec);
    case AccessKind::kU8R64:
      return LoadLanes<uint8_t, uint64_t, Space>(ctx, w, op, exec);
    case AccessKind::kS8R64:
      return LoadLanes<int8_t, uint64_t, Space>(ctx, w, op, exec);
    case AccessKind::kU16R64:
      return LoadLanes<uint16_t, uint64_t, Space>(ctx, w, op, exec);
    case AccessKind::kS16R64:
      return LoadLanes<int16_t, uint64_t, Space>(ctx, w, op, exec);
    case AccessKind::kU32R64:
      return LoadLanes<uint32_t, uint64_t, Space>(ctx, w, op, exec);
    case AccessKind::kS32R64:
      return LoadLanes<int32_t, uint64_t, Space>(ctx, w, op, exec);
    default:
      return LoadLanes<uint64_t, uint64_t, Space>(ctx, w, op, exec);
  }
}

template <typename Space>
bool Store(ExecContext& ctx, Warp& w, const Op& op, uint32_t exec) {
  switch (static_cast<AccessKind>(op.aux & kAuxKindMask)) {
    case AccessKind::kU8R32:
    case AccessKind::kS8R32:
      return StoreLanesTo<uint8_t, uint32_t, Space>(ctx, w, op, exec);
    case AccessKind::kU16R32:
    case AccessKind::kS16R32:
      return StoreLanesTo<uint16_t, uint32_t, Space>(ctx, w, op, exec);
    case AccessKind::kB32R32:
      return StoreLanesTo<uint32_t, uint32_t, Space>(ctx, w, op, exec);
    case AccessKind::kU8R64:
    case AccessKind::kS8R64:
      return StoreLanesTo<uint8_t, uint64_t, Space>(ctx, w, op, exec);
    case AccessKind::kU16R64:
    case AccessKind::kS16R64:
      return StoreLanesTo<uint16_t, uint64_t, Space>(ctx, w, op, exec);
    case AccessKind::kU32R64:
    case AccessKind::kS32R64:
      return StoreLanesTo<uint32_t, uint64_t, Space>(ctx, w, op, exec);
    default:
      return StoreLanesTo<uint64_t, uint64_t, Space>(ctx, w, op, exec);
  }
}

bool Atomic(ExecContext& ctx, Warp& w, const Op& op, uint32_t exec) {
  const auto aop = static_cast<isa::AtomOp>((op.aux >> kAuxAtomOpShift) & 0xf);
  const auto type = static_cast<isa::Type>((op.aux >> kAuxAtomTypeShift) & 0xf);
  const auto space = static_cast<isa::Space>((op.aux >> kAuxAtomSpaceShift) & 0x7);
  const bool wide = isa::Is64(type);
  const uint32_t n = wide ? 8 : 4;
  alignas(64) uint64_t t[kLanes];
  for (uint32_t m = exec; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
    const uint64_t addr = LaneAddress(w.regs, op, l);
    if (addr & (n - 1))
      return Fail(ctx, ComputeFault::Kind::kMisaligned, "misaligned atomic", l, addr);
    uint8_t* p;
    if (space == isa::Space::kShared) {
      p = SharedSpace::Resolve(ctx, w, op, l, addr, n, true);
    } else if (space == isa::Space::kGlobal) {
      p = GlobalSpace::Resolve(ctx, w, op, l, addr, n, true);
    } else {
      const LaunchConstants& lc = *ctx.launch;
      if (lc.local_window != 0 && addr - lc.local_window < isa::kWindowBytes) {
        return Fail(ctx, ComputeFault::Kind::kOutOfRange, "atomic on local memory", l, addr);
      }
      p = GenericSpace::Resolve(ctx, w, op, l, addr, n, true);
    }
    if (!p) return false;
    uint64_t b =
        wide ? RowPtr<const uint64_t>(w.regs, op.b)[l] : RowPtr<const uint32_t>(w.regs, op.b)[l];
    uint64_t c =
        wide ? RowPtr<const uint64_t>(w.regs, op.c)[l] : RowPtr<const uint32_t>(w.regs, op.c)[l];
    t[l] = AtomicRmw(p, aop, type, b, c);
  }
  if (wide) {
    uint64_t* d = RowPtr<uint64_t>(w.regs, op.d);
    for (uint32_t m = exec; m; m &= m - 1) d[__builtin_ctz(m)] = t[__builtin_ctz(m)];
  } else {
    uint32_t* d = RowPtr<uint32_t>(w.regs, op.d);
    for (uint32_t m = exec; m; m &= m - 1)
      d[__builtin_ctz(m)] = static_cast<uint32_t>(t[__builtin_ctz(m)]);
  }
  return true;
}

// ---- warp-wide and special operations
// ---------------------------------------------------------------

uint64_t NowNanoseconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void SpecialRegister(ExecContext& ctx, Warp& w, const Op& op, uint32_t exec, uint32_t active) {
  using S = isa::SpecialReg;
  const LaunchConstants& lc = *ctx.launch;
  const BlockState& b = *ctx.block;
  const auto sr = static_cast<S>(op.aux);
  if (isa::IsSpecialReg64(sr)) {
    uint64_t v = 0;
    switch (sr) {
      case S::kClock64:
      case S::kGlobalTimer:
        v = NowNanoseconds();
        break;
      case S::kSharedWindow:
        v = lc.shared_window;
        break;
      default:
        v = lc.local_window;
        break;
    }
    alignas(64) uint64_t t[kLanes];
    for (int l = 0; l < kLanes; ++l) t[l] = v;
    StoreLanes(exec, RowPtr<uint64_t>(w.regs, op.d), t);
    return;
  }
  alignas(64) uint32_t t[kLanes];
  const uint32_t bx = lc.block[0], by = lc.block[1];
  for (uint32_t l = 0; l < kLanes; ++l) {
    const uint32_t thread = w.index * kLanes + l;
    uint32_t v = 0;
    switch (sr) {
      case S::kTidX:
        v = thread % bx;
        break;
      case S::kTidY:
        v = (thread / bx) % by;
        break;
      case S::kTidZ:
        v = thread / (bx * by);
        break;
      case S::kNtidX:
        v = lc.block[0];
        break;
      case S::kNtidY:
        v = lc.block[1];
        break;
      case S::kNtidZ:
        v = lc.block[2];
        break;
      case S::kCtaidX:
        v = b.ctaid[0];
        break;
      case S::kCtaidY:
        v = b.ctaid[1];
        break;
      case S::kCtaidZ:
        v = b.ctaid[2];
        break;
      case S::kNctaidX:
        v = lc.grid[0];
        break;
      case S::kNctaidY:
        v = lc.grid[1];
        break;
      case S::kNctaidZ:
        v = lc.grid[2];
        break;
      case S::kLaneId:
        v = l;
        break;
      case S::kWarpId:
        v = w.index;
        break;
      case S::kNWarpId:
        v = lc.warps_per_block;
        break;
      case S::kSmId:
        v = ctx.worker->index;
        break;
      case S::kNSmId:
        v = lc.workers;
        break;
      case S::kGridId:
        v = lc.grid_id;
        break;
      case S::kClock:
        v = static_cast<uint32_t>(NowNanoseconds());
        break;
      case S::kLanemaskEq:
        v = 1u << l;
        break;
      case S::kLanemaskLt:
        v = (1u << l) - 1;
        break;
      case S::kLanemaskLe:
        v = l == 31 ? kFullMask : (2u << l) - 1;
        break;
      case S::kLanemaskGt:
        v = l == 31 ? 0 : ~((2u << l) - 1);
        break;
      case S::kLanemaskGe:
        v = ~((1u << l) - 1);
        break;
      case S::kActiveMask:
        v = active;
        break;
      case S::kDynamicSmemSize:
        v = lc.shared_size - ctx.program->header.shared_bytes;
        break;
      case S::kTotalSmemSize:
        v = lc.shared_size;
        break;
      default:
        break;
    }
    t[l] = v;
  }
  StoreLanes(exec, RowPtr<uint32_t>(w.regs, op.d), t);
}

void Shuffle(Warp& w, const Op& op, uint32_t exec) {
  const uint32_t mode = op.aux & isa::kShflModeMask;
  const uint32_t* a = RowPtr<const uint32_t>(w.regs, op.a);
  const uint32_t* b = RowPtr<const uint32_t>(w.regs, op.b);
  const uint32_t* c = RowPtr<const uint32_t>(w.regs, op.c);
  const bool b_imm = op.aux & isa::kShflBImm;
  const bool c_imm = op.aux & isa::kShflCImm;
  alignas(64) uint32_t t[kLanes];
  uint32_t valid = 0;
  for (uint32_t l = 0; l < kLanes; ++l) {
    const uint32_t bv = (b_imm ? (op.aux >> 8) : b[l]) & 0x1f;
    const uint32_t cv = c_imm ? (op.aux >> 16) & 0x1fff : c[l];
    const uint32_t seg = (cv >> 8) & 0x1f;
    const uint32_t clamp = cv & 0x1f;
    const uint32_t max_lane = (l & seg) | (clamp & ~seg);
    const uint32_t min_lane = l & seg;
    int32_t j = 0;
    bool in = false;
    switch (static_cast<isa::ShflMode>(mode)) {
      case isa::ShflMode::kUp:
        j = static_cast<int32_t>(l) - static_cast<int32_t>(bv);
        in = j >= static_cast<int32_t>(max_lane);
        break;
      case isa::ShflMode::kDown:
        j = static_cast<int32_t>(l + bv);
        in = j <= static_cast<int32_t>(max_lane);
        break;
      case isa::ShflMode::kBfly:
        j = static_cast<int32_t>(l ^ bv);
        in = j <= static_cast<int32_t>(max_lane);
        break;
      default:
        j = static_cast<int32_t>(min_lane | (bv & ~seg));
        in = j <= static_cast<int32_t>(max_lane);
        break;
    }
    if (!in) j = static_cast<int32_t>(l);
    t[l] = a[j & 31];
    valid |= uint32_t{in} << l;
  }
  StoreLanes(exec, RowPtr<uint32_t>(w.regs, op.d), t);
  if (op.imm != kPredTrue) SetPred(w, static_cast<uint32_t>(op.imm), exec, valid);
}

void Vote(Warp& w, const Op& op, uint32_t exec) {
  const uint32_t mode = op.aux & isa::kVoteModeMask;
  const uint32_t pred = (w.preds[op.a] ^ ((op.aux & isa::kVoteNegA) ? kFullMask : 0)) & exec;
  switch (static_cast<isa::VoteMode>(mode)) {
    case isa::VoteMode::kAll:
      SetPred(w, op.d, exec, pred == exec ? kFullMask : 0);
      break;
    case isa::VoteMode::kAny:
      SetPred(w, op.d, exec, pred != 0 ? kFullMask : 0);
      break;
    case isa::VoteMode::kUni:
      SetPred(w, op.d, exec, (pred == 0 || pred == exec) ? kFullMask : 0);
      break;
    case isa::VoteMode::kBallot: {
      alignas(64) uint32_t t[kLanes];
      for (int l = 0; l < kLanes; ++l) t[l] = pred;
      StoreLanes(exec, RowPtr<uint32_t>(w.regs, op.d), t);
      break;
    }
  }
}

void FillScratch(uint8_t* regs, const Program& p, const Op& op) {
  if (op.flags & kOpScratch64) {
    uint64_t* s = RowPtr<uint64_t>(regs, p.scratch_row);
    for (int l = 0; l < kLanes; ++l) s[l] = op.imm;
  } else {
    uint32_t* s = RowPtr<uint32_t>(regs, p.scratch_row);
    for (int l = 0; l < kLanes; ++l) s[l] = static_cast<uint32_t>(op.imm);
  }
}

template <typename T>
GPUVM_INLINE uint64_t LaneBits(uint8_t* regs, uint32_t row, uint32_t l) {
  return RowPtr<const T>(regs, row)[l];
}

void GenericCvt(uint8_t* regs, const Op& op, uint32_t exec) {
  const auto dst = static_cast<isa::Type>(op.aux & 0xf);
  const auto src = static_cast<isa::Type>((op.aux >> 4) & 0xf);
  const bool src64 = isa::Is64(src), dst64 = isa::Is64(dst);
  alignas(64) uint64_t t[kLanes];
  for (uint32_t m = exec; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
    uint64_t v = src64 ? LaneBits<uint64_t>(regs, op.a, l) : LaneBits<uint32_t>(regs, op.a, l);
    t[l] = ConvertValue(op.aux, v);
  }
  for (uint32_t m = exec; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
    if (dst64) {
      RowPtr<uint64_t>(regs, op.d)[l] = t[l];
    } else {
      RowPtr<uint32_t>(regs, op.d)[l] = static_cast<uint32_t>(t[l]);
    }
  }
}

void SlowFloat(uint8_t* regs, const Op& op, uint32_t exec) {
  const bool wide = static_cast<isa::Type>((op.aux >> 8) & 0xf) == isa::Type::kF64;
  alignas(64) uint64_t t[kLanes];
  for (uint32_t m = exec; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
    uint64_t a, b, c;
    if (wide) {
      a = LaneBits<uint64_t>(regs, op.a, l);
      b = LaneBits<uint64_t>(regs, op.b, l);
      c = LaneBits<uint64_t>(regs, op.c, l);
    } else {
      a = LaneBits<uint32_t>(regs, op.a, l);
      b = LaneBits<uint32_t>(regs, op.b, l);
      c = LaneBits<uint32_t>(regs, op.c, l);
    }
    t[l] = FloatSlowOp(op.aux, a, b, c);
  }
  for (uint32_t m = exec; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
    if (wide) {
      RowPtr<uint64_t>(regs, op.d)[l] = t[l];
    } else {
      RowPtr<uint32_t>(regs, op.d)[l] = static_cast<uint32_t>(t[l]);
    }
  }
}

}  // namespace

// ---- the loop
// ---------------------------------------------------------------------------------------

WarpStop RunWarp(ExecContext& ctx, Warp& w, int64_t* budget_inout) {
  int64_t budget = *budget_inout;
  const Program& program = *ctx.program;
  const Op* const ops = program.ops.data();
  uint8_t* const regs = w.regs;
  BlockState& block = *ctx.block;
  WorkerState& ws = *ctx.worker;

  uint32_t pc = w.pc;
  uint32_t active = w.active;
  if (active == 0) {
    if (!PopMin(w, &pc, &active)) {
      w.waiting = !w.done;
      return w.done ? WarpStop::kDone : WarpStop::kWaiting;
    }
  } else if (w.next_join < pc) {
    // A barrier released a group behind us while we were parked: keep running the smallest pc.
    PushGroup(w, pc, active);
    PopMin(w, &pc, &active);
  }
  w.waiting = false;

  uint64_t lanes = 0;  // lane-instructions retired, flushed into ws at exit
  uint64_t steps = 0;  // instructions since `active` last changed
#define GPUVM_FLUSH()                  \
  do {                                 \
    lanes += steps * Popcount(active); \
    steps = 0;                         \
  } while (0)

  WarpStop stop = WarpStop::kBudget;
  for (;;) {
    if (pc == w.next_join) {
      GPUVM_FLUSH();
      active |= TakeAt(w, pc);
    }
    const Op& op = ops[pc];
    const uint32_t exec = active & (w.preds[op.guard] ^ op.guard_xor);
    uint32_t branch_target = 0;
    ++steps;
    Handler h = op.h;
    if (exec == 0 && h < Handler::kBar) {
      ++pc;
      goto next;
    }
  dispatch:
    switch (h) {
      case Handler::kNop:
        break;
      case Handler::kMov32:
        Map1<uint32_t, uint32_t>(regs, op, exec, [](uint32_t a) { return a; });
        break;
      case Handler::kMov64:
        Map1<uint64_t, uint64_t>(regs, op, exec, [](uint64_t a) { return a; });
        break;
      case Handler::kSel32:
      case Handler::kSel64: {
        const uint32_t sel = w.preds[op.c] ^ op.aux;
        if (h == Handler::kSel32) {
          const uint32_t* a = RowPtr<const uint32_t>(regs, op.a);
          const uint32_t* b = RowPtr<const uint32_t>(regs, op.b);
          alignas(64) uint32_t t[kLanes];
          for (int l = 0; l < kLanes; ++l) t[l] = ((sel >> l) & 1) ? a[l] : b[l];
          StoreLanes(exec, RowPtr<uint32_t>(regs, op.d), t);
        } else {
          const uint64_t* a = RowPtr<const uint64_t>(regs, op.a);
          const uint64_t* b = RowPtr<const uint64_t>(regs, op.b);
          alignas(64) uint64_t t[kLanes];
          for (int l = 0; l < kLanes; ++l) t[l] = ((sel >> l) & 1) ? a[l] : b[l];
          StoreLanes(exec, RowPtr<uint64_t>(regs, op.d), t);
        }
        break;
      }
      case Handler::kS2R:
        SpecialRegister(ctx, w, op, exec, active);
        break;
      case Handler::kPack:
        Map2<uint64_t, uint32_t, uint32_t>(
            regs, op, exec, [](uint32_t a, uint32_t b) { return uint64_t{a} | uint64_t{b} << 32; });
        break;
      case Handler::kHi32:
        Map1<uint32_t, uint64_t>(regs, op, exec,
                                 [](uint64_t a) { return static_cast<uint32_t>(a >> 32); });
        break;

#define GPUVM_BIN(name, T, expr)                                                       \
  case Handler::k##name:                                                               \
    Map2<T, T, T>(                                                                     \
        regs, op, exec,                                                                \
        [](T a, T b) __attribute__((always_inline)) { return static_cast<T>(expr); }); \
    break;
#define GPUVM_UN(name, T, expr)                                                                   \
  case Handler::k##name:                                                                          \
    Map1<T, T>(                                                                                   \
        regs, op, exec, [](T a) __attribute__((always_inline)) { return static_cast<T>(expr); }); \
    break;

        GPUVM_BIN(AddI32, uint32_t, a + b)
        GPUVM_BIN(AddI64, uint64_t, a + b)
        GPUVM_BIN(AddF32, float, a + b)
        GPUVM_BIN(AddF64, double, a + b)
        GPUVM_BIN(SubI32, uint32_t, a - b)
        GPUVM_BIN(SubI64, uint64_t, a - b)
        GPUVM_BIN(SubF32, float, a - b)
        GPUVM_BIN(SubF64, double, a - b)
        GPUVM_BIN(MulI32, uint32_t, a * b)
        GPUVM_BIN(MulI64, uint64_t, a * b)
        GPUVM_BIN(MulF32, float, a* b)
        GPUVM_BIN(MulF64, double, a* b)
        GPUVM_BIN(MulHiU32, uint32_t, (uint64_t{a} * b) >> 32)
        GPUVM_BIN(MulHiS32, int32_t, (int64_t{a} * b) >> 32)
        GPUVM_BIN(MulHiU64, uint64_t, (static_cast<unsigned __int128>(a) * b) >> 64)
        GPUVM_BIN(MulHiS64, int64_t, (static_cast<__int128>(a) * b) >> 64)
        GPUVM_BIN(DivU32, uint32_t, DivUnsigned(a, b))
        GPUVM_BIN(DivS32, int32_t, (DivSigned<int32_t, uint32_t>(a, b)))
        GPUVM_BIN(DivU64, uint64_t, DivUnsigned(a, b))
        GPUVM_BIN(DivS64, int64_t, (DivSigned<int64_t, uint64_t>(a, b)))
        GPUVM_BIN(DivF32, float, a / b)
        GPUVM_BIN(DivF64, double, a / b)
        GPUVM_BIN(RemU32, uint32_t, RemUnsigned(a, b))
        GPUVM_BIN(RemS32, int32_t, RemSigned(a, b))
        GPUVM_BIN(RemU64, uint64_t, RemUnsigned(a, b))
        GPUVM_BIN(RemS64, int64_t, RemSigned(a, b))
        GPUVM_BIN(MinU32, uint32_t, a < b ? a : b)
        GPUVM_BIN(MinS32, int32_t, a < b ? a : b)
        GPUVM_BIN(MinU64, uint64_t, a < b ? a : b)
        GPUVM_BIN(MinS64, int64_t, a < b ? a : b)
        GPUVM_BIN(MinF32, float, FMin(a, b))
        GPUVM_BIN(MinF64, double, FMin(a, b))
        GPUVM_BIN(MaxU32, uint32_t, a > b ? a : b)
        GPUVM_BIN(MaxS32, int32_t, a > b ? a : b)
        GPUVM_BIN(MaxU64, uint64_t, a > b ? a : b)
        GPUVM_BIN(MaxS64, int64_t, a > b ? a : b)
        GPUVM_BIN(MaxF32, float, FMax(a, b))
        GPUVM_BIN(MaxF64, double, FMax(a, b))
        GPUVM_BIN(And32, uint32_t, a & b)
        GPUVM_BIN(And64, uint64_t, a & b)
        GPUVM_BIN(Or32, uint32_t, a | b)
        GPUVM_BIN(Or64, uint64_t, a | b)
        GPUVM_BIN(Xor32, uint32_t, a ^ b)
        GPUVM_BIN(Xor64, uint64_t, a ^ b)
        GPUVM_BIN(Shl32, uint32_t, b >= 32 ? 0u : a << b)
        GPUVM_BIN(ShrU32, uint32_t, b >= 32 ? 0u : a >> b)
        GPUVM_BIN(CopysignF32, float, std::copysign(b, a))
        GPUVM_BIN(CopysignF64, double, std::copysign(b, a))
        GPUVM_UN(AbsS32, int32_t, a < 0 ? (WrapNeg<int32_t, uint32_t>(a)) : a)
        GPUVM_UN(AbsS64, int64_t, a < 0 ? (WrapNeg<int64_t, uint64_t>(a)) : a)
        GPUVM_UN(AbsF32, float, std::fabs(a))
        GPUVM_UN(AbsF64, double, std::fabs(a))
        GPUVM_UN(NegS32, int32_t, (WrapNeg<int32_t, uint32_t>(a)))
        GPUVM_UN(NegS64, int64_t, (WrapNeg<int64_t, uint64_t>(a)))
        GPUVM_UN(NegF32, float, -a)
        GPUVM_UN(NegF64, double, -a)
        GPUVM_UN(Not32, uint32_t, ~a)
        GPUVM_UN(Not64, uint64_t, ~a)
        GPUVM_UN(Brev32, uint32_t, Brev32(a))
        GPUVM_UN(Brev64, uint64_t, Brev64(a))
        GPUVM_UN(SqrtF32, float, std::sqrt(a))
        GPUVM_UN(SqrtF64, double, std::sqrt(a))
        GPUVM_UN(RsqrtF32, float, 1.0f / std::sqrt(a))
        GPUVM_UN(RsqrtF64, double, 1.0 / std::sqrt(a))
        GPUVM_UN(RcpF32, float, 1.0f / a)
        GPUVM_UN(RcpF64, double, 1.0 / a)
        GPUVM_UN(Ex2F32, float, std::exp2(a))
        GPUVM_UN(Ex2F64, double, std::exp2(a))
        GPUVM_UN(Lg2F32, float, std::log2(a))
        GPUVM_UN(Lg2F64, double, std::log2(a))
        GPUVM_UN(SinF32, float, std::sin(a))
        GPUVM_UN(SinF64, double, std::sin(a))
        GPUVM_UN(CosF32, float, std::cos(a))
        GPUVM_UN(CosF64, double, std::cos(a))
        GPUVM_UN(TanhF32, float, std::tanh(a))
        GPUVM_UN(TanhF64, double, std::tanh(a))
#undef GPUVM_BIN
#undef GPUVM_UN

      case Handler::kAddSatS32:
        Map2<int32_t, int32_t, int32_t>(regs, op, exec, [](int32_t a, int32_t b) {
          int64_t s = int64_t{a} + b;
          return static_cast<int32_t>(s > INT32_MAX ? INT32_MAX : (s < INT32_MIN ? INT32_MIN : s));
        });
        break;
      case Handler::kSubSatS32:
        Map2<int32_t, int32_t, int32_t>(regs, op, exec, [](int32_t a, int32_t b) {
          int64_t s = int64_t{a} - b;
          return static_cast<int32_t>(s > INT32_MAX ? INT32_MAX : (s < INT32_MIN ? INT32_MIN : s));
        });
        break;
      case Handler::kMulWideU32:
        Map2<uint64_t, uint32_t, uint32_t>(regs, op, exec,
                                           [](uint32_t a, uint32_t b) { return uint64_t{a} * b; });
        break;
      case Handler::kMulWideS32:
        Map2<uint64_t, int32_t, int32_t>(regs, op, exec, [](int32_t a, int32_t b) {
          return static_cast<uint64_t>(int64_t{a} * b);
        });
        break;
      case Handler::kMadI32:
        Map3<uint32_t, uint32_t, uint32_t, uint32_t>(
            regs, op, exec, [](uint32_t a, uint32_t b, uint32_t c) { return a * b + c; });
        break;
      case Handler::kMadI64:
        Map3<uint64_t, uint64_t, uint64_t, uint64_t>(
            regs, op, exec, [](uint64_t a, uint64_t b, uint64_t c) { return a * b + c; });
        break;
      case Handler::kFmaF32:
        Map3<float, float, float, float>(
            regs, op, exec, [](float a, float b, float c) { return __builtin_fmaf(a, b, c); });
        break;
      case Handler::kFmaF64:
        Map3<double, double, double, double>(
            regs, op, exec, [](double a, double b, double c) { return __builtin_fma(a, b, c); });
        break;
      case Handler::kMadWideU32:
        Map3<uint64_t, uint32_t, uint32_t, uint64_t>(
            regs, op, exec, [](uint32_t a, uint32_t b, uint64_t c) { return uint64_t{a} * b + c; });
        break;
      case Handler::kMadWideS32:
        Map3<uint64_t, int32_t, int32_t, uint64_t>(
            regs, op, exec, [](int32_t a, int32_t b, uint64_t c) {
              return static_cast<uint64_t>(int64_t{a} * b) + c;
            });
        break;
      case Handler::kShl64:
        Map2<uint64_t, uint64_t, uint32_t>(
            regs, op, exec, [](uint64_t a, uint32_t b) { return b >= 64 ? uint64_t{0} : a << b; });
        break;
      case Handler::kShrU64:
        Map2<uint64_t, uint64_t, uint32_t>(
            regs, op, exec, [](uint64_t a, uint32_t b) { return b >= 64 ? uint64_t{0} : a >> b; });
        break;
      case Handler::kShrS32:
        Map2<int32_t, int32_t, uint32_t>(
            regs, op, exec, [](int32_t a, uint32_t b) { return a >> (b >= 32 ? 31u : b); });
        break;
      case Handler::kShrS64:
        Map2<int64_t, int64_t, uint32_t>(
            regs, op, exec, [](int64_t a, uint32_t b) { return a >> (b >= 64 ? 63u : b); });
        break;
      case Handler::kPopc32:
        Map1<uint32_t, uint32_t>(regs, op, exec, [](uint32_t a) {
          return static_cast<uint32_t>(__builtin_popcount(a));
        });
        break;
      case Handler::kPopc64:
        Map1<uint32_t, uint64_t>(regs, op, exec, [](uint64_t a) {
          return static_cast<uint32_t>(__builtin_popcountll(a));
        });
        break;
      case Handler::kClz32:
        Map1<uint32_t, uint32_t>(regs, op, exec, [](uint32_t a) {
          return a ? static_cast<uint32_t>(__builtin_clz(a)) : 32u;
        });
        break;
      case Handler::kClz64:
        Map1<uint32_t, uint64_t>(regs, op, exec, [](uint64_t a) {
          return a ? static_cast<uint32_t>(__builtin_clzll(a)) : 64u;
        });
        break;
      case Handler::kBfeU32:
        Map3<uint32_t, uint32_t, uint32_t, uint32_t>(
            regs, op, exec,
            [](uint32_t a, uint32_t b, uint32_t c) { return Bfe<uint32_t, false>(a, b, c); });
        break;
      case Handler::kBfeS32:
        Map3<uint32_t, uint32_t, uint32_t, uint32_t>(
            regs, op, exec,
            [](uint32_t a, uint32_t b, uint32_t c) { return Bfe<uint32_t, true>(a, b, c); });
        break;
      case Handler::kBfeU64:
        Map3<uint64_t, uint64_t, uint32_t, uint32_t>(
            regs, op, exec,
            [](uint64_t a, uint32_t b, uint32_t c) { return Bfe<uint64_t, false>(a, b, c); });
        break;
      case Handler::kBfeS64:
        Map3<uint64_t, uint64_t, uint32_t, uint32_t>(
            regs, op, exec,
            [](uint64_t a, uint32_t b, uint32_t c) { return Bfe<uint64_t, true>(a, b, c); });
        break;
      case Handler::kBfi32:
      case Handler::kBfi64: {
        const uint32_t* pos = RowPtr<const uint32_t>(regs, op.c);
        const uint32_t* len = RowPtr<const uint32_t>(regs, op.aux);
        if (h == Handler::kBfi32) {
          const uint32_t* a = RowPtr<const uint32_t>(regs, op.a);
          const uint32_t* b = RowPtr<const uint32_t>(regs, op.b);
          alignas(64) uint32_t t[kLanes];
          for (int l = 0; l < kLanes; ++l) t[l] = Bfi<uint32_t>(a[l], b[l], pos[l], len[l]);
          StoreLanes(exec, RowPtr<uint32_t>(regs, op.d), t);
        } else {
          const uint64_t* a = RowPtr<const uint64_t>(regs, op.a);
          const uint64_t* b = RowPtr<const uint64_t>(regs, op.b);
          alignas(64) uint64_t t[kLanes];
          for (int l = 0; l < kLanes; ++l) t[l] = Bfi<uint64_t>(a[l], b[l], pos[l], len[l]);
          StoreLanes(exec, RowPtr<uint64_t>(regs, op.d), t);
        }
        break;
      }
      case Handler::kPrmt: {
        const uint32_t mode = op.aux;
        Map3<uint32_t, uint32_t, uint32_t, uint32_t>(
            regs, op, exec,
            [mode](uint32_t a, uint32_t b, uint32_t c) { return Prmt(a, b, c, mode); });
        break;
      }
      case Handler::kShf: {
        const uint32_t mode = op.aux;
        Map3<uint32_t, uint32_t, uint32_t, uint32_t>(
            regs, op, exec,
            [mode](uint32_t a, uint32_t b, uint32_t c) { return Shf(a, b, c, mode); });
        break;
      }
      case Handler::kTestpF32:
      case Handler::kTestpF64: {
        uint32_t m = 0;
        if (h == Handler::kTestpF32) {
          const float* a = RowPtr<const float>(regs, op.a);
          for (int l = 0; l < kLanes; ++l) m |= uint32_t{Testp(a[l], op.aux)} << l;
        } else {
          const double* a = RowPtr<const double>(regs, op.a);
          for (int l = 0; l < kLanes; ++l) m |= uint32_t{Testp(a[l], op.aux)} << l;
        }
        SetPred(w, op.d, exec, m);
        break;
      }
      case Handler::kFloatSlow:
        SlowFloat(regs, op, exec);
        break;
      case Handler::kSetpU32:
        SetPred(w, op.d, exec,
                CompareLanes(RowPtr<const uint32_t>(regs, op.a), RowPtr<const uint32_t>(regs, op.b),
                             op.aux));
        break;
      case Handler::kSetpS32:
        SetPred(w, op.d, exec,
                CompareLanes(RowPtr<const int32_t>(regs, op.a), RowPtr<const int32_t>(regs, op.b),
                             op.aux));
        break;
      case Handler::kSetpU64:
        SetPred(w, op.d, exec,
                CompareLanes(RowPtr<const uint64_t>(regs, op.a), RowPtr<const uint64_t>(regs, op.b),
                             op.aux));
        break;
      case Handler::kSetpS64:
        SetPred(w, op.d, exec,
                CompareLanes(RowPtr<const int64_t>(regs, op.a), RowPtr<const int64_t>(regs, op.b),
                             op.aux));
        break;
      case Handler::kSetpF32:
        SetPred(
            w, op.d, exec,
            CompareLanes(RowPtr<const float>(regs, op.a), RowPtr<const float>(regs, op.b), op.aux));
        break;
      case Handler::kSetpF64:
        SetPred(w, op.d, exec,
                CompareLanes(RowPtr<const double>(regs, op.a), RowPtr<const double>(regs, op.b),
                             op.aux));
        break;
      case Handler::kPlop: {
        const uint32_t a = w.preds[op.a] ^ ((op.aux & isa::kPlopNegA) ? kFullMask : 0);
        const uint32_t b = w.preds[op.b] ^ ((op.aux & isa::kPlopNegB) ? kFullMask : 0);
        uint32_t r;
        switch (static_cast<isa::PlopOp>(op.aux & isa::kPlopOpMask)) {
          case isa::PlopOp::kAnd:
            r = a & b;
            break;
          case isa::PlopOp::kOr:
            r = a | b;
            break;
          default:
            r = a ^ b;
            break;
        }
        SetPred(w, op.d, exec, r);
        break;
      }
      case Handler::kCvtU64U32:
        Map1<uint64_t, uint32_t>(regs, op, exec, [](uint32_t a) { return uint64_t{a}; });
        break;
      case Handler::kCvtS64S32:
        Map1<uint64_t, int32_t>(regs, op, exec,
                                [](int32_t a) { return static_cast<uint64_t>(int64_t{a}); });
        break;
      case Handler::kCvtU32U64:
        Map1<uint32_t, uint64_t>(regs, op, exec,
                                 [](uint64_t a) { return static_cast<uint32_t>(a); });
        break;
      case Handler::kCvtF32S32:
        Map1<float, int32_t>(regs, op, exec, [](int32_t a) { return static_cast<float>(a); });
        break;
      case Handler::kCvtF32U32:
        Map1<float, uint32_t>(regs, op, exec, [](uint32_t a) { return static_cast<float>(a); });
        break;
      case Handler::kCvtS32F32:
        Map1<int32_t, float>(regs, op, exec, [](float a) { return F32ToS32(a); });
        break;
      case Handler::kCvtF64F32:
        Map1<double, float>(regs, op, exec, [](float a) { return static_cast<double>(a); });
        break;
      case Handler::kCvtF32F64:
        Map1<float, double>(regs, op, exec, [](double a) { return static_cast<float>(a); });
        break;
      case Handler::kCvtF64S32:
        Map1<double, int32_t>(regs, op, exec, [](int32_t a) { return static_cast<double>(a); });
        break;
      case Handler::kCvt:
        GenericCvt(regs, op, exec);
        break;

      case Handler::kLdGlobal:
        if (!Load<GlobalSpace>(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kLdShared:
        if (!Load<SharedSpace>(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kLdLocal:
        if (!Load<LocalSpace>(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kLdConst:
        if (!Load<ConstSpace>(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kLdGeneric:
        if (!Load<GenericSpace>(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kStGlobal:
        if (!Store<GlobalSpace>(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kStShared:
        if (!Store<SharedSpace>(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kStLocal:
        if (!Store<LocalSpace>(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kStGeneric:
        if (!Store<GenericSpace>(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kAtom:
        if (!Atomic(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kMembar:
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        break;
      case Handler::kShfl:
        Shuffle(w, op, exec);
        break;
      case Handler::kVote:
        Vote(w, op, exec);
        break;
      case Handler::kImmScratch:
        FillScratch(regs, program, op);
        h = op.h2;
        goto dispatch;

      // ---- control ----
      case Handler::kBar: {
        if (exec == 0) {
          ++pc;
          goto next;
        }
        GPUVM_FLUSH();
        const uint32_t id = op.aux;
        const uint32_t rest = active & ~exec;
        PushGroup(w, pc + 1, exec, id + 1);
        block.bar_arrived[id] += Popcount(exec);
        if (block.bar_arrived[id] >= block.live_threads) ReleaseBarrier(block, id);
        if (rest != 0) {
          active = rest;
          ++pc;
        } else if (!PopMin(w, &pc, &active)) {
          active = 0;
          stop = WarpStop::kWaiting;
          w.waiting = true;
          goto out;
        }
        goto next;
      }
      case Handler::kBra:
        branch_target = op.aux;
        goto branch;
      case Handler::kCall: {
        if (exec != 0) {  // the calling lanes' link register gets the return address
          alignas(64) uint32_t t[kLanes];
          for (int l = 0; l < kLanes; ++l) t[l] = static_cast<uint32_t>(op.imm);
          StoreLanes(exec, RowPtr<uint32_t>(regs, op.d), t);
        }
        branch_target = op.aux;
        goto branch;
      }
      case Handler::kRet: {
        if (exec == 0) {
          ++pc;
          goto next;
        }
        // Each lane returns to the word offset in its link register: group the lanes by target.
        const uint32_t* link = RowPtr<const uint32_t>(regs, op.a);
        const size_t words = program.op_of_word.size();
        for (uint32_t m = exec; m; m &= m - 1) {
          const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
          if (link[l] >= words || program.op_of_word[link[l]] < 0) {
            Fail(ctx, ComputeFault::Kind::kInvalidCode,
                 "ret to a word offset that is not an instruction", l, link[l]);
            goto fault;
          }
        }
        GPUVM_FLUSH();
        const uint32_t rest = active & ~exec;
        for (uint32_t m = exec; m; m &= m - 1) {
          const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
          PushGroup(w, static_cast<uint32_t>(program.op_of_word[link[l]]), 1u << l);
        }
        if (rest != 0) PushGroup(w, pc + 1, rest);
        PopMin(w, &pc, &active);
        goto next;
      }
      case Handler::kExit: {
        if (exec != 0) {
          GPUVM_FLUSH();
          w.exited |= exec;
          active &= ~exec;
          block.live_threads -= Popcount(exec);
          CheckBarriers(block);
        }
        if (active != 0) {
          ++pc;
          goto next;
        }
        if (!PopMin(w, &pc, &active)) {
          active = 0;
          if (w.exited == kFullMask) {
            w.done = true;
            stop = WarpStop::kDone;
          } else {
            w.waiting = true;
            stop = WarpStop::kWaiting;
          }
          goto out;
        }
        goto next;
      }
      case Handler::kTrap:
        if (exec == 0) {
          ++pc;
          goto next;
        }
        if (op.aux == uint32_t(isa::TrapCode::kAssert)) {
          Fail(ctx, ComputeFault::Kind::kAssert, "a device-side assert failed",
               static_cast<uint32_t>(__builtin_ctz(exec)), 0);
        } else {
          Fail(ctx, ComputeFault::Kind::kTrap, "the kernel executed trap",
               static_cast<uint32_t>(__builtin_ctz(exec)), 0);
        }
        goto fault;
      case Handler::kCount:
        break;
    }
    ++pc;
    goto next;
  branch : {
    const uint32_t target = branch_target;
    if (exec == active || target == pc + 1) {
      pc = target;
    } else if (exec == 0) {
      ++pc;
    } else {
      GPUVM_FLUSH();
      const uint32_t fall = active & ~exec;
      if (target < pc + 1) {
        PushGroup(w, pc + 1, fall);
        active = exec;
        pc = target;
      } else {
        PushGroup(w, target, exec);
        active = fall;
        ++pc;
      }
    }
    if (pc > w.next_join) {
      GPUVM_FLUSH();
      PushGroup(w, pc, active);
      PopMin(w, &pc, &active);
    }
  }
  next:
    if (--budget <= 0) goto out;
  }

fault:
  stop = WarpStop::kFault;
  ws.fault.pc = pc;
  ws.fault.warp = w.index;
out:
  GPUVM_FLUSH();
#undef GPUVM_FLUSH
  w.pc = pc;
  w.active = active;
  ws.lane_instructions += lanes;
  *budget_inout = budget;
  return stop;
}

}  // namespace gpuvm::sim::compute::GPUVM_INTERP_NS
