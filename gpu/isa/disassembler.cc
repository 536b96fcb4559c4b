#include "gpu/isa/disassembler.h"

#include <cinttypes>
#include <cstdio>
#include <set>

namespace gpuvm::isa {
namespace {

std::string Reg(uint8_t r) { return r == kRegZero ? "rz" : "r" + std::to_string(r); }
std::string Pred(uint8_t p, bool negated = false) {
  return std::string(negated ? "!" : "") + (p == kPredTrue ? "pt" : "p" + std::to_string(p));
}

std::string Format(const char* fmt, uint64_t v) {
  char buf[40];
  snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// An immediate for an operand of `type` (rows decides 32 vs 64 bits for integers).
std::string Imm(uint64_t imm, Type type, bool is64) {
  if (type == Type::kF32) return Format("0f%08" PRIx64, imm & 0xffffffffu);
  if (type == Type::kF64) return Format("0d%016" PRIx64, imm);
  int64_t s = static_cast<int64_t>(imm);
  if (!is64) {
    if ((imm >> 32) == 0xffffffffu)
      return std::to_string(s);  // sign-extended negative 32-bit value
    return imm < 65536 ? std::to_string(imm) : Format("0x%" PRIx64, imm);
  }
  if (s > -65536 && s < 65536) return std::to_string(s);
  return Format("0x%" PRIx64, imm);
}

std::string Address(const Instruction& inst) {
  std::string out = "[" + Reg(inst.a);
  if (inst.has_imm) {
    int64_t off = static_cast<int64_t>(inst.imm);
    if (off < 0) {
      out += "-" + std::to_string(-static_cast<uint64_t>(off));
    } else {
      out += "+" + (off < 65536 ? std::to_string(off) : Format("0x%" PRIx64, inst.imm));
    }
  }
  return out + "]";
}

std::string RoundSuffix(uint8_t mod) {
  std::string out;
  uint8_t round = mod & kModRoundMask;
  if (round != 0) out += "." + std::string(RoundingName(static_cast<Rounding>(round)));
  if (mod & kModSat) out += ".sat";
  return out;
}

std::string T(Type t) { return "." + std::string(TypeName(t)); }

}  // namespace

std::string Disassemble(const Instruction& inst) {
  std::string g;
  if (inst.guard != kPredTrue || inst.guard_negated)
    g = "@" + Pred(inst.guard, inst.guard_negated) + " ";
  std::string name(OpcodeName(inst.op));
  const Type t = inst.type;
  const bool wide = Is64(t);
  auto b_or_imm = [&](uint8_t b, Type ty, bool is64) {
    return inst.has_imm ? Imm(inst.imm, ty, is64) : Reg(b);
  };

  switch (inst.op) {
    case Opcode::kNop:
    case Opcode::kExit:
      return g + name;
    case Opcode::kTrap:
      return g + name + (inst.mod == uint8_t(TrapCode::kAssert) ? ".assert" : "");
    case Opcode::kBar:
      return g + name + " " + std::to_string(inst.mod);
    case Opcode::kMembar: {
      static constexpr const char* kLevels[] = {"cta", "gl", "sys"};
      return g + name + "." + (inst.mod < 3 ? kLevels[inst.mod] : "?");
    }
    case Opcode::kBra:
      return g + name + " L" + std::to_string(inst.target);
    case Opcode::kCall:
      return g + name + " " + Reg(inst.d) + ", L" + std::to_string(inst.target);
    case Opcode::kRet:
      return g + name + " " + Reg(inst.a);
    case Opcode::kMov:
      return g + name + T(t) + " " + Reg(inst.d) + ", " + b_or_imm(inst.a, t, wide);
    case Opcode::kSel:
      return g + name + T(t) + " " + Reg(inst.d) + ", " + Reg(inst.a) + ", " +
             b_or_imm(inst.b, t, wide) + ", " + Pred(inst.c, inst.mod & 1);
    case Opcode::kS2R:
      return g + name + T(t) + " " + Reg(inst.d) + ", %" +
             std::string(SpecialRegName(static_cast<SpecialReg>(inst.a)));
    case Opcode::kPack:
      return g + name + T(t) + " " + Reg(inst.d) + ", " + Reg(inst.a) + ", " +
             b_or_imm(inst.b, Type::kU32, false);
    case Opcode::kHi32:
    case Opcode::kAbs:
    case Opcode::kNeg:
    case Opcode::kNot:
    case Opcode::kBrev:
    case Opcode::kPopc:
    case Opcode::kClz:
    case Opcode::kRsqrt:
    case Opcode::kEx2:
    case Opcode::kLg2:
    case Opcode::kSin:
    case Opcode::kCos:
    case Opcode::kTanh:
    case Opcode::kSqrt:
    case Opcode::kRcp:
      return g + name + RoundSuffix(inst.mod) + T(t) + " " + Reg(inst.d) + ", " + Reg(inst.a);
    case Opcode::kAdd:
    case Opcode::kSub:
    case Opcode::kMul:
    case Opcode::kDiv:
    case Opcode::kMulHi:
    case Opcode::kRem:
    case Opcode::kMin:
    case Opcode::kMax:
    case Opcode::kAnd:
    case Opcode::kOr:
    case Opcode::kXor:
    case Opcode::kCopysign:
      return g + name + RoundSuffix(inst.mod) + T(t) + " " + Reg(inst.d) + ", " + Reg(inst.a) +
             ", " + b_or_imm(inst.b, t, wide);
    case Opcode::kShl:
    case Opcode::kShr:
    case Opcode::kMulWide:
      return g + name + T(t) + " " + Reg(inst.d) + ", " + Reg(inst.a) + ", " +
             b_or_imm(inst.b, Type::kU32, false);
    case Opcode::kMad:
    case Opcode::kFma:
      return g + name + RoundSuffix(inst.mod) + T(t) + " " + Reg(inst.d) + ", " + Reg(inst.a) +
             ", " + b_or_imm(inst.b, t, wide) + ", " + Reg(inst.c);
    case Opcode::kMadWide:
    case Opcode::kBfe:
      return g + name + T(t) + " " + Reg(inst.d) + ", " + Reg(inst.a) + ", " +
             b_or_imm(inst.b, Type::kU32, false) + ", " + Reg(inst.c);
    case Opcode::kBfi:
      return g + name + T(t) + " " + Reg(inst.d) + ", " + Reg(inst.a) + ", " + Reg(inst.b) + ", " +
             Reg(inst.c) + ", " + Reg(inst.mod);
    case Opcode::kPrmt: {
      std::string mode(PrmtModeName(static_cast<PrmtMode>(inst.mod)));
      return g + name + (mode.empty() ? "" : "." + mode) + " " + Reg(inst.d) + ", " + Reg(inst.a) +
             ", " + Reg(inst.b) + ", " + b_or_imm(inst.c, Type::kU32, false);
    }
    case Opcode::kShf:
      return g + name + ((inst.mod & kShfRight) ? ".r" : ".l") +
             ((inst.mod & kShfClamp) ? ".clamp" : ".wrap") + " " + Reg(inst.d) + ", " +
             Reg(inst.a) + ", " + Reg(inst.b) + ", " + b_or_imm(inst.c, Type::kU32, false);
    case Opcode::kTestp:
      return g + name + "." + std::string(TestpModeName(static_cast<TestpMode>(inst.mod))) + T(t) +
             " " + Pred(inst.d) + ", " + Reg(inst.a);
    case Opcode::kSetp:
      return g + name + "." + std::string(CompareName(static_cast<Compare>(inst.mod))) + T(t) +
             " " + Pred(inst.d) + ", " + Reg(inst.a) + ", " + b_or_imm(inst.b, t, wide);
    case Opcode::kPlop:
      return g + name + "." + std::string(PlopOpName(static_cast<PlopOp>(inst.mod & kPlopOpMask))) +
             " " + Pred(inst.d) + ", " + Pred(inst.a, inst.mod & kPlopNegA) + ", " +
             Pred(inst.b, inst.mod & kPlopNegB);
    case Opcode::kCvt:
      return g + name + RoundSuffix(inst.mod) + T(t) + T(static_cast<Type>(inst.type2)) + " " +
             Reg(inst.d) + ", " + Reg(inst.a);
    case Opcode::kLd:
    case Opcode::kSt: {
      Space space = static_cast<Space>(inst.mod & kModSpaceMask);
      std::string m = name + "." + std::string(SpaceName(space));
      if (space == Space::kConst) m += ".c" + std::to_string(inst.type2);
      if (inst.mod & kModAddr64) m += ".a64";
      if (inst.mod & kModWideReg) m += ".wide";
      m += T(t);
      if (inst.op == Opcode::kLd) return g + m + " " + Reg(inst.d) + ", " + Address(inst);
      return g + m + " " + Address(inst) + ", " + Reg(inst.b);
    }
    case Opcode::kAtom: {
      Space space = static_cast<Space>(inst.mod & kModSpaceMask);
      std::string m = name + "." + std::string(SpaceName(space));
      if (inst.mod & kModAddr64) m += ".a64";
      m += "." + std::string(AtomOpName(static_cast<AtomOp>(inst.type2))) + T(t);
      std::string out = g + m + " " + Reg(inst.d) + ", " + Address(inst) + ", " + Reg(inst.b);
      if (static_cast<AtomOp>(inst.type2) == AtomOp::kCas) out += ", " + Reg(inst.c);
      return out;
    }
    case Opcode::kShfl: {
      std::string out = g + name + "." +
                        std::string(ShflModeName(static_cast<ShflMode>(inst.mod & kShflModeMask))) +
                        " " + Reg(inst.d);
      uint8_t pred = (inst.imm >> 48) & 0x3f;
      if (pred != kPredTrue) out += "|" + Pred(pred);
      out += ", " + Reg(inst.a) + ", ";
      out += (inst.mod & kShflBImm) ? std::to_string(inst.imm & 0xffffffffu) : Reg(inst.b);
      out += ", ";
      out += (inst.mod & kShflCImm) ? std::to_string((inst.imm >> 32) & 0xffff) : Reg(inst.c);
      return out;
    }
    case Opcode::kVote: {
      VoteMode mode = static_cast<VoteMode>(inst.mod & kVoteModeMask);
      return g + name + "." + std::string(VoteModeName(mode)) + " " +
             (mode == VoteMode::kBallot ? Reg(inst.d) : Pred(inst.d)) + ", " +
             Pred(inst.a, inst.mod & kVoteNegA);
    }
  }
  return g + "<opcode " + std::to_string(static_cast<int>(inst.op)) + ">";
}

std::string DisassembleKernel(const Kernel& kernel) {
  const KernelHeader& h = kernel.header;
  std::string out;
  out += ".regs " + std::to_string(h.reg_count) + "\n";
  out += ".preds " + std::to_string(h.pred_count) + "\n";
  if (h.shared_bytes) out += ".shared " + std::to_string(h.shared_bytes) + "\n";
  if (h.local_bytes) out += ".local " + std::to_string(h.local_bytes) + "\n";
  if (h.param_bytes) out += ".params " + std::to_string(h.param_bytes) + "\n";
  if (h.max_threads) out += ".maxthreads " + std::to_string(h.max_threads) + "\n";
  std::set<uint32_t> targets;
  for (const Instruction& inst : kernel.code) {
    if (inst.op == Opcode::kBra || inst.op == Opcode::kCall) targets.insert(inst.target);
  }
  for (size_t i = 0; i < kernel.code.size(); ++i) {
    if (targets.count(static_cast<uint32_t>(i))) out += "L" + std::to_string(i) + ":\n";
    out += "  " + Disassemble(kernel.code[i]) + "\n";
  }
  return out;
}

}  // namespace gpuvm::isa
