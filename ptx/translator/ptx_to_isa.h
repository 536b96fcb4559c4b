// How the translator maps PTX (ptx/ast.h) onto GVISA (gpu/isa/isa.h): the ISA type of a memory
// access or an arithmetic operation on a PTX type, the register kind a PTX register needs, the
// bits of an immediate in a slot of a given type, and the GVISA value of each PTX modifier the
// lowering passes through (rounding, comparison, atomic operation, vote and shuffle modes,
// special registers). Pure data and pure functions, so that the lowering files (lower_*.cc) say
// only what they emit.
//
// Threading: pure functions; call from any thread.
#ifndef GPUVM_PTX_TRANSLATOR_PTX_TO_ISA_H_
#define GPUVM_PTX_TRANSLATOR_PTX_TO_ISA_H_

#include <cstdint>
#include <optional>

#include "base/align.h"
#include "gpu/isa/isa.h"
#include "ptx/ast.h"
#include "ptx/translator/vcode.h"

namespace gpuvm::ptx::translator {

// f16, f16x2, bf16, bf16x2: formats the translator moves and converts but does not compute on.
bool IsF16Like(ScalarType t);
// A 16-bit integer or bit type (computed in 32-bit rows).
bool Is16(ScalarType t);
// f32 or f64.
bool IsF(ScalarType t);

// The ISA type of a memory access / conversion of PTX type t (f16 travels as 16 raw bits).
isa::Type MemType(ScalarType t);
// The ISA type of an arithmetic operation on PTX type t: 16-bit integers compute in 32 bits.
isa::Type AluType(ScalarType t);
// The vreg kind a PTX register of type t lives in.
VKind KindOf(ScalarType t);

// The ISA rounding modifier of a PTX rounding (0, the default, for none).
uint8_t RoundingMod(Rounding r);
// The modifier of a float operation or conversion: its rounding, and kModSat for `.sat`.
uint8_t RoundSatMod(const Instruction& in);

// The bits an immediate stands for in a slot of type t (docs/PTX.md: integer literals in float
// slots are values; float literals in bit slots are their bit patterns).
uint64_t ImmBits(const Operand& op, ScalarType t);

// A PTX comparison as the ISA's, with whether it compares unsigned whatever the type (lo ls hi
// hs). nullopt for kNone.
struct IsaCompare {
  isa::Compare cmp;
  bool force_unsigned;
};
std::optional<IsaCompare> CompareOf(CompareOp op);

// The predicate operation that combines setp/set's comparison with its `c` operand (.and .or
// .xor; kNone, where there is no `c`, maps like .xor and is never used).
isa::PlopOp PlopOf(BoolOp op);

// The ISA atomic operation of a PTX atom/red operation; nullopt for bar.red's .popc and kNone.
std::optional<isa::AtomOp> AtomOpOf(AtomicOp op);

// The ISA space of an access in a PTX state space (kNone: generic; .param: the call slots in local
// memory — kernel parameters, in constant bank 0, are resolved by symbol); nullopt for the rest.
std::optional<isa::Space> SpaceOf(StateSpace space);

// vote and shfl modes (PTX's kNone, which the parser never lets through, maps like ballot / idx).
isa::VoteMode VoteModeOf(VoteMode mode);
isa::ShflMode ShflModeOf(ShuffleMode mode);

// The special register a PTX special register operand (with its .x/.y/.z component) reads;
// nullopt for one the ISA has no register for.
std::optional<isa::SpecialReg> SpecialRegOf(SpecialRegister sreg, uint8_t component);

}  // namespace gpuvm::ptx::translator

#endif  // GPUVM_PTX_TRANSLATOR_PTX_TO_ISA_H_
