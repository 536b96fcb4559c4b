// KernelTranslator (kernel_translator.h), bits and comparisons: and/or/xor/not/cnot (also on
// predicates), shifts, popc/clz/brev/bfind, bfe/bfi/bmsk, prmt, shf, lop3 (as minterms), dp4a, sad;
// setp/set with their boolean combine, selp and slct.
#include <optional>

#include "ptx/translator/kernel_translator.h"
#include "ptx/translator/ptx_to_isa.h"

namespace gpuvm::ptx::translator {

static_assert(static_cast<int>(PermuteMode::kF4e) == static_cast<int>(isa::PrmtMode::kF4e) &&
              static_cast<int>(PermuteMode::kRc16) == static_cast<int>(isa::PrmtMode::kRc16));

// -------------------------------------------------------------------------------------------------
// Bits

Status KernelTranslator::LowerBits(const Instruction& in) {
  const ScalarType t = in.type;
  const IT it = AluType(t);
  const bool wide = TypeSize(t) == 8;
  GPUVM_ASSIGN_OR_RETURN(uint32_t d, in.opcode == Opcode::kNot && t == ScalarType::kPred
                                         ? DstPred(in.operands[0])
                                         : Dst(in.operands[0]));
  switch (in.opcode) {
    case Opcode::kAnd:
    case Opcode::kOr:
    case Opcode::kXor: {
      const IOp op = in.opcode == Opcode::kAnd  ? IOp::kAnd
                     : in.opcode == Opcode::kOr ? IOp::kOr
                                                : IOp::kXor;
      if (t == ScalarType::kPred) {
        GPUVM_ASSIGN_OR_RETURN(auto a, SrcPred(in.operands[1]));
        GPUVM_ASSIGN_OR_RETURN(auto b, SrcPred(in.operands[2]));
        GPUVM_ASSIGN_OR_RETURN(uint32_t pd, DstPred(in.operands[0]));
        PlopTo(pd,
               op == IOp::kAnd  ? isa::PlopOp::kAnd
               : op == IOp::kOr ? isa::PlopOp::kOr
                                : isa::PlopOp::kXor,
               a.first, a.second, b.first, b.second);
        return Status::Ok();
      }
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
      BinTo(d, op, wide ? IT::kU64 : IT::kU32, a, b);
      return Status::Ok();
    }
    case Opcode::kNot: {
      if (t == ScalarType::kPred) {
        GPUVM_ASSIGN_OR_RETURN(auto a, SrcPred(in.operands[1]));
        PlopTo(d, isa::PlopOp::kAnd, a.first, !a.second, kPT, false);
        return Status::Ok();
      }
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      VInst& v = Emit(IOp::kNot, wide ? IT::kU64 : IT::kU32);
      v.d = d;
      v.a = a;
      return Status::Ok();
    }
    case Opcode::kCnot: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      uint32_t z = Setp(isa::Compare::kEq, wide ? IT::kU64 : IT::kU32,
                        Is16(t) ? Bin(IOp::kAnd, IT::kU32, a, I(0xffff)) : a, I(0));
      SelTo(d, wide ? IT::kU64 : IT::kU32, MovImm(wide ? IT::kU64 : IT::kU32, 1), I(0), z);
      return Status::Ok();
    }
    case Opcode::kShl:
    case Opcode::kShr: {
      const bool ext = in.opcode == Opcode::kShr;
      GPUVM_ASSIGN_OR_RETURN(uint32_t a,
                             ext ? SrcExtReg(in.operands[1], t) : SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], ScalarType::kU32));
      const IT st = in.opcode == Opcode::kShl ? (wide ? IT::kU64 : IT::kU32) : it;
      BinTo(d, in.opcode == Opcode::kShl ? IOp::kShl : IOp::kShr, st, a, b);
      return Status::Ok();
    }
    case Opcode::kPopc:
    case Opcode::kClz:
    case Opcode::kBrev: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      VInst& v = Emit(in.opcode == Opcode::kPopc  ? IOp::kPopc
                      : in.opcode == Opcode::kClz ? IOp::kClz
                                                  : IOp::kBrev,
                      wide ? IT::kU64 : IT::kU32);
      v.d = d;
      v.a = a;
      return Status::Ok();
    }
    case Opcode::kBfind: {
      // msb of a (signed: of a ^ sign bits); no bit set: 0xffffffff. .shiftamt: the left shift that
      // would move it to the top, i.e. the leading-zero count.
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      const IT ut = wide ? IT::kU64 : IT::kU32;
      uint32_t x = a;
      if (IsSignedType(t))
        x = Bin(IOp::kXor, ut, a,
                R(Bin(IOp::kShr, wide ? IT::kS64 : IT::kS32, a, I(wide ? 63 : 31))));
      uint32_t n = TempFor(IT::kU32);
      VInst& v = Emit(IOp::kClz, ut);
      v.d = n;
      v.a = x;
      uint32_t r = in.Has(kFlagShiftAmt) ? n : Bin(IOp::kXor, IT::kU32, n, I(wide ? 63 : 31));
      uint32_t none = Setp(isa::Compare::kEq, ut, x, I(0));
      SelTo(d, IT::kU32, MovImm(IT::kU32, 0xffffffffu), R(r), none, /*negate=*/false);
      return Status::Ok();
    }
    case Opcode::kBfe: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value pos, Src(in.operands[2], ScalarType::kU32));
      GPUVM_ASSIGN_OR_RETURN(uint32_t len, SrcReg(in.operands[3], ScalarType::kU32));
      TriTo(d, IOp::kBfe, it, a, pos, len);
      return Status::Ok();
    }
    case Opcode::kBfi: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t f, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(uint32_t b, SrcReg(in.operands[2], t));
      GPUVM_ASSIGN_OR_RETURN(uint32_t pos, SrcReg(in.operands[3], ScalarType::kU32));
      GPUVM_ASSIGN_OR_RETURN(uint32_t len, SrcReg(in.operands[4], ScalarType::kU32));
      VInst& v = Emit(IOp::kBfi, wide ? IT::kU64 : IT::kU32);
      v.d = d;
      v.a = f;
      v.b = b;
      v.c = pos;
      v.m = len;
      return Status::Ok();
    }
    case Opcode::kBmsk: {
      // bmsk.mode.b32 d, a, b: ones at bits [a, a + b), cut at bit 31. .wrap takes a and b modulo
      // 32; .clamp limits both to 32 (a position of 32 gives 0, a width of 32 every bit from a up).
      // Either way that is bfi(~0, 0, a', b'), whose field already stops at bit 31.
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], ScalarType::kU32));
      GPUVM_ASSIGN_OR_RETURN(uint32_t b, SrcReg(in.operands[2], ScalarType::kU32));
      const bool clamp = in.Has(kFlagClamp);
      const IOp limit = clamp ? IOp::kMin : IOp::kAnd;
      const uint64_t bound = clamp ? 32 : 31;
      const uint32_t pos = Bin(limit, IT::kU32, a, I(bound));
      const uint32_t len = Bin(limit, IT::kU32, b, I(bound));
      const uint32_t ones = MovImm(IT::kU32, 0xffffffffu);
      const uint32_t zero = MovImm(IT::kU32, 0);
      VInst& v = Emit(IOp::kBfi, IT::kU32);
      v.d = d;
      v.a = ones;
      v.b = zero;
      v.c = pos;
      v.m = len;
      return Status::Ok();
    }
    case Opcode::kPrmt:
    case Opcode::kShf: {
      // d = op(a, b, c|imm) on 32-bit values; the mode in mod.
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(uint32_t b, SrcReg(in.operands[2], t));
      GPUVM_ASSIGN_OR_RETURN(Value c, Src(in.operands[3], ScalarType::kU32));
      const bool prmt = in.opcode == Opcode::kPrmt;
      VInst& v = Emit(prmt ? IOp::kPrmt : IOp::kShf);
      v.d = d;
      v.a = a;
      v.b = b;
      // PermuteMode is numbered as PrmtMode (kNone: the generic permute, 0).
      v.in.mod = prmt ? static_cast<uint8_t>(in.permute)
                      : (in.Has(kFlagRight) ? isa::kShfRight : 0) |
                            (in.Has(kFlagClamp) ? isa::kShfClamp : 0);
      SetCOrImm(v, c);
      return Status::Ok();
    }
    case Opcode::kLop3: {
      // d = immLut[(a_i << 2) | (b_i << 1) | c_i] for every bit i: the OR of the minterms the table
      // sets.
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(uint32_t b, SrcReg(in.operands[2], t));
      GPUVM_ASSIGN_OR_RETURN(uint32_t c, SrcReg(in.operands[3], t));
      if (in.operands[4].kind != OperandKind::kImmediate)
        return Unsupported("lop3 needs an immediate table");
      const uint32_t lut = static_cast<uint32_t>(in.operands[4].imm_bits & 0xff);
      if (lut == 0 || lut == 0xff) {
        MovTo(d, IT::kU32, I(lut == 0 ? 0 : 0xffffffffu));
        return Status::Ok();
      }
      auto not_of = [&](uint32_t x) {
        uint32_t r = TempFor(IT::kU32);
        VInst& v = Emit(IOp::kNot, IT::kU32);
        v.d = r;
        v.a = x;
        return r;
      };
      const uint32_t na = not_of(a), nb = not_of(b), nc = not_of(c);
      uint32_t acc = kNoV;
      for (uint32_t k = 0; k < 8; ++k) {
        if (!((lut >> k) & 1)) continue;
        uint32_t term = Bin(IOp::kAnd, IT::kU32, (k & 4) ? a : na, R((k & 2) ? b : nb));
        term = Bin(IOp::kAnd, IT::kU32, term, R((k & 1) ? c : nc));
        acc = acc == kNoV ? term : Bin(IOp::kOr, IT::kU32, acc, R(term));
      }
      MovTo(d, IT::kU32, acc);
      return Status::Ok();
    }
    case Opcode::kDp4a: {
      // d = c + sum over the four byte lanes of a.byte * b.byte (each signed or unsigned by its
      // type).
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], ScalarType::kU32));
      GPUVM_ASSIGN_OR_RETURN(uint32_t b, SrcReg(in.operands[2], ScalarType::kU32));
      GPUVM_ASSIGN_OR_RETURN(uint32_t acc, SrcReg(in.operands[3], ScalarType::kU32));
      uint32_t eight = MovImm(IT::kU32, 8);
      const IT at = IsSignedType(in.type) ? IT::kS32 : IT::kU32;
      const IT bt = IsSignedType(in.type2) ? IT::kS32 : IT::kU32;
      for (uint32_t k = 0; k < 4; ++k) {
        uint32_t x = Tri(IOp::kBfe, at, a, I(8 * k), eight);
        uint32_t y = Tri(IOp::kBfe, bt, b, I(8 * k), eight);
        uint32_t sum = TempFor(IT::kU32);
        TriTo(sum, IOp::kMad, IT::kU32, x, R(y), acc);
        acc = sum;
      }
      MovTo(d, IT::kU32, acc);
      return Status::Ok();
    }
    case Opcode::kSad: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcExtReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value b, SrcExt(in.operands[2], t));
      GPUVM_ASSIGN_OR_RETURN(Value c, Src(in.operands[3], t));
      uint32_t hi = Bin(IOp::kMax, it, a, b);
      uint32_t lo = Bin(IOp::kMin, it, a, b);
      uint32_t diff = Bin(IOp::kSub, it, hi, R(lo));
      BinTo(d, IOp::kAdd, it, diff, c);
      return Status::Ok();
    }
    default:
      return Unsupported("internal: not a bit instruction");
  }
}

