#include "ptx/instruction_set.h"

#include <array>
#include <unordered_map>
#include <vector>

namespace gpuvm::ptx {
namespace {

// ------------------------------------------------------------------------------------------------
// Type masks

constexpr uint64_t Bit(ScalarType t) { return uint64_t{1} << static_cast<unsigned>(t); }
constexpr uint32_t Group(ModGroup g) { return uint32_t{1} << static_cast<unsigned>(g); }

using T = ScalarType;
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
    OpcodeInfo{"add", Opcode::kAdd, kGRound, kFlagSat | kFlagFtz | kFlagCc, kArith, 0, false},
    OpcodeInfo{"sub", Opcode::kSub, kGRound, kFlagSat | kFlagFtz | kFlagCc, kArith, 0, false},
    OpcodeInfo{"addc", Opcode::kAddc, 0, kFlagCc, kInt32_64, 0, false},
    OpcodeInfo{"subc", Opcode::kSubc, 0, kFlagCc, kInt32_64, 0, false},
    OpcodeInfo{"mul", Opcode::kMul, kGMul | kGRound, kFlagSat | kFlagFtz, kArith, 0, false},
    OpcodeInfo{"mad", Opcode::kMad, kGMul | kGRound, kFlagSat | kFlagFtz | kFlagCc, kArith, 0,
               false},
    OpcodeInfo{"madc", Opcode::kMadc, kGMul, kFlagCc, kInt32_64, 0, false},
    OpcodeInfo{"mul24", Opcode::kMul24, kGMul, 0, kU32S32, 0, false},
    OpcodeInfo{"mad24", Opcode::kMad24, kGMul, kFlagSat, kU32S32, 0, false},
    OpcodeInfo{"sad", Opcode::kSad, 0, 0, kInt16_64, 0, false},
    OpcodeInfo{"div", Opcode::kDiv, kGRound, kFlagApprox | kFlagFull | kFlagFtz, kArith, 0, false},
    OpcodeInfo{"rem", Opcode::kRem, 0, 0, kInt16_64, 0, false},
    OpcodeInfo{"abs", Opcode::kAbs, 0, kFlagFtz, kS16_64 | kF32_64, 0, false},
    OpcodeInfo{"neg", Opcode::kNeg, 0, kFlagFtz, kS16_64 | kF32_64, 0, false},
    OpcodeInfo{"min", Opcode::kMin, 0, kFlagFtz | kFlagNaN, kArith, 0, false},
    OpcodeInfo{"max", Opcode::kMax, 0, kFlagFtz | kFlagNaN, kArith, 0, false},
    OpcodeInfo{"fma", Opcode::kFma, kGRound, kFlagFtz | kFlagSat, kF32_64, 0, false},
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
               kFlagFtz, kCompareTypes, 0, false},
    OpcodeInfo{"set", Opcode::kSet, Group(ModGroup::kCompare) | Group(ModGroup::kBoolOp), kFlagFtz,
               kU32S32 | kF32, kCompareTypes, false},
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

constexpr uint32_t V(auto e) { return static_cast<uint32_t>(e); }

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

std::string_view Spelling(ModGroup group, uint32_t value) {
  for (const Modifier& m : kModifiers) {
    if (m.group == group && m.value == value) return m.text;
  }
  return "?";
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

bool IsFloatRounding(Rounding r) {
  return r == Rounding::kRn || r == Rounding::kRz || r == Rounding::kRm || r == Rounding::kRp;
}
bool IsIntRounding(Rounding r) {
  return r == Rounding::kRni || r == Rounding::kRzi || r == Rounding::kRmi || r == Rounding::kRpi;
}

}  // namespace

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
  auto ftz_only_f32 = [&]() -> std::string {
    if (has(kFlagFtz) && type != T::kF32) return "'.ftz' is only valid with .f32";
    return "";
  };

  switch (inst.opcode) {
    case Opcode::kAdd:
    case Opcode::kSub:
      if (is_int) {
        if (rnd != Rounding::kNone || has(kFlagFtz)) return "rounding/.ftz need a float type";
        if (has(kFlagSat) && type != T::kS32) return "'.sat' on integer add/sub needs .s32";
        if (has(kFlagCc) && (TypeSize(type) < 4)) return "'.cc' needs a 32- or 64-bit type";
      } else {
        if (has(kFlagCc)) return "'.cc' needs an integer type";
        if (rnd != Rounding::kNone && !IsFloatRounding(rnd))
          return "rounding must be .rn/.rz/.rm/.rp";
        if (has(kFlagSat) && type != T::kF32) return "'.sat' is only valid with .f32";
        return ftz_only_f32();
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
        if (has(kFlagCc)) return "'.cc' needs an integer type";
        if (rnd != Rounding::kNone && !IsFloatRounding(rnd))
          return "rounding must be .rn/.rz/.rm/.rp";
        if (has(kFlagSat) && type != T::kF32) return "'.sat' is only valid with .f32";
        return ftz_only_f32();
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
      if (has(kFlagSat) && type != T::kF32) return "'.sat' is only valid with .f32";
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
      if (has(kFlagFtz) && cmp_type != T::kF32) return "'.ftz' is only valid with .f32";
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

// ------------------------------------------------------------------------------------------------
// Operands

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

std::string KindName(OperandKind kind) {
  switch (kind) {
    case OperandKind::kRegister:
      return "a register";
    case OperandKind::kRegisterPair:
      return "a register pair";
    case OperandKind::kSink:
      return "'_'";
    case OperandKind::kSpecial:
      return "a special register";
    case OperandKind::kImmediate:
      return "an immediate";
    case OperandKind::kAddress:
      return "an address";
    case OperandKind::kSymbol:
      return "a symbol";
    case OperandKind::kLabel:
      return "a label";
    case OperandKind::kVector:
      return "a vector";
    case OperandKind::kNone:
      break;
  }
  return "nothing";
}

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
