// The PTX abstract syntax tree: what ptx::ParseModule (ptx/parser.h) produces from the PTX text
// nvcc emits, and what the PTX -> gpu/isa translator (ptx/translator/) consumes. This header is the
// contract between the two, so it is written to be read top to bottom.
//
// Shape
//   Module
//     globals[]    module-scope variables (.global .shared .const, `.extern .shared x[]`)
//     functions[]  every .entry (kernel) and .func, in source order; a prototype and its
//                  later definition are merged into one Function
//   Function
//     params[]     kernel parameters / function input parameters (.param variables)
//     returns[]    .func return parameters (.param variables)
//     registers[]  every .reg, one entry per register (`%r<4>` gives %r0..%r3); by RegId
//     locals[]     variables declared inside the body: .local, .shared (nvcc's "demoted"
//                  variables), .param (the slots of call sequences), .const; by Symbol::index
//     labels[]     branch targets; Label::target is an index into body
//     body[]       instructions in order; `{ }` blocks are flattened (they only scope names)
//   Instruction    opcode + decoded modifiers (types, state space, rounding, ...) + operands
//   Operand        register / special register / immediate / address / symbol / label /
//                  vector / sink
//
// Everything in a Module that the parser returns has been checked (docs/PTX.md lists the rules):
// every instruction is known, its modifiers are a supported combination, its operand count and
// kinds fit, register types agree with the instruction type, every name resolves, every index
// below is in range. The translator may therefore index without re-checking; anything the
// translator cannot do itself must still fail at load with an error naming the instruction, line
// and kernel (DescribeLocation and ptx/printer.h help).
//
// Names are resolved: operands carry indices, never strings. Names are kept for diagnostics and
// printing.
//
// Stability: fields and enumerators are only ever ADDED (at the end of their struct/enum); none is
// renamed, removed or re-purposed. Code must not depend on enumerator values except kNone == 0.
//
// Threading: plain values; a const Module may be read from any number of threads.
#ifndef GPUVM_PTX_AST_H_
#define GPUVM_PTX_AST_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpuvm::ptx {

// ------------------------------------------------------------------------------------------------
// Types

// Fundamental PTX types (PTX ISA 5.2). kPred is the 1-bit predicate type of .reg .pred.
enum class ScalarType : uint8_t {
  kNone = 0,
  kPred,
  kB8,
  kB16,
  kB32,
  kB64,
  kB128,
  kU8,
  kU16,
  kU32,
  kU64,
  kS8,
  kS16,
  kS32,
  kS64,
  kF16,
  kF16x2,
  kBF16,
  kBF16x2,
  kF32,
  kF64,
};

// Size in bytes (kPred: 1, kNone: 0).
uint32_t TypeSize(ScalarType type);
bool IsBitType(ScalarType type);             // .bN
bool IsUnsignedType(ScalarType type);        // .uN
bool IsSignedType(ScalarType type);          // .sN
bool IsIntegerType(ScalarType type);         // .uN or .sN (not .bN)
bool IsFloatType(ScalarType type);           // .f16 .f16x2 .bf16 .bf16x2 .f32 .f64
std::string_view TypeName(ScalarType type);  // "u32", "pred", ... ("" for kNone)

// State spaces (PTX ISA 5.1). kNone on a ld/st/atom/red/prefetch means the generic address space.
enum class StateSpace : uint8_t {
  kNone = 0,
  kReg,
  kGlobal,
  kShared,  // also `.shared::cta`
  kLocal,
  kConst,
  kParam,
};
std::string_view StateSpaceName(StateSpace space);  // "global", ... ("" for kNone)

// ------------------------------------------------------------------------------------------------
// Modifiers. Each group below is one field of Instruction; kNone means "not written". Which groups
// (and which values) an opcode accepts is checked by the parser and listed in docs/PTX.md.

// Rounding: .rn .rz .rm .rp (floating-point results) and .rni .rzi .rmi .rpi (float -> integral
// value).
enum class Rounding : uint8_t { kNone = 0, kRn, kRz, kRm, kRp, kRni, kRzi, kRmi, kRpi };

// setp/set comparison. Integer: eq ne lt le gt ge (signed/bit) and lo ls hi hs (unsigned). Float:
// eq ne lt le gt ge are ordered (false if either is NaN), equ neu ltu leu gtu geu unordered (true
// if either is NaN), num (neither NaN), nan (either NaN).
enum class CompareOp : uint8_t {
  kNone = 0,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kLo,
  kLs,
  kHi,
  kHs,
  kEqu,
  kNeu,
  kLtu,
  kLeu,
  kGtu,
  kGeu,
  kNum,
  kNan,
};

