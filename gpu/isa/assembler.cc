#include "gpu/isa/assembler.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>

#include "gpu/isa/opcode_table.h"

namespace gpuvm::isa {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      out.push_back(Trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  return out;
}

template <typename Enum, typename NameFn>
std::optional<Enum> LookUp(std::string_view name, int count, NameFn fn) {
  for (int i = 0; i < count; ++i) {
    if (fn(static_cast<Enum>(i)) == name && !name.empty()) return static_cast<Enum>(i);
  }
  return std::nullopt;
}

std::optional<uint64_t> ParseUnsigned(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::string str(s);
  errno = 0;
  char* end = nullptr;
  unsigned long long v = strtoull(str.c_str(), &end, 0);
  if (errno != 0 || *end != '\0' || str[0] == '-' || str[0] == '+') return std::nullopt;
  return v;
}

// Integer immediates: decimal (optionally negative) or 0x hex.
std::optional<uint64_t> ParseInt(std::string_view s, bool is64) {
  bool negative = !s.empty() && s[0] == '-';
  std::optional<uint64_t> v = ParseUnsigned(negative ? s.substr(1) : s);
  if (!v) return std::nullopt;
  if (negative) {
    if (*v > (is64 ? (1ull << 63) : (1ull << 31))) return std::nullopt;
    return -*v;  // sign-extended to 64 bits
  }
  if (!is64 && *v > 0xffffffffull) return std::nullopt;
  return *v;
}

std::optional<uint64_t> ParseImmediate(std::string_view s, Type type, bool is64) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'f' || s[1] == 'd')) {
    std::optional<uint64_t> bits = ParseUnsigned("0x" + std::string(s.substr(2)));
    if (!bits || (s[1] == 'f' && *bits > 0xffffffffu)) return std::nullopt;
    return bits;
  }
  if (IsFloat(type) && s.find_first_of(".eEn") != std::string_view::npos) {
    std::string str(s);
    char* end = nullptr;
    double v = strtod(str.c_str(), &end);
    if (*end != '\0') return std::nullopt;
    if (type == Type::kF32) {
      float f = static_cast<float>(v);
      uint32_t bits;
      memcpy(&bits, &f, 4);
      return bits;
    }
    uint64_t bits;
    memcpy(&bits, &v, 8);
    return bits;
  }
  if (IsFloat(type))
    return std::nullopt;  // integers for floats would be ambiguous: raw bits or value?
  return ParseInt(s, is64);
}

class Assembler {
 public:
  Result<Kernel> Run(std::string_view text) {
    int line_no = 0;
    for (std::string_view line : Split(text, '\n')) {
      line_ = ++line_no;
      size_t comment = line.find("//");
      if (comment != std::string_view::npos) line = line.substr(0, comment);
      for (std::string_view stmt : Split(line, ';')) {
        stmt = Trim(stmt);
        if (stmt.empty()) continue;
        Status s = Statement(stmt);
        if (!s.ok()) return s.WithContext("line " + std::to_string(line_no));
      }
    }
    for (auto& [index, label] : fixups_) {
      auto it = labels_.find(label.first);
      if (it == labels_.end()) {
        return Status::InvalidArgument("line " + std::to_string(label.second) + ": unknown label " +
                                       label.first);
      }
      kernel_.code[index].target = it->second;
    }
    if (kernel_.code.empty()) return Status::InvalidArgument("no instructions");
    GPUVM_RETURN_IF_ERROR(FitCounts());
    GPUVM_RETURN_IF_ERROR(
        EncodeKernel(kernel_).status());  // layout rules (targets, last instruction)
    return kernel_;
  }

 private:
  // The smallest register and predicate counts every instruction validates with (monotonic, so a
  // binary search), unless a directive fixed them.
  Status FitCounts() {
    auto all_valid = [&](const KernelHeader& h) {
      for (const Instruction& inst : kernel_.code) {
        if (!ValidateInstruction(inst, h).ok()) return false;
      }
      return true;
    };
    KernelHeader& h = kernel_.header;
    if (!regs_set_) h.reg_count = kMaxRegisters;
    if (!preds_set_) h.pred_count = kMaxPredicates;
    for (size_t i = 0; i < kernel_.code.size(); ++i) {
      Status s = ValidateInstruction(kernel_.code[i], h);
      if (!s.ok()) return s.WithContext("instruction " + std::to_string(i));
    }
    // The smallest count in [0, max] for which every instruction validates (`count` is the
    // header field being fitted).
    auto fit = [&](auto* count, int max) {
      int lo = 0, hi = max;
      while (lo < hi) {
        int mid = (lo + hi) / 2;
        *count = mid;
        if (all_valid(h))
          hi = mid;
        else
          lo = mid + 1;
      }
      *count = lo;
    };
    if (!regs_set_) fit(&h.reg_count, kMaxRegisters);
    if (!preds_set_) fit(&h.pred_count, kMaxPredicates);
    return Status::Ok();
  }

