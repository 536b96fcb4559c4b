#include "gpu/isa/encoding.h"

#include <cstring>
#include <initializer_list>
#include <string>

#include "base/hex.h"
#include "gpu/isa/opcode_table.h"

namespace gpuvm::isa {
namespace {

// Field checks. Each returns an error naming the field; `what` is the opcode name.
class Checker {
 public:
  Checker(const Instruction& inst, const KernelHeader& header) : inst_(inst), header_(header) {}

  Status Error(std::string message) const {
    return Status::InvalidArgument(std::string(OpcodeName(inst_.op)) + ": " + message);
  }

  // A source register occupying `rows` 32-bit rows (RZ allowed).
  Status Src(uint8_t r, int rows, const char* field) const {
    if (r == kRegZero) return Status::Ok();
    if (r + rows > header_.reg_count) {
      return Error(std::string(field) + " r" + std::to_string(r) + (rows == 2 ? " (64-bit)" : "") +
                   " is outside the kernel's " + std::to_string(header_.reg_count) + " registers");
    }
    return Status::Ok();
  }
  // Destinations obey the same rule (RZ discards).
  Status Dst(uint8_t r, int rows) const { return Src(r, rows, "destination"); }
  Status SrcPred(uint8_t p, const char* field) const {
    if (p == kPredTrue || p < header_.pred_count) return Status::Ok();
    return Error(std::string(field) + " p" + std::to_string(p) + " is outside the kernel's " +
                 std::to_string(header_.pred_count) + " predicates");
  }
  Status DstPred(uint8_t p) const {
    if (p == kPredTrue) return Error("PT is not a destination");
    return SrcPred(p, "destination");
  }
  Status Zero(uint8_t v, const char* field) const {
    if (v != 0) return Error(std::string(field) + " must be zero, is " + std::to_string(v));
    return Status::Ok();
  }
  Status NoImm() const {
    if (inst_.has_imm) return Error("takes no immediate");
    return Status::Ok();
  }
  // Either register b (rows) or the immediate; an immediate for a 32-bit operand must be a 32-bit
  // value (zero- or sign-extended).
  Status SrcOrImm(uint8_t r, int rows, const char* field) const {
    if (!inst_.has_imm) return Src(r, rows, field);
    GPUVM_RETURN_IF_ERROR(Zero(r, field));
    return ImmFits(rows);
  }
  Status ImmFits(int rows) const {
    if (rows == 2) return Status::Ok();
    uint64_t high = inst_.imm >> 32;
    if (inst_.type == Type::kF32 && high != 0)
      return Error("f32 immediate " + Hex(inst_.imm) + " has high bits");
    if (high == 0 || (high == 0xffffffffu && (inst_.imm & 0x80000000u))) return Status::Ok();
    return Error("immediate " + Hex(inst_.imm) + " does not fit 32 bits");
  }
  Status TypeNone() const {
    if (static_cast<uint8_t>(inst_.type) != 0) return Error("has no type; the field must be zero");
    return Status::Ok();
  }
  Status Type2None() const { return Zero(inst_.type2, "type2"); }

