// The warp interpreter's lane plumbing (part of interpreter_impl.h, compiled once per interpreter
// variant with GPUVM_INTERP_NS set; internal linkage, so the variants never mix): register rows as
// typed lane arrays, the branch-free Map1/2/3 loops every element-wise handler is built from, the
// scalar semantics the fast handlers share (division, min/max, bit fields, prmt, shf, testp), and
// lane comparisons into predicate masks.
//
// Threading: like RunWarp, everything here runs on the worker thread that owns the block being run
// (its warps' registers, its shared and local memory); only global memory is shared with other
// workers, and is touched through relaxed atomics (interpreter_memory.h).
#ifndef GPUVM_INTERP_NS
#error "define GPUVM_INTERP_NS before including interpreter_lanes.h"
#endif
#ifndef GPUVM_GPU_SIM_COMPUTE_INTERPRETER_LANES_H_
#define GPUVM_GPU_SIM_COMPUTE_INTERPRETER_LANES_H_

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "gpu/sim/compute/exec_state.h"

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

// ---- scalar semantics that the fast handlers share ----

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

// Records a fault of the running block in its worker's FaultRecord; false, for `return Fail(...)`.
GPUVM_INLINE bool Fail(ExecContext& ctx, ComputeFault::Kind kind, const char* what, uint32_t lane,
                       uint64_t address) {
  FaultRecord& f = ctx.worker->fault;
  f.kind = kind;
  f.what = what;
  f.lane = lane;
  f.address = address;
  return false;
}

GPUVM_INLINE void SetPred(Warp& w, uint32_t p, uint32_t exec, uint32_t value) {
  w.preds[p] = (w.preds[p] & ~exec) | (value & exec);
}

}  // namespace
}  // namespace gpuvm::sim::compute::GPUVM_INTERP_NS

#endif  // GPUVM_GPU_SIM_COMPUTE_INTERPRETER_LANES_H_