  Status Directive(std::string_view stmt) {
    size_t sp = stmt.find_first_of(" \t");
    std::string_view name = stmt.substr(0, sp);
    std::optional<uint64_t> v =
        sp == std::string_view::npos ? std::nullopt : ParseUnsigned(Trim(stmt.substr(sp)));
    if (!v || *v > 0xffffffffu)
      return Status::InvalidArgument("directive needs a number: " + std::string(stmt));
    KernelHeader& h = kernel_.header;
    if (name == ".regs") {
      if (*v > kMaxRegisters) return Status::InvalidArgument(".regs too large");
      h.reg_count = static_cast<uint16_t>(*v);
      regs_set_ = true;
    } else if (name == ".preds") {
      if (*v > kMaxPredicates) return Status::InvalidArgument(".preds too large");
      h.pred_count = static_cast<uint8_t>(*v);
      preds_set_ = true;
    } else if (name == ".shared") {
      h.shared_bytes = static_cast<uint32_t>(*v);
    } else if (name == ".local") {
      h.local_bytes = static_cast<uint32_t>(*v);
    } else if (name == ".params") {
      h.param_bytes = static_cast<uint32_t>(*v);
    } else if (name == ".maxthreads") {
      h.max_threads = static_cast<uint32_t>(*v);
    } else {
      return Status::InvalidArgument("unknown directive " + std::string(name));
    }
    return Status::Ok();
  }

  Status Statement(std::string_view stmt) {
    if (stmt[0] == '.') return Directive(stmt);
    // Labels: "name:" possibly followed by an instruction.
    size_t colon = stmt.find(':');
    if (colon != std::string_view::npos && stmt.find_first_of(" \t[,") > colon) {
      std::string label(Trim(stmt.substr(0, colon)));
      if (label.empty()) return Status::InvalidArgument("empty label");
      if (!labels_.emplace(label, static_cast<uint32_t>(kernel_.code.size())).second) {
        return Status::InvalidArgument("label " + label + " defined twice");
      }
      stmt = Trim(stmt.substr(colon + 1));
      if (stmt.empty()) return Status::Ok();
    }
    Instruction inst;
    if (stmt[0] == '@') {
      size_t sp = stmt.find_first_of(" \t");
      if (sp == std::string_view::npos) return Status::InvalidArgument("guard without instruction");
      GPUVM_RETURN_IF_ERROR(Pred(stmt.substr(1, sp - 1), &inst.guard, &inst.guard_negated));
      stmt = Trim(stmt.substr(sp));
    }
    size_t sp = stmt.find_first_of(" \t");
    std::string_view mnemonic = stmt.substr(0, sp);
    std::string_view rest = sp == std::string_view::npos ? "" : Trim(stmt.substr(sp));
    std::vector<std::string_view> ops;
    if (!rest.empty()) ops = Split(rest, ',');
    Status s = Build(mnemonic, ops, &inst);
    if (!s.ok()) return s.WithContext(std::string(mnemonic));
    kernel_.code.push_back(inst);
    return Status::Ok();
  }

