#include "gpu/sim/compute/program.h"

#include <array>
#include <cstring>
#include <map>

namespace gpuvm::sim::compute {
namespace {

using isa::Instruction;
using isa::Opcode;
using isa::Type;

constexpr bool IsRn(uint8_t mod) {
  uint8_t round = mod & isa::kModRoundMask;
  return (mod & isa::kModSat) == 0 && (round == static_cast<uint8_t>(isa::Rounding::kDefault) ||
                                       round == static_cast<uint8_t>(isa::Rounding::kRn));
}

using H = Handler;

// An opcode whose handler depends on its type alone: one handler per type it comes in, in the
// order of isa::Type from U32 to F64 (U32, S32, U64, S64, F32, F64); kCount where it has none.
struct TypedOp {
  Opcode op;
  std::array<Handler, 6> by_type;
};
constexpr TypedOp kTypedOps[] = {
    {Opcode::kAdd, {H::kAddI32, H::kAddI32, H::kAddI64, H::kAddI64, H::kAddF32, H::kAddF64}},
    {Opcode::kSub, {H::kSubI32, H::kSubI32, H::kSubI64, H::kSubI64, H::kSubF32, H::kSubF64}},
    {Opcode::kMul, {H::kMulI32, H::kMulI32, H::kMulI64, H::kMulI64, H::kMulF32, H::kMulF64}},
    {Opcode::kMulHi,
     {H::kMulHiU32, H::kMulHiS32, H::kMulHiU64, H::kMulHiS64, H::kCount, H::kCount}},
    {Opcode::kMad, {H::kMadI32, H::kMadI32, H::kMadI64, H::kMadI64, H::kFmaF32, H::kFmaF64}},
    {Opcode::kFma, {H::kMadI32, H::kMadI32, H::kMadI64, H::kMadI64, H::kFmaF32, H::kFmaF64}},
    {Opcode::kDiv, {H::kDivU32, H::kDivS32, H::kDivU64, H::kDivS64, H::kDivF32, H::kDivF64}},
    {Opcode::kRem, {H::kRemU32, H::kRemS32, H::kRemU64, H::kRemS64, H::kCount, H::kCount}},
    {Opcode::kMin, {H::kMinU32, H::kMinS32, H::kMinU64, H::kMinS64, H::kMinF32, H::kMinF64}},
    {Opcode::kMax, {H::kMaxU32, H::kMaxS32, H::kMaxU64, H::kMaxS64, H::kMaxF32, H::kMaxF64}},
    {Opcode::kAbs, {H::kCount, H::kAbsS32, H::kCount, H::kAbsS64, H::kAbsF32, H::kAbsF64}},
    {Opcode::kNeg, {H::kCount, H::kNegS32, H::kCount, H::kNegS64, H::kNegF32, H::kNegF64}},
    {Opcode::kShr, {H::kShrU32, H::kShrS32, H::kShrU64, H::kShrS64, H::kCount, H::kCount}},
    {Opcode::kBfe, {H::kBfeU32, H::kBfeS32, H::kBfeU64, H::kBfeS64, H::kCount, H::kCount}},
    {Opcode::kSetp, {H::kSetpU32, H::kSetpS32, H::kSetpU64, H::kSetpS64, H::kSetpF32, H::kSetpF64}},
};

// An opcode whose handler depends only on its width (the type's register rows: 1 or 2).
struct WidthOp {
  Opcode op;
  Handler rows1, rows2;
};
constexpr WidthOp kWidthOps[] = {
    {Opcode::kAnd, H::kAnd32, H::kAnd64},
    {Opcode::kOr, H::kOr32, H::kOr64},
    {Opcode::kXor, H::kXor32, H::kXor64},
    {Opcode::kNot, H::kNot32, H::kNot64},
    {Opcode::kPopc, H::kPopc32, H::kPopc64},
    {Opcode::kClz, H::kClz32, H::kClz64},
    {Opcode::kBrev, H::kBrev32, H::kBrev64},
    {Opcode::kSqrt, H::kSqrtF32, H::kSqrtF64},
    {Opcode::kRcp, H::kRcpF32, H::kRcpF64},
    {Opcode::kRsqrt, H::kRsqrtF32, H::kRsqrtF64},
    {Opcode::kEx2, H::kEx2F32, H::kEx2F64},
    {Opcode::kLg2, H::kLg2F32, H::kLg2F64},
    {Opcode::kSin, H::kSinF32, H::kSinF64},
    {Opcode::kCos, H::kCosF32, H::kCosF64},
    {Opcode::kTanh, H::kTanhF32, H::kTanhF64},
    {Opcode::kShl, H::kShl32, H::kShl64},
    {Opcode::kMov, H::kMov32, H::kMov64},
    {Opcode::kSel, H::kSel32, H::kSel64},
    {Opcode::kBfi, H::kBfi32, H::kBfi64},
    {Opcode::kCopysign, H::kCopysignF32, H::kCopysignF64},
    {Opcode::kTestp, H::kTestpF32, H::kTestpF64},
};

// The handler of `op` for type `t` from the tables above; kCount where there is none (the caller
// reports it).
Handler ByType(Opcode op, Type t) {
  const auto i = static_cast<size_t>(t) - static_cast<size_t>(Type::kU32);
  for (const TypedOp& row : kTypedOps) {
    if (row.op == op) return i < row.by_type.size() ? row.by_type[i] : Handler::kCount;
  }
  return Handler::kCount;
}
Handler ByWidth(Opcode op, int rows) {
  for (const WidthOp& row : kWidthOps) {
    if (row.op == op) return rows == 2 ? row.rows2 : row.rows1;
  }
  return Handler::kCount;
}

AccessKind KindOf(Type t, bool wide_reg) {
  switch (t) {
    case Type::kU8:
      return wide_reg ? AccessKind::kU8R64 : AccessKind::kU8R32;
    case Type::kS8:
      return wide_reg ? AccessKind::kS8R64 : AccessKind::kS8R32;
    case Type::kU16:
      return wide_reg ? AccessKind::kU16R64 : AccessKind::kU16R32;
    case Type::kS16:
      return wide_reg ? AccessKind::kS16R64 : AccessKind::kS16R32;
    case Type::kU32:
    case Type::kF32:
      return wide_reg ? AccessKind::kU32R64 : AccessKind::kB32R32;
    case Type::kS32:
      return wide_reg ? AccessKind::kS32R64 : AccessKind::kB32R32;
    default:
      return AccessKind::kB64R64;
  }
}

class Lowering {
 public:
  explicit Lowering(const isa::Kernel& kernel) : kernel_(kernel) {
    program_ = std::make_shared<Program>();
    program_->header = kernel.header;
    program_->source = kernel.code;
    program_->reg_rows = kernel.header.reg_count;
    program_->zero_row = program_->reg_rows;
    program_->sink_row = program_->reg_rows + 2;
    program_->scratch_row = program_->reg_rows + 4;
    program_->const_begin = program_->reg_rows + 6;
    next_const_row_ = program_->const_begin;
  }

