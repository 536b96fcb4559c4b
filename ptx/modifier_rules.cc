// The supported PTX instruction set, part 2: CheckModifiers, the rules for which combinations of
// modifiers, types and flags each opcode accepts (after ApplyModifier has decoded them one by one
// in instruction_set.cc). Returns the first problem as text for the parser to report.
#include <string>

#include "ptx/instruction_set.h"
#include "ptx/instruction_set_internal.h"

namespace gpuvm::ptx {

using instruction_set_internal::Bit;
using instruction_set_internal::IsFloatRounding;
using instruction_set_internal::IsIntRounding;
using instruction_set_internal::Spelling;
using instruction_set_internal::T;
using instruction_set_internal::V;

std::string CheckModifiers(const OpcodeInfo& info, const Instruction& inst) {
  const T type = inst.type;
  const T type2 = inst.type2;
  // Types: present when required, and from the opcode's list.
  if (info.types != 0) {
    if (type == T::kNone && !info.type_optional) return "missing type suffix";
    if (type != T::kNone && (info.types & Bit(type)) == 0) {
      return "type '." + std::string(TypeName(type)) + "' is not valid for " +
             std::string(info.mnemonic);
    }
  }
  if (info.types2 != 0) {
    if (type2 == T::kNone) return "needs two type suffixes";
    if ((info.types2 & Bit(type2)) == 0) {
      return "type '." + std::string(TypeName(type2)) + "' is not valid as the second type of " +
             std::string(info.mnemonic);
    }
  }
  const bool is_float = IsFloatType(type);
  const bool is_int = IsIntegerType(type) || IsBitType(type);
  const Rounding rnd = inst.rounding;
  const uint32_t flags = inst.flags;
  auto has = [&](uint32_t f) { return (flags & f) != 0; };
  const bool f16s = type == T::kF16 || type == T::kF16x2;
  auto ftz_only_f32 = [&]() -> std::string {
    if (has(kFlagFtz) && type != T::kF32 && !f16s) return "'.ftz' is only valid with .f32";
    return "";
  };
  // Float add/sub/mul/mad: no carry, IEEE rounding, .sat and .ftz for f32 (and f16) only; half
  // precision rounds only to nearest.
  auto float_arith = [&]() -> std::string {
    if (has(kFlagCc)) return "'.cc' needs an integer type";
    if (rnd != Rounding::kNone && !IsFloatRounding(rnd)) return "rounding must be .rn/.rz/.rm/.rp";
    if (f16s && rnd != Rounding::kNone && rnd != Rounding::kRn) return "f16 rounds only .rn";
    if (has(kFlagSat) && type != T::kF32 && !f16s) return "'.sat' is only valid with .f32";
    return ftz_only_f32();
  };

  switch (inst.opcode) {
    case Opcode::kAdd:
    case Opcode::kSub:
      if (is_int) {
        if (rnd != Rounding::kNone || has(kFlagFtz)) return "rounding/.ftz need a float type";
        if (has(kFlagSat) && type != T::kS32) return "'.sat' on integer add/sub needs .s32";
        if (has(kFlagCc) && (TypeSize(type) < 4)) return "'.cc' needs a 32- or 64-bit type";
      } else {
        return float_arith();
      }
      return "";
    case Opcode::kMul:
    case Opcode::kMad:
      if (is_int) {
        if (inst.mul_mode == MulMode::kNone) return "integer mul/mad needs .lo, .hi or .wide";
        if (rnd != Rounding::kNone || has(kFlagFtz)) return "rounding/.ftz need a float type";
        if (inst.mul_mode == MulMode::kWide && TypeSize(type) > 4)
          return "'.wide' needs a 16/32-bit type";
        if (has(kFlagSat) &&
            !(inst.opcode == Opcode::kMad && inst.mul_mode == MulMode::kHi && type == T::kS32)) {
          return "'.sat' on integer mul/mad needs mad.hi.s32";
        }
        if (has(kFlagCc) && (inst.mul_mode == MulMode::kWide || TypeSize(type) < 4)) {
          return "'.cc' needs .lo/.hi with a 32- or 64-bit type";
        }
      } else {
        if (inst.mul_mode != MulMode::kNone) return "'.lo/.hi/.wide' need an integer type";
        return float_arith();
      }
      return "";
    case Opcode::kMadc:
    case Opcode::kMul24:
    case Opcode::kMad24:
      if (inst.mul_mode != MulMode::kLo && inst.mul_mode != MulMode::kHi) return "needs .lo or .hi";
      if (has(kFlagSat) && !(inst.mul_mode == MulMode::kHi && type == T::kS32)) {
        return "'.sat' needs mad24.hi.s32";
      }
      return "";
    case Opcode::kDiv:
      if (is_int) {
        if (rnd != Rounding::kNone || has(kFlagApprox | kFlagFull | kFlagFtz)) {
          return "rounding/.approx/.full/.ftz need a float type";
        }
      } else if (type == T::kF32) {
        int modes = (rnd != Rounding::kNone) + has(kFlagApprox) + has(kFlagFull);
        if (modes != 1) return "div.f32 needs exactly one of .approx, .full, .rn/.rz/.rm/.rp";
        if (rnd != Rounding::kNone && !IsFloatRounding(rnd))
          return "rounding must be .rn/.rz/.rm/.rp";
      } else {
        if (!IsFloatRounding(rnd)) return "div.f64 needs .rn/.rz/.rm/.rp";
        if (has(kFlagApprox | kFlagFull | kFlagFtz))
          return "'.approx/.full/.ftz' are only valid with .f32";
      }
      return "";
    case Opcode::kAbs:
    case Opcode::kNeg:
    case Opcode::kMin:
    case Opcode::kMax:
      if (has(kFlagNaN) && !is_float) return "'.NaN' needs a float type";
      return ftz_only_f32();
    case Opcode::kFma:
      if (!IsFloatRounding(rnd)) return "fma needs .rn/.rz/.rm/.rp";
      if (f16s && rnd != Rounding::kRn) return "fma.f16 needs .rn";
      if (has(kFlagSat) && type != T::kF32 && !f16s) return "'.sat' is only valid with .f32";
      return ftz_only_f32();
    case Opcode::kRcp:
    case Opcode::kSqrt:
      if (has(kFlagApprox) == (rnd != Rounding::kNone))
        return "needs exactly one of .approx or .rn/.rz/.rm/.rp";
      if (rnd != Rounding::kNone && !IsFloatRounding(rnd))
        return "rounding must be .rn/.rz/.rm/.rp";
      if (type == T::kF64 && has(kFlagApprox)) {
        if (inst.opcode == Opcode::kSqrt) return "sqrt.f64 has no .approx form";
        if (!has(kFlagFtz)) return "rcp.approx.f64 needs .ftz";
        return "";
      }
      return ftz_only_f32();
    case Opcode::kRsqrt:
      if (!has(kFlagApprox)) return "rsqrt needs .approx";
      return "";
    case Opcode::kSin:
    case Opcode::kCos:
    case Opcode::kLg2:
    case Opcode::kEx2:
    case Opcode::kTanh:
      if (!has(kFlagApprox)) return "needs .approx";
      return "";
    case Opcode::kTestp:
      if (inst.test == TestProperty::kNone) return "needs a property (.finite, .infinite, ...)";
      return "";
    case Opcode::kShf:
      if (has(kFlagLeft) == has(kFlagRight)) return "needs exactly one of .l or .r";
      if (has(kFlagClamp) == has(kFlagWrap)) return "needs exactly one of .clamp or .wrap";
      return "";
    case Opcode::kBmsk:
      if (has(kFlagClamp) == has(kFlagWrap)) return "needs exactly one of .clamp or .wrap";
      return "";
    case Opcode::kSetp:
    case Opcode::kSet: {
      const T cmp_type = inst.opcode == Opcode::kSetp ? type : type2;
      const CompareOp c = inst.compare;
      if (c == CompareOp::kNone) return "needs a comparison (.eq, .lt, ...)";
      const bool cmp_float = IsFloatType(cmp_type);
      if (!cmp_float && c >= CompareOp::kEqu) return "unordered comparisons need a float type";
      if (cmp_float && c >= CompareOp::kLo && c <= CompareOp::kHs) {
        return "'.lo/.ls/.hi/.hs' need an integer type";
      }
      if (has(kFlagFtz) && cmp_type != T::kF32 && cmp_type != T::kF16 && cmp_type != T::kF16x2)
        return "'.ftz' is only valid with .f32";
      if (inst.opcode == Opcode::kSet && (type == T::kF16 || type == T::kF16x2) &&
          cmp_type != T::kF16 && cmp_type != T::kF16x2) {
        return "an .f16 destination needs .f16 operands";
      }
      return "";
    }
    case Opcode::kSlct:
      if (has(kFlagFtz) && type2 != T::kF32) return "'.ftz' needs the .f32 form";
      return "";
    case Opcode::kCvt: {
      const bool src_float = IsFloatType(type2);
      const bool dst_float = IsFloatType(type);
      if (has(kFlagFtz) && type != T::kF32 && type2 != T::kF32)
        return "'.ftz' needs an .f32 operand";
      if (!src_float && !dst_float) {
        if (rnd != Rounding::kNone) return "integer-to-integer cvt takes no rounding";
      } else if (!src_float && dst_float) {
        if (!IsFloatRounding(rnd)) return "integer-to-float cvt needs .rn/.rz/.rm/.rp";
      } else if (src_float && !dst_float) {
        if (!IsIntRounding(rnd)) return "float-to-integer cvt needs .rni/.rzi/.rmi/.rpi";
      } else if (TypeSize(type) < TypeSize(type2)) {
        if (!IsFloatRounding(rnd)) return "narrowing float cvt needs .rn/.rz/.rm/.rp";
      } else if (TypeSize(type) == TypeSize(type2)) {
        if (rnd != Rounding::kNone && !IsIntRounding(rnd)) {
          return "same-size float cvt takes only .rni/.rzi/.rmi/.rpi";
        }
        if (type != type2) return "cvt between different float types of one size is not supported";
      } else if (rnd != Rounding::kNone) {
        return "widening float cvt takes no rounding";
      }
      return "";
    }
    case Opcode::kCvta:
      if (inst.space == StateSpace::kNone) return "needs a state space";
      return "";
    case Opcode::kIsspacep:
      if (inst.space == StateSpace::kNone) return "needs a state space";
      return "";
    case Opcode::kLd:
    case Opcode::kSt: {
      const bool ld = inst.opcode == Opcode::kLd;
      if (!ld && inst.space == StateSpace::kConst) return "cannot store to .const";
      if (has(kFlagNc) && (inst.space != StateSpace::kGlobal)) return "'.nc' needs .global";
      const MemoryOrder o = inst.order;
      if (o == MemoryOrder::kAcqRel || o == MemoryOrder::kSc)
        return "invalid memory order for ld/st";
      if (ld && o == MemoryOrder::kRelease) return "ld cannot be .release";
      if (!ld && o == MemoryOrder::kAcquire) return "st cannot be .acquire";
      const bool strong =
          o == MemoryOrder::kRelaxed || o == MemoryOrder::kAcquire || o == MemoryOrder::kRelease;
      if (strong != (inst.scope != MemoryScope::kNone)) {
        return "'.relaxed/.acquire/.release' need a scope, and only they take one";
      }
      if (has(kFlagNc) && o != MemoryOrder::kNone && o != MemoryOrder::kWeak) {
        return "'.nc' cannot be combined with a memory order";
      }
      const CacheOp cop = inst.cache;
      if (ld && (cop == CacheOp::kWb || cop == CacheOp::kWt))
        return "'.wb/.wt' are store cache ops";
      if (!ld && (cop == CacheOp::kCa || cop == CacheOp::kLu || cop == CacheOp::kCv)) {
        return "'.ca/.lu/.cv' are load cache ops";
      }
      if (inst.vector != 1 && TypeSize(type) * inst.vector > 16)
        return "vector access wider than 16 bytes";
      return "";
    }
    case Opcode::kLdu:
      if (inst.space != StateSpace::kNone && inst.space != StateSpace::kGlobal) {
        return "ldu is only valid on .global or generic addresses";
      }
      if (inst.vector != 1 && TypeSize(type) * inst.vector > 16)
        return "vector access wider than 16 bytes";
      return "";
    case Opcode::kPrefetch:
      if (inst.space != StateSpace::kNone && inst.space != StateSpace::kGlobal &&
          inst.space != StateSpace::kLocal) {
        return "prefetch needs .global, .local or a generic address";
      }
      if (has(kFlagL1) == has(kFlagL2)) return "needs exactly one of .L1 or .L2";
      return "";
    case Opcode::kAtom:
    case Opcode::kRed: {
      const bool atom = inst.opcode == Opcode::kAtom;
      if (inst.space != StateSpace::kNone && inst.space != StateSpace::kGlobal &&
          inst.space != StateSpace::kShared) {
        return "atomics need .global, .shared or a generic address";
      }
      const MemoryOrder o = inst.order;
      if (o == MemoryOrder::kWeak || o == MemoryOrder::kVolatile || o == MemoryOrder::kSc) {
        return "invalid memory order for an atomic";
      }
      if (!atom && (o == MemoryOrder::kAcquire || o == MemoryOrder::kAcqRel)) {
        return "red can only be .relaxed or .release";
      }
      const AtomicOp op = inst.atomic_op;
      bool ok = false;
      switch (op) {
        case AtomicOp::kAdd:
          ok = type == T::kU32 || type == T::kS32 || type == T::kU64 || type == T::kF32 ||
               type == T::kF64;
          break;
        case AtomicOp::kInc:
        case AtomicOp::kDec:
          ok = type == T::kU32;
          break;
        case AtomicOp::kMin:
        case AtomicOp::kMax:
          ok = IsIntegerType(type);
          break;
        case AtomicOp::kAnd:
        case AtomicOp::kOr:
        case AtomicOp::kXor:
          ok = IsBitType(type);
          break;
        case AtomicOp::kCas:
        case AtomicOp::kExch:
          ok = atom && IsBitType(type);
          if (!atom) return "red has no ." + std::string(Spelling(ModGroup::kAtomic, V(op)));
          break;
        case AtomicOp::kNone:
          return "needs an operation (.add, .min, .cas, ...)";
        case AtomicOp::kPopc:
          return "'.popc' is not an atomic operation";
      }
      if (!ok) {
        return "." + std::string(Spelling(ModGroup::kAtomic, V(op))) + " is not valid with ." +
               std::string(TypeName(type));
      }
      return "";
    }
    case Opcode::kBar: {
      const int kinds = has(kFlagSync) + has(kFlagArrive) + has(kFlagRed);
      if (has(kFlagWarp)) {
        if (!has(kFlagSync) || kinds != 1) return "bar.warp needs .sync";
        if (type != T::kNone || inst.atomic_op != AtomicOp::kNone)
          return "bar.warp.sync takes no type";
        return "";
      }
      if (kinds != 1) return "needs exactly one of .sync, .arrive or .red";
      if (has(kFlagRed)) {
        const AtomicOp op = inst.atomic_op;
        if (op == AtomicOp::kPopc) {
          if (type != T::kU32) return "bar.red.popc needs .u32";
        } else if (op == AtomicOp::kAnd || op == AtomicOp::kOr) {
          if (type != T::kPred) return "bar.red.and/.or need .pred";
        } else {
          return "bar.red needs .popc, .and or .or";
        }
      } else if (type != T::kNone || inst.atomic_op != AtomicOp::kNone) {
        return "only bar.red takes an operation and a type";
      }
      return "";
    }
    case Opcode::kMembar:
      if (inst.scope == MemoryScope::kNone) return "needs .cta, .gl or .sys";
      return "";
    case Opcode::kFence:
      if (inst.order != MemoryOrder::kSc && inst.order != MemoryOrder::kAcqRel) {
        return "fence needs .sc or .acq_rel";
      }
      if (inst.scope == MemoryScope::kNone) return "fence needs a scope";
      return "";
    case Opcode::kShfl:
      if (!has(kFlagSync)) return "only shfl.sync is supported";
      if (inst.shuffle == ShuffleMode::kNone) return "needs .up, .down, .bfly or .idx";
      return "";
    case Opcode::kVote:
      if (!has(kFlagSync)) return "only vote.sync is supported";
      if (inst.vote == VoteMode::kNone) return "needs .all, .any, .uni or .ballot";
      if ((inst.vote == VoteMode::kBallot) != (type == T::kB32)) {
        return "vote.ballot takes .b32; .all/.any/.uni take .pred";
      }
      return "";
    default:
      return "";
  }
}
}  // namespace gpuvm::ptx
