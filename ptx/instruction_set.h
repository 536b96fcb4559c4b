// The supported PTX instruction set: which mnemonics exist, which modifiers each accepts, and which
// operand shapes and types each takes. The parser (ptx/parser_instructions.cc) uses it to decode
// and validate every instruction; the printer (ptx/printer.cc) uses its tables to spell
// instructions back. docs/PTX.md describes the same subset in prose — keep the two in step.
//
// Threading: the tables are immutable after static initialization; every function is safe from any
// thread.
#ifndef GPUVM_PTX_INSTRUCTION_SET_H_
#define GPUVM_PTX_INSTRUCTION_SET_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "ptx/ast.h"

namespace gpuvm::ptx {

// Modifier groups, one per Instruction field (kFlag: a bit of Instruction::flags).
enum class ModGroup : uint8_t {
  kType,
  kSpace,
  kVector,
  kRounding,
  kCompare,
  kBoolOp,
  kAtomic,
  kMulMode,
  kShuffle,
  kVote,
  kPermute,
  kTest,
  kOrder,
  kScope,
  kCache,
  kFlag,
};

struct OpcodeInfo {
  std::string_view mnemonic;
  Opcode opcode;
  uint32_t
      groups;  // bit (1 << ModGroup) per accepted group; kType and kFlag are implied by the masks
  uint32_t flags;   // accepted Flag bits
  uint64_t types;   // accepted instruction types (bit 1 << ScalarType); 0 = takes no type
  uint64_t types2;  // accepted second types; 0 = takes no second type
  bool type_optional;
};

// The entry for a mnemonic root ("add", "barrier"), or nullptr when the instruction is not
// supported.
const OpcodeInfo* FindOpcode(std::string_view mnemonic);

// Applies one modifier (the text after the dot, e.g. "rn", "shared::cta") to `inst`. Returns "" or
// what is wrong ("modifier '.lo' is not valid here", "duplicate ..."). Values the group does not
// allow for this opcode are caught later by CheckModifiers.
std::string ApplyModifier(const OpcodeInfo& info, std::string_view word, Instruction* inst);

// After every modifier is applied: checks the combination (required groups present, values allowed
// for the opcode and type, exclusive modifiers). Returns "" or the problem.
std::string CheckModifiers(const OpcodeInfo& info, const Instruction& inst);

// Checks operand count, kinds and register/immediate types against the opcode's signature. Symbols,
// registers and labels must already be resolved (indices valid for `function`). Calls are checked
// by CheckCall. Returns "" or the problem.
std::string CheckOperands(const Module& module, const Function& function, const Instruction& inst);

// Checks a call's results and arguments against the callee's declaration.
std::string CheckCall(const Module& module, const Function& function, const Instruction& inst);

// The mnemonic with modifiers, as PTX spells it: "ld.global.nc.v4.f32". Modifiers come in one
// canonical order, so it parses back to the same Instruction.
std::string InstructionMnemonic(const Instruction& inst);

// True if a register of type `reg` may stand where the instruction expects `want` (PTX ISA "operand
// type checking"): same size and not int-vs-float (bit types match any type of their size); with
// `relaxed` (ld/st/cvt), an integer or bit register may also be wider than an integer/bit `want`.
bool RegisterTypeFits(ScalarType reg, ScalarType want, bool relaxed);

}  // namespace gpuvm::ptx

#endif  // GPUVM_PTX_INSTRUCTION_SET_H_
