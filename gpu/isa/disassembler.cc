#include "gpu/isa/disassembler.h"

#include <cinttypes>
#include <cstdio>
#include <set>

#include "gpu/isa/opcode_table.h"

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

// The mnemonic suffix a mod rule spells (before the type suffix).
std::string ModSuffix(ModRule rule, uint8_t mod) {
  switch (rule) {
    case ModRule::kArith:
    case ModRule::kArithSat:
    case ModRule::kRound:
    case ModRule::kRoundSat:
      return RoundSuffix(mod);
    case ModRule::kPrmt: {
      std::string mode(PrmtModeName(static_cast<PrmtMode>(mod)));
      return mode.empty() ? "" : "." + mode;
    }
    case ModRule::kShf:
      return std::string((mod & kShfRight) ? ".r" : ".l") +
             ((mod & kShfClamp) ? ".clamp" : ".wrap");
    case ModRule::kTestp:
      return "." + std::string(TestpModeName(static_cast<TestpMode>(mod)));
    case ModRule::kCompare:
      return "." + std::string(CompareName(static_cast<Compare>(mod)));
    case ModRule::kPlop:
      return "." + std::string(PlopOpName(static_cast<PlopOp>(mod & kPlopOpMask)));
    case ModRule::kFence: {
      static constexpr const char* kLevels[] = {"cta", "gl", "sys"};
      return std::string(".") + (mod < 3 ? kLevels[mod] : "?");
    }
    case ModRule::kTrap:
      return mod == uint8_t(TrapCode::kAssert) ? ".assert" : "";
    default:
      return "";
  }
}

// A kGeneric opcode: mnemonic, mod suffix, type suffix, then the operands its entry lists.
std::string Generic(const OpcodeInfo& info, const Instruction& inst) {
  std::string out(info.mnemonic);
  out += ModSuffix(info.mod, inst.mod);
  if (info.types != TypeRule::kNone) out += T(inst.type);
  const char* sep = " ";
  for (const OperandSpec& o : info.operands.operands()) {
    out += sep;
    sep = ", ";
    const uint8_t v = FieldValue(inst, o.field);
    switch (o.kind) {
      case OperandKind::kReg:
        out += Reg(v);
        break;
      case OperandKind::kRegOrImm: {
        // A fixed-width operand's immediate is a 32-bit integer; otherwise the type's.
        const bool own_type = o.rows == 0;
        out += inst.has_imm
                   ? Imm(inst.imm, own_type ? inst.type : Type::kU32, own_type && Is64(inst.type))
                   : Reg(v);
        break;
      }
      case OperandKind::kPred:
        out += Pred(v, (inst.mod & NegationBit(info.mod, o.field)) != 0);
        break;
      case OperandKind::kSpecialReg:
        out += "%" + std::string(SpecialRegName(static_cast<SpecialReg>(v)));
        break;
      case OperandKind::kNumber:
        out += std::to_string(v);
        break;
      case OperandKind::kTarget:
        out += "L" + std::to_string(inst.target);
        break;
    }
  }
  return out;
}

}  // namespace

std::string Disassemble(const Instruction& inst) {
  std::string g;
  if (inst.guard != kPredTrue || inst.guard_negated)
    g = "@" + Pred(inst.guard, inst.guard_negated) + " ";
  const OpcodeInfo* info = FindOpcode(inst.op);
  if (info == nullptr) return g + "<opcode " + std::to_string(static_cast<int>(inst.op)) + ">";
  const std::string name(info->mnemonic);
  const Type t = inst.type;
  switch (info->form) {
    case Form::kGeneric:
      return g + Generic(*info, inst);
    case Form::kCvt:
      return g + name + RoundSuffix(inst.mod) + T(t) + T(static_cast<Type>(inst.type2)) + " " +
             Reg(inst.d) + ", " + Reg(inst.a);
    case Form::kLoad:
    case Form::kStore: {
      Space space = static_cast<Space>(inst.mod & kModSpaceMask);
      std::string m = name + "." + std::string(SpaceName(space));
      if (space == Space::kConst) m += ".c" + std::to_string(inst.type2);
      if (inst.mod & kModAddr64) m += ".a64";
      if (inst.mod & kModWideReg) m += ".wide";
      if (inst.mod & kModPair) m += ".pair";
      m += T(t);
      if (inst.mod & kModPair) {
        if (info->form == Form::kLoad)
          return g + m + " " + Reg(inst.d) + ", " + Reg(inst.b) + ", " + Address(inst);
        return g + m + " " + Address(inst) + ", " + Reg(inst.b) + ", " + Reg(inst.c);
      }
      if (info->form == Form::kLoad) return g + m + " " + Reg(inst.d) + ", " + Address(inst);
      return g + m + " " + Address(inst) + ", " + Reg(inst.b);
    }
    case Form::kAtom: {
      Space space = static_cast<Space>(inst.mod & kModSpaceMask);
      std::string m = name + "." + std::string(SpaceName(space));
      if (inst.mod & kModAddr64) m += ".a64";
      m += "." + std::string(AtomOpName(static_cast<AtomOp>(inst.type2))) + T(t);
      std::string out = g + m + " " + Reg(inst.d) + ", " + Address(inst) + ", " + Reg(inst.b);
      if (static_cast<AtomOp>(inst.type2) == AtomOp::kCas) out += ", " + Reg(inst.c);
      return out;
    }
    case Form::kShfl: {
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
    case Form::kVote: {
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
    const OpcodeInfo* info = FindOpcode(inst.op);
    if (info != nullptr && info->HasTarget()) targets.insert(inst.target);
  }
  for (size_t i = 0; i < kernel.code.size(); ++i) {
    if (targets.count(static_cast<uint32_t>(i))) out += "L" + std::to_string(i) + ":\n";
    out += "  " + Disassemble(kernel.code[i]) + "\n";
  }
  return out;
}

}  // namespace gpuvm::isa
