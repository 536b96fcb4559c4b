// The translator's intermediate form: GVISA instructions over an unbounded set of virtual registers
// ("vregs"), with branch targets as label ids. The lowering (kernel_translator.h) produces it; the
// register allocator (regalloc.h) maps vregs to the 255 register rows and 63 predicates of the ISA
// and emits the final isa::Kernel.
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
inline constexpr uint32_t kLink =
    0xfffffffcu;  // the link register (a reserved row) that call writes
inline constexpr bool IsVReg(uint32_t v) { return v < kLink; }

enum class VKind : uint8_t { kReg32, kReg64, kPred };

struct VRegInfo {
  VKind kind = VKind::kReg32;
  // A temporary of one PTX instruction's expansion: read only inside that expansion, under the same
  // guard, so a guarded write to it need not preserve the old value (see regalloc.cc).
  bool temp = false;
};

struct VInst {
  // Opcode, type, type2, modifiers, immediate, guard negation; the register/predicate fields of
  // `in` are filled by the allocator from the slots below (S2R keeps its special register in in.a).
  isa::Instruction in;
  uint32_t d = kNoV;  // destination (register or predicate)
  uint32_t a = kNoV, b = kNoV, c = kNoV;
  uint32_t m = kNoV;          // bfi's length register (encoded in the mod field)
  uint32_t shfl_pred = kNoV;  // shfl's optional predicate destination
  uint32_t guard = kPT;
  uint32_t label = kNoV;  // bra, call: the target label
  uint32_t line = 0;      // PTX source line, for errors
  // >= 0: the immediate is an offset from the end of this stack region's frame, whose size the
  // allocator knows only after it has laid out the save area; it adds the frame size to `in.imm`.
  // On a call: the region of the caller (where live values are saved).
  int32_t frame_region = -1;
};

struct VCode {
  std::vector<VInst> code;
  std::vector<VRegInfo> vregs;
  std::vector<uint32_t> label_pos;  // label id -> instruction index (kNoV while unbound)

  // Real calls (recursive functions). Region 0 is the kernel's own frame at local offset 0; every
  // out-of-line function is a region whose frame starts at the stack pointer. A frame is the
  // region's fixed part (parameters, results, locals) followed by the save area the allocator adds
  // for values live across calls; the next frame starts after it (16-byte aligned).
  std::vector<uint64_t> region_fixed{0};
  uint32_t sp = kNoV;        // the stack pointer vreg (u32, local offset of the current frame)
  uint32_t stack_bytes = 0;  // local memory reserved for the call stack beyond region 0's frame

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