// The second-stage combine of setp/set (`setp.lt.and.s32 p, a, b, c` is p = (a < b) AND c).
enum class BoolOp : uint8_t { kNone = 0, kAnd, kOr, kXor };

// atom/red operation (.cas and .exch only on atom), and bar.red's reduction (.popc .and .or).
enum class AtomicOp : uint8_t {
  kNone = 0,
  kAdd,
  kMin,
  kMax,
  kInc,
  kDec,
  kCas,
  kExch,
  kAnd,
  kOr,
  kXor,
  kPopc,
};

// Which part of an integer product mul/mad/mul24/mad24 keep: low half, high half, or the full
// double-width product (.wide: the destination, and mad's addend, have twice the size of the
// instruction type).
enum class MulMode : uint8_t { kNone = 0, kLo, kHi, kWide };

enum class ShuffleMode : uint8_t { kNone = 0, kUp, kDown, kBfly, kIdx };
enum class VoteMode : uint8_t { kNone = 0, kAll, kAny, kUni, kBallot };
// prmt's mode; kNone is the default byte-select permute with a selector register/immediate.
enum class PermuteMode : uint8_t { kNone = 0, kF4e, kB4e, kRc8, kEcl, kEcr, kRc16 };
enum class TestProperty : uint8_t {
  kNone = 0,
  kFinite,
  kInfinite,
  kNumber,
  kNotANumber,
  kNormal,
  kSubnormal,
};

// Memory-consistency qualifiers of ld/st/atom/red/fence. kVolatile is ld.volatile/st.volatile; kSc
// only on fence. atom/red without one is .relaxed in the PTX memory model.
enum class MemoryOrder : uint8_t {
  kNone = 0,
  kWeak,
  kVolatile,
  kRelaxed,
  kAcquire,
  kRelease,
  kAcqRel,
  kSc
};
// Scopes: .cta, .gpu (membar.gl is written as kGpu), .sys. kNone: the default (.gpu for atom/red).
enum class MemoryScope : uint8_t { kNone = 0, kCta, kGpu, kSys };
// Cache operators of ld/st (.ca .cg .cs .lu .cv .wb .wt). Performance hints only; semantics are the
// same.
enum class CacheOp : uint8_t { kNone = 0, kCa, kCg, kCs, kLu, kCv, kWb, kWt };

// Single-word modifiers, as bits of Instruction::flags.
enum Flag : uint32_t {
  kFlagFtz = 1u << 0,  // .ftz: flush f32 subnormal inputs and results to sign-preserving zero
  kFlagSat = 1u << 1,  // .sat: clamp (float: to [0,1], NaN -> 0; s32 add/sub/mad.hi: to int range)
  kFlagApprox = 1u << 2,  // .approx
  kFlagFull = 1u << 3,    // div.full.f32
  kFlagUni = 1u << 4,     // bra.uni / call.uni / ret.uni: the compiler promises no divergence
  kFlagNc = 1u << 5,      // ld.global.nc: read-only (non-coherent) data path
  kFlagCc = 1u << 6,      // .cc: write the carry flag (add.cc, sub.cc, mad.cc, addc.cc, ...)
  kFlagTo =
      1u << 7,  // cvta.to: generic -> state-space address (without it: state space -> generic)
  kFlagSync = 1u << 8,      // bar.sync, barrier.sync, shfl.sync, vote.sync, bar.warp.sync
  kFlagArrive = 1u << 9,    // bar.arrive
  kFlagRed = 1u << 10,      // bar.red
  kFlagAligned = 1u << 11,  // barrier.*.aligned; the parser also sets it on bar.sync/arrive/red
                            // (bar.sync is barrier.sync.aligned by definition)
  kFlagWarp = 1u << 12,     // bar.warp.sync (warp-level sync with a member mask, not a CTA barrier)
  kFlagShiftAmt = 1u << 13,  // bfind.shiftamt
  kFlagLeft = 1u << 14,      // shf.l
  kFlagRight = 1u << 15,     // shf.r
  kFlagClamp = 1u << 16,     // shf.clamp
  kFlagWrap = 1u << 17,      // shf.wrap
  kFlagNaN = 1u << 18,  // min.NaN / max.NaN: NaN in -> NaN out (otherwise NaN inputs are ignored)
  kFlagCacheHint =
      1u << 19,        // one or more .L1::/.L2:: eviction/prefetch hints (ignored, no semantics)
  kFlagL1 = 1u << 20,  // prefetch.L1
  kFlagL2 = 1u << 21,  // prefetch.L2
};