  static Status Reg(std::string_view s, uint8_t* r) {
    if (s == "rz") {
      *r = kRegZero;
      return Status::Ok();
    }
    std::optional<uint64_t> v;
    if (s.size() > 1 && s[0] == 'r') v = ParseUnsigned(s.substr(1));
    if (!v || *v >= kMaxRegisters)
      return Status::InvalidArgument("bad register '" + std::string(s) + "'");
    *r = static_cast<uint8_t>(*v);
    return Status::Ok();
  }
  static Status Pred(std::string_view s, uint8_t* p, bool* negated) {
    bool neg = !s.empty() && s[0] == '!';
    if (neg) s.remove_prefix(1);
    if (negated) {
      *negated = neg;
    } else if (neg) {
      return Status::InvalidArgument("predicate cannot be negated here");
    }
    if (s == "pt") {
      *p = kPredTrue;
      return Status::Ok();
    }
    std::optional<uint64_t> v;
    if (s.size() > 1 && s[0] == 'p') v = ParseUnsigned(s.substr(1));
    if (!v || *v >= kMaxPredicates)
      return Status::InvalidArgument("bad predicate '" + std::string(s) + "'");
    *p = static_cast<uint8_t>(*v);
    return Status::Ok();
  }
  // A register, or an immediate stored in inst->imm.
  static Status RegOrImm(std::string_view s, Type type, bool is64, uint8_t* r, Instruction* inst) {
    if (!s.empty() && s[0] == 'r') return Reg(s, r);
    std::optional<uint64_t> v = ParseImmediate(s, type, is64);
    if (!v) return Status::InvalidArgument("bad immediate '" + std::string(s) + "'");
    *r = 0;
    inst->has_imm = true;
    inst->imm = *v;
    return Status::Ok();
  }
  static Status Address(std::string_view s, Instruction* inst) {
    if (s.size() < 3 || s.front() != '[' || s.back() != ']') {
      return Status::InvalidArgument("bad address '" + std::string(s) + "'");
    }
    s = Trim(s.substr(1, s.size() - 2));
    size_t sign = s.find_first_of("+-");
    GPUVM_RETURN_IF_ERROR(Reg(Trim(s.substr(0, sign)), &inst->a));
    if (sign == std::string_view::npos) return Status::Ok();
    std::string_view off = Trim(s.substr(sign + 1));
    std::optional<uint64_t> v = ParseUnsigned(off);
    if (!v) return Status::InvalidArgument("bad offset '" + std::string(off) + "'");
    inst->has_imm = true;
    inst->imm = s[sign] == '-' ? -*v : *v;
    return Status::Ok();
  }

  // The suffixes of a mnemonic, sorted by kind ("ld.global.a64.f32": space, a64, type).
  struct Suffixes {
    std::vector<Type> types;
    uint8_t round = 0;
    bool sat = false, a64 = false, wide = false, pair = false;
    std::optional<Space> space;
    std::optional<uint8_t> bank;
    std::vector<std::string_view> other;  // the opcode's own (modes)

    Status OneType(Instruction* inst) const {
      if (types.size() != 1) return Status::InvalidArgument("needs exactly one type suffix");
      inst->type = types[0];
      return Status::Ok();
    }
    Status NoType() const {
      if (!types.empty()) return Status::InvalidArgument("takes no type suffix");
      return Status::Ok();
    }
    // Opcode-specific suffix (exactly one), looked up with `lookup`.
    template <typename LookUpFn>
    Result<uint8_t> OneOther(LookUpFn lookup) const {
      if (other.size() != 1) return Status::InvalidArgument("needs one mode suffix");
      auto v = lookup(other[0]);
      if (!v) return Status::InvalidArgument("unknown suffix ." + std::string(other[0]));
      return static_cast<uint8_t>(*v);
    }
    Status NoOther() const {
      if (!other.empty())
        return Status::InvalidArgument("unknown suffix ." + std::string(other[0]));
      return Status::Ok();
    }
  };

  static Status NeedOps(const std::vector<std::string_view>& ops, size_t n) {
    if (ops.size() != n) {
      return Status::InvalidArgument("expects " + std::to_string(n) + " operands, got " +
                                     std::to_string(ops.size()));
    }
    return Status::Ok();
  }

  static Result<Suffixes> ParseSuffixes(const std::vector<std::string_view>& parts) {
    Suffixes sx;
    for (size_t i = 1; i < parts.size(); ++i) {
      std::string_view p = parts[i];
      if (auto t = LookUp<Type>(p, kTypeCount, TypeName)) {
        sx.types.push_back(*t);
      } else if (auto r = LookUp<Rounding>(p, 9, RoundingName)) {
        sx.round = static_cast<uint8_t>(*r);
      } else if (p == "sat") {
        sx.sat = true;
      } else if (p == "a64") {
        sx.a64 = true;
      } else if (p == "wide") {
        sx.wide = true;
      } else if (p == "pair") {
        sx.pair = true;
      } else if (auto sp = LookUp<Space>(p, 5, SpaceName)) {
        sx.space = *sp;
      } else if (p.size() > 1 && p[0] == 'c' && ParseUnsigned(p.substr(1))) {
        uint64_t b = *ParseUnsigned(p.substr(1));
        if (b > 15) return Status::InvalidArgument("constant bank " + std::string(p));
        sx.bank = static_cast<uint8_t>(b);
      } else {
        sx.other.push_back(p);
      }
    }
    return sx;
  }

