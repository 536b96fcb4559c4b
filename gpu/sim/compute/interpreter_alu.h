// The warp interpreter's ALU handlers (part of interpreter_impl.h; see there for how it is
// compiled): the element-wise lane operations as one table (GPUVM_INTERP_LANE_OPS), which
// GPUVM_INTERP_LANE_OP_CASES() turns into `case` labels of RunWarp's dispatch switch, and the
// handlers that do more than map lanes (selp, bfi, prmt, shf, testp, setp, predicate logic).
//
// Why a table of cases rather than a function with its own switch: RunWarp is the software GPU's
// hot path, and one switch over every handler compiles to one jump table; a second switch behind a
// `default:` would add an indirect jump to every ALU instruction.
//
// Threading: like RunWarp, everything here runs on the worker thread that owns the warp; ALU
// handlers touch only the warp's registers and predicates.
#ifndef GPUVM_INTERP_NS
#error "define GPUVM_INTERP_NS before including interpreter_alu.h"
#endif
#ifndef GPUVM_GPU_SIM_COMPUTE_INTERPRETER_ALU_H_
#define GPUVM_GPU_SIM_COMPUTE_INTERPRETER_ALU_H_

#include <cmath>
#include <cstdint>

#include "gpu/sim/compute/exec_state.h"
#include "gpu/sim/compute/interpreter_lanes.h"