// ------------------------------------------------------------------------------------------------
// Declarations

// Index into Function::registers.
using RegId = uint32_t;
inline constexpr RegId kNoReg = 0xffffffffu;

struct Register {
  ScalarType type = ScalarType::kNone;
  std::string name;  // "%r12", "%p1", "%SP", "temp_param_reg"
};

enum class Linkage : uint8_t { kNone = 0, kVisible, kExtern, kWeak, kCommon };

// Where a variable's address points when its name is used (Symbol::kind says which table it lives
// in). `init` holds the bytes of an initializer, little-endian, covering a prefix of the variable
// (the rest is zero); `relocations` are initializer elements that are addresses of other
// variables/functions
// (`= {gvals, generic(x)}`), each to be added at `offset` as an 8-byte (or 4-byte for 32-bit
// elements) address.
struct Relocation {
  uint64_t offset = 0;  // byte offset inside the variable
  uint32_t size = 8;    // 4 or 8
  bool generic =
      false;  // `generic(x)`: the generic address of x, otherwise x's state-space address
  bool is_function =
      false;  // the target is Module::functions[index] (a function pointer), else globals[index]
  uint32_t index = 0;
  int64_t addend = 0;  // `x+8`: added to the target's address
};

struct Variable {
  std::string name;
  StateSpace space = StateSpace::kNone;
  ScalarType type = ScalarType::kNone;  // element type (kB8 for nvcc's byte arrays)
  uint32_t vector = 1;                  // .v2/.v4 element vectors
  uint32_t align = 0;                   // .align N in bytes; 0 = natural (element size)
  // Array shape: elements = product of dims; `x[]` (unsized) has unsized == true and elements == 0.
  // Scalars have no dims and elements == 1.
  std::vector<uint64_t> dims;
  uint64_t elements = 1;
  bool unsized = false;
  Linkage linkage = Linkage::kNone;  // kExtern on `.extern .shared x[]` (dynamic shared memory)
  std::vector<uint8_t> init;         // see above; empty when no initializer
  std::vector<Relocation> relocations;
  // Kernel parameters with `.ptr` attributes: the space they point to and the promised alignment.
  StateSpace ptr_space = StateSpace::kNone;
  uint32_t ptr_align = 0;
  bool managed = false;  // .attribute(.managed): host and device share it (runtime/core/jit.cc)
  uint32_t line = 0;

  uint32_t ElementSize() const;  // TypeSize(type) * vector
  uint64_t SizeBytes() const;    // ElementSize() * elements (0 when unsized)
  uint32_t Alignment() const;    // align, or ElementSize() when not given
};

// ------------------------------------------------------------------------------------------------
// Operands

// A named memory location or code address, resolved.
struct Symbol {
  enum class Kind : uint8_t {
    kNone = 0,
    kGlobal,    // Module::globals[index]
    kParam,     // Function::params[index]   (kernel/function input parameter)
    kReturn,    // Function::returns[index]  (function return parameter, e.g. func_retval0)
    kLocal,     // Function::locals[index]   (.local/.shared/.param/.const declared in the body)
    kFunction,  // Module::functions[index]
  };
  Kind kind = Kind::kNone;
  uint32_t index = 0;
};

// The special registers, one per row of ptx/special_registers.def (%tid, %ntid, %ctaid, %nctaid
// take a component: .x .y .z => 0 1 2; the others have none).
enum class SpecialRegister : uint8_t {
  kNone = 0,
#define GPUVM_PTX_SREG(e, name, type, component) e,
#include "ptx/special_registers.def"
#undef GPUVM_PTX_SREG
};
inline constexpr SpecialRegister kFirstSpecialRegister = SpecialRegister::kTid;
inline constexpr SpecialRegister kLastSpecialRegister = SpecialRegister::kEnvreg31;
std::string_view SpecialRegisterName(SpecialRegister sreg);  // "%tid", ...
// The natural type (u64 for %clock64, %globaltimer, %gridid, %pmN_64, %current_graph_exec; u32
// for the rest).
ScalarType SpecialRegisterType(SpecialRegister sreg);
bool SpecialRegisterHasComponent(SpecialRegister sreg);

