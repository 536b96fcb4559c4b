// What every GVISA opcode is, as data: its mnemonic, operand fields, legal types, the meaning of
// its mod field and its flags, one entry per line of opcodes.def. The validator (encoding.cc),
// the assembler, the disassembler and the JIT's register allocator read this table instead of
// each keeping a switch over the opcodes; what an opcode computes stays code (gpu/sim/compute).
// docs/ISA.md "Adding an opcode" walks through a new entry.
//
// Threading: constants and pure functions.
#ifndef GPUVM_GPU_ISA_OPCODE_TABLE_H_
#define GPUVM_GPU_ISA_OPCODE_TABLE_H_

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "gpu/isa/encoding.h"
#include "gpu/isa/isa.h"

namespace gpuvm::isa {

// How an opcode's operands are read and written. kGeneric opcodes are described completely by
// their OperandSpecs; the others have their own code in each tool (the operands text is then for
// people).
enum class Form : uint8_t {
  kGeneric,
  kCvt,    // d(type) = a(type2), rounding and saturation in mod
  kLoad,   // d = [a + imm]; space, address width, wide register in mod; bank in type2
  kStore,  // [a + imm] = b; as kLoad
  kAtom,   // d = op([a + imm], b, c); op in type2
  kShfl,   // shuffle; mode in mod, lane/clamp immediates and predicate in the extension word
  kVote,   // vote; mode and negation in mod, d a predicate or (ballot) a register
};

// The legal values of the type field (the error message names them).
enum class TypeRule : uint8_t {
  kNone,           // no type: the field is zero, the text has no type suffix
  kAlu32or64,      // u32 s32 u64 s64 f32 f64 ("a 32- or 64-bit type")
  kAlu,            // u32 s32 u64 s64 f32 f64
  kInt,            // u32 s32 u64 s64
  kIntSource,      // u32 s32 u64 s64, naming the source (popc, clz: the result is 32-bit)
  kWideSource,     // u32 s32, naming the sources (mulwide, madwide: the result is 64-bit)
  kFloat,          // f32 f64
  kSignedOrFloat,  // s32 s64 f32 f64
  kU32U64,
  kU32,
  kU64,
  kSpecialReg,  // u32, or u64 for a 64-bit special register (s2r; a must name one)
  kForm,        // checked by the opcode's form
};

// What the mod field holds.
enum class ModRule : uint8_t {
  kZero,      // nothing: zero
  kArith,     // floats: rounding (rn rz rm rp) and .sat; integers: nothing
  kArithSat,  // as kArith, and .sat for s32
  kRound,     // floats: rounding (rn rz rm rp)
  kRoundSat,  // rounding and .sat
  kSelect,    // bit 0 negates the p(c) selector
  kPrmt,      // PrmtMode
  kShf,       // kShfRight | kShfClamp
  kTestp,     // TestpMode
  kCompare,   // Compare (the unordered ones for floats only)
  kPlop,      // PlopOp | kPlopNegA | kPlopNegB
  kBarrier,   // barrier id 0..15, written as an n(mod) operand
  kFence,     // fence level 0..2: .cta .gl .sys
  kTrap,      // TrapCode: nothing or .assert
  kRegister,  // a register, written as an r(mod) operand
  kForm,      // checked by the opcode's form
};

enum OpFlag : uint8_t {
  kMemRead = 1 << 0,
  kMemWrite = 1 << 1,
  kSync = 1 << 2,        // acts across a warp or a block (barriers, fences, shuffles, votes)
  kControl = 1 << 3,     // may leave the straight-line order (branches, calls, exit, trap)
  kEndsKernel = 1 << 4,  // unguarded, control cannot fall through: may end a kernel
};

// One operand of a kGeneric opcode.
enum class OperandKind : uint8_t {
  kReg,         // a register (RZ allowed)
  kRegOrImm,    // a register, or the extension word's immediate in its place
  kPred,        // a predicate; a destination in field d
  kSpecialReg,  // s2r's special register number
  kNumber,      // a number kept in the field (bar's id in mod)
  kTarget,      // a branch target: the extension word
};
enum class Field : uint8_t { kD, kA, kB, kC, kMod, kNone };

struct OperandSpec {
  OperandKind kind = OperandKind::kReg;
  Field field = Field::kNone;
  uint8_t rows = 0;       // 32-bit rows of a register; 0: as the instruction's type
  std::string_view name;  // in error messages ("b", "shift", "return address")
};

inline constexpr int kMaxOperands = 5;
struct OperandList {
  std::array<OperandSpec, kMaxOperands> items{};
  uint8_t count = 0;
  bool valid = true;  // the text parsed (checked at compile time)