// The element-wise lane operations: MAP1(handler, D, A, expr of a), MAP2(handler, D, A, B, expr
// of a and b), MAP3(handler, D, A, B, C, expr of a, b and c). D is the destination row's lane type,
// A/B/C the sources'; the expression is converted to D. An expression with a comma outside
// parentheses (a template argument list) is parenthesised.
// clang-format off
#define GPUVM_INTERP_LANE_OPS(MAP1, MAP2, MAP3)                                                \
  MAP1(Mov32, uint32_t, uint32_t, a)                                                          \
  MAP1(Mov64, uint64_t, uint64_t, a)                                                          \
  MAP2(Pack, uint64_t, uint32_t, uint32_t, uint64_t{a} | uint64_t{b} << 32)                   \
  MAP1(Hi32, uint32_t, uint64_t, a >> 32)                                                     \
  MAP2(AddI32, uint32_t, uint32_t, uint32_t, a + b)                                           \
  MAP2(AddI64, uint64_t, uint64_t, uint64_t, a + b)                                           \
  MAP2(AddF32, float, float, float, a + b)                                                    \
  MAP2(AddF64, double, double, double, a + b)                                                 \
  MAP2(SubI32, uint32_t, uint32_t, uint32_t, a - b)                                           \
  MAP2(SubI64, uint64_t, uint64_t, uint64_t, a - b)                                           \
  MAP2(SubF32, float, float, float, a - b)                                                    \
  MAP2(SubF64, double, double, double, a - b)                                                 \
  MAP2(MulI32, uint32_t, uint32_t, uint32_t, a * b)                                           \
  MAP2(MulI64, uint64_t, uint64_t, uint64_t, a * b)                                           \
  MAP2(MulF32, float, float, float, a * b)                                                    \
  MAP2(MulF64, double, double, double, a * b)                                                 \
  MAP2(MulHiU32, uint32_t, uint32_t, uint32_t, (uint64_t{a} * b) >> 32)                       \
  MAP2(MulHiS32, int32_t, int32_t, int32_t, (int64_t{a} * b) >> 32)                           \
  MAP2(MulHiU64, uint64_t, uint64_t, uint64_t, (static_cast<unsigned __int128>(a) * b) >> 64) \
  MAP2(MulHiS64, int64_t, int64_t, int64_t, (static_cast<__int128>(a) * b) >> 64)             \
  MAP2(DivU32, uint32_t, uint32_t, uint32_t, DivUnsigned(a, b))                               \
  MAP2(DivS32, int32_t, int32_t, int32_t, (DivSigned<int32_t, uint32_t>(a, b)))               \
  MAP2(DivU64, uint64_t, uint64_t, uint64_t, DivUnsigned(a, b))                               \
  MAP2(DivS64, int64_t, int64_t, int64_t, (DivSigned<int64_t, uint64_t>(a, b)))               \
  MAP2(DivF32, float, float, float, a / b)                                                    \
  MAP2(DivF64, double, double, double, a / b)                                                 \
  MAP2(RemU32, uint32_t, uint32_t, uint32_t, RemUnsigned(a, b))                               \
  MAP2(RemS32, int32_t, int32_t, int32_t, RemSigned(a, b))                                    \
  MAP2(RemU64, uint64_t, uint64_t, uint64_t, RemUnsigned(a, b))                               \
  MAP2(RemS64, int64_t, int64_t, int64_t, RemSigned(a, b))                                    \
  MAP2(MinU32, uint32_t, uint32_t, uint32_t, a < b ? a : b)                                   \
  MAP2(MinS32, int32_t, int32_t, int32_t, a < b ? a : b)                                      \
  MAP2(MinU64, uint64_t, uint64_t, uint64_t, a < b ? a : b)                                   \
  MAP2(MinS64, int64_t, int64_t, int64_t, a < b ? a : b)                                      \
  MAP2(MinF32, float, float, float, FMin(a, b))                                               \
  MAP2(MinF64, double, double, double, FMin(a, b))                                            \
  MAP2(MaxU32, uint32_t, uint32_t, uint32_t, a > b ? a : b)                                   \
  MAP2(MaxS32, int32_t, int32_t, int32_t, a > b ? a : b)                                      \
  MAP2(MaxU64, uint64_t, uint64_t, uint64_t, a > b ? a : b)                                   \
  MAP2(MaxS64, int64_t, int64_t, int64_t, a > b ? a : b)                                      \
  MAP2(MaxF32, float, float, float, FMax(a, b))                                               \
  MAP2(MaxF64, double, double, double, FMax(a, b))                                            \
  MAP2(And32, uint32_t, uint32_t, uint32_t, a & b)                                            \
  MAP2(And64, uint64_t, uint64_t, uint64_t, a & b)                                            \
  MAP2(Or32, uint32_t, uint32_t, uint32_t, a | b)                                             \
  MAP2(Or64, uint64_t, uint64_t, uint64_t, a | b)                                             \
  MAP2(Xor32, uint32_t, uint32_t, uint32_t, a ^ b)                                            \
  MAP2(Xor64, uint64_t, uint64_t, uint64_t, a ^ b)                                            \
  MAP2(Shl32, uint32_t, uint32_t, uint32_t, b >= 32 ? 0u : a << b)                            \
  MAP2(ShrU32, uint32_t, uint32_t, uint32_t, b >= 32 ? 0u : a >> b)                           \
  MAP2(CopysignF32, float, float, float, std::copysign(b, a))                                 \
  MAP2(CopysignF64, double, double, double, std::copysign(b, a))                              \
  MAP1(AbsS32, int32_t, int32_t, a < 0 ? (WrapNeg<int32_t, uint32_t>(a)) : a)                 \
  MAP1(AbsS64, int64_t, int64_t, a < 0 ? (WrapNeg<int64_t, uint64_t>(a)) : a)                 \
  MAP1(AbsF32, float, float, std::fabs(a))                                                    \
  MAP1(AbsF64, double, double, std::fabs(a))                                                  \
  MAP1(NegS32, int32_t, int32_t, (WrapNeg<int32_t, uint32_t>(a)))                             \
  MAP1(NegS64, int64_t, int64_t, (WrapNeg<int64_t, uint64_t>(a)))                             \
  MAP1(NegF32, float, float, -a)                                                              \
  MAP1(NegF64, double, double, -a)                                                            \
  MAP1(Not32, uint32_t, uint32_t, ~a)                                                         \
  MAP1(Not64, uint64_t, uint64_t, ~a)                                                         \
  MAP1(Brev32, uint32_t, uint32_t, Brev32(a))                                                 \
  MAP1(Brev64, uint64_t, uint64_t, Brev64(a))                                                 \
  MAP1(SqrtF32, float, float, std::sqrt(a))                                                   \
  MAP1(SqrtF64, double, double, std::sqrt(a))                                                 \
  MAP1(RsqrtF32, float, float, 1.0f / std::sqrt(a))                                           \
  MAP1(RsqrtF64, double, double, 1.0 / std::sqrt(a))                                          \
  MAP1(RcpF32, float, float, 1.0f / a)                                                        \
  MAP1(RcpF64, double, double, 1.0 / a)                                                       \
  MAP1(Ex2F32, float, float, std::exp2(a))                                                    \
  MAP1(Ex2F64, double, double, std::exp2(a))                                                  \
  MAP1(Lg2F32, float, float, std::log2(a))                                                    \
  MAP1(Lg2F64, double, double, std::log2(a))                                                  \
  MAP1(SinF32, float, float, std::sin(a))                                                     \
  MAP1(SinF64, double, double, std::sin(a))                                                   \
  MAP1(CosF32, float, float, std::cos(a))                                                     \
  MAP1(CosF64, double, double, std::cos(a))                                                   \
  MAP1(TanhF32, float, float, std::tanh(a))                                                   \
  MAP1(TanhF64, double, double, std::tanh(a))                                                 \
  MAP2(AddSatS32, int32_t, int32_t, int32_t, SaturateS32(int64_t{a} + b))                     \
  MAP2(SubSatS32, int32_t, int32_t, int32_t, SaturateS32(int64_t{a} - b))                     \
  MAP2(MulWideU32, uint64_t, uint32_t, uint32_t, uint64_t{a} * b)                             \
  MAP2(MulWideS32, uint64_t, int32_t, int32_t, int64_t{a} * b)                                \
  MAP3(MadI32, uint32_t, uint32_t, uint32_t, uint32_t, a * b + c)                             \
  MAP3(MadI64, uint64_t, uint64_t, uint64_t, uint64_t, a * b + c)                             \
  MAP3(FmaF32, float, float, float, float, __builtin_fmaf(a, b, c))                           \
  MAP3(FmaF64, double, double, double, double, __builtin_fma(a, b, c))                        \
  MAP3(MadWideU32, uint64_t, uint32_t, uint32_t, uint64_t, uint64_t{a} * b + c)               \
  MAP3(MadWideS32, uint64_t, int32_t, int32_t, uint64_t,                                      \
       static_cast<uint64_t>(int64_t{a} * b) + c)                                             \
  MAP2(Shl64, uint64_t, uint64_t, uint32_t, b >= 64 ? uint64_t{0} : a << b)                   \
  MAP2(ShrU64, uint64_t, uint64_t, uint32_t, b >= 64 ? uint64_t{0} : a >> b)                  \
  MAP2(ShrS32, int32_t, int32_t, uint32_t, a >> (b >= 32 ? 31u : b))                          \
  MAP2(ShrS64, int64_t, int64_t, uint32_t, a >> (b >= 64 ? 63u : b))                          \
  MAP1(Popc32, uint32_t, uint32_t, __builtin_popcount(a))                                     \
  MAP1(Popc64, uint32_t, uint64_t, __builtin_popcountll(a))                                   \
  MAP1(Clz32, uint32_t, uint32_t, a ? static_cast<uint32_t>(__builtin_clz(a)) : 32u)          \
  MAP1(Clz64, uint32_t, uint64_t, a ? static_cast<uint32_t>(__builtin_clzll(a)) : 64u)        \
  MAP3(BfeU32, uint32_t, uint32_t, uint32_t, uint32_t, (Bfe<uint32_t, false>(a, b, c)))       \
  MAP3(BfeS32, uint32_t, uint32_t, uint32_t, uint32_t, (Bfe<uint32_t, true>(a, b, c)))        \
  MAP3(BfeU64, uint64_t, uint64_t, uint32_t, uint32_t, (Bfe<uint64_t, false>(a, b, c)))       \
  MAP3(BfeS64, uint64_t, uint64_t, uint32_t, uint32_t, (Bfe<uint64_t, true>(a, b, c)))        \
  MAP1(CvtU64U32, uint64_t, uint32_t, a)                                                      \
  MAP1(CvtS64S32, uint64_t, int32_t, int64_t{a})                                              \
  MAP1(CvtU32U64, uint32_t, uint64_t, a)                                                      \
  MAP1(CvtF32S32, float, int32_t, a)                                                          \
  MAP1(CvtF32U32, float, uint32_t, a)                                                         \
  MAP1(CvtS32F32, int32_t, float, F32ToS32(a))                                                \
  MAP1(CvtF64F32, double, float, a)                                                           \
  MAP1(CvtF32F64, float, double, a)                                                           \
  MAP1(CvtF64S32, double, int32_t, a)

