// KernelTranslator (kernel_translator.h), arithmetic: add/sub/div/rem/min/max/abs/neg, the float
// functions, mul and mad in their .lo/.hi/.wide forms, mul24/mad24, and the carry chains
// (add.cc, addc, sub.cc, subc, mad.cc, madc) on a carry-flag register.
#include <utility>

#include "ptx/translator/kernel_translator.h"
#include "ptx/translator/ptx_to_isa.h"

namespace gpuvm::ptx::translator {

// -------------------------------------------------------------------------------------------------
// Arithmetic

Status KernelTranslator::LowerArith(const Instruction& in) {
  const ScalarType t = in.type;
  const IT it = AluType(t);
  const uint8_t fmod = RoundSatMod(in);
  GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
  auto binary = [&](IOp op, bool ext16, uint8_t mod) -> Status {
    GPUVM_ASSIGN_OR_RETURN(uint32_t a,
                           ext16 ? SrcExtReg(in.operands[1], t) : SrcReg(in.operands[1], t));
    GPUVM_ASSIGN_OR_RETURN(Value b, ext16 ? SrcExt(in.operands[2], t) : Src(in.operands[2], t));
    BinTo(d, op, it, a, b, mod);
    return Status::Ok();
  };
  auto unary = [&](IOp op, bool ext16, uint8_t mod) -> Status {
    GPUVM_ASSIGN_OR_RETURN(uint32_t a,
                           ext16 ? SrcExtReg(in.operands[1], t) : SrcReg(in.operands[1], t));
    VInst& v = Emit(op, it);
    v.d = d;
    v.a = a;
    v.in.mod = mod;
    return Status::Ok();
  };
  switch (in.opcode) {
    case Opcode::kAdd:
    case Opcode::kSub: {
      const IOp op = in.opcode == Opcode::kAdd ? IOp::kAdd : IOp::kSub;
      if (IsF(t)) return binary(op, false, fmod);
      const bool sat = in.Has(kFlagSat);
      if (sat && t != ScalarType::kS32) return Unsupported(".sat is for s32");
      return binary(op, false, sat ? isa::kModSat : 0);
    }
    case Opcode::kDiv:
      if (IsF(t)) return binary(IOp::kDiv, false, RoundingMod(in.rounding));
      return binary(IOp::kDiv, true, 0);
    case Opcode::kMin:
    case Opcode::kMax:
      if (in.Has(kFlagNaN)) return Unsupported(".NaN min/max is not supported");
      return binary(in.opcode == Opcode::kMin ? IOp::kMin : IOp::kMax, true, 0);
    case Opcode::kFma: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
      GPUVM_ASSIGN_OR_RETURN(uint32_t c, SrcReg(in.operands[3], t));
      TriTo(d, IOp::kFma, it, a, b, c, fmod);
      return Status::Ok();
    }
    default:
      break;
  }
  // The rest are one GVISA instruction each.
  struct OneToOne {
    Opcode ptx;
    IOp isa;
    bool binary;    // takes operand b
    bool ext16;     // 16-bit sources are extended to 32 bits first
    bool rounding;  // passes the instruction's rounding on
  };
  static constexpr OneToOne kOneToOne[] = {
      {Opcode::kRem, IOp::kRem, true, true, false},
      {Opcode::kAbs, IOp::kAbs, false, true, false},
      {Opcode::kNeg, IOp::kNeg, false, false, false},
      {Opcode::kCopysign, IOp::kCopysign, true, false, false},
      {Opcode::kRcp, IOp::kRcp, false, false, true},
      {Opcode::kSqrt, IOp::kSqrt, false, false, true},
      {Opcode::kRsqrt, IOp::kRsqrt, false, false, false},
      {Opcode::kSin, IOp::kSin, false, false, false},
      {Opcode::kCos, IOp::kCos, false, false, false},
      {Opcode::kLg2, IOp::kLg2, false, false, false},
      {Opcode::kEx2, IOp::kEx2, false, false, false},
      {Opcode::kTanh, IOp::kTanh, false, false, false},
  };
  for (const OneToOne& e : kOneToOne) {
    if (e.ptx != in.opcode) continue;
    const uint8_t mod = e.rounding ? RoundingMod(in.rounding) : 0;
    return e.binary ? binary(e.isa, e.ext16, mod) : unary(e.isa, e.ext16, mod);
  }
  return Unsupported("internal: not an arithmetic instruction");
}

// mul24/mad24 operands: their low 24 bits, sign- or zero-extended from bit 23.
std::pair<uint32_t, uint32_t> KernelTranslator::Operands24(uint32_t a, uint32_t b, bool is_signed) {
  const uint32_t len = MovImm(IT::kU32, 24);
  const IT t = is_signed ? IT::kS32 : IT::kU32;
  return {Tri(IOp::kBfe, t, a, I(0), len), Tri(IOp::kBfe, t, b, I(0), len)};
}