// -------------------------------------------------------------------------------------------------
// Comparisons and selection

Status KernelTranslator::LowerCompare(const Instruction& in) {
  if (in.opcode == Opcode::kSelp || in.opcode == Opcode::kSlct) {
    // d = selector ? a : b; selp's selector is a predicate, slct's is c >= 0.
    const ScalarType t = in.type;
    const IT it = TypeSize(t) == 8 ? IT::kU64 : IT::kU32;
    GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
    GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
    GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
    if (in.opcode == Opcode::kSlct) {
      GPUVM_ASSIGN_OR_RETURN(uint32_t c, SrcReg(in.operands[3], in.type2));
      const bool f = in.type2 == ScalarType::kF32;
      SelTo(d, it, a, b, Setp(isa::Compare::kGe, f ? IT::kF32 : IT::kS32, c, I(0)));
      return Status::Ok();
    }
    GPUVM_ASSIGN_OR_RETURN(auto p, SrcPred(in.operands[3]));
    if (p.first == kPT) {  // a constant predicate
      MovTo(d, it, p.second ? b : R(a));
      return Status::Ok();
    }
    SelTo(d, it, a, b, p.first, p.second);
    return Status::Ok();
  }
  // setp / set: compare in the comparison type, then combine.
  const bool is_set = in.opcode == Opcode::kSet;
  const ScalarType ct = is_set ? in.type2 : in.type;
  std::optional<IsaCompare> compare = CompareOf(in.compare);
  if (!compare) return Unsupported("comparison missing");
  const isa::Compare cmp = compare->cmp;
  const bool force_unsigned = compare->force_unsigned;
  IT it = AluType(ct);
  if (force_unsigned || IsBitType(ct)) it = TypeSize(ct) == 8 ? IT::kU64 : IT::kU32;
  // 16-bit values: extend by the comparison's signedness.
  ScalarType ext_type = ct;
  if (Is16(ct) && (force_unsigned || IsBitType(ct))) ext_type = ScalarType::kU16;
  GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcExtReg(in.operands[1], ext_type));
  GPUVM_ASSIGN_OR_RETURN(Value b, SrcExt(in.operands[2], ext_type));
  const bool has_c = in.bool_op != BoolOp::kNone;
  if (!is_set && !has_c && in.operands[0].kind == OperandKind::kRegister) {
    // The common case: compare straight into the destination predicate.
    GPUVM_ASSIGN_OR_RETURN(uint32_t pd, DstPred(in.operands[0]));
    uint32_t p = Setp(cmp, it, a, b);
    vc_.code.back().d = pd;
    (void)p;
    return Status::Ok();
  }
  uint32_t p = Setp(cmp, it, a, b);
  uint32_t result = p;
  std::pair<uint32_t, bool> c{kPT, false};
  if (has_c) {
    GPUVM_ASSIGN_OR_RETURN(c, SrcPred(in.operands[3]));
  }
  const isa::PlopOp bop = PlopOf(in.bool_op);
  if (is_set) {
    if (has_c) {
      result = Temp(VKind::kPred);
      PlopTo(result, bop, p, false, c.first, c.second);
    }
    GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
    const uint64_t one = in.type == ScalarType::kF32 ? 0x3f800000u : 0xffffffffu;
    SelTo(d, IT::kU32, MovImm(IT::kU32, one), I(0), result);
    return Status::Ok();
  }
  GPUVM_ASSIGN_OR_RETURN(const auto dst, DstPair(in.operands[0], /*predicate=*/true));
  const auto [pd, qd] = dst;
  if (has_c) {
    PlopTo(pd, bop, p, false, c.first, c.second);
    if (qd != kNoV) PlopTo(qd, bop, p, true, c.first, c.second);
  } else {
    PlopTo(pd, isa::PlopOp::kAnd, p, false, kPT, false);
    if (qd != kNoV) PlopTo(qd, isa::PlopOp::kAnd, p, true, kPT, false);
  }
  return Status::Ok();
}

}  // namespace gpuvm::ptx::translator