// The table as `case` labels of a switch over Handler, where `regs`, `op` and `exec` name the
// warp's register file, the instruction and its executing lanes.
#define GPUVM_INTERP_MAP1_CASE(name, D, A, expr)                                              \
  case Handler::k##name:                                                                      \
    Map1<D, A>(regs, op, exec,                                                                \
               [](A a) __attribute__((always_inline)) { return static_cast<D>(expr); });     \
    break;
#define GPUVM_INTERP_MAP2_CASE(name, D, A, B, expr)                                           \
  case Handler::k##name:                                                                      \
    Map2<D, A, B>(regs, op, exec,                                                             \
                  [](A a, B b) __attribute__((always_inline)) { return static_cast<D>(expr); }); \
    break;
#define GPUVM_INTERP_MAP3_CASE(name, D, A, B, C, expr)                                        \
  case Handler::k##name:                                                                      \
    Map3<D, A, B, C>(regs, op, exec, [](A a, B b, C c) __attribute__((always_inline)) {       \
      return static_cast<D>(expr);                                                            \
    });                                                                                       \
    break;
#define GPUVM_INTERP_LANE_OP_CASES() \
  GPUVM_INTERP_LANE_OPS(GPUVM_INTERP_MAP1_CASE, GPUVM_INTERP_MAP2_CASE, GPUVM_INTERP_MAP3_CASE)