enum class OperandKind : uint8_t {
  kNone = 0,
  kRegister,      // reg (negated: `!%p`, only on predicate sources where PTX allows it)
  kRegisterPair,  // `reg|reg2`: shfl.sync's value|in-range predicate, setp's p|q
  kSink,          // `_`: a destination whose value is discarded
  kSpecial,       // sreg (+ component)
  kImmediate,     // imm_kind + imm_bits
  kAddress,       // [base + offset]: base is a register, a symbol, or nothing (absolute address)
  kSymbol,        // a variable's or function's address (`mov.u32 %r1, sh`), or a call's .param slot
  kLabel,         // Function::labels[label]
  kVector,        // {a, b, c, d}: elements are kRegister / kImmediate / kSink
};

// How the bits of an immediate are to be read. Integer literals are stored as their 64-bit two's
// complement value; 0fXXXXXXXX as the f32 bit pattern in the low 32 bits; 0dXXXXXXXXXXXXXXXX and
// decimal floating literals (1.5) as the f64 bit pattern. The translator converts to the slot type
// (an integer literal used as an f32 operand means that integer value as a float; an f64 literal
// used as f32 is rounded to nearest). An integer in a .pred slot (`mov.pred %p, -1`, as nvcc -G
// writes it) is false when zero and true otherwise.
enum class ImmKind : uint8_t { kNone = 0, kInt, kF32, kF64 };

enum class AddressBase : uint8_t { kNone = 0, kRegister, kSymbol };

struct Operand {
  OperandKind kind = OperandKind::kNone;
  bool negated = false;  // kRegister only: `!%p`
  RegId reg = kNoReg;    // kRegister, kRegisterPair (first), kAddress with base kRegister
  RegId reg2 = kNoReg;   // kRegisterPair: the second register (always .pred)
  SpecialRegister sreg = SpecialRegister::kNone;
  uint8_t component = 0;  // kSpecial: 0=x 1=y 2=z
  ImmKind imm_kind = ImmKind::kNone;
  uint64_t imm_bits = 0;
  AddressBase base = AddressBase::kNone;  // kAddress
  Symbol symbol;                          // kSymbol, kAddress with base kSymbol
  int64_t offset = 0;                     // kAddress, kSymbol: byte offset added to the base
  uint32_t label = 0;                     // kLabel
  std::vector<Operand> elements;          // kVector (2 or 4 elements; never nested)

  // Immediate helpers (for kImmediate).
  int64_t ImmAsInt() const;    // kInt as is; floats truncated toward zero (saturating)
  double ImmAsDouble() const;  // the value as a double
  float ImmAsFloat() const;    // the value as a float (kF32 exactly)
};

// The instruction's guard: `@%p` (negated == false) or `@!%p`. reg == kNoReg: no guard.
struct Guard {
  RegId reg = kNoReg;
  bool negated = false;
  bool present() const { return reg != kNoReg; }
};

// ------------------------------------------------------------------------------------------------
// Instructions

enum class Opcode : uint16_t {
  kNone = 0,
  // integer and float arithmetic
  kAdd,
  kSub,
  kMul,
  kMad,
  kMul24,
  kMad24,
  kSad,
  kDiv,
  kRem,
  kAbs,
  kNeg,
  kMin,
  kMax,
  kAddc,
  kSubc,
  kMadc,
  kFma,
  kRcp,
  kSqrt,
  kRsqrt,
  kSin,
  kCos,
  kLg2,
  kEx2,
  kTanh,
  kCopysign,
  kTestp,
  // bit manipulation and logic
  kPopc,
  kClz,
  kBfind,
  kBrev,
  kBfe,
  kBfi,
  kBmsk,
  kPrmt,
  kLop3,
  kShf,
  kShl,
  kShr,
  kAnd,
  kOr,
  kXor,
  kNot,
  kCnot,
  kDp4a,
  // comparison and selection
  kSetp,
  kSet,
  kSelp,
  kSlct,
  // data movement and conversion
  kMov,
  kCvt,
  kCvta,
  kLd,
  kLdu,
  kSt,
  kPrefetch,
  kIsspacep,
  // atomics
  kAtom,
  kRed,
  // synchronization and warp-level
  kBar,  // `bar.*` and `barrier.*` (see kFlagAligned, kFlagWarp, kFlagArrive, kFlagRed)
  kMembar,
  kFence,
  kShfl,
  kVote,
  kActivemask,
  // control flow
  kBra,
  kCall,
  kRet,
  kExit,
  kTrap,
  kBrkpt,
  kNanosleep,
};
std::string_view OpcodeName(Opcode op);  // the PTX mnemonic root ("add", "bar", ...)

