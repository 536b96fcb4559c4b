// KernelTranslator: the lowering of one PTX kernel (.entry) to a GVISA kernel image — the heart of
// the JIT (translator.h is the public entry point). Private to ptx/translator; the class is
// implemented across files by concern:
//   translator.cc        Run, the prepass (call graph, shared memory, parameters), the body walk
//                        and the per-opcode dispatcher (Lower), Translate/CompilePtx
//   lower_operands.cc    registers, sources and destinations, special registers, symbols and
//                        addresses
//   lower_arith.cc       add/sub/mul/mad/div/..., the 24-bit and carry-chain forms
//   lower_bits.cc        logic, shifts, bit fields, lop3, dp4a, sad; comparisons and selects
//   lower_memory.cc      mov (incl. pack/unpack), cvt, cvta, isspacep, ld/st, atom/red
//   lower_sync.cc        barriers (incl. bar.red), fences, vote, shfl, activemask
//   lower_calls.cc       inlined calls, out-of-line (recursive) functions and their frames
// The GVISA-only emission vocabulary is VCodeBuilder (vcode_builder.h); the PTX -> GVISA value
// mappings are in ptx_to_isa.h.
//
// Threading: one KernelTranslator per kernel translation, used by one thread.
#ifndef GPUVM_PTX_TRANSLATOR_KERNEL_TRANSLATOR_H_
#define GPUVM_PTX_TRANSLATOR_KERNEL_TRANSLATOR_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "gpu/isa/module.h"
#include "ptx/ast.h"
#include "ptx/translator/module_layout.h"
#include "ptx/translator/translator.h"
#include "ptx/translator/vcode.h"
#include "ptx/translator/vcode_builder.h"

namespace gpuvm::ptx::translator {

class KernelTranslator : public VCodeBuilder {
 public:
  KernelTranslator(const Module& m, ModuleLayout& layout, uint32_t kernel,
                   const TranslateOptions& options)
      : m_(m),
        layout_(layout),
        kernel_index_(kernel),
        kernel_(m.functions[kernel]),
        options_(options) {}

  Result<isa::ModuleKernel> Run(KernelStats* stats);

 private:
  // One function body being emitted: the kernel, an inlined call, or an out-of-line (recursive)
  // function.
  enum class FrameKind { kKernel, kInline, kCallable };
  struct Frame {
    FrameKind kind = FrameKind::kKernel;
    uint32_t region = 0;  // the stack region its locals live in (VCode::region_fixed)
    // Locals are addressed from the stack pointer (inside an out-of-line function).
    bool sp_based = false;
    uint32_t ret_addr = kNoV;  // kCallable: the vreg holding the return address
    const Function* fn = nullptr;
    uint32_t fn_index = 0;
    std::vector<uint32_t> regs;    // RegId -> vreg (kNoV until first use)
    std::vector<uint32_t> labels;  // label index -> label id
    // Offsets are relative to the region's frame (absolute local offsets in region 0).
    // locals index -> local-memory offset (.local/.param), or -1
    std::vector<int64_t> local_offset;
    std::vector<int64_t> param_offset;  // callee: params index -> local offset of the caller's slot
    std::vector<int64_t> return_offset;  // callee: returns index -> local offset
    uint32_t return_label = kNoV;        // kInline: where ret goes
  };
  // The frame layout of an out-of-line function: its parameters, then its results.
  struct CallableLayout {
    std::vector<int64_t> param_offset, return_offset;
    uint64_t fixed = 0;
  };
  // A memory operand resolved to an ISA space, a base register and an offset.
  struct Addr {
    isa::Space space = isa::Space::kGeneric;
    uint8_t bank = 0;
    uint32_t base = kRZ;  // vreg, or kRZ for an absolute offset
    bool base64 = false;
    int64_t offset = 0;
  };

  uint32_t LocalBase() const { return frame_->sp_based ? sp_ : kRZ; }
  // The PTX instruction being lowered (nullptr between instructions); errors name it.
  void SetCurrent(const Instruction* in) {
    cur_ = in;
    SetLine(in ? in->line : 0);
  }

  // ---- errors (translator.cc) ----
  Status Error(StatusCode code, const std::string& what) const;
  Status Unsupported(const std::string& what) const {
    return Error(StatusCode::kUnimplemented, what);
  }