  std::span<const OperandSpec> operands() const { return {items.data(), count}; }
};

struct OpcodeInfo {
  Opcode op;
  std::string_view mnemonic;
  Form form;
  std::string_view operands_text;
  OperandList operands;
  TypeRule types;
  ModRule mod;
  uint8_t flags;

  bool Has(OpFlag f) const { return (flags & f) != 0; }
  // The operand in `field`, or nullptr.
  const OperandSpec* OperandIn(Field field) const;
  // Has a branch target in the extension word (bra, call).
  bool HasTarget() const;
  // Its only effect is its register destination (the JIT drops it when that is never read).
  bool IsPure() const;
};

// The entry of an opcode value, or nullptr for a value that is not an opcode.
const OpcodeInfo* FindOpcode(Opcode op);
// The entry spelled `mnemonic`, or nullptr.
const OpcodeInfo* FindOpcode(std::string_view mnemonic);
// Every opcode, in ascending value order.
std::span<const OpcodeInfo> AllOpcodes();

// The byte of `inst` that holds `field` (nullptr for kNone), and its value (0 for kNone).
uint8_t* FieldOf(Instruction* inst, Field field);
uint8_t FieldValue(const Instruction& inst, Field field);

// For the mod rules with negatable predicates (kSelect, kPlop; vote's own): the mod bit that
// negates the predicate in `field`, or 0.
uint8_t NegationBit(ModRule rule, Field field);
// Mod rules whose text takes rounding and .sat suffixes.
bool TakesRounding(ModRule rule);

// Parses an operands column (opcodes.def); constexpr so that a malformed entry fails the build.
constexpr OperandList ParseOperands(std::string_view text) {
  OperandList out;
  auto field_of = [](char ch) {
    switch (ch) {
      case 'd':
        return Field::kD;
      case 'a':
        return Field::kA;
      case 'b':
        return Field::kB;
      case 'c':
        return Field::kC;
      default:
        return Field::kNone;
    }
  };
  auto letter_name = [](Field f) -> std::string_view {
    switch (f) {
      case Field::kD:
        return "destination";
      case Field::kA:
        return "a";
      case Field::kB:
        return "b";
      case Field::kC:
        return "c";
      default:
        return "mod";
    }
  };
  while (!text.empty()) {
    size_t comma = text.find(", ");
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 2);
    if (out.count == kMaxOperands) {
      out.valid = false;
      return out;
    }
    OperandSpec spec;
    size_t eq = item.find('=');
    if (eq != std::string_view::npos) {
      spec.name = item.substr(0, eq);
      item = item.substr(eq + 1);
    }
    auto inner = [&](std::string_view prefix) -> std::string_view {
      if (item.size() <= prefix.size() + 1 || item.substr(0, prefix.size()) != prefix ||
          item.back() != ')') {
        return {};
      }
      return item.substr(prefix.size(), item.size() - prefix.size() - 1);
    };
    if (item == "target") {
      spec.kind = OperandKind::kTarget;
    } else if (std::string_view f = inner("p("); f.size() == 1) {
      spec.kind = OperandKind::kPred;
      spec.field = field_of(f[0]);
    } else if (inner("sreg(") == "a") {
      spec.kind = OperandKind::kSpecialReg;
      spec.field = Field::kA;
    } else if (inner("n(") == "mod") {
      spec.kind = OperandKind::kNumber;
      spec.field = Field::kMod;
    } else if (inner("r(") == "mod") {
      spec.kind = OperandKind::kReg;
      spec.field = Field::kMod;
      spec.rows = 1;
    } else {
      spec.field = field_of(item.empty() ? '?' : item[0]);
      item = item.substr(1);
      if (item.size() >= 4 && item.substr(item.size() - 4) == "|imm") {
        spec.kind = OperandKind::kRegOrImm;
        item = item.substr(0, item.size() - 4);
      }
      if (item == "32") {
        spec.rows = 1;
      } else if (item == "64") {
        spec.rows = 2;
      } else if (!item.empty()) {
        out.valid = false;
      }
    }
    if (spec.field == Field::kNone && spec.kind != OperandKind::kTarget) out.valid = false;
    if (spec.name.empty()) spec.name = letter_name(spec.field);
    out.items[out.count++] = spec;
  }
  return out;
}

}  // namespace gpuvm::isa

#endif  // GPUVM_GPU_ISA_OPCODE_TABLE_H_
