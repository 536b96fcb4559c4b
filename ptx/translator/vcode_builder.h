// VCodeBuilder: appends GVISA instructions over virtual registers to a VCode (vcode.h) — the
// translator's small vocabulary of "emit this" (a move, a conversion, a two-operand ALU op into a
// fresh temporary, a compare, a predicate op, a select, a special-register read). Every emitted
// instruction carries the current guard and source line, which the translator sets per PTX
// instruction. It knows GVISA, not PTX: the PTX-facing lowering is KernelTranslator
// (kernel_translator.h), which builds on it.
//
// Threading: one builder per kernel translation, used by one thread.
#ifndef GPUVM_PTX_TRANSLATOR_VCODE_BUILDER_H_
#define GPUVM_PTX_TRANSLATOR_VCODE_BUILDER_H_

#include <cstdint>

#include "gpu/isa/isa.h"
#include "ptx/translator/vcode.h"

namespace gpuvm::ptx::translator {

class VCodeBuilder {
 public:
  using IOp = isa::Opcode;
  using IT = isa::Type;

  // A source operand: a register, or an immediate.
  struct Value {
    uint32_t reg = kNoV;
    bool is_imm = false;
    uint64_t imm = 0;
  };
  static Value R(uint32_t reg) { return Value{reg, false, 0}; }
  static Value I(uint64_t imm) { return Value{kNoV, true, imm}; }

  // The guard (a predicate vreg or kPT) and PTX line of the instructions emitted from now on.
  void SetGuard(uint32_t guard, bool negated) {
    guard_ = guard;
    guard_negated_ = negated;
  }
  uint32_t guard() const { return guard_; }
  bool guard_negated() const { return guard_negated_; }
  void SetLine(uint32_t line) { line_ = line; }

  // A new instruction under the current guard; the caller fills its operands.
  VInst& Emit(isa::Opcode op, isa::Type type = isa::Type::kU8);

  uint32_t Temp(VKind k) { return vc_.NewVReg(k, /*temp=*/true); }
  uint32_t TempFor(isa::Type t) { return Temp(isa::Is64(t) ? VKind::kReg64 : VKind::kReg32); }
  VKind KindOfVReg(uint32_t v) const { return vc_.vregs[v].kind; }

  // A fresh temporary holding `bits` (truncated to 32 bits for a 32-bit type).
  uint32_t MovImm(isa::Type t, uint64_t bits);
  // A fresh temporary holding `a` converted from `src` to `dst` (mod: rounding | saturate).
  uint32_t Cvt(isa::Type dst, isa::Type src, uint32_t a, uint8_t mod = 0);
  // d = op(a, b|imm) into a fresh temp (of `dtype_for_temp` when it differs from t).
  uint32_t Bin(isa::Opcode op, isa::Type t, uint32_t a, Value b, uint8_t mod = 0,
               isa::Type dtype_for_temp = isa::Type::kU8);
  void BinTo(uint32_t d, isa::Opcode op, isa::Type t, uint32_t a, Value b, uint8_t mod = 0);
  // d = op(a, b|imm, c): the three-source forms (mad, fma, madwide, bfe's length).
  void TriTo(uint32_t d, isa::Opcode op, isa::Type t, uint32_t a, Value b, uint32_t c,
             uint8_t mod = 0);
  uint32_t Tri(isa::Opcode op, isa::Type t, uint32_t a, Value b, uint32_t c, uint8_t mod = 0);
  void MovTo(uint32_t d, isa::Type t, uint32_t a);
  void MovTo(uint32_t d, isa::Type t, Value a);
  // A fresh predicate = a cmp b.
  uint32_t Setp(isa::Compare cmp, isa::Type t, uint32_t a, Value b);
  void PlopTo(uint32_t d, isa::PlopOp op, uint32_t a, bool neg_a, uint32_t b, bool neg_b);
  // d = p ? a : b (32 or 64 bit); `negate` selects on !p.
  void SelTo(uint32_t d, isa::Type t, uint32_t a, Value b, uint32_t p, bool negate = false);
  // A memory instruction (ld, st, atom) on [base + offset] in `space`, the offset in the extension
  // word even when it is 0; the caller fills the value operands.
  VInst& EmitMem(isa::Opcode op, isa::Type t, isa::Space space, uint32_t base, uint64_t offset);
  // A fresh temporary holding special register `sr` (32 or 64 bits as the register is).
  uint32_t S2R(isa::SpecialReg sr);
  // Sets the c operand of `v`: a 32-bit immediate in the extension word, or a register (prmt's
  // selector, shf's shift).
  static void SetCOrImm(VInst& v, Value c);

 protected:
  VCode vc_;  // the code so far; the translator also reads it (labels, regions, the last inst)

 private:
  // Sets v's b operand: the immediate (32 bits for a 32-bit type) or the register.
  static void SetBOrImm(VInst& v, isa::Type t, Value b);

  uint32_t guard_ = kPT;
  bool guard_negated_ = false;
  uint32_t line_ = 0;
};

}  // namespace gpuvm::ptx::translator

#endif  // GPUVM_PTX_TRANSLATOR_VCODE_BUILDER_H_