  Result<std::shared_ptr<const Program>> Run() {
    program_->ops.reserve(kernel_.code.size());
    program_->op_of_word.assign(kernel_.header.code_words, -1);
    uint32_t word = 0;
    for (size_t i = 0; i < kernel_.code.size(); ++i) {
      program_->op_of_word[word] = static_cast<int32_t>(i);
      word_of_op_.push_back(word);
      word += kernel_.code[i].words();
    }
    word_of_op_.push_back(word);
    for (size_t i = 0; i < kernel_.code.size(); ++i) {
      index_ = i;
      Result<Op> op = Lower(kernel_.code[i]);
      if (!op.ok()) return op.status().WithContext("instruction " + std::to_string(i));
      program_->ops.push_back(*op);
    }
    Program& p = *program_;
    p.total_rows = next_const_row_;
    p.init_rows.assign(size_t{p.total_rows - p.zero_row} * kRowBytes, 0);
    for (const auto& [key, row] : const_rows_) {
      uint8_t* dst = p.init_rows.data() + size_t{row - p.zero_row} * kRowBytes;
      if (key.second == 2) {
        for (int l = 0; l < kLanes; ++l) memcpy(dst + l * 8, &key.first, 8);
      } else {
        uint32_t v = static_cast<uint32_t>(key.first);
        for (int l = 0; l < kLanes; ++l) memcpy(dst + l * 4, &v, 4);
      }
    }
    return std::shared_ptr<const Program>(std::move(program_));
  }