// clang-format on

namespace gpuvm::sim::compute::GPUVM_INTERP_NS {
namespace {

GPUVM_INLINE int32_t SaturateS32(int64_t s) {
  return static_cast<int32_t>(s > INT32_MAX ? INT32_MAX : (s < INT32_MIN ? INT32_MIN : s));
}

// selp: d = c ? a : b, the predicate (row c, negated by aux) picking per lane.
template <typename T>
GPUVM_INLINE void SelLanes(Warp& w, uint8_t* regs, const Op& op, uint32_t exec) {
  const uint32_t sel = w.preds[op.c] ^ op.aux;
  const T* a = RowPtr<const T>(regs, op.a);
  const T* b = RowPtr<const T>(regs, op.b);
  alignas(64) T t[kLanes];
  for (int l = 0; l < kLanes; ++l) t[l] = ((sel >> l) & 1) ? a[l] : b[l];
  StoreLanes(exec, RowPtr<T>(regs, op.d), t);
}

// bfi: the bit field of b at [pos, pos + len) replaced by a's low bits (pos in row c, len in row
// aux).
template <typename T>
GPUVM_INLINE void BfiLanes(uint8_t* regs, const Op& op, uint32_t exec) {
  const uint32_t* pos = RowPtr<const uint32_t>(regs, op.c);
  const uint32_t* len = RowPtr<const uint32_t>(regs, op.aux);
  const T* a = RowPtr<const T>(regs, op.a);
  const T* b = RowPtr<const T>(regs, op.b);
  alignas(64) T t[kLanes];
  for (int l = 0; l < kLanes; ++l) t[l] = Bfi<T>(a[l], b[l], pos[l], len[l]);
  StoreLanes(exec, RowPtr<T>(regs, op.d), t);
}

GPUVM_INLINE void PrmtLanes(uint8_t* regs, const Op& op, uint32_t exec) {
  const uint32_t mode = op.aux;
  Map3<uint32_t, uint32_t, uint32_t, uint32_t>(
      regs, op, exec, [mode](uint32_t a, uint32_t b, uint32_t c) { return Prmt(a, b, c, mode); });
}

GPUVM_INLINE void ShfLanes(uint8_t* regs, const Op& op, uint32_t exec) {
  const uint32_t mode = op.aux;
  Map3<uint32_t, uint32_t, uint32_t, uint32_t>(
      regs, op, exec, [mode](uint32_t a, uint32_t b, uint32_t c) { return Shf(a, b, c, mode); });
}

// testp: predicate d = the class test `aux` of each lane's a.
template <typename F>
GPUVM_INLINE void TestpLanes(Warp& w, uint8_t* regs, const Op& op, uint32_t exec) {
  const F* a = RowPtr<const F>(regs, op.a);
  uint32_t m = 0;
  for (int l = 0; l < kLanes; ++l) m |= uint32_t{Testp(a[l], op.aux)} << l;
  SetPred(w, op.d, exec, m);
}

// setp: predicate d = the comparison `aux` of a and b.
template <typename T>
GPUVM_INLINE void SetpLanes(Warp& w, uint8_t* regs, const Op& op, uint32_t exec) {
  SetPred(w, op.d, exec,
          CompareLanes(RowPtr<const T>(regs, op.a), RowPtr<const T>(regs, op.b), op.aux));
}

// Predicate logic: d = a op b, either source negated by aux.
GPUVM_INLINE void PlopLanes(Warp& w, const Op& op, uint32_t exec) {
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
}

}  // namespace
}  // namespace gpuvm::sim::compute::GPUVM_INTERP_NS

#endif  // GPUVM_GPU_SIM_COMPUTE_INTERPRETER_ALU_H_