  // ---- registers and operands (lower_operands.cc) ----
  uint32_t FrameReg(RegId r);
  ScalarType RegType(RegId r) const { return frame_->fn->registers[r].type; }
  // A register holding v converted to the width t needs (32 <-> 64 bits).
  uint32_t FitWidth(uint32_t v, ScalarType t);
  Result<Value> Src(const Operand& op, ScalarType t);
  Result<uint32_t> SrcReg(const Operand& op, ScalarType t);
  // A 16-bit operand extended to 32 bits (others unchanged).
  Value Extend16(Value v, ScalarType t);
  Result<Value> SrcExt(const Operand& op, ScalarType t);
  Result<uint32_t> SrcExtReg(const Operand& op, ScalarType t);
  Result<uint32_t> Dst(const Operand& op);
  Result<uint32_t> DstPred(const Operand& op);
  // A destination that may be a `reg|pred` pair (setp's p|q, shfl's d|p): (first, second), second
  // kNoV without a pair. `predicate`: a single destination is a predicate.
  Result<std::pair<uint32_t, uint32_t>> DstPair(const Operand& op, bool predicate);
  // A predicate source: (vreg, negated).
  Result<std::pair<uint32_t, bool>> SrcPred(const Operand& op);
  // Writes a 32-bit (or 64-bit) temp into PTX destination register d whose width may differ.
  void WriteWidth(uint32_t d, uint32_t value, bool value64, bool sign);
  Result<uint32_t> Special(const Operand& op);
  Result<uint32_t> SymbolAddress(const Operand& op, bool want64, bool generic);
  Result<Addr> Address(const Operand& op, StateSpace space);
  uint32_t GlobalVarAddress(uint32_t global_index);

  // ---- the walk and the dispatcher (translator.cc) ----
  Status Prepass();
  Status EmitBody(Frame& frame);
  Status Lower(const Instruction& in);

  // ---- lowering by concern (lower_*.cc) ----
  Status LowerArith(const Instruction& in);
  Status LowerMul(const Instruction& in);
  std::pair<uint32_t, uint32_t> Operands24(uint32_t a, uint32_t b, bool is_signed);
  uint32_t Mul24Hi(uint32_t a24, uint32_t b24, bool is_signed);
  Status LowerMad(const Instruction& in);
  Status LowerCarry(const Instruction& in);
  Status LowerBits(const Instruction& in);
  Status LowerCompare(const Instruction& in);
  // f16 / f16x2 add, sub, mul, fma, neg, abs, setp, set (lower_half.cc); IsHalfArith says which.
  static bool IsHalfArith(const Instruction& in);
  Status LowerHalf(const Instruction& in);
  Status LowerMov(const Instruction& in);
  Status LowerCvt(const Instruction& in);
  Status LowerCvta(const Instruction& in);
  Status LowerIsspacep(const Instruction& in);
  Status LowerMemory(const Instruction& in);
  Status LowerAtomic(const Instruction& in);
  Status LowerBarrier(const Instruction& in);
  Status LowerWarp(const Instruction& in);

  // ---- calls (lower_calls.cc) ----
  Status LowerCall(const Instruction& in);
  Status LowerVprintf(const Instruction& in);
  Status EmitRealCall(const Instruction& in, uint32_t callee_index);
  Status EmitCallable(uint32_t fn_index);
  const CallableLayout& LayoutOf(uint32_t fn_index);
  uint32_t EntryLabel(uint32_t fn_index);
  // The local offset of the caller's .param slot a call passes (or receives a result in).
  Result<int64_t> CallSlotOffset(const Operand& op);
  void CopyLocal(uint32_t src_base, int64_t src_off, int32_t src_patch, uint32_t dst_base,
                 int64_t dst_off, uint64_t size);
  Status InitFrame(Frame* f, const Function& fn, uint32_t fn_index);

  const Module& m_;
  ModuleLayout& layout_;
  const uint32_t kernel_index_;
  const Function& kernel_;
  const TranslateOptions& options_;
  Frame* frame_ = nullptr;
  const Instruction* cur_ = nullptr;
  std::vector<uint32_t> call_stack_;  // function indices being inlined
  uint32_t cc_ = kNoV;                // the carry flag (u32 0/1)
  // Recursive functions, emitted out of line and reached with call/ret.
  std::set<uint32_t> callable_;
  std::map<uint32_t, CallableLayout> callable_layout_;
  std::map<uint32_t, uint32_t> entry_label_;
  std::vector<uint32_t> pending_callables_;
  uint32_t sp_ = kNoV;

  // Memory layout of this kernel.
  std::vector<int64_t> kparam_offset_;
  uint32_t param_bytes_ = 0;
  std::map<uint32_t, int64_t> shared_global_;  // module global -> shared offset
  // (function, local) -> shared offset
  std::map<std::pair<uint32_t, uint32_t>, int64_t> shared_local_;
  int64_t bar_red_word_ = -1;
  uint32_t shared_bytes_ = 0;
  uint32_t internal_shared_bytes_ = 0;  // of shared_bytes_: bar.red's word and its padding
};

}  // namespace gpuvm::ptx::translator

#endif  // GPUVM_PTX_TRANSLATOR_KERNEL_TRANSLATOR_H_
