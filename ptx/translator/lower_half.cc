// KernelTranslator (kernel_translator.h), half precision: add, sub, mul, fma, neg and abs on .f16
// and .f16x2, and the comparisons setp/set with .f16/.f16x2 operands — what cuda_fp16.h's
// intrinsics (__hadd, __hfma, __hlt, operators on __half2, ...) compile to for sm_75.
//
// The GPU has no half-precision ALU, so each half is widened to f64 (exact), computed there, and
// rounded once to f16 (the engine's cvt.f16.f64, with the instruction's rounding and .sat). The
// sum, difference or product of two f16 values is exact in f64, so add, sub and mul give the
// correctly rounded f16 result PTX requires. fma's f64 sum of an exact product and an f16 can
// itself round when the exponents are more than ~30 apart; that double rounding can differ from a
// fused f16 fma in the last bit in rare halfway cases. neg and abs flip or clear the sign bit, as
// PTX defines them (NaN payloads kept). .ftz is accepted and not applied: f16 subnormals are kept.
//
// .f16 values live in the low 16 bits of a 32-bit register row; .f16x2 holds the first element in
// bits 0-15 and the second in bits 16-31.
#include "ptx/translator/kernel_translator.h"
#include "ptx/translator/ptx_to_isa.h"

namespace gpuvm::ptx::translator {

bool KernelTranslator::IsHalfArith(const Instruction& in) {
  auto half = [](ScalarType t) { return t == ScalarType::kF16 || t == ScalarType::kF16x2; };
  switch (in.opcode) {
    case Opcode::kAdd:
    case Opcode::kSub:
    case Opcode::kMul:
    case Opcode::kFma:
    case Opcode::kNeg:
    case Opcode::kAbs:
    case Opcode::kSetp:
      return half(in.type);
    case Opcode::kSet:
      return half(in.type2);
    default:
      return false;
  }
}

Status KernelTranslator::LowerHalf(const Instruction& in) {
  const ScalarType operand_type = in.opcode == Opcode::kSet ? in.type2 : in.type;
  const bool x2 = operand_type == ScalarType::kF16x2;
  const int halves = x2 ? 2 : 1;
  const ScalarType reg_type = x2 ? ScalarType::kB32 : ScalarType::kB16;
  // Half h of a source register, as an f64 value.
  auto widen = [&](uint32_t reg, int h) -> uint32_t {
    const uint32_t bits = h == 0 ? reg : Bin(IOp::kShr, IT::kU32, reg, I(16));
    return Cvt(IT::kF64, IT::kF16, bits);
  };
  // 16-bit results (zero-extended in 32-bit registers) into d: one, or two packed.
  auto store = [&](uint32_t d, const uint32_t* parts) {
    if (!x2) {
      MovTo(d, IT::kU32, parts[0]);
      return;
    }
    const uint32_t low = Bin(IOp::kAnd, IT::kU32, parts[0], I(0xffff));
    const uint32_t high = Bin(IOp::kShl, IT::kU32, parts[1], I(16));
    BinTo(d, IOp::kOr, IT::kU32, low, R(high));
  };

  if (in.opcode == Opcode::kNeg || in.opcode == Opcode::kAbs) {
    GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
    GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], reg_type));
    const uint64_t sign = x2 ? 0x80008000u : 0x8000u;
    if (in.opcode == Opcode::kNeg) {
      BinTo(d, IOp::kXor, IT::kU32, a, I(sign));
    } else {
      BinTo(d, IOp::kAnd, IT::kU32, a, I(~sign & (x2 ? 0xffffffffu : 0xffffu)));
    }
    return Status::Ok();
  }

  if (in.opcode == Opcode::kSetp || in.opcode == Opcode::kSet) {
    std::optional<IsaCompare> compare = CompareOf(in.compare);
    if (!compare) return Unsupported("comparison missing");
    GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], reg_type));
    GPUVM_ASSIGN_OR_RETURN(uint32_t b, SrcReg(in.operands[2], reg_type));
    const bool has_c = in.bool_op != BoolOp::kNone;
    std::pair<uint32_t, bool> c{kPT, false};
    if (has_c) {
      GPUVM_ASSIGN_OR_RETURN(c, SrcPred(in.operands[3]));
    }
    const isa::PlopOp bop = PlopOf(in.bool_op);
    uint32_t compared[2] = {kNoV, kNoV};  // the comparison per half
    uint32_t result[2] = {kNoV, kNoV};    // combined with c
    for (int h = 0; h < halves; ++h) {
      compared[h] = Setp(compare->cmp, IT::kF64, widen(a, h), R(widen(b, h)));
      result[h] = compared[h];
      if (has_c) {
        result[h] = Temp(VKind::kPred);
        PlopTo(result[h], bop, compared[h], false, c.first, c.second);
      }
    }
    if (in.opcode == Opcode::kSetp) {
      // setp.f16: p (and q = !p, as for other types); setp.f16x2 p|q: one per half.
      GPUVM_ASSIGN_OR_RETURN(const auto dst, DstPair(in.operands[0], /*predicate=*/true));
      const auto [pd, qd] = dst;
      PlopTo(pd, isa::PlopOp::kAnd, result[0], false, kPT, false);
      if (qd != kNoV) {
        if (x2) {
          PlopTo(qd, isa::PlopOp::kAnd, result[1], false, kPT, false);
        } else {
          // As for the other types: q combines the complement of the comparison with c.
          PlopTo(qd, has_c ? bop : isa::PlopOp::kAnd, compared[0], true, c.first, c.second);
        }
      }
      return Status::Ok();
    }
    // set: each half (or the whole u32/s32/f32 destination) is "true" or 0 — 1.0 for float
    // destinations (f16: 0x3c00, f32: 1.0f), all ones for integer ones.
    GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
    const ScalarType dt = in.type;
    if (dt == ScalarType::kF16 || dt == ScalarType::kF16x2 ||
        (x2 && (dt == ScalarType::kU32 || dt == ScalarType::kS32))) {
      const uint64_t one = dt == ScalarType::kF16 || dt == ScalarType::kF16x2 ? 0x3c00u : 0xffffu;
      uint32_t parts[2];
      for (int h = 0; h < halves; ++h) {
        parts[h] = Temp(VKind::kReg32);
        SelTo(parts[h], IT::kU32, MovImm(IT::kU32, one), I(0), result[h]);
      }
      store(d, parts);
      return Status::Ok();
    }
    if (x2)
      return Unsupported("set with .f16x2 operands needs an .f16x2, .u32 or .s32 destination");
    const uint64_t one = dt == ScalarType::kF32 ? 0x3f800000u : 0xffffffffu;
    SelTo(d, IT::kU32, MovImm(IT::kU32, one), I(0), result[0]);
    return Status::Ok();
  }

  // add, sub, mul, fma.
  GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
  const int sources = in.opcode == Opcode::kFma ? 3 : 2;
  uint32_t src[3];
  for (int k = 0; k < sources; ++k) {
    GPUVM_ASSIGN_OR_RETURN(src[k], SrcReg(in.operands[1 + k], reg_type));
  }
  const uint8_t mod = RoundSatMod(in);
  uint32_t parts[2];
  for (int h = 0; h < halves; ++h) {
    const uint32_t a = widen(src[0], h);
    const uint32_t b = widen(src[1], h);
    uint32_t exact;
    switch (in.opcode) {
      case Opcode::kAdd:
        exact = Bin(IOp::kAdd, IT::kF64, a, R(b));
        break;
      case Opcode::kSub:
        exact = Bin(IOp::kSub, IT::kF64, a, R(b));
        break;
      case Opcode::kMul:
        exact = Bin(IOp::kMul, IT::kF64, a, R(b));
        break;
      default:
        exact = Tri(IOp::kFma, IT::kF64, a, R(b), widen(src[2], h));
        break;
    }
    parts[h] = Cvt(IT::kF16, IT::kF64, exact, mod);
  }
  store(d, parts);
  return Status::Ok();
}

}  // namespace gpuvm::ptx::translator
