// The supported PTX instruction set, part 1: the opcode table, the modifier dictionary, decoding
// of mnemonics and modifiers (FindOpcode, ApplyModifier) and spelling them back
// (InstructionMnemonic). The rules that check a decoded instruction are in modifier_rules.cc
// (modifier combinations) and operand_rules.cc (operand shapes and types).
#include "ptx/instruction_set.h"

#include <array>
#include <unordered_map>
#include <vector>

#include "ptx/instruction_set_internal.h"

namespace gpuvm::ptx {

using instruction_set_internal::Bit;
using instruction_set_internal::Group;
using instruction_set_internal::Spelling;
using instruction_set_internal::T;
using instruction_set_internal::V;

namespace {

// ------------------------------------------------------------------------------------------------
// Type masks

constexpr uint64_t kPredT = Bit(T::kPred);
constexpr uint64_t kB16_64 = Bit(T::kB16) | Bit(T::kB32) | Bit(T::kB64);
constexpr uint64_t kB32_64 = Bit(T::kB32) | Bit(T::kB64);
constexpr uint64_t kU16_64 = Bit(T::kU16) | Bit(T::kU32) | Bit(T::kU64);
constexpr uint64_t kS16_64 = Bit(T::kS16) | Bit(T::kS32) | Bit(T::kS64);
constexpr uint64_t kInt16_64 = kU16_64 | kS16_64;
constexpr uint64_t kInt32_64 = Bit(T::kU32) | Bit(T::kS32) | Bit(T::kU64) | Bit(T::kS64);
constexpr uint64_t kInt8 = Bit(T::kU8) | Bit(T::kS8);
constexpr uint64_t kF32_64 = Bit(T::kF32) | Bit(T::kF64);
constexpr uint64_t kHalf = Bit(T::kF16) | Bit(T::kBF16);
constexpr uint64_t kArith = kInt16_64 | kF32_64;
// Half-precision arithmetic (translator/lower_half.cc): add sub mul fma neg abs setp set.
constexpr uint64_t kF16s = Bit(T::kF16) | Bit(T::kF16x2);
constexpr uint64_t kU32S32 = Bit(T::kU32) | Bit(T::kS32);
constexpr uint64_t kU32 = Bit(T::kU32);
constexpr uint64_t kB32 = Bit(T::kB32);
constexpr uint64_t kF32 = Bit(T::kF32);
// Everything a register can hold that moves through memory (ld/st): no predicates, no 128-bit.
constexpr uint64_t kMemTypes =
    Bit(T::kB8) | kB16_64 | kInt8 | kInt16_64 | kHalf | Bit(T::kF16x2) | Bit(T::kBF16x2) | kF32_64;
constexpr uint64_t kCvtTypes = kInt8 | kInt16_64 | kHalf | kF32_64;
constexpr uint64_t kCompareTypes = kB16_64 | kInt16_64 | kF32_64;
constexpr uint64_t kMovTypes = kPredT | kB16_64 | kInt16_64 | kF32_64;

// ------------------------------------------------------------------------------------------------
// The opcode table

constexpr uint32_t kGRound = Group(ModGroup::kRounding);
constexpr uint32_t kGMul = Group(ModGroup::kMulMode);
constexpr uint32_t kGMem = Group(ModGroup::kSpace) | Group(ModGroup::kVector) |
                           Group(ModGroup::kOrder) | Group(ModGroup::kScope) |
                           Group(ModGroup::kCache);
constexpr uint32_t kGAtom = Group(ModGroup::kSpace) | Group(ModGroup::kOrder) |
                            Group(ModGroup::kScope) | Group(ModGroup::kAtomic);

constexpr std::array kOpcodes = {
    OpcodeInfo{"add", Opcode::kAdd, kGRound, kFlagSat | kFlagFtz | kFlagCc, kArith | kF16s, 0,
               false},
    OpcodeInfo{"sub", Opcode::kSub, kGRound, kFlagSat | kFlagFtz | kFlagCc, kArith | kF16s, 0,
               false},
    OpcodeInfo{"addc", Opcode::kAddc, 0, kFlagCc, kInt32_64, 0, false},
    OpcodeInfo{"subc", Opcode::kSubc, 0, kFlagCc, kInt32_64, 0, false},
    OpcodeInfo{"mul", Opcode::kMul, kGMul | kGRound, kFlagSat | kFlagFtz, kArith | kF16s, 0, false},
    OpcodeInfo{"mad", Opcode::kMad, kGMul | kGRound, kFlagSat | kFlagFtz | kFlagCc, kArith, 0,
               false},
    OpcodeInfo{"madc", Opcode::kMadc, kGMul, kFlagCc, kInt32_64, 0, false},
    OpcodeInfo{"mul24", Opcode::kMul24, kGMul, 0, kU32S32, 0, false},
    OpcodeInfo{"mad24", Opcode::kMad24, kGMul, kFlagSat, kU32S32, 0, false},
    OpcodeInfo{"sad", Opcode::kSad, 0, 0, kInt16_64, 0, false},
    OpcodeInfo{"div", Opcode::kDiv, kGRound, kFlagApprox | kFlagFull | kFlagFtz, kArith, 0, false},
    OpcodeInfo{"rem", Opcode::kRem, 0, 0, kInt16_64, 0, false},
    OpcodeInfo{"abs", Opcode::kAbs, 0, kFlagFtz, kS16_64 | kF32_64 | kF16s, 0, false},
    OpcodeInfo{"neg", Opcode::kNeg, 0, kFlagFtz, kS16_64 | kF32_64 | kF16s, 0, false},
    OpcodeInfo{"min", Opcode::kMin, 0, kFlagFtz | kFlagNaN, kArith, 0, false},
    OpcodeInfo{"max", Opcode::kMax, 0, kFlagFtz | kFlagNaN, kArith, 0, false},
    OpcodeInfo{"fma", Opcode::kFma, kGRound, kFlagFtz | kFlagSat, kF32_64 | kF16s, 0, false},
    OpcodeInfo{"rcp", Opcode::kRcp, kGRound, kFlagApprox | kFlagFtz, kF32_64, 0, false},
    OpcodeInfo{"sqrt", Opcode::kSqrt, kGRound, kFlagApprox | kFlagFtz, kF32_64, 0, false},
    OpcodeInfo{"rsqrt", Opcode::kRsqrt, 0, kFlagApprox | kFlagFtz, kF32_64, 0, false},
    OpcodeInfo{"sin", Opcode::kSin, 0, kFlagApprox | kFlagFtz, kF32, 0, false},
    OpcodeInfo{"cos", Opcode::kCos, 0, kFlagApprox | kFlagFtz, kF32, 0, false},
    OpcodeInfo{"lg2", Opcode::kLg2, 0, kFlagApprox | kFlagFtz, kF32, 0, false},
    OpcodeInfo{"ex2", Opcode::kEx2, 0, kFlagApprox | kFlagFtz, kF32, 0, false},
    OpcodeInfo{"tanh", Opcode::kTanh, 0, kFlagApprox, kF32, 0, false},
    OpcodeInfo{"copysign", Opcode::kCopysign, 0, 0, kF32_64, 0, false},
    OpcodeInfo{"testp", Opcode::kTestp, Group(ModGroup::kTest), 0, kF32_64, 0, false},
    OpcodeInfo{"popc", Opcode::kPopc, 0, 0, kB32_64, 0, false},
    OpcodeInfo{"clz", Opcode::kClz, 0, 0, kB32_64, 0, false},
    OpcodeInfo{"bfind", Opcode::kBfind, 0, kFlagShiftAmt, kInt32_64, 0, false},
    OpcodeInfo{"brev", Opcode::kBrev, 0, 0, kB32_64, 0, false},
    OpcodeInfo{"bfe", Opcode::kBfe, 0, 0, kInt32_64, 0, false},
    OpcodeInfo{"bfi", Opcode::kBfi, 0, 0, kB32_64, 0, false},
    OpcodeInfo{"bmsk", Opcode::kBmsk, 0, kFlagClamp | kFlagWrap, kB32, 0, false},
    OpcodeInfo{"prmt", Opcode::kPrmt, Group(ModGroup::kPermute), 0, kB32, 0, false},
    OpcodeInfo{"lop3", Opcode::kLop3, 0, 0, kB32, 0, false},
    OpcodeInfo{"shf", Opcode::kShf, 0, kFlagLeft | kFlagRight | kFlagClamp | kFlagWrap, kB32, 0,
               false},
    OpcodeInfo{"shl", Opcode::kShl, 0, 0, kB16_64, 0, false},
    OpcodeInfo{"shr", Opcode::kShr, 0, 0, kB16_64 | kInt16_64, 0, false},
    OpcodeInfo{"and", Opcode::kAnd, 0, 0, kPredT | kB16_64, 0, false},
    OpcodeInfo{"or", Opcode::kOr, 0, 0, kPredT | kB16_64, 0, false},
    OpcodeInfo{"xor", Opcode::kXor, 0, 0, kPredT | kB16_64, 0, false},
    OpcodeInfo{"not", Opcode::kNot, 0, 0, kPredT | kB16_64, 0, false},
    OpcodeInfo{"cnot", Opcode::kCnot, 0, 0, kB16_64, 0, false},
    OpcodeInfo{"dp4a", Opcode::kDp4a, 0, 0, kU32S32, kU32S32, false},
    OpcodeInfo{"setp", Opcode::kSetp, Group(ModGroup::kCompare) | Group(ModGroup::kBoolOp),
               kFlagFtz, kCompareTypes | kF16s, 0, false},
    OpcodeInfo{"set", Opcode::kSet, Group(ModGroup::kCompare) | Group(ModGroup::kBoolOp), kFlagFtz,
               kU32S32 | kF32 | kF16s, kCompareTypes | kF16s, false},
    OpcodeInfo{"selp", Opcode::kSelp, 0, 0, kB16_64 | kInt16_64 | kF32_64, 0, false},
    OpcodeInfo{"slct", Opcode::kSlct, 0, kFlagFtz, kB16_64 | kInt16_64 | kF32_64,
               Bit(T::kS32) | kF32, false},
    OpcodeInfo{"mov", Opcode::kMov, 0, 0, kMovTypes, 0, false},
    OpcodeInfo{"cvt", Opcode::kCvt, kGRound, kFlagFtz | kFlagSat, kCvtTypes, kCvtTypes, false},
    OpcodeInfo{"cvta", Opcode::kCvta, Group(ModGroup::kSpace), kFlagTo, Bit(T::kU32) | Bit(T::kU64),
               0, false},
    OpcodeInfo{"ld", Opcode::kLd, kGMem, kFlagNc | kFlagCacheHint, kMemTypes, 0, false},
    OpcodeInfo{"ldu", Opcode::kLdu, Group(ModGroup::kSpace) | Group(ModGroup::kVector), 0,
               kMemTypes, 0, false},
    OpcodeInfo{"st", Opcode::kSt, kGMem, kFlagCacheHint, kMemTypes, 0, false},
    OpcodeInfo{"prefetch", Opcode::kPrefetch, Group(ModGroup::kSpace), kFlagL1 | kFlagL2, 0, 0,
               false},
    OpcodeInfo{"isspacep", Opcode::kIsspacep, Group(ModGroup::kSpace), 0, 0, 0, false},
    OpcodeInfo{"atom", Opcode::kAtom, kGAtom, 0, kInt32_64 | kB32_64 | kF32_64, 0, false},
    OpcodeInfo{"red", Opcode::kRed, kGAtom, 0, kInt32_64 | kB32_64 | kF32_64, 0, false},
    OpcodeInfo{"bar", Opcode::kBar, Group(ModGroup::kAtomic),
               kFlagSync | kFlagArrive | kFlagRed | kFlagWarp, kU32 | kPredT, 0, true},
    OpcodeInfo{"barrier", Opcode::kBar, Group(ModGroup::kAtomic),
               kFlagSync | kFlagArrive | kFlagRed | kFlagAligned, kU32 | kPredT, 0, true},
    OpcodeInfo{"membar", Opcode::kMembar, Group(ModGroup::kScope), 0, 0, 0, false},
    OpcodeInfo{"fence", Opcode::kFence, Group(ModGroup::kOrder) | Group(ModGroup::kScope), 0, 0, 0,
               false},
    OpcodeInfo{"shfl", Opcode::kShfl, Group(ModGroup::kShuffle), kFlagSync, kB32, 0, false},
    OpcodeInfo{"vote", Opcode::kVote, Group(ModGroup::kVote), kFlagSync, kPredT | kB32, 0, false},
    OpcodeInfo{"activemask", Opcode::kActivemask, 0, 0, kB32, 0, false},
    OpcodeInfo{"bra", Opcode::kBra, 0, kFlagUni, 0, 0, false},
    OpcodeInfo{"call", Opcode::kCall, 0, kFlagUni, 0, 0, false},
    OpcodeInfo{"ret", Opcode::kRet, 0, kFlagUni, 0, 0, false},
    OpcodeInfo{"exit", Opcode::kExit, 0, 0, 0, 0, false},
    OpcodeInfo{"trap", Opcode::kTrap, 0, 0, 0, 0, false},
    OpcodeInfo{"brkpt", Opcode::kBrkpt, 0, 0, 0, 0, false},
    OpcodeInfo{"nanosleep", Opcode::kNanosleep, 0, 0, kU32, 0, false},
};

// ------------------------------------------------------------------------------------------------
// The modifier dictionary. The first entry for a (group, value) is its canonical spelling.

struct Modifier {
  std::string_view text;
  ModGroup group;
  uint32_t value;  // the enum value, the vector width, or the Flag bit
};

constexpr Modifier kModifiers[] = {
    {"pred", ModGroup::kType, V(T::kPred)},
    {"b8", ModGroup::kType, V(T::kB8)},
    {"b16", ModGroup::kType, V(T::kB16)},
    {"b32", ModGroup::kType, V(T::kB32)},
    {"b64", ModGroup::kType, V(T::kB64)},
    {"b128", ModGroup::kType, V(T::kB128)},
    {"u8", ModGroup::kType, V(T::kU8)},
    {"u16", ModGroup::kType, V(T::kU16)},
    {"u32", ModGroup::kType, V(T::kU32)},
    {"u64", ModGroup::kType, V(T::kU64)},
    {"s8", ModGroup::kType, V(T::kS8)},
    {"s16", ModGroup::kType, V(T::kS16)},
    {"s32", ModGroup::kType, V(T::kS32)},
    {"s64", ModGroup::kType, V(T::kS64)},
    {"f16", ModGroup::kType, V(T::kF16)},
    {"f16x2", ModGroup::kType, V(T::kF16x2)},
    {"bf16", ModGroup::kType, V(T::kBF16)},
    {"bf16x2", ModGroup::kType, V(T::kBF16x2)},
    {"f32", ModGroup::kType, V(T::kF32)},
    {"f64", ModGroup::kType, V(T::kF64)},
    {"global", ModGroup::kSpace, V(StateSpace::kGlobal)},
    {"shared", ModGroup::kSpace, V(StateSpace::kShared)},
    {"shared::cta", ModGroup::kSpace, V(StateSpace::kShared)},
    {"local", ModGroup::kSpace, V(StateSpace::kLocal)},
    {"const", ModGroup::kSpace, V(StateSpace::kConst)},
    {"param", ModGroup::kSpace, V(StateSpace::kParam)},
    {"v2", ModGroup::kVector, 2},
    {"v4", ModGroup::kVector, 4},
    {"rn", ModGroup::kRounding, V(Rounding::kRn)},
    {"rz", ModGroup::kRounding, V(Rounding::kRz)},
    {"rm", ModGroup::kRounding, V(Rounding::kRm)},
    {"rp", ModGroup::kRounding, V(Rounding::kRp)},
    {"rni", ModGroup::kRounding, V(Rounding::kRni)},
    {"rzi", ModGroup::kRounding, V(Rounding::kRzi)},
    {"rmi", ModGroup::kRounding, V(Rounding::kRmi)},
    {"rpi", ModGroup::kRounding, V(Rounding::kRpi)},
    {"eq", ModGroup::kCompare, V(CompareOp::kEq)},
    {"ne", ModGroup::kCompare, V(CompareOp::kNe)},
    {"lt", ModGroup::kCompare, V(CompareOp::kLt)},
    {"le", ModGroup::kCompare, V(CompareOp::kLe)},
    {"gt", ModGroup::kCompare, V(CompareOp::kGt)},
    {"ge", ModGroup::kCompare, V(CompareOp::kGe)},
    {"lo", ModGroup::kCompare, V(CompareOp::kLo)},
    {"ls", ModGroup::kCompare, V(CompareOp::kLs)},
    {"hi", ModGroup::kCompare, V(CompareOp::kHi)},
    {"hs", ModGroup::kCompare, V(CompareOp::kHs)},
    {"equ", ModGroup::kCompare, V(CompareOp::kEqu)},
    {"neu", ModGroup::kCompare, V(CompareOp::kNeu)},
    {"ltu", ModGroup::kCompare, V(CompareOp::kLtu)},
    {"leu", ModGroup::kCompare, V(CompareOp::kLeu)},
    {"gtu", ModGroup::kCompare, V(CompareOp::kGtu)},
    {"geu", ModGroup::kCompare, V(CompareOp::kGeu)},
    {"num", ModGroup::kCompare, V(CompareOp::kNum)},
    {"nan", ModGroup::kCompare, V(CompareOp::kNan)},
    {"and", ModGroup::kBoolOp, V(BoolOp::kAnd)},
    {"or", ModGroup::kBoolOp, V(BoolOp::kOr)},
    {"xor", ModGroup::kBoolOp, V(BoolOp::kXor)},
    {"add", ModGroup::kAtomic, V(AtomicOp::kAdd)},
    {"min", ModGroup::kAtomic, V(AtomicOp::kMin)},
    {"max", ModGroup::kAtomic, V(AtomicOp::kMax)},
    {"inc", ModGroup::kAtomic, V(AtomicOp::kInc)},
    {"dec", ModGroup::kAtomic, V(AtomicOp::kDec)},
    {"cas", ModGroup::kAtomic, V(AtomicOp::kCas)},
    {"exch", ModGroup::kAtomic, V(AtomicOp::kExch)},
    {"and", ModGroup::kAtomic, V(AtomicOp::kAnd)},
    {"or", ModGroup::kAtomic, V(AtomicOp::kOr)},
    {"xor", ModGroup::kAtomic, V(AtomicOp::kXor)},
    {"popc", ModGroup::kAtomic, V(AtomicOp::kPopc)},
    {"lo", ModGroup::kMulMode, V(MulMode::kLo)},
    {"hi", ModGroup::kMulMode, V(MulMode::kHi)},
    {"wide", ModGroup::kMulMode, V(MulMode::kWide)},
    {"up", ModGroup::kShuffle, V(ShuffleMode::kUp)},
    {"down", ModGroup::kShuffle, V(ShuffleMode::kDown)},
    {"bfly", ModGroup::kShuffle, V(ShuffleMode::kBfly)},
    {"idx", ModGroup::kShuffle, V(ShuffleMode::kIdx)},
    {"all", ModGroup::kVote, V(VoteMode::kAll)},
    {"any", ModGroup::kVote, V(VoteMode::kAny)},
    {"uni", ModGroup::kVote, V(VoteMode::kUni)},
    {"ballot", ModGroup::kVote, V(VoteMode::kBallot)},
    {"f4e", ModGroup::kPermute, V(PermuteMode::kF4e)},
    {"b4e", ModGroup::kPermute, V(PermuteMode::kB4e)},
    {"rc8", ModGroup::kPermute, V(PermuteMode::kRc8)},
    {"ecl", ModGroup::kPermute, V(PermuteMode::kEcl)},
    {"ecr", ModGroup::kPermute, V(PermuteMode::kEcr)},
    {"rc16", ModGroup::kPermute, V(PermuteMode::kRc16)},
    {"finite", ModGroup::kTest, V(TestProperty::kFinite)},
    {"infinite", ModGroup::kTest, V(TestProperty::kInfinite)},
    {"number", ModGroup::kTest, V(TestProperty::kNumber)},
    {"notanumber", ModGroup::kTest, V(TestProperty::kNotANumber)},
    {"normal", ModGroup::kTest, V(TestProperty::kNormal)},
    {"subnormal", ModGroup::kTest, V(TestProperty::kSubnormal)},
    {"weak", ModGroup::kOrder, V(MemoryOrder::kWeak)},
    {"volatile", ModGroup::kOrder, V(MemoryOrder::kVolatile)},
    {"relaxed", ModGroup::kOrder, V(MemoryOrder::kRelaxed)},
    {"acquire", ModGroup::kOrder, V(MemoryOrder::kAcquire)},
    {"release", ModGroup::kOrder, V(MemoryOrder::kRelease)},
    {"acq_rel", ModGroup::kOrder, V(MemoryOrder::kAcqRel)},
    {"sc", ModGroup::kOrder, V(MemoryOrder::kSc)},
    {"cta", ModGroup::kScope, V(MemoryScope::kCta)},
    {"gpu", ModGroup::kScope, V(MemoryScope::kGpu)},
    {"gl", ModGroup::kScope, V(MemoryScope::kGpu)},
    {"sys", ModGroup::kScope, V(MemoryScope::kSys)},
    {"ca", ModGroup::kCache, V(CacheOp::kCa)},
    {"cg", ModGroup::kCache, V(CacheOp::kCg)},
    {"cs", ModGroup::kCache, V(CacheOp::kCs)},
    {"lu", ModGroup::kCache, V(CacheOp::kLu)},
    {"cv", ModGroup::kCache, V(CacheOp::kCv)},
    {"wb", ModGroup::kCache, V(CacheOp::kWb)},
    {"wt", ModGroup::kCache, V(CacheOp::kWt)},
    {"to", ModGroup::kFlag, kFlagTo},
    {"sync", ModGroup::kFlag, kFlagSync},
    {"warp", ModGroup::kFlag, kFlagWarp},
    {"arrive", ModGroup::kFlag, kFlagArrive},
    {"red", ModGroup::kFlag, kFlagRed},
    {"aligned", ModGroup::kFlag, kFlagAligned},
    {"nc", ModGroup::kFlag, kFlagNc},
    {"approx", ModGroup::kFlag, kFlagApprox},
    {"full", ModGroup::kFlag, kFlagFull},
    {"ftz", ModGroup::kFlag, kFlagFtz},
    {"sat", ModGroup::kFlag, kFlagSat},
    {"NaN", ModGroup::kFlag, kFlagNaN},
    {"cc", ModGroup::kFlag, kFlagCc},
    {"shiftamt", ModGroup::kFlag, kFlagShiftAmt},
    {"l", ModGroup::kFlag, kFlagLeft},
    {"r", ModGroup::kFlag, kFlagRight},
    {"clamp", ModGroup::kFlag, kFlagClamp},
    {"wrap", ModGroup::kFlag, kFlagWrap},
    {"L1", ModGroup::kFlag, kFlagL1},
    {"L2", ModGroup::kFlag, kFlagL2},
    {"uni", ModGroup::kFlag, kFlagUni},
    // Eviction-priority and prefetch-size hints: accepted, recorded as one flag, no semantics.
    {"L1::evict_normal", ModGroup::kFlag, kFlagCacheHint},
    {"L1::evict_unchanged", ModGroup::kFlag, kFlagCacheHint},
    {"L1::evict_first", ModGroup::kFlag, kFlagCacheHint},
    {"L1::evict_last", ModGroup::kFlag, kFlagCacheHint},
    {"L1::no_allocate", ModGroup::kFlag, kFlagCacheHint},
    {"L2::evict_normal", ModGroup::kFlag, kFlagCacheHint},
    {"L2::evict_first", ModGroup::kFlag, kFlagCacheHint},
    {"L2::evict_last", ModGroup::kFlag, kFlagCacheHint},
    {"L2::64B", ModGroup::kFlag, kFlagCacheHint},
    {"L2::128B", ModGroup::kFlag, kFlagCacheHint},
    {"L2::256B", ModGroup::kFlag, kFlagCacheHint},
};

const std::unordered_map<std::string_view, std::vector<const Modifier*>>& ModifierIndex() {
  static const auto* index = [] {
    auto* map = new std::unordered_map<std::string_view, std::vector<const Modifier*>>();
    for (const Modifier& m : kModifiers) (*map)[m.text].push_back(&m);
    return map;
  }();
  return *index;
}

const std::unordered_map<std::string_view, const OpcodeInfo*>& OpcodeIndex() {
  static const auto* index = [] {
    auto* map = new std::unordered_map<std::string_view, const OpcodeInfo*>();
    for (const OpcodeInfo& info : kOpcodes) (*map)[info.mnemonic] = &info;
    return map;
  }();
  return *index;
}

std::string Quote(std::string_view word) { return "'." + std::string(word) + "'"; }

// Sets `*field` (an enum whose kNone is 0) once.
template <typename E>
std::string SetOnce(E* field, uint32_t value, std::string_view word) {
  if (*field != E{}) {
    return "modifier " + Quote(word) + " conflicts with an earlier modifier of the same kind";
  }
  *field = static_cast<E>(value);
  return "";
}

}  // namespace

namespace instruction_set_internal {

std::string_view Spelling(ModGroup group, uint32_t value) {
  for (const Modifier& m : kModifiers) {
    if (m.group == group && m.value == value) return m.text;
  }
  return "?";
}

}  // namespace instruction_set_internal

const OpcodeInfo* FindOpcode(std::string_view mnemonic) {
  const auto& index = OpcodeIndex();
  auto it = index.find(mnemonic);
  return it == index.end() ? nullptr : it->second;
}

std::string ApplyModifier(const OpcodeInfo& info, std::string_view word, Instruction* inst) {
  const auto& index = ModifierIndex();
  auto it = index.find(word);
  if (it == index.end()) {
    if (word.starts_with("L2::cache_hint")) {
      return "modifier " + Quote(word) + " (cache-policy operand) is not supported";
    }
    return "unknown modifier " + Quote(word);
  }
  for (const Modifier* m : it->second) {
    const uint32_t value = m->value;
    switch (m->group) {
      case ModGroup::kType:
        if (info.types == 0) continue;
        if (inst->type == T::kNone) {
          inst->type = static_cast<T>(value);
        } else if (info.types2 != 0 && inst->type2 == T::kNone) {
          inst->type2 = static_cast<T>(value);
        } else {
          return "too many type suffixes (" + Quote(word) + ")";
        }
        return "";
      case ModGroup::kFlag:
        if ((info.flags & value) == 0) continue;
        if ((inst->flags & value) != 0) return "duplicate modifier " + Quote(word);
        inst->flags |= value;
        return "";
      default:
        break;
    }
    if ((info.groups & Group(m->group)) == 0) continue;
    switch (m->group) {
      case ModGroup::kSpace:
        return SetOnce(&inst->space, value, word);
      case ModGroup::kVector:
        if (inst->vector != 1) return "duplicate vector modifier " + Quote(word);
        inst->vector = static_cast<uint8_t>(value);
        return "";
      case ModGroup::kRounding:
        return SetOnce(&inst->rounding, value, word);
      case ModGroup::kCompare:
        return SetOnce(&inst->compare, value, word);
      case ModGroup::kBoolOp:
        return SetOnce(&inst->bool_op, value, word);
      case ModGroup::kAtomic:
        return SetOnce(&inst->atomic_op, value, word);
      case ModGroup::kMulMode:
        return SetOnce(&inst->mul_mode, value, word);
      case ModGroup::kShuffle:
        return SetOnce(&inst->shuffle, value, word);
      case ModGroup::kVote:
        return SetOnce(&inst->vote, value, word);
      case ModGroup::kPermute:
        return SetOnce(&inst->permute, value, word);
      case ModGroup::kTest:
        return SetOnce(&inst->test, value, word);
      case ModGroup::kOrder:
        return SetOnce(&inst->order, value, word);
      case ModGroup::kScope:
        return SetOnce(&inst->scope, value, word);
      case ModGroup::kCache:
        return SetOnce(&inst->cache, value, word);
      case ModGroup::kType:
      case ModGroup::kFlag:
        break;
    }
  }
  return "modifier " + Quote(word) + " is not valid for " + std::string(info.mnemonic);
}

std::string InstructionMnemonic(const Instruction& inst) {
  // bar.* implies .aligned; a barrier without it can only be spelled `barrier`.
  const bool unaligned_barrier =
      inst.opcode == Opcode::kBar && !inst.Has(kFlagWarp) && !inst.Has(kFlagAligned);
  std::string out(unaligned_barrier ? "barrier" : OpcodeName(inst.opcode));
  auto add = [&](std::string_view word) {
    out += '.';
    out += word;
  };
  auto add_group = [&](ModGroup g, uint32_t v) {
    if (v != 0) add(Spelling(g, v));
  };
  if (inst.Has(kFlagTo)) add("to");
  if (inst.Has(kFlagWarp)) add("warp");
  if (inst.Has(kFlagSync)) add("sync");
  if (inst.Has(kFlagArrive)) add("arrive");
  if (inst.Has(kFlagRed)) add("red");
  add_group(ModGroup::kOrder, V(inst.order));
  if (inst.opcode == Opcode::kMembar && inst.scope == MemoryScope::kGpu) {
    add("gl");
  } else {
    add_group(ModGroup::kScope, V(inst.scope));
  }
  add_group(ModGroup::kSpace, V(inst.space));
  add_group(ModGroup::kCache, V(inst.cache));
  if (inst.Has(kFlagNc)) add("nc");
  if (inst.Has(kFlagCacheHint)) add("L1::evict_normal");
  add_group(ModGroup::kCompare, V(inst.compare));
  add_group(ModGroup::kBoolOp, V(inst.bool_op));
  add_group(ModGroup::kAtomic, V(inst.atomic_op));
  add_group(ModGroup::kMulMode, V(inst.mul_mode));
  add_group(ModGroup::kShuffle, V(inst.shuffle));
  add_group(ModGroup::kVote, V(inst.vote));
  add_group(ModGroup::kTest, V(inst.test));
  add_group(ModGroup::kRounding, V(inst.rounding));
  if (inst.Has(kFlagApprox)) add("approx");
  if (inst.Has(kFlagFull)) add("full");
  if (inst.Has(kFlagFtz)) add("ftz");
  if (inst.Has(kFlagSat)) add("sat");
  if (inst.Has(kFlagNaN)) add("NaN");
  if (inst.Has(kFlagCc)) add("cc");
  if (inst.Has(kFlagShiftAmt)) add("shiftamt");
  if (inst.Has(kFlagLeft)) add("l");
  if (inst.Has(kFlagRight)) add("r");
  if (inst.Has(kFlagClamp)) add("clamp");
  if (inst.Has(kFlagWrap)) add("wrap");
  if (inst.Has(kFlagL1)) add("L1");
  if (inst.Has(kFlagL2)) add("L2");
  if (inst.Has(kFlagUni)) add("uni");
  if (inst.vector == 2) add("v2");
  if (inst.vector == 4) add("v4");
  if (inst.type != T::kNone) add(TypeName(inst.type));
  if (inst.type2 != T::kNone) add(TypeName(inst.type2));
  add_group(ModGroup::kPermute, V(inst.permute));
  return out;
}

}  // namespace gpuvm::ptx