 private:
  const Instruction& inst_;
  const KernelHeader& header_;
};

bool IsInt3264(Type t) {
  return t == Type::kU32 || t == Type::kS32 || t == Type::kU64 || t == Type::kS64;
}

// Float rounding modifiers (rn/rz/rm/rp) for arithmetic.
Status CheckFloatArithMod(const Checker& c, const Instruction& inst, bool allow_sat) {
  uint8_t round = inst.mod & kModRoundMask;
  uint8_t rest = inst.mod & ~(kModRoundMask | (allow_sat ? kModSat : 0));
  if (round > static_cast<uint8_t>(Rounding::kRp))
    return c.Error("rounding must be default/rn/rz/rm/rp");
  if (rest != 0) return c.Error("unknown modifier bits " + Hex(rest));
  return Status::Ok();
}

Status CheckIntOrFloatArith(const Checker& c, const Instruction& inst, bool int_sat_ok) {
  if (IsFloat(inst.type)) return CheckFloatArithMod(c, inst, /*allow_sat=*/true);
  uint8_t allowed = (int_sat_ok && inst.type == Type::kS32) ? kModSat : 0;
  if (inst.mod & ~allowed) return c.Error("unknown modifier bits " + Hex(inst.mod));
  return Status::Ok();
}

constexpr uint16_t TypeBits(std::initializer_list<Type> types) {
  uint16_t bits = 0;
  for (Type t : types) bits |= uint16_t{1} << static_cast<int>(t);
  return bits;
}

// The type field against the opcode's TypeRule.
Status CheckType(const Checker& c, TypeRule rule, const Instruction& inst) {
  using enum Type;
  static constexpr struct {
    TypeRule rule;
    uint16_t types;
    const char* what;  // "type must be <what>"
  } kTypeSets[] = {
      {TypeRule::kAlu32or64, TypeBits({kU32, kS32, kU64, kS64, kF32, kF64}),
       "a 32- or 64-bit type"},
      {TypeRule::kAlu, TypeBits({kU32, kS32, kU64, kS64, kF32, kF64}), "u32/s32/u64/s64/f32/f64"},
      {TypeRule::kInt, TypeBits({kU32, kS32, kU64, kS64}), "u32/s32/u64/s64"},
      {TypeRule::kIntSource, TypeBits({kU32, kS32, kU64, kS64}), "u32/s32/u64/s64 (the source)"},
      {TypeRule::kWideSource, TypeBits({kU32, kS32}), "u32/s32 (the sources)"},
      {TypeRule::kFloat, TypeBits({kF32, kF64}), "f32/f64"},
      {TypeRule::kSignedOrFloat, TypeBits({kS32, kS64, kF32, kF64}), "s32/s64/f32/f64"},
      {TypeRule::kU32U64, TypeBits({kU32, kU64}), "u32/u64"},
      {TypeRule::kU32, TypeBits({kU32}), "u32"},
      {TypeRule::kU64, TypeBits({kU64}), "u64"},
  };
  const Type t = inst.type;
  if (rule == TypeRule::kNone) return c.TypeNone();
  if (rule == TypeRule::kSpecialReg) {
    if (inst.a >= kSpecialRegCount) return c.Error("special register " + std::to_string(inst.a));
    const bool wide = IsSpecialReg64(static_cast<SpecialReg>(inst.a));
    if (t != (wide ? kU64 : kU32)) {
      return c.Error(std::string("special register ") +
                     std::string(SpecialRegName(static_cast<SpecialReg>(inst.a))) + " needs type " +
                     (wide ? "u64" : "u32"));
    }
    return Status::Ok();
  }
  for (const auto& set : kTypeSets) {
    if (set.rule != rule) continue;
    if ((set.types >> static_cast<int>(t)) & 1) return Status::Ok();
    return c.Error(std::string("type must be ") + set.what);
  }
  return Status::Ok();  // kForm: the form checks it
}

// The mod field against the opcode's ModRule (kRegister: checked as an operand).
Status CheckMod(const Checker& c, ModRule rule, const Instruction& inst) {
  const uint8_t mod = inst.mod;
  switch (rule) {
    case ModRule::kZero:
      return c.Zero(mod, "mod");
    case ModRule::kArith:
      return CheckIntOrFloatArith(c, inst, /*int_sat_ok=*/false);
    case ModRule::kArithSat:
      return CheckIntOrFloatArith(c, inst, /*int_sat_ok=*/true);
    case ModRule::kRound:
      return CheckFloatArithMod(c, inst, /*allow_sat=*/false);
    case ModRule::kRoundSat:
      return CheckFloatArithMod(c, inst, /*allow_sat=*/true);
    case ModRule::kSelect:
      if (mod & ~1) return c.Error("unknown modifier bits " + Hex(mod));
      return Status::Ok();
    case ModRule::kPrmt:
      if (mod >= kPrmtModeCount) return c.Error("mode " + std::to_string(mod));
      return Status::Ok();
    case ModRule::kShf:
      if (mod & ~(kShfRight | kShfClamp)) return c.Error("unknown modifier bits " + Hex(mod));
      return Status::Ok();
    case ModRule::kTestp:
      if (mod >= kTestpModeCount) return c.Error("mode " + std::to_string(mod));
      return Status::Ok();
    case ModRule::kCompare:
      if (mod >= kCompareCount) return c.Error("comparison " + std::to_string(mod));
      if (mod >= static_cast<uint8_t>(Compare::kEqu) && !IsFloat(inst.type)) {
        return c.Error("unordered comparisons are for floats");
      }
      return Status::Ok();
    case ModRule::kPlop:
      if ((mod & kPlopOpMask) > static_cast<uint8_t>(PlopOp::kXor) ||
          (mod & ~(kPlopOpMask | kPlopNegA | kPlopNegB))) {
        return c.Error("modifier " + Hex(mod));
      }
      return Status::Ok();
    case ModRule::kBarrier:
      if (mod >= kMaxBarriers) return c.Error("barrier id " + std::to_string(mod));
      return Status::Ok();
    case ModRule::kFence:
      if (mod > 2) return c.Error("fence level " + std::to_string(mod));
      return Status::Ok();
    case ModRule::kTrap:
      if (mod > uint8_t(TrapCode::kAssert)) return c.Error("trap code " + std::to_string(mod));
      return Status::Ok();
    case ModRule::kRegister:
    case ModRule::kForm:
      break;
  }
  return Status::Ok();
}

// A kGeneric opcode: everything its table entry says.
Status CheckGeneric(const Checker& c, const OpcodeInfo& info, const Instruction& inst) {
  GPUVM_RETURN_IF_ERROR(c.Type2None());
  GPUVM_RETURN_IF_ERROR(CheckType(c, info.types, inst));
  GPUVM_RETURN_IF_ERROR(CheckMod(c, info.mod, inst));
  bool takes_imm = false;
  for (const OperandSpec& o : info.operands.operands()) {
    takes_imm |= o.kind == OperandKind::kRegOrImm;
  }
  if (info.HasTarget()) {
    if (!inst.has_imm) return c.Error("needs its target in the extension word");
  } else if (!takes_imm) {
    GPUVM_RETURN_IF_ERROR(c.NoImm());
  }
  static constexpr struct {
    Field field;
    const char* name;
  } kFields[] = {{Field::kD, "d"}, {Field::kA, "a"}, {Field::kB, "b"}, {Field::kC, "c"}};
  for (const auto& f : kFields) {
    if (!info.OperandIn(f.field)) GPUVM_RETURN_IF_ERROR(c.Zero(FieldValue(inst, f.field), f.name));
  }
  const int type_rows = TypeRows(inst.type);
  for (const OperandSpec& o : info.operands.operands()) {
    const uint8_t v = FieldValue(inst, o.field);
    const int rows = o.rows != 0 ? o.rows : type_rows;
    // The name in messages; a register in the mod field says so.
    const std::string name =
        o.field == Field::kMod ? std::string(o.name) + " (mod)" : std::string(o.name);
    switch (o.kind) {
      case OperandKind::kReg:
        GPUVM_RETURN_IF_ERROR(o.field == Field::kD ? c.Dst(v, rows) : c.Src(v, rows, name.c_str()));
        break;
      case OperandKind::kRegOrImm:
        GPUVM_RETURN_IF_ERROR(c.SrcOrImm(v, rows, name.c_str()));
        break;
      case OperandKind::kPred:
        GPUVM_RETURN_IF_ERROR(o.field == Field::kD ? c.DstPred(v) : c.SrcPred(v, name.c_str()));
        break;
      case OperandKind::kSpecialReg:  // the type rule checked it
      case OperandKind::kNumber:      // the mod rule checked it
      case OperandKind::kTarget:      // DecodeKernel/EncodeKernel check it
        break;
    }
  }
  return Status::Ok();
}

Status CheckCvt(const Checker& c, const Instruction& inst) {
  if (!IsValidType(inst.type2))
    return c.Error("source type " + std::to_string(inst.type2) + " invalid");
  Type dst = inst.type;
  Type src = static_cast<Type>(inst.type2);
  uint8_t round = inst.mod & kModRoundMask;
  if (inst.mod & ~(kModRoundMask | kModSat))
    return c.Error("unknown modifier bits " + Hex(inst.mod));
  if (round > static_cast<uint8_t>(Rounding::kRpi))
    return c.Error("rounding " + std::to_string(round));
  bool integral_round = round >= static_cast<uint8_t>(Rounding::kRni);
  bool plain_round = round >= static_cast<uint8_t>(Rounding::kRn) && !integral_round;
  if (!IsFloatFormat(dst) && !IsFloatFormat(src)) {
    if (round != 0) return c.Error("integer to integer conversion takes no rounding");
  } else if (IsFloatFormat(src) && !IsFloatFormat(dst)) {
    if (plain_round) return c.Error("float to integer conversion needs rni/rzi/rmi/rpi");
  } else if (!IsFloatFormat(src) && IsFloatFormat(dst)) {
    if (integral_round) return c.Error("integer to float conversion needs rn/rz/rm/rp");
  }
  GPUVM_RETURN_IF_ERROR(c.Dst(inst.d, TypeRows(dst)));
  GPUVM_RETURN_IF_ERROR(c.NoImm());
  GPUVM_RETURN_IF_ERROR(c.Zero(inst.b, "b"));
  GPUVM_RETURN_IF_ERROR(c.Zero(inst.c, "c"));
  return c.Src(inst.a, TypeRows(src), "a");
}

Status CheckMemory(const Checker& c, const Instruction& inst) {
  uint8_t space = inst.mod & kModSpaceMask;
  if (space > static_cast<uint8_t>(Space::kConst)) return c.Error("space " + std::to_string(space));
  if (inst.mod & ~(kModSpaceMask | kModAddr64 | kModWideReg | kModPair)) {
    return c.Error("unknown modifier bits " + Hex(inst.mod));
  }
  if (static_cast<Space>(space) == Space::kConst) {
    if (inst.op == Opcode::kSt) return c.Error("constant space is read-only");
    if (inst.type2 >= kConstBanks) return c.Error("constant bank " + std::to_string(inst.type2));
  } else {
    GPUVM_RETURN_IF_ERROR(c.Type2None());
  }
  if (inst.type == Type::kF16) return c.Error("f16 is a conversion type only (use u16 for memory)");
  if (inst.mod & kModPair) {
    if (inst.type != Type::kU64 || (inst.mod & kModWideReg)) return c.Error("a pair is two u64");
    if (static_cast<Space>(space) != Space::kGlobal && static_cast<Space>(space) != Space::kGeneric)
      return c.Error("pairs are global or generic accesses");
    GPUVM_RETURN_IF_ERROR(c.Src(inst.a, (inst.mod & kModAddr64) ? 2 : 1, "address"));
    if (inst.op == Opcode::kLd) {
      GPUVM_RETURN_IF_ERROR(c.Zero(inst.c, "c"));
      GPUVM_RETURN_IF_ERROR(c.Dst(inst.b, 2));
      return c.Dst(inst.d, 2);
    }
    GPUVM_RETURN_IF_ERROR(c.Zero(inst.d, "d"));
    GPUVM_RETURN_IF_ERROR(c.Src(inst.b, 2, "value"));
    return c.Src(inst.c, 2, "second value");
  }
  bool wide = inst.mod & kModWideReg;
  if (wide && Is64(inst.type)) return c.Error("wide register flag on a 64-bit access");
  int value_rows = wide ? 2 : TypeRows(inst.type);
  GPUVM_RETURN_IF_ERROR(c.Src(inst.a, (inst.mod & kModAddr64) ? 2 : 1, "address"));
  GPUVM_RETURN_IF_ERROR(c.Zero(inst.c, "c"));
  if (inst.op == Opcode::kLd) {
    GPUVM_RETURN_IF_ERROR(c.Zero(inst.b, "b"));
    return c.Dst(inst.d, value_rows);
  }
  GPUVM_RETURN_IF_ERROR(c.Zero(inst.d, "d"));
  return c.Src(inst.b, value_rows, "value");
}

Status CheckAtom(const Checker& c, const Instruction& inst) {
  uint8_t space = inst.mod & kModSpaceMask;
  if (space != static_cast<uint8_t>(Space::kGeneric) &&
      space != static_cast<uint8_t>(Space::kGlobal) &&
      space != static_cast<uint8_t>(Space::kShared)) {
    return c.Error("atomics work on generic, global or shared space");
  }
  if (inst.mod & ~(kModSpaceMask | kModAddr64))
    return c.Error("unknown modifier bits " + Hex(inst.mod));
  if (inst.type2 >= kAtomOpCount) return c.Error("atomic op " + std::to_string(inst.type2));
  AtomOp op = static_cast<AtomOp>(inst.type2);
  Type t = inst.type;
  bool ok = false;
  switch (op) {
    case AtomOp::kAdd:
      ok = t == Type::kU32 || t == Type::kS32 || t == Type::kU64 || t == Type::kF32 ||
           t == Type::kF64;
      break;
    case AtomOp::kMin:
    case AtomOp::kMax:
      ok = IsInt3264(t);
      break;
    case AtomOp::kInc:
    case AtomOp::kDec:
      ok = t == Type::kU32;
      break;
    case AtomOp::kCas:
    case AtomOp::kExch:
    case AtomOp::kAnd:
    case AtomOp::kOr:
    case AtomOp::kXor:
      ok = IsInt3264(t);
      break;
  }
  if (!ok)
    return c.Error("atomic op " + std::to_string(inst.type2) + " does not take type " +
                   std::string(TypeName(t)));
  int rows = TypeRows(t);
  GPUVM_RETURN_IF_ERROR(c.Dst(inst.d, rows));
  GPUVM_RETURN_IF_ERROR(c.Src(inst.a, (inst.mod & kModAddr64) ? 2 : 1, "address"));
  GPUVM_RETURN_IF_ERROR(c.Src(inst.b, rows, "b"));
  if (op == AtomOp::kCas) return c.Src(inst.c, rows, "c");
  return c.Zero(inst.c, "c");
}

Status CheckShfl(const Checker& c, const Instruction& inst) {
  GPUVM_RETURN_IF_ERROR(c.Type2None());
  GPUVM_RETURN_IF_ERROR(c.TypeNone());
  if (!inst.has_imm) return c.Error("needs its extension word");
  if (inst.mod & ~(kShflModeMask | kShflBImm | kShflCImm)) {
    return c.Error("unknown modifier bits " + Hex(inst.mod));
  }
  if (inst.imm >> 54) return c.Error("extension bits 54-63 must be zero");
  uint8_t pred = (inst.imm >> 48) & 0x3f;
  if (pred != kPredTrue) GPUVM_RETURN_IF_ERROR(c.DstPred(pred));
  GPUVM_RETURN_IF_ERROR(c.Dst(inst.d, 1));
  GPUVM_RETURN_IF_ERROR(c.Src(inst.a, 1, "a"));
  if (inst.mod & kShflBImm) {
    GPUVM_RETURN_IF_ERROR(c.Zero(inst.b, "b"));
  } else {
    GPUVM_RETURN_IF_ERROR(c.Src(inst.b, 1, "b"));
    if (inst.imm & 0xffffffffu) return c.Error("lane immediate set but b is a register");
  }
  if (inst.mod & kShflCImm) return c.Zero(inst.c, "c");
  if ((inst.imm >> 32) & 0xffff) return c.Error("c immediate set but c is a register");
  return c.Src(inst.c, 1, "c");
}

Status CheckVote(const Checker& c, const Instruction& inst) {
  GPUVM_RETURN_IF_ERROR(c.Type2None());
  GPUVM_RETURN_IF_ERROR(c.TypeNone());
  GPUVM_RETURN_IF_ERROR(c.NoImm());
  if (inst.mod & ~(kVoteModeMask | kVoteNegA))
    return c.Error("unknown modifier bits " + Hex(inst.mod));
  GPUVM_RETURN_IF_ERROR(c.Zero(inst.b, "b"));
  GPUVM_RETURN_IF_ERROR(c.Zero(inst.c, "c"));
  GPUVM_RETURN_IF_ERROR(c.SrcPred(inst.a, "a"));
  if (static_cast<VoteMode>(inst.mod & kVoteModeMask) == VoteMode::kBallot) return c.Dst(inst.d, 1);
  return c.DstPred(inst.d);
}

}  // namespace

Status ValidateInstruction(const Instruction& inst, const KernelHeader& header) {
  Checker c(inst, header);
  GPUVM_RETURN_IF_ERROR(c.SrcPred(inst.guard, "guard"));
  if (inst.guard == kPredTrue && inst.guard_negated) return c.Error("guard !PT never executes");
  if (!IsValidType(static_cast<uint8_t>(inst.type))) return c.Error("type field invalid");
  const OpcodeInfo* info = FindOpcode(inst.op);
  if (info == nullptr) {
    return Status::InvalidArgument("unknown opcode " + Hex(static_cast<uint8_t>(inst.op)));
  }
  switch (info->form) {
    case Form::kGeneric:
      return CheckGeneric(c, *info, inst);
    case Form::kCvt:
      return CheckCvt(c, inst);
    case Form::kLoad:
    case Form::kStore:
      return CheckMemory(c, inst);
    case Form::kAtom:
      return CheckAtom(c, inst);
    case Form::kShfl:
      return CheckShfl(c, inst);
    case Form::kVote:
      return CheckVote(c, inst);
  }
  return Status::Ok();
}

Status ValidateHeader(const KernelHeader& h) {
  if (h.magic != kKernelMagic)
    return Status::InvalidArgument("kernel magic " + Hex(h.magic) + " is not GVKN");
  if (h.version != kVersion) {
    return Status::InvalidArgument("kernel version " + std::to_string(h.version) + " unsupported");
  }
  if (h.header_bytes != kKernelHeaderBytes) {
    return Status::InvalidArgument("kernel header size " + std::to_string(h.header_bytes));
  }
  if (h.code_words == 0 || h.code_words > kMaxCodeWords) {
    return Status::InvalidArgument("code size " + std::to_string(h.code_words) + " words");
  }
  if (h.reg_count > kMaxRegisters) {
    return Status::InvalidArgument("register count " + std::to_string(h.reg_count));
  }
  if (h.pred_count > kMaxPredicates) {
    return Status::InvalidArgument("predicate count " + std::to_string(h.pred_count));
  }
  if (h.flags != 0) return Status::InvalidArgument("reserved flags set");
  if (h.shared_bytes > kMaxSharedBytes) {
    return Status::InvalidArgument("static shared size " + std::to_string(h.shared_bytes));
  }
  if (h.local_bytes > kMaxLocalBytes) {
    return Status::InvalidArgument("local size " + std::to_string(h.local_bytes));
  }
  if (h.param_bytes > kMaxParamBytes) {
    return Status::InvalidArgument("parameter size " + std::to_string(h.param_bytes));
  }
  if (h.max_threads > 1024)
    return Status::InvalidArgument("max threads " + std::to_string(h.max_threads));
  if (h.internal_shared_bytes > kMaxInternalSharedBytes ||
      h.internal_shared_bytes > h.shared_bytes) {
    return Status::InvalidArgument("internal shared size " +
                                   std::to_string(h.internal_shared_bytes));
  }
  return Status::Ok();
}

void WriteHeader(const KernelHeader& h, uint8_t out[kKernelHeaderBytes]) {
  memset(out, 0, kKernelHeaderBytes);
  auto put32 = [&](int off, uint32_t v) { memcpy(out + off, &v, 4); };
  auto put16 = [&](int off, uint16_t v) { memcpy(out + off, &v, 2); };
  put32(0x00, h.magic);
  put16(0x04, h.version);
  put16(0x06, h.header_bytes);
  put32(0x08, h.code_words);
  put16(0x0c, h.reg_count);
  out[0x0e] = h.pred_count;
  out[0x0f] = h.flags;
  put32(0x10, h.shared_bytes);
  put32(0x14, h.local_bytes);
  put32(0x18, h.param_bytes);
  put32(0x1c, h.max_threads);
  put32(0x20, h.internal_shared_bytes);
}

KernelHeader ReadHeader(const uint8_t in[kKernelHeaderBytes]) {
  KernelHeader h;
  auto get32 = [&](int off) {
    uint32_t v;
    memcpy(&v, in + off, 4);
    return v;
  };
  auto get16 = [&](int off) {
    uint16_t v;
    memcpy(&v, in + off, 2);
    return v;
  };
  h.magic = get32(0x00);
  h.version = get16(0x04);
  h.header_bytes = get16(0x06);
  h.code_words = get32(0x08);
  h.reg_count = get16(0x0c);
  h.pred_count = in[0x0e];
  h.flags = in[0x0f];
  h.shared_bytes = get32(0x10);
  h.local_bytes = get32(0x14);
  h.param_bytes = get32(0x18);
  h.max_threads = get32(0x1c);
  h.internal_shared_bytes = get32(0x20);
  return h;
}

Result<KernelHeader> DecodeKernelHeader(std::span<const uint8_t> bytes) {
  if (bytes.size() < kKernelHeaderBytes) {
    return Status::InvalidArgument("kernel image of " + std::to_string(bytes.size()) +
                                   " bytes is shorter than its header");
  }
  KernelHeader h = ReadHeader(bytes.data());
  GPUVM_RETURN_IF_ERROR(ValidateHeader(h));
  for (uint32_t i = 0x24; i < kKernelHeaderBytes; ++i) {
    if (bytes[i] != 0)
      return Status::InvalidArgument("reserved header byte " + Hex(i) + " is not zero");
  }
  return h;
}

namespace {

Instruction DecodeWord(uint64_t w) {
  using L = WordLayout;
  Instruction inst;
  inst.op = static_cast<Opcode>((w >> L::kOpcodeShift) & 0xff);
  inst.d = (w >> L::kDShift) & 0xff;
  inst.a = (w >> L::kAShift) & 0xff;
  inst.b = (w >> L::kBShift) & 0xff;
  inst.c = (w >> L::kCShift) & 0xff;
  inst.guard = (w >> L::kGuardShift) & 0x3f;
  inst.guard_negated = (w & L::kGuardNegated) != 0;
  inst.has_imm = (w & L::kExtended) != 0;
  inst.type = static_cast<Type>((w >> L::kTypeShift) & 0xf);
  inst.type2 = (w >> L::kType2Shift) & 0xf;
  inst.mod = (w >> L::kModShift) & 0xff;
  return inst;
}

// bra, call: the extension word holds a branch target.
bool HasTarget(Opcode op) {
  const OpcodeInfo* info = FindOpcode(op);
  return info != nullptr && info->HasTarget();
}

bool IsTerminator(const Instruction& inst) {
  const OpcodeInfo* info = FindOpcode(inst.op);
  return info != nullptr && info->Has(kEndsKernel) && inst.guard == kPredTrue &&
         !inst.guard_negated;
}

Status AtInstruction(Status s, size_t index, uint32_t word) {
  return s.WithContext("instruction " + std::to_string(index) + " (word " + std::to_string(word) +
                       ")");
}

}  // namespace

void AppendInstructionWords(const Instruction& inst, std::vector<uint64_t>* words) {
  using L = WordLayout;
  uint64_t w = static_cast<uint64_t>(inst.op) << L::kOpcodeShift;
  w |= static_cast<uint64_t>(inst.d) << L::kDShift;
  w |= static_cast<uint64_t>(inst.a) << L::kAShift;
  w |= static_cast<uint64_t>(inst.b) << L::kBShift;
  w |= static_cast<uint64_t>(inst.c) << L::kCShift;
  w |= static_cast<uint64_t>(inst.guard & 0x3f) << L::kGuardShift;
  if (inst.guard_negated) w |= L::kGuardNegated;
  if (inst.has_imm) w |= L::kExtended;
  w |= static_cast<uint64_t>(static_cast<uint8_t>(inst.type) & 0xf) << L::kTypeShift;
  w |= static_cast<uint64_t>(inst.type2 & 0xf) << L::kType2Shift;
  w |= static_cast<uint64_t>(inst.mod) << L::kModShift;
  words->push_back(w);
  if (inst.has_imm) words->push_back(inst.imm);
}

Result<Kernel> DecodeKernel(std::span<const uint8_t> bytes) {
  GPUVM_ASSIGN_OR_RETURN(KernelHeader header, DecodeKernelHeader(bytes));
  uint64_t expected = kKernelHeaderBytes + uint64_t{header.code_words} * 8;
  if (bytes.size() != expected) {
    return Status::InvalidArgument("kernel image is " + std::to_string(bytes.size()) +
                                   " bytes; header says " + std::to_string(expected));
  }
  Kernel kernel;
  kernel.header = header;
  const uint8_t* code = bytes.data() + kKernelHeaderBytes;
  // Word offset -> instruction index (or -1 for extension words), for branch targets.
  std::vector<int32_t> index_of_word(header.code_words, -1);
  kernel.code.reserve(header.code_words);
  for (uint32_t w = 0; w < header.code_words;) {
    uint64_t word;
    memcpy(&word, code + uint64_t{w} * 8, 8);
    Instruction inst = DecodeWord(word);
    if (inst.has_imm) {
      if (w + 1 >= header.code_words) {
        return AtInstruction(Status::InvalidArgument("extension word past the end of the code"),
                             kernel.code.size(), w);
      }
      memcpy(&inst.imm, code + uint64_t{w + 1} * 8, 8);
    }
    Status s = ValidateInstruction(inst, header);
    if (!s.ok()) return AtInstruction(s, kernel.code.size(), w);
    index_of_word[w] = static_cast<int32_t>(kernel.code.size());
    kernel.code.push_back(inst);
    w += inst.words();
  }
  for (size_t i = 0; i < kernel.code.size(); ++i) {
    Instruction& inst = kernel.code[i];
    if (!HasTarget(inst.op)) continue;
    if (inst.imm >= header.code_words || index_of_word[inst.imm] < 0) {
      return AtInstruction(
          Status::InvalidArgument("branch target word " + std::to_string(inst.imm) +
                                  " is not the start of an instruction"),
          i, 0);
    }
    inst.target = static_cast<uint32_t>(index_of_word[inst.imm]);
  }
  if (!IsTerminator(kernel.code.back())) {
    return Status::InvalidArgument(
        "the last instruction must be an unconditional exit, bra or trap (control would run off "
        "the code)");
  }
  return kernel;
}

Result<std::vector<uint8_t>> EncodeKernel(const Kernel& kernel) {
  if (kernel.code.empty())
    return Status::InvalidArgument("a kernel needs at least one instruction");
  std::vector<uint32_t> word_of_index(kernel.code.size() + 1);
  uint32_t words = 0;
  for (size_t i = 0; i < kernel.code.size(); ++i) {
    word_of_index[i] = words;
    words += HasTarget(kernel.code[i].op) ? 2 : kernel.code[i].words();
  }
  word_of_index[kernel.code.size()] = words;
  KernelHeader header = kernel.header;
  header.code_words = words;
  GPUVM_RETURN_IF_ERROR(ValidateHeader(header));
  std::vector<uint64_t> out;
  out.reserve(words);
  for (size_t i = 0; i < kernel.code.size(); ++i) {
    Instruction inst = kernel.code[i];
    if (HasTarget(inst.op)) {
      if (inst.target >= kernel.code.size()) {
        return AtInstruction(
            Status::InvalidArgument("branch target " + std::to_string(inst.target) +
                                    " is past the code"),
            i, word_of_index[i]);
      }
      inst.has_imm = true;
      inst.imm = word_of_index[inst.target];
    }
    Status s = ValidateInstruction(inst, header);
    if (!s.ok()) return AtInstruction(s, i, word_of_index[i]);
    AppendInstructionWords(inst, &out);
  }
  if (!IsTerminator(kernel.code.back())) {
    return Status::InvalidArgument(
        "the last instruction must be an unconditional exit, bra or trap");
  }
  std::vector<uint8_t> bytes(kKernelHeaderBytes + out.size() * 8);
  WriteHeader(header, bytes.data());
  memcpy(bytes.data() + kKernelHeaderBytes, out.data(), out.size() * 8);
  return bytes;
}

}  // namespace gpuvm::isa
