// Private to the PTX instruction-set unit (instruction_set.cc, modifier_rules.cc,
// operand_rules.cc): the small helpers the opcode/modifier tables and the rule checks share. Not
// for other users; the public contract is ptx/instruction_set.h.
//
// Threading: constants and pure functions.
#ifndef GPUVM_PTX_INSTRUCTION_SET_INTERNAL_H_
#define GPUVM_PTX_INSTRUCTION_SET_INTERNAL_H_

#include <cstdint>
#include <string_view>

#include "ptx/ast.h"
#include "ptx/instruction_set.h"

namespace gpuvm::ptx::instruction_set_internal {

using T = ScalarType;

// The bit of a type in OpcodeInfo::types / types2.
constexpr uint64_t Bit(ScalarType t) { return uint64_t{1} << static_cast<unsigned>(t); }
// The bit of a modifier group in OpcodeInfo::groups.
constexpr uint32_t Group(ModGroup g) { return uint32_t{1} << static_cast<unsigned>(g); }
// An enum's value as a modifier value.
constexpr uint32_t V(auto e) { return static_cast<uint32_t>(e); }

// The canonical spelling of a modifier (the first dictionary entry for (group, value)), or "?".
std::string_view Spelling(ModGroup group, uint32_t value);

inline bool IsFloatRounding(Rounding r) {
  return r == Rounding::kRn || r == Rounding::kRz || r == Rounding::kRm || r == Rounding::kRp;
}
inline bool IsIntRounding(Rounding r) {
  return r == Rounding::kRni || r == Rounding::kRzi || r == Rounding::kRmi || r == Rounding::kRpi;
}

}  // namespace gpuvm::ptx::instruction_set_internal

#endif  // GPUVM_PTX_INSTRUCTION_SET_INTERNAL_H_