 private:
  uint16_t Src(uint8_t r) const { return r == isa::kRegZero ? program_->zero_row : r; }
  uint16_t Dst(uint8_t r) const { return r == isa::kRegZero ? program_->sink_row : r; }

  // The row holding `value` broadcast (rows = 1: 32-bit, 2: 64-bit), or the scratch row (and the op
  // turns into kImmScratch) when the constant-row budget is spent.
  uint16_t Imm(uint64_t value, int rows, Op* op) {
    if (rows == 1) value &= 0xffffffffu;
    auto key = std::make_pair(value, rows);
    auto it = const_rows_.find(key);
    if (it != const_rows_.end()) return static_cast<uint16_t>(it->second);
    if (next_const_row_ + rows - program_->const_begin <= kMaxConstRows) {
      uint32_t row = next_const_row_;
      next_const_row_ += rows;
      const_rows_.emplace(key, row);
      return static_cast<uint16_t>(row);
    }
    op->flags |= rows == 2 ? kOpScratch64 : 0;
    op->imm = value;
    scratch_ = true;
    return static_cast<uint16_t>(program_->scratch_row);
  }
  uint16_t SrcOrImm(const Instruction& inst, uint8_t r, int rows, Op* op) {
    return inst.has_imm ? Imm(inst.imm, rows, op) : Src(r);
  }

