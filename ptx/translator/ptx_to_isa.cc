// PTX -> GVISA mappings (ptx_to_isa.h). The modifier mappings are tables indexed by the PTX enum,
// checked against the enums' sizes at compile time.
#include "ptx/translator/ptx_to_isa.h"

#include <cstring>
#include <iterator>

namespace gpuvm::ptx::translator {

using IT = isa::Type;

namespace {

// table[index] for an enum index, or `fallback` past the table's end.
template <typename T, size_t N, typename Enum>
constexpr T At(const T (&table)[N], Enum index, T fallback) {
  const auto i = static_cast<size_t>(index);
  return i < N ? table[i] : fallback;
}

}  // namespace

bool IsF16Like(ScalarType t) {
  return t == ScalarType::kF16 || t == ScalarType::kF16x2 || t == ScalarType::kBF16 ||
         t == ScalarType::kBF16x2;
}
bool Is16(ScalarType t) { return TypeSize(t) == 2 && !IsF16Like(t); }
bool IsF(ScalarType t) { return t == ScalarType::kF32 || t == ScalarType::kF64; }

IT MemType(ScalarType t) {
  switch (t) {
    case ScalarType::kB8:
    case ScalarType::kU8:
      return IT::kU8;
    case ScalarType::kS8:
      return IT::kS8;
    case ScalarType::kB16:
    case ScalarType::kU16:
    case ScalarType::kF16:
    case ScalarType::kBF16:
      return IT::kU16;
    case ScalarType::kS16:
      return IT::kS16;
    default:
      return AluType(t);  // 32/64-bit integers and floats; b32, u32, f16x2, bf16x2 as u32
  }
}

IT AluType(ScalarType t) {
  switch (t) {
    case ScalarType::kS16:
    case ScalarType::kS32:
      return IT::kS32;
    case ScalarType::kS64:
      return IT::kS64;
    case ScalarType::kB64:
    case ScalarType::kU64:
      return IT::kU64;
    case ScalarType::kF32:
      return IT::kF32;
    case ScalarType::kF64:
      return IT::kF64;
    default:
      return IT::kU32;
  }
}

VKind KindOf(ScalarType t) {
  if (t == ScalarType::kPred) return VKind::kPred;
  return TypeSize(t) == 8 ? VKind::kReg64 : VKind::kReg32;
}

uint8_t RoundingMod(Rounding r) {
  // PTX's roundings are numbered as the ISA's (none = the ISA's default).
  static_assert(static_cast<uint8_t>(Rounding::kRn) == static_cast<uint8_t>(isa::Rounding::kRn) &&
                static_cast<uint8_t>(Rounding::kRp) == static_cast<uint8_t>(isa::Rounding::kRp) &&
                static_cast<uint8_t>(Rounding::kRni) == static_cast<uint8_t>(isa::Rounding::kRni) &&
                static_cast<uint8_t>(Rounding::kRpi) == static_cast<uint8_t>(isa::Rounding::kRpi));
  return r <= Rounding::kRpi ? static_cast<uint8_t>(r) : 0;
}

uint8_t RoundSatMod(const Instruction& in) {
  return RoundingMod(in.rounding) | (in.Has(kFlagSat) ? isa::kModSat : 0);
}

uint64_t ImmBits(const Operand& op, ScalarType t) {
  if (t == ScalarType::kF32) {
    if (op.imm_kind == ImmKind::kF32) return op.imm_bits & 0xffffffffu;
    float f = op.ImmAsFloat();
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
  }
  if (t == ScalarType::kF64) {
    if (op.imm_kind == ImmKind::kF64) return op.imm_bits;
    double d = op.ImmAsDouble();
    uint64_t b;
    memcpy(&b, &d, 8);
    return b;
  }
  uint64_t bits = op.imm_bits;
  const uint32_t size = TypeSize(t);
  if (size < 8) bits &= (uint64_t{1} << (size * 8)) - 1;
  return bits;
}

std::optional<IsaCompare> CompareOf(CompareOp op) {
  using C = isa::Compare;
  // Indexed by CompareOp (kNone first).
  static constexpr IsaCompare kTable[] = {
      {C::kEq, false},  {C::kEq, false},  {C::kNe, false},  {C::kLt, false},  {C::kLe, false},
      {C::kGt, false},  {C::kGe, false},  {C::kLt, true},   {C::kLe, true},   {C::kGt, true},
      {C::kGe, true},   {C::kEqu, false}, {C::kNeu, false}, {C::kLtu, false}, {C::kLeu, false},
      {C::kGtu, false}, {C::kGeu, false}, {C::kNum, false}, {C::kNan, false}};
  static_assert(std::size(kTable) == static_cast<size_t>(CompareOp::kNan) + 1);
  const auto i = static_cast<size_t>(op);
  if (op == CompareOp::kNone || i >= std::size(kTable)) return std::nullopt;
  return kTable[i];
}

isa::PlopOp PlopOf(BoolOp op) {
  return op == BoolOp::kAnd  ? isa::PlopOp::kAnd
         : op == BoolOp::kOr ? isa::PlopOp::kOr
                             : isa::PlopOp::kXor;
}

std::optional<isa::AtomOp> AtomOpOf(AtomicOp op) {
  // add .. xor are numbered as the ISA's, one higher (PTX's kNone is 0).
  static_assert(static_cast<int>(AtomicOp::kAdd) - 1 == static_cast<int>(isa::AtomOp::kAdd) &&
                static_cast<int>(AtomicOp::kCas) - 1 == static_cast<int>(isa::AtomOp::kCas) &&
                static_cast<int>(AtomicOp::kXor) - 1 == static_cast<int>(isa::AtomOp::kXor));
  if (op < AtomicOp::kAdd || op > AtomicOp::kXor) return std::nullopt;
  return static_cast<isa::AtomOp>(static_cast<uint8_t>(op) - 1);
}

std::optional<isa::Space> SpaceOf(StateSpace space) {
  switch (space) {
    case StateSpace::kNone:
      return isa::Space::kGeneric;
    case StateSpace::kGlobal:
      return isa::Space::kGlobal;
    case StateSpace::kShared:
      return isa::Space::kShared;
    case StateSpace::kLocal:
    case StateSpace::kParam:
      return isa::Space::kLocal;
    case StateSpace::kConst:
      return isa::Space::kConst;
    default:
      return std::nullopt;
  }
}

isa::VoteMode VoteModeOf(VoteMode mode) {
  using M = isa::VoteMode;
  static constexpr M kTable[] = {M::kBallot, M::kAll, M::kAny, M::kUni, M::kBallot};
  static_assert(std::size(kTable) == static_cast<size_t>(VoteMode::kBallot) + 1);
  return At(kTable, mode, M::kBallot);
}

isa::ShflMode ShflModeOf(ShuffleMode mode) {
  using M = isa::ShflMode;
  static constexpr M kTable[] = {M::kIdx, M::kUp, M::kDown, M::kBfly, M::kIdx};
  static_assert(std::size(kTable) == static_cast<size_t>(ShuffleMode::kIdx) + 1);
  return At(kTable, mode, M::kIdx);
}

std::optional<isa::SpecialReg> SpecialRegOf(SpecialRegister sreg, uint8_t component) {
  using S = isa::SpecialReg;
  struct Entry {
    SpecialRegister ptx;
    S isa;
    bool has_component;  // .x/.y/.z add 0/1/2
  };
  static constexpr Entry kTable[] = {
      {SpecialRegister::kTid, S::kTidX, true},
      {SpecialRegister::kNtid, S::kNtidX, true},
      {SpecialRegister::kCtaid, S::kCtaidX, true},
      {SpecialRegister::kNctaid, S::kNctaidX, true},
      {SpecialRegister::kLaneid, S::kLaneId, false},
      {SpecialRegister::kWarpid, S::kWarpId, false},
      {SpecialRegister::kNwarpid, S::kNWarpId, false},
      {SpecialRegister::kSmid, S::kSmId, false},
      {SpecialRegister::kNsmid, S::kNSmId, false},
      {SpecialRegister::kGridid, S::kGridId, false},
      {SpecialRegister::kLanemaskEq, S::kLanemaskEq, false},
      {SpecialRegister::kLanemaskLe, S::kLanemaskLe, false},
      {SpecialRegister::kLanemaskLt, S::kLanemaskLt, false},
      {SpecialRegister::kLanemaskGe, S::kLanemaskGe, false},
      {SpecialRegister::kLanemaskGt, S::kLanemaskGt, false},
      {SpecialRegister::kClock, S::kClock, false},
      {SpecialRegister::kClock64, S::kClock64, false},
      {SpecialRegister::kGlobaltimer, S::kGlobalTimer, false},
      {SpecialRegister::kDynamicSmemSize, S::kDynamicSmemSize, false},
      {SpecialRegister::kTotalSmemSize, S::kTotalSmemSize, false},
  };
  for (const Entry& e : kTable) {
    if (e.ptx != sreg) continue;
    if (!e.has_component) return e.isa;
    return static_cast<S>(static_cast<uint8_t>(e.isa) + component);
  }
  return std::nullopt;
}

}  // namespace gpuvm::ptx::translator