  // The mode suffixes a kGeneric opcode's mod rule spells, into inst->mod.
  static Status ModSuffixes(ModRule rule, const Suffixes& sx, Instruction* inst) {
    // The rules spelled as exactly one mode suffix.
    auto one_mode = [&](auto lookup) -> Status {
      GPUVM_ASSIGN_OR_RETURN(inst->mod, sx.OneOther(lookup));
      return Status::Ok();
    };
    switch (rule) {
      case ModRule::kTrap:  // `trap` or `trap.assert`
        if (sx.other.empty()) return Status::Ok();
        return one_mode([](std::string_view p) -> std::optional<int> {
          if (p == "assert") return int(TrapCode::kAssert);
          return std::nullopt;
        });
      case ModRule::kFence:
        return one_mode([](std::string_view p) -> std::optional<int> {
          if (p == "cta") return 0;
          if (p == "gl") return 1;
          if (p == "sys") return 2;
          return std::nullopt;
        });
      case ModRule::kPrmt:
        if (sx.other.size() > 1) return Status::InvalidArgument("one prmt mode at most");
        if (sx.other.size() == 1) {
          auto m = LookUp<PrmtMode>(sx.other[0], kPrmtModeCount, PrmtModeName);
          if (!m) return Status::InvalidArgument("unknown prmt mode");
          inst->mod = static_cast<uint8_t>(*m);
        }
        return Status::Ok();
      case ModRule::kShf:
        for (std::string_view p : sx.other) {
          if (p == "r")
            inst->mod |= kShfRight;
          else if (p == "clamp")
            inst->mod |= kShfClamp;
          else if (p != "l" && p != "wrap")
            return Status::InvalidArgument("unknown suffix ." + std::string(p));
        }
        return Status::Ok();
      case ModRule::kTestp:
        return one_mode([](std::string_view p) {
          return LookUp<TestpMode>(p, kTestpModeCount, TestpModeName);
        });
      case ModRule::kCompare:
        return one_mode(
            [](std::string_view p) { return LookUp<Compare>(p, kCompareCount, CompareName); });
      case ModRule::kPlop:
        return one_mode([](std::string_view p) { return LookUp<PlopOp>(p, 3, PlopOpName); });
      case ModRule::kZero:
      case ModRule::kArith:
      case ModRule::kArithSat:
      case ModRule::kRound:
      case ModRule::kRoundSat:
      case ModRule::kSelect:
      case ModRule::kBarrier:
      case ModRule::kRegister:
      case ModRule::kForm:
        break;
    }
    return sx.NoOther();
  }

  // A kGeneric opcode: suffixes and operands as its table entry lists them.
  Status BuildGeneric(const OpcodeInfo& info, const Suffixes& sx,
                      const std::vector<std::string_view>& ops, Instruction* inst) {
    GPUVM_RETURN_IF_ERROR(info.types == TypeRule::kNone ? sx.NoType() : sx.OneType(inst));
    GPUVM_RETURN_IF_ERROR(ModSuffixes(info.mod, sx, inst));
    GPUVM_RETURN_IF_ERROR(NeedOps(ops, info.operands.count));
    for (size_t i = 0; i < ops.size(); ++i) {
      const OperandSpec& o = info.operands.items[i];
      uint8_t* field = FieldOf(inst, o.field);
      switch (o.kind) {
        case OperandKind::kReg:
          GPUVM_RETURN_IF_ERROR(Reg(ops[i], field));
          break;
        case OperandKind::kRegOrImm: {
          // A fixed-width operand's immediate is a 32-bit integer; otherwise the type's.
          const bool own_type = o.rows == 0;
          GPUVM_RETURN_IF_ERROR(RegOrImm(ops[i], own_type ? inst->type : Type::kU32,
                                         own_type && Is64(inst->type), field, inst));
          break;
        }
        case OperandKind::kPred: {
          const uint8_t negation = NegationBit(info.mod, o.field);
          bool negated = false;
          GPUVM_RETURN_IF_ERROR(Pred(ops[i], field, negation ? &negated : nullptr));
          if (negated) inst->mod |= negation;
          break;
        }
        case OperandKind::kSpecialReg: {
          if (ops[i].empty() || ops[i][0] != '%')
            return Status::InvalidArgument("special register needs %");
          auto sr = LookUp<SpecialReg>(ops[i].substr(1), kSpecialRegCount, SpecialRegName);
          if (!sr) {
            return Status::InvalidArgument("unknown special register " + std::string(ops[i]));
          }
          *field = static_cast<uint8_t>(*sr);
          break;
        }
        case OperandKind::kNumber: {
          std::optional<uint64_t> v = ParseUnsigned(ops[i]);
          if (!v || *v > 255) return Status::InvalidArgument("bad " + std::string(o.name));
          *field = static_cast<uint8_t>(*v);
          break;
        }
        case OperandKind::kTarget:
          inst->has_imm = true;
          fixups_.emplace(kernel_.code.size(), std::make_pair(std::string(ops[i]), line_));
          break;
      }
    }
    return Status::Ok();
  }