  Result<Op> Lower(const Instruction& inst) {
    Op op;
    op.guard = inst.guard;
    op.guard_xor = inst.guard_negated ? kFullMask : 0;
    scratch_ = false;
    const Type t = inst.type;
    const int rows = isa::TypeRows(t);
    const bool float_rn = IsRn(inst.mod);
    // The float slow path (rounding modes, .sat, .ftz): the handler, with the op in aux.
    auto slow_float = [&]() {
      op.aux = static_cast<uint32_t>(inst.op) | static_cast<uint32_t>(t) << 8 |
               static_cast<uint32_t>(inst.mod) << 16;
      return Handler::kFloatSlow;
    };
    // d = f(a, b|imm); an immediate b takes `b_rows` rows (the type's, or 1 where b is 32-bit).
    auto binary = [&](Handler h, int b_rows) {
      op.h = h;
      op.d = Dst(inst.d);
      op.a = Src(inst.a);
      op.b = SrcOrImm(inst, inst.b, b_rows, &op);
    };
    auto unary = [&](Handler h) {
      op.h = h;
      op.d = Dst(inst.d);
      op.a = Src(inst.a);
    };

    switch (inst.op) {
      case Opcode::kNop:
        op.h = Handler::kNop;
        break;
      case Opcode::kMov:
        op.h = ByWidth(inst.op, rows);
        op.d = Dst(inst.d);
        op.a = SrcOrImm(inst, inst.a, rows, &op);
        break;
      case Opcode::kSel:
        binary(ByWidth(inst.op, rows), rows);
        op.c = inst.c;
        op.aux = (inst.mod & 1) ? kFullMask : 0;
        break;
      case Opcode::kS2R:
        op.h = Handler::kS2R;
        op.d = Dst(inst.d);
        op.aux = inst.a;
        if (inst.a == static_cast<uint8_t>(isa::SpecialReg::kSharedWindow))
          program_->reads_shared_window = true;
        if (inst.a == static_cast<uint8_t>(isa::SpecialReg::kLocalWindow))
          program_->reads_local_window = true;
        break;
      case Opcode::kPack:
        binary(Handler::kPack, 1);
        break;
      case Opcode::kHi32:
        unary(Handler::kHi32);
        break;
      case Opcode::kAdd:
      case Opcode::kSub:
      case Opcode::kMul:
      case Opcode::kDiv:
        if (isa::IsFloat(t) && !float_rn) {
          binary(slow_float(), rows);
        } else if (t == Type::kS32 && (inst.mod & isa::kModSat) && inst.op == Opcode::kAdd) {
          binary(Handler::kAddSatS32, rows);
        } else if (t == Type::kS32 && (inst.mod & isa::kModSat) && inst.op == Opcode::kSub) {
          binary(Handler::kSubSatS32, rows);
        } else {
          binary(ByType(inst.op, t), rows);
        }
        break;
      case Opcode::kMulWide:
        binary(t == Type::kS32 ? Handler::kMulWideS32 : Handler::kMulWideU32, 1);
        break;
      case Opcode::kMadWide:
        binary(t == Type::kS32 ? Handler::kMadWideS32 : Handler::kMadWideU32, 1);
        op.c = Src(inst.c);
        break;
      case Opcode::kMad:
      case Opcode::kFma:
        if (isa::IsFloat(t) && !float_rn) {
          binary(slow_float(), rows);
          op.aux = (op.aux & ~0xffu) | static_cast<uint32_t>(Opcode::kFma);
        } else {
          binary(ByType(inst.op, t), rows);
        }
        op.c = Src(inst.c);
        break;
      case Opcode::kMulHi:
      case Opcode::kRem:
      case Opcode::kMin:
      case Opcode::kMax:
        binary(ByType(inst.op, t), rows);
        break;
      case Opcode::kAbs:
      case Opcode::kNeg:
        unary(ByType(inst.op, t));
        break;
      case Opcode::kAnd:
      case Opcode::kOr:
      case Opcode::kXor:
        binary(ByWidth(inst.op, rows), rows);
        break;
      case Opcode::kNot:
      case Opcode::kPopc:
      case Opcode::kClz:
      case Opcode::kBrev:
      case Opcode::kRsqrt:
      case Opcode::kEx2:
      case Opcode::kLg2:
      case Opcode::kSin:
      case Opcode::kCos:
      case Opcode::kTanh:
        unary(ByWidth(inst.op, rows));
        break;
      case Opcode::kSqrt:
      case Opcode::kRcp:
        unary(float_rn ? ByWidth(inst.op, rows) : slow_float());
        break;
      case Opcode::kShl:
      case Opcode::kShr:
        binary(inst.op == Opcode::kShl ? ByWidth(inst.op, rows) : ByType(inst.op, t), 1);
        break;
      case Opcode::kBfe:
        binary(ByType(inst.op, t), 1);
        op.c = Src(inst.c);
        break;
      case Opcode::kBfi:
        op.h = ByWidth(inst.op, rows);
        op.d = Dst(inst.d);
        op.a = Src(inst.a);
        op.b = Src(inst.b);
        op.c = Src(inst.c);
        op.aux = Src(inst.mod);
        break;
      case Opcode::kPrmt:
      case Opcode::kShf:
        op.h = inst.op == Opcode::kPrmt ? Handler::kPrmt : Handler::kShf;
        op.d = Dst(inst.d);
        op.a = Src(inst.a);
        op.b = Src(inst.b);
        op.c = SrcOrImm(inst, inst.c, 1, &op);
        op.aux = inst.mod;
        break;
      case Opcode::kCopysign:
        op.h = ByWidth(inst.op, rows);
        op.d = Dst(inst.d);
        op.a = Src(inst.a);
        op.b = Src(inst.b);
        break;
      case Opcode::kTestp:
        op.h = ByWidth(inst.op, rows);
        op.d = inst.d;
        op.a = Src(inst.a);
        op.aux = inst.mod;
        break;
      case Opcode::kSetp:
        op.h = ByType(inst.op, t);
        op.d = inst.d;
        op.a = Src(inst.a);
        op.b = SrcOrImm(inst, inst.b, rows, &op);
        op.aux = inst.mod;
        break;
      case Opcode::kPlop:
        op.h = Handler::kPlop;
        op.d = inst.d;
        op.a = inst.a;
        op.b = inst.b;
        op.aux = inst.mod;
        break;
      case Opcode::kCvt:
        LowerCvt(inst, &op);
        break;
      case Opcode::kLd:
      case Opcode::kSt: {
        auto space = static_cast<isa::Space>(inst.mod & isa::kModSpaceMask);
        bool load = inst.op == Opcode::kLd;
        switch (space) {
          case isa::Space::kGeneric:
            op.h = load ? Handler::kLdGeneric : Handler::kStGeneric;
            break;
          case isa::Space::kGlobal:
            op.h = load ? Handler::kLdGlobal : Handler::kStGlobal;
            break;
          case isa::Space::kShared:
            op.h = load ? Handler::kLdShared : Handler::kStShared;
            break;
          case isa::Space::kLocal:
            op.h = load ? Handler::kLdLocal : Handler::kStLocal;
            break;
          case isa::Space::kConst:
            op.h = Handler::kLdConst;
            program_->const_banks_used |= static_cast<uint16_t>(1u << inst.type2);
            break;
        }
        const bool pair = inst.mod & isa::kModPair;
        op.aux = static_cast<uint32_t>(pair ? AccessKind::kPair128
                                            : KindOf(t, inst.mod & isa::kModWideReg)) |
                 ((inst.mod & isa::kModAddr64) ? kAuxAddr64 : 0) |
                 uint32_t{inst.type2} << kAuxBankShift;
        op.a = Src(inst.a);
        if (load) {
          op.d = Dst(inst.d);
          if (pair) op.b = Dst(inst.b);
        } else {
          op.b = Src(inst.b);
          if (pair) op.c = Src(inst.c);
        }
        op.imm = inst.has_imm ? inst.imm : 0;
        break;
      }
      case Opcode::kAtom:
        op.h = Handler::kAtom;
        op.d = Dst(inst.d);
        op.a = Src(inst.a);
        op.b = Src(inst.b);
        op.c = Src(inst.c);
        op.imm = inst.has_imm ? inst.imm : 0;
        op.aux = ((inst.mod & isa::kModAddr64) ? kAuxAddr64 : 0) |
                 uint32_t{inst.type2} << kAuxAtomOpShift |
                 static_cast<uint32_t>(t) << kAuxAtomTypeShift |
                 uint32_t{static_cast<uint8_t>(inst.mod & isa::kModSpaceMask)}
                     << kAuxAtomSpaceShift;
        break;
      case Opcode::kVprintf:
        op.h = Handler::kVprintf;
        op.d = Dst(inst.d);
        op.a = Src(inst.a);
        op.b = Src(inst.b);
        op.c = Src(inst.c);
        break;
      case Opcode::kBar:
        op.h = Handler::kBar;
        op.aux = inst.mod;
        program_->uses_barriers = true;
        break;
      case Opcode::kMembar:
        op.h = Handler::kMembar;
        break;
      case Opcode::kShfl:
        // The lane/offset and clamp immediates travel in aux (the handler reads them instead of
        // rows), so shfl never needs constant rows.
        op.h = Handler::kShfl;
        op.d = Dst(inst.d);
        op.a = Src(inst.a);
        op.b = (inst.mod & isa::kShflBImm) ? 0 : Src(inst.b);
        op.c = (inst.mod & isa::kShflCImm) ? 0 : Src(inst.c);
        op.aux = (inst.mod & 0x0f) | static_cast<uint32_t>(inst.imm & 0x1f) << 8 |
                 static_cast<uint32_t>((inst.imm >> 32) & 0x1fff) << 16;
        op.imm = (inst.imm >> 48) & 0x3f;
        break;
      case Opcode::kVote:
        op.h = Handler::kVote;
        op.d = (static_cast<isa::VoteMode>(inst.mod & isa::kVoteModeMask) == isa::VoteMode::kBallot)
                   ? Dst(inst.d)
                   : inst.d;
        op.a = inst.a;
        op.aux = inst.mod;
        break;
      case Opcode::kBra:
        op.h = Handler::kBra;
        op.aux = inst.target;
        break;
      case Opcode::kExit:
        op.h = Handler::kExit;
        break;
      case Opcode::kCall:
        op.h = Handler::kCall;
        op.d = Dst(inst.d);
        op.aux = inst.target;
        op.imm = word_of_op_[index_ + 1];  // the return address: the next instruction's word offset
        break;
      case Opcode::kRet:
        op.h = Handler::kRet;
        op.a = Src(inst.a);
        break;
      case Opcode::kTrap:
        op.h = Handler::kTrap;
        op.aux = inst.mod;  // isa::TrapCode
        break;
    }
    if (op.h == Handler::kCount) {
      return Status::Internal(std::string("no handler for ") +
                              std::string(isa::OpcodeName(inst.op)) + "." +
                              std::string(isa::TypeName(t)));
    }
    if (scratch_) {
      op.h2 = op.h;
      op.h = Handler::kImmScratch;
    }
    return op;
  }

