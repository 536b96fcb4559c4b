// The supported PTX instruction set, part 3: operand signatures per opcode and the checks of an
// instruction's operands (count, kinds, register and immediate types, addresses, vectors) and of a
// call's arguments against the callee (CheckOperands, CheckCall, RegisterTypeFits).
#include <string>
#include <vector>

#include "base/enum_names.h"
#include "ptx/instruction_set.h"
#include "ptx/instruction_set_internal.h"

namespace gpuvm::ptx {

using instruction_set_internal::T;

bool RegisterTypeFits(ScalarType reg, ScalarType want, bool relaxed) {
  if (want == T::kNone) return true;
  if (reg == T::kPred || want == T::kPred) return reg == want;
  const uint32_t rs = TypeSize(reg), ws = TypeSize(want);
  if (rs == ws) {
    if (IsBitType(reg) || IsBitType(want)) return true;
    if (IsIntegerType(reg) && IsIntegerType(want)) return true;
    return reg == want;
  }
  if (relaxed && rs > ws && !IsFloatType(reg) && !(want == T::kF32 || want == T::kF64)) return true;
  return false;
}

namespace {

// What a slot accepts.
enum Accept : uint16_t {
  kReg = 1 << 0,
  kImm = 1 << 1,
  kSreg = 1 << 2,
  kSym = 1 << 3,
  kAddr = 1 << 4,
  kLabelOp = 1 << 5,
  kVec = 1 << 6,
  kPair = 1 << 7,
  kNeg = 1 << 8,
};
constexpr uint16_t kSrc = kReg | kImm | kSreg;

struct Slot {
  uint16_t accept;
  T type;  // kNone: any
  bool relaxed = false;
  bool dest = false;
  bool optional = false;
};

Slot D(T t) { return Slot{kReg, t, false, true}; }
Slot S(T t) { return Slot{kSrc, t}; }
Slot P() { return Slot{kReg, T::kPred}; }
Slot PN() { return Slot{kReg | kNeg, T::kPred}; }
Slot A() { return Slot{kAddr, T::kNone}; }
Slot Opt(Slot s) {
  s.optional = true;
  return s;
}

T Wide(T t) {
  switch (t) {
    case T::kU16:
      return T::kU32;
    case T::kS16:
      return T::kS32;
    case T::kU32:
      return T::kU64;
    case T::kS32:
      return T::kS64;
    case T::kB16:
      return T::kB32;
    case T::kB32:
      return T::kB64;
    default:
      return t;
  }
}

// Integer/bit type of `bytes` bytes (for vector elements of mov).
T BitsOfSize(uint32_t bytes) {
  switch (bytes) {
    case 1:
      return T::kB8;
    case 2:
      return T::kB16;
    case 4:
      return T::kB32;
    case 8:
      return T::kB64;
    default:
      return T::kNone;
  }
}

void Signature(const Instruction& inst, std::vector<Slot>* out) {
  const T t = inst.type;
  auto& s = *out;
  switch (inst.opcode) {
    case Opcode::kAdd:
    case Opcode::kSub:
    case Opcode::kAddc:
    case Opcode::kSubc:
    case Opcode::kDiv:
    case Opcode::kRem:
    case Opcode::kMin:
    case Opcode::kMax:
    case Opcode::kCopysign:
    case Opcode::kAnd:
    case Opcode::kOr:
    case Opcode::kXor:
    case Opcode::kMul24:
      s = {D(t), S(t), S(t)};
      return;
    case Opcode::kMul:
      s = {D(inst.mul_mode == MulMode::kWide ? Wide(t) : t), S(t), S(t)};
      return;
    case Opcode::kMad:
    case Opcode::kMadc: {
      const T wide = inst.mul_mode == MulMode::kWide ? Wide(t) : t;
      s = {D(wide), S(t), S(t), S(wide)};
      return;
    }
    case Opcode::kMad24:
    case Opcode::kSad:
    case Opcode::kFma:
      s = {D(t), S(t), S(t), S(t)};
      return;
    case Opcode::kAbs:
    case Opcode::kNeg:
    case Opcode::kNot:
    case Opcode::kCnot:
    case Opcode::kBrev:
    case Opcode::kRcp:
    case Opcode::kSqrt:
    case Opcode::kRsqrt:
    case Opcode::kSin:
    case Opcode::kCos:
    case Opcode::kLg2:
    case Opcode::kEx2:
    case Opcode::kTanh:
      s = {D(t), S(t)};
      return;
    case Opcode::kTestp:
      s = {D(T::kPred), S(t)};
      return;
    case Opcode::kPopc:
    case Opcode::kClz:
    case Opcode::kBfind:
      s = {D(T::kU32), S(t)};
      return;
    case Opcode::kBfe:
      s = {D(t), S(t), S(T::kU32), S(T::kU32)};
      return;
    case Opcode::kBfi:
      s = {D(t), S(t), S(t), S(T::kU32), S(T::kU32)};
      return;
    case Opcode::kBmsk:
      s = {D(t), S(T::kU32), S(T::kU32)};
      return;
    case Opcode::kPrmt:
      s = {D(t), S(t), S(t), S(t)};
      return;
    case Opcode::kLop3:
      s = {D(t), S(t), S(t), S(t), Slot{kImm, T::kU32}};
      return;
    case Opcode::kShf:
      s = {D(t), S(t), S(t), S(T::kU32)};
      return;
    case Opcode::kShl:
    case Opcode::kShr:
      s = {D(t), S(t), S(T::kU32)};
      return;
    case Opcode::kDp4a: {
      const T acc = (IsSignedType(t) || IsSignedType(inst.type2)) ? T::kS32 : T::kU32;
      s = {D(acc), S(T::kB32), S(T::kB32), S(acc)};
      return;
    }
    case Opcode::kSetp: {
      Slot d = D(T::kPred);
      d.accept |= kPair;
      s = {d, S(t), S(t)};
      if (inst.bool_op != BoolOp::kNone) s.push_back(PN());
      return;
    }
    case Opcode::kSet:
      s = {D(t), S(inst.type2), S(inst.type2)};
      if (inst.bool_op != BoolOp::kNone) s.push_back(PN());
      return;
    case Opcode::kSelp:
      s = {D(t), S(t), S(t), P()};
      return;
    case Opcode::kSlct:
      s = {D(t), S(t), S(t), S(inst.type2)};
      return;
    case Opcode::kMov: {
      Slot d = D(t);
      d.accept |= kVec;
      Slot a = S(t);
      a.accept |= kVec | kSym;
      s = {d, a};
      return;
    }
    case Opcode::kCvt:
      s = {Slot{kReg, t, true, true}, Slot{kSrc, inst.type2, true}};
      return;
    case Opcode::kCvta:
      s = {D(t), Slot{static_cast<uint16_t>(inst.Has(kFlagTo) ? kReg : (kReg | kSym)), t}};
      return;
    case Opcode::kLd:
    case Opcode::kLdu:
      s = {Slot{static_cast<uint16_t>(inst.vector > 1 ? kVec : kReg), t, true, true}, A()};
      return;
    case Opcode::kSt:
      s = {A(), Slot{static_cast<uint16_t>(inst.vector > 1 ? kVec : (kReg | kImm)), t, true}};
      return;
    case Opcode::kPrefetch:
      s = {A()};
      return;
    case Opcode::kIsspacep:
      s = {D(T::kPred), Slot{kReg, T::kNone}};
      return;
    case Opcode::kAtom:
      s = {D(t), A(), S(t)};
      if (inst.atomic_op == AtomicOp::kCas) s.push_back(S(t));
      return;
    case Opcode::kRed:
      s = {A(), S(t)};
      return;
    case Opcode::kBar:
      if (inst.Has(kFlagWarp)) {
        s = {S(T::kU32)};
      } else if (inst.Has(kFlagRed)) {
        s = {D(t), S(T::kU32), S(T::kU32), PN()};  // the b operand is optional; see CheckOperands
      } else if (inst.Has(kFlagArrive)) {
        s = {S(T::kU32), S(T::kU32)};
      } else {
        s = {S(T::kU32), Opt(S(T::kU32))};
      }
      return;
    case Opcode::kShfl: {
      Slot d = D(T::kB32);
      d.accept |= kPair;
      s = {d, S(T::kB32), S(T::kU32), S(T::kU32), S(T::kU32)};
      return;
    }
    case Opcode::kVote:
      s = {D(t), PN(), S(T::kU32)};
      return;
    case Opcode::kActivemask:
      s = {D(T::kB32)};
      return;
    case Opcode::kBra:
      s = {Slot{kLabelOp, T::kNone}};
      return;
    case Opcode::kNanosleep:
      s = {S(T::kU32)};
      return;
    default:
      s.clear();
      return;
  }
}

constexpr EnumName<OperandKind> kOperandKindNames[] = {
    {OperandKind::kRegister, "a register"},
    {OperandKind::kRegisterPair, "a register pair"},
    {OperandKind::kSink, "'_'"},
    {OperandKind::kSpecial, "a special register"},
    {OperandKind::kImmediate, "an immediate"},
    {OperandKind::kAddress, "an address"},
    {OperandKind::kSymbol, "a symbol"},
    {OperandKind::kLabel, "a label"},
    {OperandKind::kVector, "a vector"},
};

std::string KindName(OperandKind kind) { return NameOf(kOperandKindNames, kind, "nothing"); }

std::string TypeMismatch(const Register& reg, T want, int index) {
  return "operand " + std::to_string(index + 1) + ": register " + reg.name + " has type ." +
         std::string(TypeName(reg.type)) + ", expected ." + std::string(TypeName(want));
}

// Checks an immediate against the slot type: integers must fit, floats need a float or same-size
// bit slot.
std::string CheckImmediate(const Operand& op, T want, int index) {
  const std::string where = "operand " + std::to_string(index + 1) + ": ";
  if (want == T::kPred) {
    // `mov.pred %p, 0` / `mov.pred %p, -1` (nvcc -G): zero is false, anything else true.
    if (op.imm_kind == ImmKind::kInt) return "";
    return where + "a predicate immediate must be an integer";
  }
  if (want == T::kNone) return "";
  const uint32_t size = TypeSize(want);
  if (op.imm_kind == ImmKind::kInt) {
    if (size < 8) {
      const int64_t v = static_cast<int64_t>(op.imm_bits);
      const int64_t lo = -(int64_t{1} << (size * 8 - 1));
      const int64_t hi = (int64_t{1} << (size * 8)) - 1;
      if (v < lo || v > hi) {
        return where + "immediate " + std::to_string(v) + " does not fit ." +
               std::string(TypeName(want));
      }
    }
    return "";
  }
  if (IsFloatType(want)) return "";
  if (IsBitType(want) && ((op.imm_kind == ImmKind::kF32 && size == 4) ||
                          (op.imm_kind == ImmKind::kF64 && size == 8))) {
    return "";
  }
  return where + "floating-point immediate where ." + std::string(TypeName(want)) + " is expected";
}

std::string CheckRegister(const Function& f, RegId reg, T want, bool relaxed, int index) {
  if (reg >= f.registers.size()) return "internal: register index out of range";
  if (!RegisterTypeFits(f.registers[reg].type, want, relaxed)) {
    return TypeMismatch(f.registers[reg], want, index);
  }
  return "";
}

std::string CheckAddress(const Module& module, const Function& f, const Instruction& inst,
                         const Operand& op, int index) {
  const std::string where = "operand " + std::to_string(index + 1) + ": ";
  if (op.base == AddressBase::kRegister) {
    if (op.reg >= f.registers.size()) return "internal: register index out of range";
    const Register& r = f.registers[op.reg];
    if (!(IsIntegerType(r.type) || IsBitType(r.type)) || TypeSize(r.type) < 4 ||
        TypeSize(r.type) > 8) {
      return where + "address register " + r.name + " must be a 32- or 64-bit integer";
    }
  } else if (op.base == AddressBase::kSymbol) {
    if (op.symbol.kind == Symbol::Kind::kFunction)
      return where + "a function is not a data address";
    const Variable* var = ResolveVariable(module, f, op.symbol);
    if (var == nullptr) return "internal: symbol index out of range";
    if (inst.space != StateSpace::kNone && var->space != inst.space) {
      return where + "'" + var->name + "' is in ." + std::string(StateSpaceName(var->space)) +
             ", not ." + std::string(StateSpaceName(inst.space));
    }
    if (inst.opcode != Opcode::kLd && inst.opcode != Opcode::kLdu && f.is_entry &&
        op.symbol.kind == Symbol::Kind::kParam) {
      return where + "kernel parameters are read-only";
    }
  }
  return "";
}

std::string CheckVector(const Function& f, const Instruction& inst, const Operand& op, T elem,
                        bool relaxed, bool dest, int index) {
  const std::string where = "operand " + std::to_string(index + 1) + ": ";
  for (const Operand& e : op.elements) {
    if (e.kind == OperandKind::kRegister) {
      if (e.negated) return where + "'!' is not valid here";
      std::string err = CheckRegister(f, e.reg, elem, relaxed, index);
      if (!err.empty()) return err;
    } else if (e.kind == OperandKind::kImmediate) {
      if (dest) return where + "an immediate cannot be a destination";
      std::string err = CheckImmediate(e, elem, index);
      if (!err.empty()) return err;
    } else if (e.kind == OperandKind::kSink) {
      if (!dest) return where + "'_' is only valid in a destination";
    } else {
      return where + "vector elements must be registers or immediates";
    }
  }
  (void)inst;
  return "";
}

}  // namespace

std::string CheckOperands(const Module& module, const Function& function, const Instruction& inst) {
  if (inst.opcode == Opcode::kCall) return CheckCall(module, function, inst);
  std::vector<Slot> slots;
  Signature(inst, &slots);
  size_t required = 0;
  for (const Slot& slot : slots) required += slot.optional ? 0 : 1;
  size_t count = inst.operands.size();
  // bar.red's second source (the thread count) may be left out.
  if (inst.opcode == Opcode::kBar && inst.Has(kFlagRed) && count == 3) {
    slots.erase(slots.begin() + 2);
    required = 3;
  }
  if (count < required || count > slots.size()) {
    std::string expected = std::to_string(required);
    if (slots.size() != required) expected += "-" + std::to_string(slots.size());
    return "expected " + expected + " operand" + (slots.size() == 1 ? "" : "s") + ", got " +
           std::to_string(count);
  }
  for (size_t i = 0; i < count; ++i) {
    const Slot& slot = slots[i];
    const Operand& op = inst.operands[i];
    const int index = static_cast<int>(i);
    const std::string where = "operand " + std::to_string(i + 1) + ": ";
    auto reject = [&]() { return where + KindName(op.kind) + " is not valid here"; };
    switch (op.kind) {
      case OperandKind::kRegister: {
        if ((slot.accept & kReg) == 0) return reject();
        if (op.negated && (slot.accept & kNeg) == 0) return where + "'!' is not valid here";
        std::string err = CheckRegister(function, op.reg, slot.type, slot.relaxed, index);
        if (!err.empty()) return err;
        break;
      }
      case OperandKind::kRegisterPair: {
        if ((slot.accept & kPair) == 0) return reject();
        std::string err = CheckRegister(function, op.reg, slot.type, false, index);
        if (err.empty()) err = CheckRegister(function, op.reg2, T::kPred, false, index);
        if (!err.empty()) return err;
        break;
      }
      case OperandKind::kSpecial: {
        if ((slot.accept & kSreg) == 0) return reject();
        const T st = SpecialRegisterType(op.sreg);
        if (!RegisterTypeFits(st, slot.type, slot.relaxed)) {
          return where + std::string(SpecialRegisterName(op.sreg)) + " is ." +
                 std::string(TypeName(st)) + ", expected ." + std::string(TypeName(slot.type));
        }
        break;
      }
      case OperandKind::kImmediate: {
        if ((slot.accept & kImm) == 0) return reject();
        std::string err = CheckImmediate(op, slot.type, index);
        if (!err.empty()) return err;
        if (inst.opcode == Opcode::kLop3 && (op.imm_kind != ImmKind::kInt || op.imm_bits > 255)) {
          return where + "lop3's lookup table must be an integer 0..255";
        }
        break;
      }
      case OperandKind::kAddress: {
        if ((slot.accept & kAddr) == 0) return reject();
        std::string err = CheckAddress(module, function, inst, op, index);
        if (!err.empty()) return err;
        break;
      }
      case OperandKind::kSymbol: {
        if ((slot.accept & kSym) == 0) return reject();
        // An address in a register: the type must be a 32/64-bit integer.
        if (!(IsIntegerType(slot.type) || IsBitType(slot.type)) || TypeSize(slot.type) < 4) {
          return where + "an address needs a 32- or 64-bit integer type";
        }
        if (inst.opcode == Opcode::kCvta && op.symbol.kind == Symbol::Kind::kFunction) {
          return where + "cvta of a function";
        }
        break;
      }
      case OperandKind::kLabel:
        if ((slot.accept & kLabelOp) == 0) return reject();
        break;
      case OperandKind::kVector: {
        if ((slot.accept & kVec) == 0) return reject();
        const size_t n = op.elements.size();
        T elem = slot.type;
        if (inst.opcode == Opcode::kMov) {
          // Pack/unpack: {a, b} <-> one register twice as wide; the other operand must be scalar.
          if (n != 2 && n != 4) return where + "a vector needs 2 or 4 elements";
          if (!IsBitType(inst.type) || TypeSize(inst.type) < 2 * n) {
            return where + "vector mov needs a .b16/.b32/.b64 type at least as wide as its parts";
          }
          elem = BitsOfSize(TypeSize(inst.type) / static_cast<uint32_t>(n));
          const Operand& other = inst.operands[i == 0 ? 1 : 0];
          if (inst.operands.size() == 2 && other.kind == OperandKind::kVector) {
            return where + "mov cannot move a vector to a vector";
          }
        } else if (n != inst.vector) {
          return where + "expected a vector of " + std::to_string(inst.vector) + " elements, got " +
                 std::to_string(n);
        }
        std::string err = CheckVector(function, inst, op, elem, slot.relaxed, slot.dest, index);
        if (!err.empty()) return err;
        break;
      }
      case OperandKind::kSink:
      case OperandKind::kNone:
        return reject();
    }
    if (slot.dest && op.kind != OperandKind::kRegister && op.kind != OperandKind::kRegisterPair &&
        op.kind != OperandKind::kVector) {
      return where + "a destination must be a register";
    }
  }
  return "";
}

std::string CheckCall(const Module& module, const Function& function, const Instruction& inst) {
  if (inst.callee >= module.functions.size()) return "internal: callee index out of range";
  const Function& callee = module.functions[inst.callee];
  if (callee.is_entry) return "cannot call kernel '" + callee.name + "'";
  const size_t results = inst.call_results;
  const size_t args = inst.operands.size() - results;
  if (results != callee.returns.size()) {
    return "'" + callee.name + "' returns " + std::to_string(callee.returns.size()) +
           " value(s), the call takes " + std::to_string(results);
  }
  if (args != callee.params.size()) {
    return "'" + callee.name + "' takes " + std::to_string(callee.params.size()) +
           " argument(s), the call passes " + std::to_string(args);
  }
  for (size_t i = 0; i < inst.operands.size(); ++i) {
    const Operand& op = inst.operands[i];
    const Variable& formal = i < results ? callee.returns[i] : callee.params[i - results];
    if (op.kind != OperandKind::kSymbol || op.symbol.kind == Symbol::Kind::kFunction) {
      return "call operand " + std::to_string(i + 1) + " must be a .param variable";
    }
    const Variable* actual = ResolveVariable(module, function, op.symbol);
    if (actual == nullptr || actual->space != StateSpace::kParam) {
      return "call operand " + std::to_string(i + 1) + " must be a .param variable";
    }
    if (actual->SizeBytes() != formal.SizeBytes()) {
      return "call operand " + std::to_string(i + 1) + " ('" + actual->name + "', " +
             std::to_string(actual->SizeBytes()) + " bytes) does not match parameter '" +
             formal.name + "' (" + std::to_string(formal.SizeBytes()) + " bytes)";
    }
  }
  return "";
}

}  // namespace gpuvm::ptx