// mul24.hi/mad24.hi: bits 16..47 of the 48-bit product of two 24-bit values (.lo is a plain
// 32-bit mul).
uint32_t KernelTranslator::Mul24Hi(uint32_t a24, uint32_t b24, bool is_signed) {
  const uint32_t p = Bin(IOp::kMulWide, is_signed ? IT::kS32 : IT::kU32, a24, R(b24), 0, IT::kU64);
  return Cvt(IT::kU32, IT::kU64, Bin(IOp::kShr, IT::kU64, p, I(16)));
}

Status KernelTranslator::LowerMul(const Instruction& in) {
  const ScalarType t = in.type;
  GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
  if (IsF(t)) {
    GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
    GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
    BinTo(d, IOp::kMul, AluType(t), a, b, RoundSatMod(in));
    return Status::Ok();
  }
  const bool s = IsSignedType(t);
  if (in.opcode == Opcode::kMul24) {
    GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
    GPUVM_ASSIGN_OR_RETURN(uint32_t b, SrcReg(in.operands[2], t));
    const auto [a24, b24] = Operands24(a, b, s);
    if (in.mul_mode == MulMode::kHi) {
      WriteWidth(d, Mul24Hi(a24, b24, s), false, false);
      return Status::Ok();
    }
    BinTo(d, IOp::kMul, IT::kU32, a24, R(b24));
    return Status::Ok();
  }
  switch (in.mul_mode) {
    case MulMode::kLo: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
      BinTo(d, IOp::kMul, AluType(t), a, b);
      return Status::Ok();
    }
    case MulMode::kHi: {
      if (Is16(t)) {
        GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcExtReg(in.operands[1], t));
        GPUVM_ASSIGN_OR_RETURN(Value b, SrcExt(in.operands[2], t));
        uint32_t p = Bin(IOp::kMul, IT::kU32, a, b);
        BinTo(d, IOp::kShr, s ? IT::kS32 : IT::kU32, p, I(16));
        return Status::Ok();
      }
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
      BinTo(d, IOp::kMulHi, AluType(t), a, b);
      return Status::Ok();
    }
    case MulMode::kWide: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcExtReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value b, SrcExt(in.operands[2], t));
      if (Is16(t)) {
        BinTo(d, IOp::kMul, IT::kU32, a, b);  // a 16x16 product fits 32 bits
        return Status::Ok();
      }
      if (TypeSize(t) != 4) return Unsupported("mul.wide on 64-bit types");
      BinTo(d, IOp::kMulWide, s ? IT::kS32 : IT::kU32, a, b);
      return Status::Ok();
    }
    default:
      return Unsupported("mul needs .lo/.hi/.wide");
  }
}

Status KernelTranslator::LowerMad(const Instruction& in) {
  const ScalarType t = in.type;
  GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
  if (IsF(t)) {  // mad.f32/f64 is fma (sm_20 and later)
    GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
    GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
    GPUVM_ASSIGN_OR_RETURN(uint32_t c, SrcReg(in.operands[3], t));
    TriTo(d, IOp::kFma, AluType(t), a, b, c, RoundSatMod(in));
    return Status::Ok();
  }
  const bool s = IsSignedType(t);
  const IT it = AluType(t);
  if (in.opcode == Opcode::kMad24) {
    if (in.Has(kFlagSat)) return Unsupported("mad24.hi.sat is not supported");
    GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
    GPUVM_ASSIGN_OR_RETURN(uint32_t b, SrcReg(in.operands[2], t));
    GPUVM_ASSIGN_OR_RETURN(Value c, Src(in.operands[3], t));
    const auto [a24, b24] = Operands24(a, b, s);
    const uint32_t part =
        in.mul_mode == MulMode::kHi ? Mul24Hi(a24, b24, s) : Bin(IOp::kMul, IT::kU32, a24, R(b24));
    BinTo(d, IOp::kAdd, IT::kU32, part, c);
    return Status::Ok();
  }
  switch (in.mul_mode) {
    case MulMode::kLo: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
      GPUVM_ASSIGN_OR_RETURN(uint32_t c, SrcReg(in.operands[3], t));
      TriTo(d, IOp::kMad, it, a, b, c);
      return Status::Ok();
    }
    case MulMode::kHi: {
      uint32_t hi;
      if (Is16(t)) {
        GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcExtReg(in.operands[1], t));
        GPUVM_ASSIGN_OR_RETURN(Value b, SrcExt(in.operands[2], t));
        hi = Bin(IOp::kShr, s ? IT::kS32 : IT::kU32, Bin(IOp::kMul, IT::kU32, a, b), I(16));
      } else {
        GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
        GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
        hi = Bin(IOp::kMulHi, it, a, b);
      }
      GPUVM_ASSIGN_OR_RETURN(Value c, Src(in.operands[3], t));
      const bool sat = in.Has(kFlagSat);
      BinTo(d, IOp::kAdd, sat ? IT::kS32 : it, hi, c, sat ? isa::kModSat : 0);
      return Status::Ok();
    }
    case MulMode::kWide: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcExtReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value b, SrcExt(in.operands[2], t));
      if (Is16(t)) {
        GPUVM_ASSIGN_OR_RETURN(uint32_t c, SrcReg(in.operands[3], ScalarType::kU32));
        TriTo(d, IOp::kMad, IT::kU32, a, b, c);
        return Status::Ok();
      }
      if (TypeSize(t) != 4) return Unsupported("mad.wide on 64-bit types");
      GPUVM_ASSIGN_OR_RETURN(uint32_t c,
                             SrcReg(in.operands[3], s ? ScalarType::kS64 : ScalarType::kU64));
      TriTo(d, IOp::kMadWide, s ? IT::kS32 : IT::kU32, a, b, c);
      return Status::Ok();
    }
    default:
      return Unsupported("mad needs .lo/.hi/.wide");
  }
}