  void LowerCvt(const Instruction& inst, Op* op) {
    const Type dst = inst.type;
    const Type src = static_cast<Type>(inst.type2);
    const uint8_t round = inst.mod & isa::kModRoundMask;
    const bool sat = inst.mod & isa::kModSat;
    auto is = [](Type t, std::initializer_list<Type> set) {
      for (Type s : set) {
        if (s == t) return true;
      }
      return false;
    };
    using R = isa::Rounding;
    bool default_or = [&](R r) { return round == 0 || round == static_cast<uint8_t>(r); }(R::kRn);
    Handler h = Handler::kCvt;
    if (!sat && is(dst, {Type::kU64, Type::kS64}) && src == Type::kU32) {
      h = Handler::kCvtU64U32;
    } else if (!sat && is(dst, {Type::kU64, Type::kS64}) && src == Type::kS32) {
      h = Handler::kCvtS64S32;
    } else if (!sat && is(dst, {Type::kU32, Type::kS32}) && is(src, {Type::kU64, Type::kS64})) {
      h = Handler::kCvtU32U64;
    } else if (!sat && dst == Type::kF32 && src == Type::kS32 && default_or) {
      h = Handler::kCvtF32S32;
    } else if (!sat && dst == Type::kF32 && src == Type::kU32 && default_or) {
      h = Handler::kCvtF32U32;
    } else if (dst == Type::kS32 && src == Type::kF32 &&
               (round == 0 || round == static_cast<uint8_t>(R::kRzi))) {
      h = Handler::kCvtS32F32;  // float->int saturates anyway: .sat changes nothing
    } else if (!sat && dst == Type::kF64 && src == Type::kF32 && round == 0) {
      h = Handler::kCvtF64F32;
    } else if (!sat && dst == Type::kF32 && src == Type::kF64 && default_or) {
      h = Handler::kCvtF32F64;
    } else if (!sat && dst == Type::kF64 && src == Type::kS32 && default_or) {
      h = Handler::kCvtF64S32;
    }
    op->h = h;
    op->d = Dst(inst.d);
    op->a = Src(inst.a);
    op->aux = static_cast<uint32_t>(dst) | uint32_t{inst.type2} << 4 | uint32_t{inst.mod} << 8;
  }

  const isa::Kernel& kernel_;
  std::shared_ptr<Program> program_;
  std::map<std::pair<uint64_t, int>, uint32_t> const_rows_;
  uint32_t next_const_row_ = 0;
  bool scratch_ = false;
  size_t index_ = 0;                  // the instruction being lowered
  std::vector<uint32_t> word_of_op_;  // instruction index -> word offset (one past the end too)
};

}  // namespace

Result<std::shared_ptr<const Program>> LowerKernel(const isa::Kernel& kernel) {
  return Lowering(kernel).Run();
}

const char* HandlerName(Handler h) {
  static constexpr const char* kNames[] = {
#define GPUVM_HANDLER_NAME(name) #name,
      GPUVM_COMPUTE_HANDLERS(GPUVM_HANDLER_NAME)
#undef GPUVM_HANDLER_NAME
  };
  auto i = static_cast<size_t>(h);
  return i < std::size(kNames) ? kNames[i] : "?";
}

}  // namespace gpuvm::sim::compute
