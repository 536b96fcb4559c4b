// The software GPU's native instruction set ("GVISA"): the facts of the binary encoding shared by
// the PTX translator (which writes it), the compute engine (which fetches, validates and runs it)
// and the tools (disassembler, assembler). docs/ISA.md is the prose version of this header; keep
// the two in step.
//
// A kernel image is a 64-byte KernelHeader followed by `code_words` little-endian 64-bit words.
// Every instruction is one word, optionally followed by one extension word holding a 64-bit
// immediate (bit X of the first word says so). Registers are 32-bit rows of a warp's register file;
// a 64-bit value occupies two consecutive rows. Predicates are separate one-bit-per-lane registers.
//
// Threading: constants and plain value types only.
#ifndef GPUVM_GPU_ISA_ISA_H_
#define GPUVM_GPU_ISA_ISA_H_

#include <cstdint>
#include <string_view>

namespace gpuvm::isa {

inline constexpr uint32_t kKernelMagic = 0x4E4B5647;  // "GVKN" as little-endian bytes
inline constexpr uint16_t kVersion = 1;
inline constexpr uint32_t kKernelHeaderBytes = 64;

inline constexpr int kWarpSize = 32;
inline constexpr int kMaxRegisters = 255;  // r0..r254
inline constexpr uint8_t kRegZero = 255;   // RZ: reads as 0 (32 or 64 bits), writes are discarded
inline constexpr int kMaxPredicates = 63;  // p0..p62
inline constexpr uint8_t kPredTrue = 63;   // PT: always true; never a destination
inline constexpr uint32_t kMaxCodeWords = 1u << 20;     // 8 MiB of code per kernel
inline constexpr uint32_t kMaxSharedBytes = 64 * 1024;  // per block (static + dynamic)
// Shared memory a translator may add to a kernel's own for its lowering (bar.red's word): part of
// the header's shared_bytes, named by internal_shared_bytes, not counted against the program's
// per-block limit (the hardware does these in its barrier unit).
inline constexpr uint32_t kMaxInternalSharedBytes = 64;
inline constexpr uint32_t kMaxLocalBytes = 16 * 1024;  // per thread
inline constexpr uint32_t kMaxParamBytes = 4 * 1024;   // kernel parameters in constant bank 0
inline constexpr int kConstBanks = 16;
inline constexpr int kMaxBarriers = 16;  // bar.sync ids 0..15
// Generic-address windows (our choice): [base, base + kWindowBytes) with base = LOCAL_BASE /
// SHARED_BASE.
inline constexpr uint64_t kWindowBytes = 16ull << 20;

// Constant banks with a fixed role (our choice; docs/ISA.md "Constant banks").
inline constexpr uint8_t kParamBank = 0;  // kernel parameters at offset 0, PTX declaration order
inline constexpr uint8_t kUserConstBank = 1;  // module-scope .const variables
inline constexpr uint8_t kGlobalsBank = 2;    // 8-byte addresses of module-scope .global variables

// Data types (4 bits). Integer ALU operations use the 32- and 64-bit types; 8- and 16-bit types
// appear in memory accesses and CVT only.
enum class Type : uint8_t {
  kU8 = 0,
  kS8 = 1,
  kU16 = 2,
  kS16 = 3,
  kU32 = 4,
  kS32 = 5,
  kU64 = 6,
  kS64 = 7,
  kF32 = 8,
  kF64 = 9,
  kF16 = 10,
};
inline constexpr int kTypeCount = 11;

constexpr bool IsValidType(uint8_t t) { return t < kTypeCount; }
constexpr int TypeBytes(Type t) {
  switch (t) {
    case Type::kU8:
    case Type::kS8:
      return 1;
    case Type::kU16:
    case Type::kS16:
    case Type::kF16:
      return 2;
    case Type::kU32:
    case Type::kS32:
    case Type::kF32:
      return 4;
    default:
      return 8;
  }
}
// f32/f64, the types of float arithmetic (f16 is a conversion format only: IsFloatFormat).
constexpr bool IsFloat(Type t) { return t == Type::kF32 || t == Type::kF64; }
constexpr bool IsFloatFormat(Type t) { return IsFloat(t) || t == Type::kF16; }
constexpr bool IsSigned(Type t) {
  return t == Type::kS8 || t == Type::kS16 || t == Type::kS32 || t == Type::kS64;
}
constexpr bool Is64(Type t) { return TypeBytes(t) == 8; }
// Register rows a value of this type occupies (small integers live in one 32-bit row).
constexpr int TypeRows(Type t) { return Is64(t) ? 2 : 1; }

// Opcodes (8 bits), one per line of opcodes.def: the value, the mnemonic and the operands of each,
// which opcode_table.h makes available as data (FindOpcode). What each computes: docs/ISA.md.
enum class Opcode : uint8_t {
#define GVISA_OPCODE(name, value, ...) k##name = value,
#include "gpu/isa/opcodes.def"
#undef GVISA_OPCODE
};

// kTrap's mod field: why the kernel stops (the driver sees different trap reasons).
enum class TrapCode : uint8_t {
  kTrap = 0,    // PTX `trap`
  kAssert = 1,  // a failed device-side assert (nvcc's call to `__assertfail`)
};

// Memory spaces (kLd/kSt/kAtom mod bits 0-2).
enum class Space : uint8_t {
  kGeneric = 0,  // windows decide: shared, local, else global
  kGlobal = 1,   // the channel's GPU virtual address space
  kShared = 2,   // per block; 32-bit offsets
  kLocal = 3,    // per thread; 32-bit offsets
  kConst = 4,    // constant bank type2; read-only
};
inline constexpr uint8_t kModSpaceMask = 0x07;
inline constexpr uint8_t kModAddr64 = 0x08;   // the address register a is 64-bit (else 32-bit)
inline constexpr uint8_t kModWideReg = 0x10;  // kLd/kSt of 8/16/32-bit data with a 64-bit register
// kLd/kSt of 16 bytes as two 64-bit values, single-copy atomic per lane (PTX .v2.u64 in global or
// generic space: CUB publishes {status, value} of 8-byte types that way): type u64, 16-byte
// aligned; kLd's destinations are d (bytes 0-7) and b (8-15), kSt's sources b and c.
inline constexpr uint8_t kModPair = 0x20;

// Rounding (kCvt, and float kAdd/kSub/kMul/kMad/kFma/kDiv/kSqrt/kRcp: mod bits 0-3).
enum class Rounding : uint8_t {
  kDefault = 0,  // floats: rn; float->int cvt: rzi (truncate); int->float: rn
  kRn = 1,
  kRz = 2,
  kRm = 3,
  kRp = 4,
  kRni = 5,  // round to integral value, nearest even (float->float, float->int)
  kRzi = 6,
  kRmi = 7,
  kRpi = 8,
};
inline constexpr uint8_t kModRoundMask = 0x0f;
inline constexpr uint8_t kModSat =
    0x10;  // saturate: floats clamp to [0, 1]; integers clamp to the type

// Comparisons (kSetp mod). Signedness comes from the type; the unordered forms are for floats.
enum class Compare : uint8_t {
  kEq = 0,
  kNe = 1,
  kLt = 2,
  kLe = 3,
  kGt = 4,
  kGe = 5,
  kEqu = 6,  // float: equal or unordered
  kNeu = 7,
  kLtu = 8,
  kLeu = 9,
  kGtu = 10,
  kGeu = 11,
  kNum = 12,  // neither is NaN
  kNan = 13,  // either is NaN
};
inline constexpr int kCompareCount = 14;

enum class PlopOp : uint8_t { kAnd = 0, kOr = 1, kXor = 2 };
inline constexpr uint8_t kPlopOpMask = 0x03;
inline constexpr uint8_t kPlopNegA = 0x04;
inline constexpr uint8_t kPlopNegB = 0x08;

enum class AtomOp : uint8_t {
  kAdd = 0,
  kMin = 1,
  kMax = 2,
  kInc = 3,  // d = old; new = old >= b ? 0 : old + 1 (u32)
  kDec = 4,  // d = old; new = (old == 0 || old > b) ? b : old - 1 (u32)
  kCas = 5,  // d = old; new = old == b ? c : old
  kExch = 6,
  kAnd = 7,
  kOr = 8,
  kXor = 9,
};
inline constexpr int kAtomOpCount = 10;

enum class ShflMode : uint8_t { kIdx = 0, kUp = 1, kDown = 2, kBfly = 3 };
inline constexpr uint8_t kShflModeMask = 0x03;
inline constexpr uint8_t kShflBImm = 0x04;  // lane/offset is imm bits 0-31 (else register b)
inline constexpr uint8_t kShflCImm =
    0x08;  // clamp/segment mask is imm bits 32-47 (else register c)
// Extension word of kShfl: bits 0-31 lane/offset immediate, bits 32-47 c immediate, bits 48-53
// predicate destination (kPredTrue = none), bits 54-63 zero.

enum class VoteMode : uint8_t { kAll = 0, kAny = 1, kUni = 2, kBallot = 3 };
inline constexpr uint8_t kVoteModeMask = 0x03;
inline constexpr uint8_t kVoteNegA = 0x04;

enum class TestpMode : uint8_t {
  kFinite = 0,
  kInfinite = 1,
  kNumber = 2,
  kNotANumber = 3,
  kNormal = 4,
  kSubnormal = 5,
};
inline constexpr int kTestpModeCount = 6;

enum class PrmtMode : uint8_t {
  kGeneric = 0,
  kF4e = 1,
  kB4e = 2,
  kRc8 = 3,
  kEcl = 4,
  kEcr = 5,
  kRc16 = 6
};
inline constexpr int kPrmtModeCount = 7;

inline constexpr uint8_t kShfRight = 0x01;
inline constexpr uint8_t kShfClamp = 0x02;

// Special registers (kS2R operand a). The 64-bit ones need a 64-bit destination (type U64).
enum class SpecialReg : uint8_t {
  kTidX = 0,
  kTidY,
  kTidZ,
  kNtidX,
  kNtidY,
  kNtidZ,
  kCtaidX,
  kCtaidY,
  kCtaidZ,
  kNctaidX,
  kNctaidY,
  kNctaidZ,
  kLaneId,
  kWarpId,
  kNWarpId,
  kSmId,
  kNSmId,
  kGridId,
  kClock,
  kLanemaskEq,
  kLanemaskLt,
  kLanemaskLe,
  kLanemaskGt,
  kLanemaskGe,
  kActiveMask,
  kDynamicSmemSize,
  kTotalSmemSize,
  // 64-bit from here on.
  kClock64,
  kGlobalTimer,
  kSharedWindow,  // generic address of shared offset 0 (SHARED_BASE)
  kLocalWindow,   // generic address of local offset 0 (LOCAL_BASE)
};
inline constexpr int kSpecialRegCount = static_cast<int>(SpecialReg::kLocalWindow) + 1;
constexpr bool IsSpecialReg64(SpecialReg r) { return r >= SpecialReg::kClock64; }

// The instruction word.
struct WordLayout {
  static constexpr int kOpcodeShift = 0;
  static constexpr int kDShift = 8;
  static constexpr int kAShift = 16;
  static constexpr int kBShift = 24;
  static constexpr int kCShift = 32;
  static constexpr int kGuardShift = 40;  // 6 bits
  static constexpr uint64_t kGuardNegated = 1ull << 46;
  static constexpr uint64_t kExtended = 1ull << 47;
  static constexpr int kTypeShift = 48;   // 4 bits
  static constexpr int kType2Shift = 52;  // 4 bits
  static constexpr int kModShift = 56;    // 8 bits
};

// The kernel header (64 bytes at the kernel's entry address; little-endian).
struct KernelHeader {
  uint32_t magic = kKernelMagic;               // 0x00
  uint16_t version = kVersion;                 // 0x04
  uint16_t header_bytes = kKernelHeaderBytes;  // 0x06
  uint32_t code_words = 0;                     // 0x08: 64-bit words after the header
  uint16_t reg_count = 0;                      // 0x0c: 32-bit rows r0..r(reg_count-1)
  uint8_t pred_count = 0;                      // 0x0e: p0..p(pred_count-1)
  uint8_t flags = 0;                           // 0x0f: reserved, zero
  uint32_t shared_bytes = 0;                   // 0x10: static shared memory per block
  uint32_t local_bytes = 0;                    // 0x14: local memory per thread
  uint32_t param_bytes = 0;                    // 0x18: kernel parameter bytes in constant bank 0
  uint32_t max_threads = 0;            // 0x1c: largest block the kernel supports (0: any); .maxntid
  uint32_t internal_shared_bytes = 0;  // 0x20: of shared_bytes, the translator's own (bar.red)
  // 0x24..0x3f reserved, zero.
};

// The kernel's own static shared memory: what the program declared, without the translator's.
inline uint32_t ProgramSharedBytes(const KernelHeader& h) {
  return h.shared_bytes > h.internal_shared_bytes ? h.shared_bytes - h.internal_shared_bytes : 0;
}

// Names as the disassembler prints them (names.cc). Out-of-range values give "?"-suffixed names.
std::string_view OpcodeName(Opcode op);
std::string_view TypeName(Type t);
std::string_view SpaceName(Space s);
std::string_view SpecialRegName(SpecialReg r);
std::string_view RoundingName(Rounding r);
std::string_view CompareName(Compare c);
std::string_view AtomOpName(AtomOp op);
std::string_view ShflModeName(ShflMode m);
std::string_view VoteModeName(VoteMode m);
std::string_view TestpModeName(TestpMode m);
std::string_view PrmtModeName(PrmtMode m);
std::string_view PlopOpName(PlopOp op);

}  // namespace gpuvm::isa

#endif  // GPUVM_GPU_ISA_ISA_H_