// add.cc/addc/sub.cc/subc/mad.cc/madc: the carry flag is a u32 register (0/1) of the kernel.
Status KernelTranslator::LowerCarry(const Instruction& in) {
  const ScalarType t = in.type;
  const bool wide = TypeSize(t) == 8;
  const IT it = wide ? IT::kU64 : IT::kU32;
  if (cc_ == kNoV) cc_ = vc_.NewVReg(VKind::kReg32);
  const bool carry_in =
      in.opcode == Opcode::kAddc || in.opcode == Opcode::kSubc || in.opcode == Opcode::kMadc;
  const bool carry_out = in.Has(kFlagCc);
  const bool subtract = in.opcode == Opcode::kSub || in.opcode == Opcode::kSubc;
  GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
  uint32_t a, b;
  if (in.opcode == Opcode::kMad || in.opcode == Opcode::kMadc) {
    GPUVM_ASSIGN_OR_RETURN(uint32_t x, SrcReg(in.operands[1], t));
    GPUVM_ASSIGN_OR_RETURN(Value y, Src(in.operands[2], t));
    if (in.mul_mode == MulMode::kHi) {
      a = Bin(IOp::kMulHi, IsSignedType(t) ? (wide ? IT::kS64 : IT::kS32) : it, x, y);
    } else if (in.mul_mode == MulMode::kLo) {
      a = Bin(IOp::kMul, it, x, y);
    } else {
      return Unsupported("carry-chain mad needs .lo or .hi");
    }
    GPUVM_ASSIGN_OR_RETURN(b, SrcReg(in.operands[3], t));
  } else {
    GPUVM_ASSIGN_OR_RETURN(a, SrcReg(in.operands[1], t));
    GPUVM_ASSIGN_OR_RETURN(b, SrcReg(in.operands[2], t));
  }
  uint32_t result, carry = kNoV;
  if (!wide) {
    // 64-bit arithmetic on zero-extended values; the high word is the carry (or all ones on a
    // borrow).
    uint32_t wa = Cvt(IT::kU64, IT::kU32, a);
    uint32_t wb = Cvt(IT::kU64, IT::kU32, b);
    uint32_t w = Bin(subtract ? IOp::kSub : IOp::kAdd, IT::kU64, wa, R(wb));
    if (carry_in)
      w = Bin(subtract ? IOp::kSub : IOp::kAdd, IT::kU64, w, R(Cvt(IT::kU64, IT::kU32, cc_)));
    result = Cvt(IT::kU32, IT::kU64, w);
    if (carry_out) {
      uint32_t hi = TempFor(IT::kU32);
      VInst& v = Emit(IOp::kHi32, IT::kU32);
      v.d = hi;
      v.a = w;
      carry = Bin(IOp::kAnd, IT::kU32, hi, I(1));
    }
  } else {
    uint32_t t1 = Bin(subtract ? IOp::kSub : IOp::kAdd, IT::kU64, a, R(b));
    // carry of the first step: add: t1 < a; sub (borrow): a < b.
    uint32_t c1 = subtract ? Setp(isa::Compare::kLt, IT::kU64, a, R(b))
                           : Setp(isa::Compare::kLt, IT::kU64, t1, R(a));
    result = t1;
    uint32_t any = c1;
    if (carry_in) {
      uint32_t cin = Cvt(IT::kU64, IT::kU32, cc_);
      uint32_t t2 = Bin(subtract ? IOp::kSub : IOp::kAdd, IT::kU64, t1, R(cin));
      uint32_t c2 = subtract ? Setp(isa::Compare::kLt, IT::kU64, t1, R(cin))
                             : Setp(isa::Compare::kLt, IT::kU64, t2, R(t1));
      any = Temp(VKind::kPred);
      PlopTo(any, isa::PlopOp::kOr, c1, false, c2, false);
      result = t2;
    }
    if (carry_out) {
      carry = TempFor(IT::kU32);
      SelTo(carry, IT::kU32, MovImm(IT::kU32, 1), I(0), any);
    }
  }
  if (d != kRZ) MovTo(d, it, result);
  if (carry != kNoV) MovTo(cc_, IT::kU32, carry);
  return Status::Ok();
}

}  // namespace gpuvm::ptx::translator
