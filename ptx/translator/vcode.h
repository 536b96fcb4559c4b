// The translator's intermediate form: GVISA instructions over an unbounded set of virtual registers
// ("vregs"), with branch targets as label ids. The lowering (translator.cc) produces it; the register
// allocator (regalloc.h) maps vregs to the 255 register rows and 63 predicates of the ISA and emits the
// final isa::Kernel.
//
// Threading: plain values, used by one translation at a time.
#ifndef GPUVM_PTX_TRANSLATOR_VCODE_H_
#define GPUVM_PTX_TRANSLATOR_VCODE_H_

#include <cstdint>
#include <vector>

#include "gpu/isa/encoding.h"

namespace gpuvm::ptx::translator {

inline constexpr uint32_t kNoV = 0xffffffffu;  // the slot is not used by the opcode (field 0)
inline constexpr uint32_t kRZ = 0xfffffffeu;   // register slot reading zero / discarding the write
inline constexpr uint32_t kPT = 0xfffffffdu;   // predicate slot: always true
inline constexpr bool IsVReg(uint32_t v) { return v < kPT; }

enum class VKind : uint8_t { kReg32, kReg64, kPred };

struct VRegInfo {
  VKind kind = VKind::kReg32;
  // A temporary of one PTX instruction's expansion: read only inside that expansion, under the same guard,
  // so a guarded write to it need not preserve the old value (see regalloc.cc).
  bool temp = false;
};

struct VInst {
  // Opcode, type, type2, modifiers, immediate, guard negation; the register/predicate fields of `in` are
  // filled by the allocator from the slots below (S2R keeps its special register in in.a).
  isa::Instruction in;
  uint32_t d = kNoV;  // destination (register or predicate)
  uint32_t a = kNoV, b = kNoV, c = kNoV;
  uint32_t m = kNoV;          // bfi's length register (encoded in the mod field)
  uint32_t shfl_pred = kNoV;  // shfl's optional predicate destination
  uint32_t guard = kPT;
  uint32_t label = kNoV;  // bra: the target label
  uint32_t line = 0;      // PTX source line, for errors
};

struct VCode {
  std::vector<VInst> code;
  std::vector<VRegInfo> vregs;
  std::vector<uint32_t> label_pos;  // label id -> instruction index (kNoV while unbound)

  uint32_t NewVReg(VKind kind, bool temp = false) {
    vregs.push_back({kind, temp});
    return static_cast<uint32_t>(vregs.size() - 1);
  }
  uint32_t NewLabel() {
    label_pos.push_back(kNoV);
    return static_cast<uint32_t>(label_pos.size() - 1);
  }
  void Bind(uint32_t label) { label_pos[label] = static_cast<uint32_t>(code.size()); }
};

}  // namespace gpuvm::ptx::translator

#endif  // GPUVM_PTX_TRANSLATOR_VCODE_H_