  Status Build(std::string_view mnemonic, const std::vector<std::string_view>& ops,
               Instruction* inst) {
    std::vector<std::string_view> parts = Split(mnemonic, '.');
    const OpcodeInfo* found = FindOpcode(parts[0]);
    if (found == nullptr) return Status::InvalidArgument("unknown opcode");
    const OpcodeInfo& info = *found;
    inst->op = info.op;
    GPUVM_ASSIGN_OR_RETURN(const Suffixes sx, ParseSuffixes(parts));
    const std::optional<uint8_t>& bank = sx.bank;
    bool arith_mods = false;  // rounding/sat allowed
    bool mem_mods = false;
    switch (info.form) {
      case Form::kGeneric:
        GPUVM_RETURN_IF_ERROR(BuildGeneric(info, sx, ops, inst));
        arith_mods = TakesRounding(info.mod);
        break;
      case Form::kCvt:
        if (sx.types.size() != 2)
          return Status::InvalidArgument("cvt needs destination and source types");
        GPUVM_RETURN_IF_ERROR(sx.NoOther());
        inst->type = sx.types[0];
        inst->type2 = static_cast<uint8_t>(sx.types[1]);
        GPUVM_RETURN_IF_ERROR(NeedOps(ops, 2));
        GPUVM_RETURN_IF_ERROR(Reg(ops[0], &inst->d));
        GPUVM_RETURN_IF_ERROR(Reg(ops[1], &inst->a));
        arith_mods = true;
        break;
      case Form::kLoad:
      case Form::kStore:
        GPUVM_RETURN_IF_ERROR(sx.OneType(inst));
        GPUVM_RETURN_IF_ERROR(sx.NoOther());
        if (sx.pair) {  // ld.pair d, b, [addr]; st.pair [addr], b, c
          GPUVM_RETURN_IF_ERROR(NeedOps(ops, 3));
          if (info.form == Form::kLoad) {
            GPUVM_RETURN_IF_ERROR(Reg(ops[0], &inst->d));
            GPUVM_RETURN_IF_ERROR(Reg(ops[1], &inst->b));
            GPUVM_RETURN_IF_ERROR(Address(ops[2], inst));
          } else {
            GPUVM_RETURN_IF_ERROR(Address(ops[0], inst));
            GPUVM_RETURN_IF_ERROR(Reg(ops[1], &inst->b));
            GPUVM_RETURN_IF_ERROR(Reg(ops[2], &inst->c));
          }
          mem_mods = true;
          break;
        }
        GPUVM_RETURN_IF_ERROR(NeedOps(ops, 2));
        if (info.form == Form::kLoad) {
          GPUVM_RETURN_IF_ERROR(Reg(ops[0], &inst->d));
          GPUVM_RETURN_IF_ERROR(Address(ops[1], inst));
        } else {
          GPUVM_RETURN_IF_ERROR(Address(ops[0], inst));
          GPUVM_RETURN_IF_ERROR(Reg(ops[1], &inst->b));
        }
        mem_mods = true;
        break;
      case Form::kAtom: {
        GPUVM_RETURN_IF_ERROR(sx.OneType(inst));
        GPUVM_ASSIGN_OR_RETURN(inst->type2, sx.OneOther([](std::string_view p) {
          return LookUp<AtomOp>(p, kAtomOpCount, AtomOpName);
        }));
        bool cas = static_cast<AtomOp>(inst->type2) == AtomOp::kCas;
        GPUVM_RETURN_IF_ERROR(NeedOps(ops, cas ? 4 : 3));
        GPUVM_RETURN_IF_ERROR(Reg(ops[0], &inst->d));
        GPUVM_RETURN_IF_ERROR(Address(ops[1], inst));
        GPUVM_RETURN_IF_ERROR(Reg(ops[2], &inst->b));
        if (cas) GPUVM_RETURN_IF_ERROR(Reg(ops[3], &inst->c));
        mem_mods = true;
        if (bank) return Status::InvalidArgument("atomics have no constant bank");
        break;
      }
      case Form::kShfl: {
        GPUVM_RETURN_IF_ERROR(sx.NoType());
        GPUVM_ASSIGN_OR_RETURN(inst->mod, sx.OneOther([](std::string_view p) {
          return LookUp<ShflMode>(p, 4, ShflModeName);
        }));
        GPUVM_RETURN_IF_ERROR(NeedOps(ops, 4));
        inst->has_imm = true;
        uint8_t pred = kPredTrue;
        std::vector<std::string_view> dst = Split(ops[0], '|');
        if (dst.size() > 2) return Status::InvalidArgument("bad shfl destination");
        GPUVM_RETURN_IF_ERROR(Reg(dst[0], &inst->d));
        if (dst.size() == 2) GPUVM_RETURN_IF_ERROR(Pred(dst[1], &pred, nullptr));
        GPUVM_RETURN_IF_ERROR(Reg(ops[1], &inst->a));
        uint64_t imm = uint64_t{pred} << 48;
        if (!ops[2].empty() && ops[2][0] == 'r') {
          GPUVM_RETURN_IF_ERROR(Reg(ops[2], &inst->b));
        } else {
          std::optional<uint64_t> v = ParseUnsigned(ops[2]);
          if (!v || *v > 0xffffffffu) return Status::InvalidArgument("bad lane immediate");
          imm |= *v;
          inst->mod |= kShflBImm;
        }
        if (!ops[3].empty() && ops[3][0] == 'r') {
          GPUVM_RETURN_IF_ERROR(Reg(ops[3], &inst->c));
        } else {
          std::optional<uint64_t> v = ParseUnsigned(ops[3]);
          if (!v || *v > 0xffff) return Status::InvalidArgument("bad clamp immediate");
          imm |= *v << 32;
          inst->mod |= kShflCImm;
        }
        inst->imm = imm;
        break;
      }
      case Form::kVote: {
        GPUVM_RETURN_IF_ERROR(sx.NoType());
        GPUVM_ASSIGN_OR_RETURN(inst->mod, sx.OneOther([](std::string_view p) {
          return LookUp<VoteMode>(p, 4, VoteModeName);
        }));
        GPUVM_RETURN_IF_ERROR(NeedOps(ops, 2));
        if (static_cast<VoteMode>(inst->mod) == VoteMode::kBallot) {
          GPUVM_RETURN_IF_ERROR(Reg(ops[0], &inst->d));
        } else {
          GPUVM_RETURN_IF_ERROR(Pred(ops[0], &inst->d, nullptr));
        }
        bool neg = false;
        GPUVM_RETURN_IF_ERROR(Pred(ops[1], &inst->a, &neg));
        if (neg) inst->mod |= kVoteNegA;
        break;
      }
    }
    if (arith_mods) {
      inst->mod |= sx.round | (sx.sat ? kModSat : 0);
    } else if (sx.round || sx.sat) {
      return Status::InvalidArgument("takes no rounding or .sat");
    }
    if (mem_mods) {
      if (!sx.space) return Status::InvalidArgument("needs a space suffix");
      inst->mod |= static_cast<uint8_t>(*sx.space) | (sx.a64 ? kModAddr64 : 0) |
                   (sx.wide ? kModWideReg : 0) | (sx.pair ? kModPair : 0);
      if (info.form != Form::kAtom) {
        if (*sx.space == Space::kConst && !bank)
          return Status::InvalidArgument("constant space needs .cN");
        if (*sx.space != Space::kConst && bank)
          return Status::InvalidArgument(".cN is for constant space");
        if (bank) inst->type2 = *bank;
      }
    } else if (sx.space || sx.a64 || sx.wide || sx.pair || bank) {
      return Status::InvalidArgument("memory suffixes on a non-memory opcode");
    }
    return Status::Ok();
  }

  Kernel kernel_;
  bool regs_set_ = false;
  bool preds_set_ = false;
  int line_ = 0;
  std::map<std::string, uint32_t> labels_;
  std::map<size_t, std::pair<std::string, int>> fixups_;
};

}  // namespace

Result<Kernel> AssembleKernel(std::string_view text) { return Assembler().Run(text); }

Result<std::vector<uint8_t>> Assemble(std::string_view text) {
  GPUVM_ASSIGN_OR_RETURN(Kernel kernel, AssembleKernel(text));
  return EncodeKernel(kernel);
}

}  // namespace gpuvm::isa