// Operand layout by opcode (d = destination, a/b/c = sources; all in PTX order):
//   most arithmetic and logic  d, a[, b[, c]]
//   setp                       p (or a p|q pair), a, b[, c]
//   selp, slct                 d, a, b, c
//   ld, ldu                    d (or a kVector), [addr]
//   st                         [addr], a (or a kVector)
//   atom                       d, [addr], b[, c for .cas]
//   red                        [addr], b
//   cvta                       d, a (a: register, or kSymbol without .to)
//   mov                        d, a (a may be kSymbol, kSpecial, or kVector to pack;
//                              d may be kVector to unpack)
//   shfl                       d (or a d|p pair), a, b, c, membermask
//   vote                       d, a, membermask
//   bar                        a[, b]; bar.red: d, a[, b], c; bar.warp.sync: membermask
//   bra                        label
//   ret, exit, trap            none
//   call                       [results..., args...], each a kSymbol naming a .param variable;
//                              the callee is Instruction::callee; call_results say how many
//                              leading operands are results
struct Instruction {
  Opcode opcode = Opcode::kNone;
  // Type suffixes in source order. type: the instruction type (cvt/set/slct/dp4a: the destination
  // type); type2: the second type where the opcode has one (cvt's source type, set's/slct's
  // comparison type, dp4a's b type).
  ScalarType type = ScalarType::kNone;
  ScalarType type2 = ScalarType::kNone;
  StateSpace space =
      StateSpace::kNone;  // ld/st/ldu/atom/red/cvta/isspacep/prefetch (kNone = generic)
  uint8_t vector = 1;     // .v2 / .v4 on ld/st/ldu
  Rounding rounding = Rounding::kNone;
  CompareOp compare = CompareOp::kNone;
  BoolOp bool_op = BoolOp::kNone;
  AtomicOp atomic_op = AtomicOp::kNone;
  MulMode mul_mode = MulMode::kNone;
  ShuffleMode shuffle = ShuffleMode::kNone;
  VoteMode vote = VoteMode::kNone;
  PermuteMode permute = PermuteMode::kNone;
  TestProperty test = TestProperty::kNone;
  MemoryOrder order = MemoryOrder::kNone;
  MemoryScope scope = MemoryScope::kNone;
  CacheOp cache = CacheOp::kNone;
  uint32_t flags = 0;  // Flag bits
  Guard guard;
  std::vector<Operand> operands;
  uint32_t callee = 0;        // call: index into Module::functions
  uint32_t call_results = 0;  // call: how many leading operands are results
  uint32_t line = 0;          // 1-based source line

  bool Has(Flag flag) const { return (flags & flag) != 0; }
};

struct Label {
  std::string name;
  uint32_t target =
      0;  // index into Function::body of the instruction that follows (may == body.size())
  uint32_t line = 0;
};

// ------------------------------------------------------------------------------------------------
// Functions and the module

struct Function {
  std::string name;
  bool is_entry = false;  // .entry (a kernel) vs .func
  bool has_body = false;  // false: a prototype only (e.g. `.extern .func vprintf`)
  Linkage linkage = Linkage::kNone;
  std::vector<Variable> params;   // .param inputs, in order
  std::vector<Variable> returns;  // .func return parameters (at most one in practice)
  std::vector<Register> registers;
  std::vector<Variable> locals;
  std::vector<Label> labels;
  std::vector<Instruction> body;
  // Performance directives; 0 = not given.
  std::array<uint32_t, 3> maxntid{};
  std::array<uint32_t, 3> reqntid{};
  uint32_t minnctapersm = 0;
  uint32_t maxnreg = 0;
  bool noreturn = false;  // .noreturn on a .func
  uint32_t line = 0;
};

struct Module {
  uint32_t version_major = 0, version_minor = 0;  // .version
  std::string target;                             // "sm_75"
  uint32_t sm_version = 0;                        // 75
  uint32_t address_size = 64;                     // always 64 (32-bit PTX is rejected)
  std::vector<Variable> globals;
  std::vector<Function> functions;

  // Index of the function with this name, or -1.
  int FindFunction(std::string_view name) const;
  // Index of the module-scope variable with this name, or -1.
  int FindGlobal(std::string_view name) const;
};

// The variable a Symbol names inside `function` (nullptr for kNone/kFunction or an out-of-range
// index).
const Variable* ResolveVariable(const Module& module, const Function& function,
                                const Symbol& symbol);

// "line 12: in kernel 'name': " / "in function 'name'" — the prefix every load-time error starts
// with, so the translator's errors read like the parser's.
std::string DescribeLocation(const Function& function, uint32_t line);

}  // namespace gpuvm::ptx

#endif  // GPUVM_PTX_AST_H_
