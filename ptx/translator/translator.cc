#include "ptx/translator/translator.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "gpu/isa/encoding.h"
#include "ptx/parser.h"
#include "ptx/printer.h"
#include "ptx/translator/regalloc.h"
#include "ptx/translator/vcode.h"

namespace gpuvm::ptx {
namespace {

using translator::kLink;
using translator::kNoV;
using translator::kPT;
using translator::kRZ;
using translator::VCode;
using translator::VInst;
using translator::VKind;
using IOp = isa::Opcode;
using IT = isa::Type;

constexpr uint32_t kMaxInlineDepth = 32;
// The CUDA runtime's device-side assert handler, declared (never defined) in nvcc's PTX.
constexpr std::string_view kAssertFail = "__assertfail";
// Local memory reserved per thread for the call stack of recursive functions (beyond the kernel's
// frame).
constexpr uint32_t kStackBytes = 8192;

uint64_t AlignUp(uint64_t v, uint64_t a) { return a <= 1 ? v : (v + a - 1) / a * a; }

bool IsF16Like(ScalarType t) {
  return t == ScalarType::kF16 || t == ScalarType::kF16x2 || t == ScalarType::kBF16 ||
         t == ScalarType::kBF16x2;
}
bool Is16(ScalarType t) { return TypeSize(t) == 2 && !IsF16Like(t); }
bool IsF(ScalarType t) { return t == ScalarType::kF32 || t == ScalarType::kF64; }
bool Signed(ScalarType t) { return IsSignedType(t); }

// The ISA type of a memory access / conversion of PTX type t (f16 travels as 16 raw bits).
IT MemType(ScalarType t) {
  switch (t) {
    case ScalarType::kB8:
    case ScalarType::kU8:
      return IT::kU8;
    case ScalarType::kS8:
      return IT::kS8;
    case ScalarType::kB16:
    case ScalarType::kU16:
    case ScalarType::kF16:
    case ScalarType::kBF16:
      return IT::kU16;
    case ScalarType::kS16:
      return IT::kS16;
    case ScalarType::kS32:
      return IT::kS32;
    case ScalarType::kF32:
      return IT::kF32;
    case ScalarType::kB64:
    case ScalarType::kU64:
      return IT::kU64;
    case ScalarType::kS64:
      return IT::kS64;
    case ScalarType::kF64:
      return IT::kF64;
    default:
      return IT::kU32;  // b32, u32, f16x2, bf16x2
  }
}

// The ISA type of an arithmetic operation on PTX type t: 16-bit integers compute in 32 bits.
IT AluType(ScalarType t) {
  switch (t) {
    case ScalarType::kS16:
    case ScalarType::kS32:
      return IT::kS32;
    case ScalarType::kS64:
      return IT::kS64;
    case ScalarType::kB64:
    case ScalarType::kU64:
      return IT::kU64;
    case ScalarType::kF32:
      return IT::kF32;
    case ScalarType::kF64:
      return IT::kF64;
    default:
      return IT::kU32;
  }
}

VKind KindOf(ScalarType t) {
  if (t == ScalarType::kPred) return VKind::kPred;
  return TypeSize(t) == 8 ? VKind::kReg64 : VKind::kReg32;
}

uint8_t RoundingMod(Rounding r) {
  switch (r) {
    case Rounding::kRn:
      return static_cast<uint8_t>(isa::Rounding::kRn);
    case Rounding::kRz:
      return static_cast<uint8_t>(isa::Rounding::kRz);
    case Rounding::kRm:
      return static_cast<uint8_t>(isa::Rounding::kRm);
    case Rounding::kRp:
      return static_cast<uint8_t>(isa::Rounding::kRp);
    case Rounding::kRni:
      return static_cast<uint8_t>(isa::Rounding::kRni);
    case Rounding::kRzi:
      return static_cast<uint8_t>(isa::Rounding::kRzi);
    case Rounding::kRmi:
      return static_cast<uint8_t>(isa::Rounding::kRmi);
    case Rounding::kRpi:
      return static_cast<uint8_t>(isa::Rounding::kRpi);
    default:
      return 0;
  }
}

// The bits an immediate stands for in a slot of type t (docs/PTX.md: integer literals in float
// slots are values; float literals in bit slots are their bit patterns).
uint64_t ImmBits(const Operand& op, ScalarType t) {
  if (t == ScalarType::kF32) {
    if (op.imm_kind == ImmKind::kF32) return op.imm_bits & 0xffffffffu;
    float f = op.ImmAsFloat();
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
  }
  if (t == ScalarType::kF64) {
    if (op.imm_kind == ImmKind::kF64) return op.imm_bits;
    double d = op.ImmAsDouble();
    uint64_t b;
    memcpy(&b, &d, 8);
    return b;
  }
  uint64_t bits = op.imm_bits;
  const uint32_t size = TypeSize(t);
  if (size < 8) bits &= (uint64_t{1} << (size * 8)) - 1;
  return bits;
}

// ---------------------------------------------------------------------------------------------------
// Module-wide memory layout: .global variables (addresses in bank 2), .const variables (bank 1).

struct ModuleLayout {
  std::vector<int64_t>
      global_slot;  // per Module::globals index: slot in isa::Module::globals, or -1
  std::vector<int64_t> const_offset;  // per Module::globals index: offset in bank 1, or -1
  std::map<std::pair<uint32_t, uint32_t>, int64_t>
      local_const_offset;  // (function, local) -> bank 1
  isa::Module out;

  Status Build(const Module& m) {
    global_slot.assign(m.globals.size(), -1);
    const_offset.assign(m.globals.size(), -1);
    for (size_t i = 0; i < m.globals.size(); ++i) {
      const Variable& v = m.globals[i];
      if (v.space == StateSpace::kGlobal) {
        global_slot[i] = static_cast<int64_t>(out.globals.size());
        isa::ModuleGlobal g;
        g.name = v.name;
        g.size = std::max<uint64_t>(v.SizeBytes(), 1);
        g.align = std::max<uint32_t>(v.Alignment(), 1);
        g.init = v.init;
        out.globals.push_back(std::move(g));
      } else if (v.space == StateSpace::kConst) {
        GPUVM_RETURN_IF_ERROR(PlaceConst(v, &const_offset[i]));
      }
    }
    // Relocations once every slot is known.
    for (size_t i = 0; i < m.globals.size(); ++i) {
      const Variable& v = m.globals[i];
      if (v.relocations.empty()) continue;
      if (v.space != StateSpace::kGlobal) {
        return Status::Unimplemented(
            "line " + std::to_string(v.line) + ": variable '" + v.name +
            "': address initializers are supported in .global variables only");
      }
      for (const Relocation& r : v.relocations) {
        if (r.is_function || r.index >= m.globals.size() || global_slot[r.index] < 0) {
          return Status::Unimplemented("line " + std::to_string(v.line) + ": variable '" + v.name +
                                       "': initializer takes the address of something other than a "
                                       ".global variable");
        }
        isa::ModuleRelocation rel;
        rel.offset = static_cast<uint32_t>(r.offset);
        rel.size = r.size;
        rel.target = static_cast<uint32_t>(global_slot[r.index]);
        rel.addend = r.addend;
        out.globals[global_slot[i]].relocations.push_back(rel);
      }
    }
    return Status::Ok();
  }

  Status PlaceConst(const Variable& v, int64_t* offset) {
    const uint64_t at = AlignUp(out.const_image.size(), std::max<uint32_t>(v.Alignment(), 1));
    const uint64_t size = v.SizeBytes();
    if (at + size > isa::kMaxConstImageBytes) {
      return Status::ResourceExhausted("line " + std::to_string(v.line) + ": variable '" + v.name +
                                       "': .const variables exceed the 64 KiB constant bank");
    }
    out.const_image.resize(at + size, 0);
    memcpy(out.const_image.data() + at, v.init.data(), std::min<size_t>(v.init.size(), size));
    *offset = static_cast<int64_t>(at);
    return Status::Ok();
  }
};

// ---------------------------------------------------------------------------------------------------
// One kernel.

class KernelTranslator {
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
    bool sp_based =
        false;  // locals are addressed from the stack pointer (inside an out-of-line function)
    uint32_t ret_addr = kNoV;  // kCallable: the vreg holding the return address
    const Function* fn = nullptr;
    uint32_t fn_index = 0;
    std::vector<uint32_t> regs;    // RegId -> vreg (kNoV until first use)
    std::vector<uint32_t> labels;  // label index -> label id
    // Offsets are relative to the region's frame (absolute local offsets in region 0).
    std::vector<int64_t>
        local_offset;  // locals index -> local-memory offset (.local/.param), or -1
    std::vector<int64_t> param_offset;  // callee: params index -> local offset of the caller's slot
    std::vector<int64_t> return_offset;  // callee: returns index -> local offset
    uint32_t return_label = kNoV;        // kInline: where ret goes
  };
  // The frame layout of an out-of-line function: its parameters, then its results.
  struct CallableLayout {
    std::vector<int64_t> param_offset, return_offset;
    uint64_t fixed = 0;
  };
  uint32_t LocalBase() const { return frame_->sp_based ? sp_ : kRZ; }

  struct Addr {
    isa::Space space = isa::Space::kGeneric;
    uint8_t bank = 0;
    uint32_t base = kRZ;  // vreg, or kRZ for an absolute offset
    bool base64 = false;
    int64_t offset = 0;
  };

  struct Value {  // a source: a register, or an immediate
    uint32_t reg = kNoV;
    bool is_imm = false;
    uint64_t imm = 0;
  };

  // ---- errors ----
  Status Error(StatusCode code, const std::string& what) const {
    std::string text = DescribeLocation(*frame_->fn, cur_ ? cur_->line : frame_->fn->line);
    if (cur_) text += "instruction '" + PrintInstruction(m_, *frame_->fn, *cur_) + "': ";
    if (frame_->fn != &kernel_) text += "(inlined into kernel '" + kernel_.name + "') ";
    return Status(code, text + what);
  }
  Status Unsupported(const std::string& what) const {
    return Error(StatusCode::kUnimplemented, what);
  }

  // ---- emission ----
  VInst& Emit(IOp op, IT type = IT::kU8) {
    vc_.code.emplace_back();
    VInst& v = vc_.code.back();
    v.in.op = op;
    v.in.type = type;
    v.guard = guard_;
    v.in.guard_negated = guard_negated_;
    v.line = cur_ ? cur_->line : 0;
    return v;
  }
  uint32_t Temp(VKind k) { return vc_.NewVReg(k, /*temp=*/true); }
  uint32_t TempFor(IT t) { return Temp(isa::Is64(t) ? VKind::kReg64 : VKind::kReg32); }

  uint32_t MovImm(IT t, uint64_t bits) {
    uint32_t d = TempFor(t);
    VInst& v = Emit(IOp::kMov, t);
    v.d = d;
    v.in.has_imm = true;
    v.in.imm = isa::Is64(t) ? bits : (bits & 0xffffffffu);
    return d;
  }
  uint32_t Cvt(IT dst, IT src, uint32_t a, uint8_t mod = 0) {
    uint32_t d = TempFor(dst);
    VInst& v = Emit(IOp::kCvt, dst);
    v.in.type2 = static_cast<uint8_t>(src);
    v.in.mod = mod;
    v.d = d;
    v.a = a;
    return d;
  }
  // d = op(a, b|imm) into a fresh temp.
  uint32_t Bin(IOp op, IT t, uint32_t a, Value b, uint8_t mod = 0, IT dtype_for_temp = IT::kU8) {
    uint32_t d = TempFor(dtype_for_temp == IT::kU8 ? t : dtype_for_temp);
    BinTo(d, op, t, a, b, mod);
    return d;
  }
  void BinTo(uint32_t d, IOp op, IT t, uint32_t a, Value b, uint8_t mod = 0) {
    VInst& v = Emit(op, t);
    v.d = d;
    v.a = a;
    v.in.mod = mod;
    if (b.is_imm) {
      v.in.has_imm = true;
      v.in.imm = isa::Is64(t) || op == IOp::kShl || op == IOp::kShr ? b.imm : (b.imm & 0xffffffffu);
      if ((op == IOp::kShl || op == IOp::kShr || op == IOp::kMulWide || op == IOp::kMadWide ||
           op == IOp::kBfe) &&
          b.imm > 0xffffffffu) {
        v.in.imm = b.imm & 0xffffffffu;
      }
    } else {
      v.b = b.reg;
    }
  }
  static Value R(uint32_t reg) { return Value{reg, false, 0}; }
  static Value I(uint64_t imm) { return Value{kNoV, true, imm}; }
  void MovTo(uint32_t d, IT t, uint32_t a) {
    VInst& v = Emit(IOp::kMov, t);
    v.d = d;
    v.a = a;
  }
  void MovTo(uint32_t d, IT t, Value a) {
    if (!a.is_imm) return MovTo(d, t, a.reg);
    VInst& v = Emit(IOp::kMov, t);
    v.d = d;
    v.in.has_imm = true;
    v.in.imm = isa::Is64(t) ? a.imm : (a.imm & 0xffffffffu);
  }
  uint32_t Setp(isa::Compare cmp, IT t, uint32_t a, Value b) {
    uint32_t p = Temp(VKind::kPred);
    VInst& v = Emit(IOp::kSetp, t);
    v.d = p;
    v.a = a;
    v.in.mod = static_cast<uint8_t>(cmp);
    if (b.is_imm) {
      v.in.has_imm = true;
      v.in.imm = isa::Is64(t) ? b.imm : (b.imm & 0xffffffffu);
    } else {
      v.b = b.reg;
    }
    return p;
  }
  void PlopTo(uint32_t d, isa::PlopOp op, uint32_t a, bool neg_a, uint32_t b, bool neg_b) {
    VInst& v = Emit(IOp::kPlop);
    v.d = d;
    v.a = a;
    v.b = b;
    v.in.mod =
        static_cast<uint8_t>(op) | (neg_a ? isa::kPlopNegA : 0) | (neg_b ? isa::kPlopNegB : 0);
  }
  // d = p ? a : b (32 or 64 bit).
  void SelTo(uint32_t d, IT t, uint32_t a, Value b, uint32_t p, bool negate = false) {
    VInst& v = Emit(IOp::kSel, t);
    v.d = d;
    v.a = a;
    v.c = p;
    v.in.mod = negate ? 1 : 0;
    if (b.is_imm) {
      v.in.has_imm = true;
      v.in.imm = isa::Is64(t) ? b.imm : (b.imm & 0xffffffffu);
    } else {
      v.b = b.reg;
    }
  }
  uint32_t S2R(isa::SpecialReg sr) {
    const bool wide = isa::IsSpecialReg64(sr);
    uint32_t d = Temp(wide ? VKind::kReg64 : VKind::kReg32);
    VInst& v = Emit(IOp::kS2R, wide ? IT::kU64 : IT::kU32);
    v.d = d;
    v.in.a = static_cast<uint8_t>(sr);
    return d;
  }

  // ---- registers and operands ----
  uint32_t FrameReg(RegId r) {
    uint32_t& v = frame_->regs[r];
    if (v == kNoV) v = vc_.NewVReg(KindOf(frame_->fn->registers[r].type));
    return v;
  }
  ScalarType RegType(RegId r) const { return frame_->fn->registers[r].type; }
  VKind KindOfVReg(uint32_t v) const { return vc_.vregs[v].kind; }

  // A register holding `src` (of kind `have`) converted to the width `t` needs.
  uint32_t FitWidth(uint32_t v, ScalarType t) {
    const bool want64 = TypeSize(t) == 8;
    const VKind k = KindOfVReg(v);
    if (k == VKind::kPred) return v;
    if (want64 && k == VKind::kReg32)
      return Cvt(Signed(t) ? IT::kS64 : IT::kU64, Signed(t) ? IT::kS32 : IT::kU32, v);
    if (!want64 && k == VKind::kReg64) return Cvt(IT::kU32, IT::kU64, v);
    return v;
  }

  Result<Value> Src(const Operand& op, ScalarType t) {
    switch (op.kind) {
      case OperandKind::kRegister:
        if (op.negated) return Unsupported("negated register operand");
        return R(FitWidth(FrameReg(op.reg), t));
      case OperandKind::kImmediate:
        return I(ImmBits(op, t));
      case OperandKind::kSpecial: {
        GPUVM_ASSIGN_OR_RETURN(uint32_t v, Special(op));
        return R(FitWidth(v, t));
      }
      case OperandKind::kSymbol: {
        GPUVM_ASSIGN_OR_RETURN(uint32_t v, SymbolAddress(op, TypeSize(t) == 8, /*generic=*/false));
        return R(FitWidth(v, t));
      }
      default:
        return Unsupported("operand kind not supported here");
    }
  }
  Result<uint32_t> SrcReg(const Operand& op, ScalarType t) {
    GPUVM_ASSIGN_OR_RETURN(Value v, Src(op, t));
    if (!v.is_imm) return v.reg;
    IT it = TypeSize(t) == 8 ? (IsF(t) ? IT::kF64 : IT::kU64)
                             : (t == ScalarType::kF32 ? IT::kF32 : IT::kU32);
    return MovImm(it, v.imm);
  }
  // A 16-bit operand extended to 32 bits (others unchanged).
  Value Extend16(Value v, ScalarType t) {
    if (!Is16(t)) return v;
    if (v.is_imm) {
      uint64_t x = v.imm & 0xffff;
      if (Signed(t) && (x & 0x8000)) x |= 0xffff0000ull;
      return I(x);
    }
    return R(Cvt(Signed(t) ? IT::kS32 : IT::kU32, Signed(t) ? IT::kS16 : IT::kU16, v.reg));
  }
  Result<Value> SrcExt(const Operand& op, ScalarType t) {
    GPUVM_ASSIGN_OR_RETURN(Value v, Src(op, t));
    return Extend16(v, t);
  }
  Result<uint32_t> SrcExtReg(const Operand& op, ScalarType t) {
    GPUVM_ASSIGN_OR_RETURN(Value v, SrcExt(op, t));
    if (!v.is_imm) return v.reg;
    return MovImm(TypeSize(t) == 8 ? IT::kU64 : IT::kU32, v.imm);
  }
  Result<uint32_t> Dst(const Operand& op) {
    if (op.kind == OperandKind::kSink) return kRZ;
    if (op.kind != OperandKind::kRegister) return Unsupported("destination must be a register");
    return FrameReg(op.reg);
  }
  Result<uint32_t> DstPred(const Operand& op) {
    if (op.kind == OperandKind::kSink) return Temp(VKind::kPred);
    if (op.kind != OperandKind::kRegister || RegType(op.reg) != ScalarType::kPred) {
      return Unsupported("destination must be a predicate");
    }
    return FrameReg(op.reg);
  }
  // A predicate source: (vreg, negated).
  Result<std::pair<uint32_t, bool>> SrcPred(const Operand& op) {
    if (op.kind == OperandKind::kImmediate) {
      // A constant predicate: true = PT, false = !PT.
      return std::make_pair(kPT, op.imm_bits == 0);
    }
    if (op.kind != OperandKind::kRegister || RegType(op.reg) != ScalarType::kPred) {
      return Unsupported("expected a predicate operand");
    }
    return std::make_pair(FrameReg(op.reg), op.negated);
  }
  // Writes a 32-bit (or 64-bit) temp into PTX destination register d whose width may differ.
  void WriteWidth(uint32_t d, uint32_t value, bool value64, bool sign) {
    if (d == kRZ) return;
    const bool d64 = KindOfVReg(d) == VKind::kReg64;
    if (d64 == value64) return MovTo(d, value64 ? IT::kU64 : IT::kU32, value);
    if (d64) {
      VInst& v = Emit(IOp::kCvt, sign ? IT::kS64 : IT::kU64);
      v.in.type2 = static_cast<uint8_t>(sign ? IT::kS32 : IT::kU32);
      v.d = d;
      v.a = value;
    } else {
      VInst& v = Emit(IOp::kCvt, IT::kU32);
      v.in.type2 = static_cast<uint8_t>(IT::kU64);
      v.d = d;
      v.a = value;
    }
  }

  Result<uint32_t> Special(const Operand& op);
  Result<uint32_t> SymbolAddress(const Operand& op, bool want64, bool generic);
  Result<Addr> Address(const Operand& op, StateSpace space);
  uint32_t GlobalVarAddress(uint32_t global_index);

  // ---- lowering ----
  Status Prepass();
  Status EmitBody(Frame& frame);
  Status Lower(const Instruction& in);
  Status LowerArith(const Instruction& in);
  Status LowerMul(const Instruction& in);
  Status LowerMad(const Instruction& in);
  Status LowerCarry(const Instruction& in);
  Status LowerBits(const Instruction& in);
  Status LowerCompare(const Instruction& in);
  Status LowerMov(const Instruction& in);
  Status LowerCvt(const Instruction& in);
  Status LowerCvta(const Instruction& in);
  Status LowerMemory(const Instruction& in);
  Status LowerAtomic(const Instruction& in);
  Status LowerBarrier(const Instruction& in);
  Status LowerWarp(const Instruction& in);
  Status LowerCall(const Instruction& in);
  Status EmitRealCall(const Instruction& in, uint32_t callee_index);
  Status EmitCallable(uint32_t fn_index);
  const CallableLayout& LayoutOf(uint32_t fn_index);
  uint32_t EntryLabel(uint32_t fn_index);
  void CopyLocal(uint32_t src_base, int64_t src_off, int32_t src_patch, uint32_t dst_base,
                 int64_t dst_off, uint64_t size);
  Status InitFrame(Frame* f, const Function& fn, uint32_t fn_index);

  const Module& m_;
  ModuleLayout& layout_;
  const uint32_t kernel_index_;
  const Function& kernel_;
  const TranslateOptions& options_;
  VCode vc_;
  Frame* frame_ = nullptr;
  const Instruction* cur_ = nullptr;
  uint32_t guard_ = kPT;
  bool guard_negated_ = false;
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
  std::map<std::pair<uint32_t, uint32_t>, int64_t>
      shared_local_;  // (function, local) -> shared offset
  int64_t bar_red_word_ = -1;
  uint32_t shared_bytes_ = 0;
};

// ---- special registers and symbols
// ----------------------------------------------------------------

Result<uint32_t> KernelTranslator::Special(const Operand& op) {
  using S = isa::SpecialReg;
  auto component = [&](S x) { return static_cast<S>(static_cast<uint8_t>(x) + op.component); };
  S sr;
  switch (op.sreg) {
    case SpecialRegister::kTid:
      sr = component(S::kTidX);
      break;
    case SpecialRegister::kNtid:
      sr = component(S::kNtidX);
      break;
    case SpecialRegister::kCtaid:
      sr = component(S::kCtaidX);
      break;
    case SpecialRegister::kNctaid:
      sr = component(S::kNctaidX);
      break;
    case SpecialRegister::kLaneid:
      sr = S::kLaneId;
      break;
    case SpecialRegister::kWarpid:
      sr = S::kWarpId;
      break;
    case SpecialRegister::kNwarpid:
      sr = S::kNWarpId;
      break;
    case SpecialRegister::kSmid:
      sr = S::kSmId;
      break;
    case SpecialRegister::kNsmid:
      sr = S::kNSmId;
      break;
    case SpecialRegister::kGridid:
      sr = S::kGridId;
      break;
    case SpecialRegister::kLanemaskEq:
      sr = S::kLanemaskEq;
      break;
    case SpecialRegister::kLanemaskLe:
      sr = S::kLanemaskLe;
      break;
    case SpecialRegister::kLanemaskLt:
      sr = S::kLanemaskLt;
      break;
    case SpecialRegister::kLanemaskGe:
      sr = S::kLanemaskGe;
      break;
    case SpecialRegister::kLanemaskGt:
      sr = S::kLanemaskGt;
      break;
    case SpecialRegister::kClock:
      sr = S::kClock;
      break;
    case SpecialRegister::kClock64:
      sr = S::kClock64;
      break;
    case SpecialRegister::kGlobaltimer:
      sr = S::kGlobalTimer;
      break;
    case SpecialRegister::kDynamicSmemSize:
      sr = S::kDynamicSmemSize;
      break;
    case SpecialRegister::kTotalSmemSize:
      sr = S::kTotalSmemSize;
      break;
    default:
      return Unsupported("special register not supported");
  }
  return S2R(sr);
}

uint32_t KernelTranslator::GlobalVarAddress(uint32_t global_index) {
  uint32_t d = Temp(VKind::kReg64);
  VInst& v = Emit(IOp::kLd, IT::kU64);
  v.d = d;
  v.a = kRZ;
  v.in.mod = static_cast<uint8_t>(isa::Space::kConst);
  v.in.type2 = isa::kGlobalsBank;
  v.in.has_imm = true;
  v.in.imm = static_cast<uint64_t>(layout_.global_slot[global_index]) * 8;
  return d;
}

// The value of a symbol operand (`mov.u64 %rd, var+8`): its address in its own state space (shared
// and local offsets, constant-bank offsets, global addresses), or its generic address.
Result<uint32_t> KernelTranslator::SymbolAddress(const Operand& op, bool want64, bool generic) {
  const Symbol& s = op.symbol;
  const Variable* var = ResolveVariable(m_, *frame_->fn, s);
  if (!var) return Unsupported("the address of a function is not supported (no function pointers)");
  int64_t offset = 0;
  std::optional<isa::SpecialReg> window;
  if (s.kind == Symbol::Kind::kGlobal && var->space == StateSpace::kGlobal) {
    uint32_t a = GlobalVarAddress(s.index);
    if (op.offset != 0) a = Bin(IOp::kAdd, IT::kU64, a, I(static_cast<uint64_t>(op.offset)));
    return want64 ? a : Cvt(IT::kU32, IT::kU64, a);
  }
  if (var->space == StateSpace::kShared) {
    offset = s.kind == Symbol::Kind::kGlobal ? shared_global_.at(s.index)
                                             : shared_local_.at({frame_->fn_index, s.index});
    window = isa::SpecialReg::kSharedWindow;
  } else if (s.kind == Symbol::Kind::kLocal && var->space == StateSpace::kLocal) {
    offset = frame_->local_offset[s.index];
    window = isa::SpecialReg::kLocalWindow;
  } else if (var->space == StateSpace::kConst) {
    if (generic) return Unsupported("generic addresses of .const variables are not supported");
    offset = s.kind == Symbol::Kind::kGlobal
                 ? layout_.const_offset[s.index]
                 : layout_.local_const_offset.at({frame_->fn_index, s.index});
  } else {
    return Unsupported("taking the address of '" + var->name + "' (" +
                       std::string(StateSpaceName(var->space)) + ") is not supported");
  }
  offset += op.offset;
  if (frame_->sp_based && window == isa::SpecialReg::kLocalWindow) {
    // A local variable of an out-of-line function: its address depends on the stack pointer.
    uint32_t a32 = Bin(IOp::kAdd, IT::kU32, sp_, I(static_cast<uint64_t>(offset)));
    if (!generic) return want64 ? Cvt(IT::kU64, IT::kU32, a32) : a32;
    uint32_t a = Bin(IOp::kAdd, IT::kU64, S2R(*window), R(Cvt(IT::kU64, IT::kU32, a32)));
    return want64 ? a : Cvt(IT::kU32, IT::kU64, a);
  }
  if (generic) {
    uint32_t w = S2R(*window);
    uint32_t a = Bin(IOp::kAdd, IT::kU64, w, I(static_cast<uint64_t>(offset)));
    return want64 ? a : Cvt(IT::kU32, IT::kU64, a);
  }
  return MovImm(want64 ? IT::kU64 : IT::kU32, static_cast<uint64_t>(offset));
}

// Resolves a memory operand for an access in `space` (kNone = generic).
Result<KernelTranslator::Addr> KernelTranslator::Address(const Operand& op, StateSpace space) {
  if (op.kind != OperandKind::kAddress) return Unsupported("expected an address operand");
  Addr a;
  a.offset = op.offset;
  switch (space) {
    case StateSpace::kNone:
      a.space = isa::Space::kGeneric;
      break;
    case StateSpace::kGlobal:
      a.space = isa::Space::kGlobal;
      break;
    case StateSpace::kShared:
      a.space = isa::Space::kShared;
      break;
    case StateSpace::kLocal:
      a.space = isa::Space::kLocal;
      break;
    case StateSpace::kConst:
      a.space = isa::Space::kConst;
      a.bank = isa::kUserConstBank;
      break;
    case StateSpace::kParam:
      a.space = isa::Space::kLocal;
      break;  // call slots; kernel params below
    default:
      return Unsupported("state space not supported");
  }
  if (op.base == AddressBase::kRegister) {
    if (space == StateSpace::kParam)
      return Unsupported("register-addressed .param accesses are not supported");
    uint32_t r = FrameReg(op.reg);
    a.base = r;
    a.base64 = KindOfVReg(r) == VKind::kReg64;
    return a;
  }
  if (op.base == AddressBase::kNone) return a;  // an absolute address
  const Symbol& s = op.symbol;
  const Variable* var = ResolveVariable(m_, *frame_->fn, s);
  if (!var) return Unsupported("address of a function");
  switch (s.kind) {
    case Symbol::Kind::kParam:
      if (frame_->kind == FrameKind::kKernel) {  // a kernel parameter: constant bank 0
        a.space = isa::Space::kConst;
        a.bank = isa::kParamBank;
        a.offset += kparam_offset_[s.index];
        return a;
      }
      a.space = isa::Space::kLocal;
      a.base = LocalBase();
      a.offset += frame_->param_offset[s.index];
      return a;
    case Symbol::Kind::kReturn:
      a.space = isa::Space::kLocal;
      a.base = LocalBase();
      a.offset += frame_->return_offset[s.index];
      return a;
    default:
      break;
  }
  // A variable in memory: address it in its own space; for a generic access use its generic
  // address.
  if (space == StateSpace::kNone ||
      (space == StateSpace::kGlobal && var->space == StateSpace::kGlobal)) {
    Operand sym;
    sym.kind = OperandKind::kSymbol;
    sym.symbol = s;
    sym.offset = 0;
    GPUVM_ASSIGN_OR_RETURN(uint32_t base, SymbolAddress(sym, true, space == StateSpace::kNone));
    a.base = base;
    a.base64 = true;
    return a;
  }
  switch (var->space) {
    case StateSpace::kShared:
      a.space = isa::Space::kShared;
      a.offset += s.kind == Symbol::Kind::kGlobal ? shared_global_.at(s.index)
                                                  : shared_local_.at({frame_->fn_index, s.index});
      return a;
    case StateSpace::kLocal:
    case StateSpace::kParam:
      a.space = isa::Space::kLocal;
      a.base = LocalBase();
      a.offset += frame_->local_offset[s.index];
      return a;
    case StateSpace::kConst:
      a.space = isa::Space::kConst;
      a.bank = isa::kUserConstBank;
      a.offset += s.kind == Symbol::Kind::kGlobal
                      ? layout_.const_offset[s.index]
                      : layout_.local_const_offset.at({frame_->fn_index, s.index});
      return a;
    default:
      return Unsupported("variable '" + var->name + "' cannot be addressed here");
  }
}

// ---- arithmetic
// -----------------------------------------------------------------------------------

Status KernelTranslator::LowerArith(const Instruction& in) {
  const ScalarType t = in.type;
  const IT it = AluType(t);
  const uint8_t fmod = RoundingMod(in.rounding) | (in.Has(kFlagSat) ? isa::kModSat : 0);
  GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
  auto binary = [&](IOp op, bool ext16, uint8_t mod) -> Status {
    GPUVM_ASSIGN_OR_RETURN(uint32_t a,
                           ext16 ? SrcExtReg(in.operands[1], t) : SrcReg(in.operands[1], t));
    GPUVM_ASSIGN_OR_RETURN(Value b, ext16 ? SrcExt(in.operands[2], t) : Src(in.operands[2], t));
    BinTo(d, op, it, a, b, mod);
    return Status::Ok();
  };
  auto unary = [&](IOp op, bool ext16, uint8_t mod) -> Status {
    GPUVM_ASSIGN_OR_RETURN(uint32_t a,
                           ext16 ? SrcExtReg(in.operands[1], t) : SrcReg(in.operands[1], t));
    VInst& v = Emit(op, it);
    v.d = d;
    v.a = a;
    v.in.mod = mod;
    return Status::Ok();
  };
  switch (in.opcode) {
    case Opcode::kAdd:
    case Opcode::kSub: {
      const IOp op = in.opcode == Opcode::kAdd ? IOp::kAdd : IOp::kSub;
      if (IsF(t)) return binary(op, false, fmod);
      const bool sat = in.Has(kFlagSat);
      if (sat && t != ScalarType::kS32) return Unsupported(".sat is for s32");
      return binary(op, false, sat ? isa::kModSat : 0);
    }
    case Opcode::kDiv:
      if (IsF(t)) return binary(IOp::kDiv, false, RoundingMod(in.rounding));
      return binary(IOp::kDiv, true, 0);
    case Opcode::kRem:
      return binary(IOp::kRem, true, 0);
    case Opcode::kMin:
    case Opcode::kMax:
      if (in.Has(kFlagNaN)) return Unsupported(".NaN min/max is not supported");
      return binary(in.opcode == Opcode::kMin ? IOp::kMin : IOp::kMax, true, 0);
    case Opcode::kAbs:
      return unary(IOp::kAbs, true, 0);
    case Opcode::kNeg:
      return unary(IOp::kNeg, false, 0);
    case Opcode::kCopysign:
      return binary(IOp::kCopysign, false, 0);
    case Opcode::kFma: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
      GPUVM_ASSIGN_OR_RETURN(uint32_t c, SrcReg(in.operands[3], t));
      BinTo(d, IOp::kFma, it, a, b, fmod);
      vc_.code.back().c = c;
      return Status::Ok();
    }
    case Opcode::kRcp:
    case Opcode::kSqrt:
      return unary(in.opcode == Opcode::kRcp ? IOp::kRcp : IOp::kSqrt, false,
                   RoundingMod(in.rounding));
    case Opcode::kRsqrt:
      return unary(IOp::kRsqrt, false, 0);
    case Opcode::kSin:
      return unary(IOp::kSin, false, 0);
    case Opcode::kCos:
      return unary(IOp::kCos, false, 0);
    case Opcode::kLg2:
      return unary(IOp::kLg2, false, 0);
    case Opcode::kEx2:
      return unary(IOp::kEx2, false, 0);
    case Opcode::kTanh:
      return unary(IOp::kTanh, false, 0);
    default:
      return Unsupported("internal: not an arithmetic instruction");
  }
}

Status KernelTranslator::LowerMul(const Instruction& in) {
  const ScalarType t = in.type;
  GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
  if (IsF(t)) {
    GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
    GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
    BinTo(d, IOp::kMul, AluType(t), a, b,
          RoundingMod(in.rounding) | (in.Has(kFlagSat) ? isa::kModSat : 0));
    return Status::Ok();
  }
  const bool s = Signed(t);
  if (in.opcode == Opcode::kMul24) {
    // 24-bit operands (sign- or zero-extended from bit 23); .lo: the low 32 bits of the 48-bit
    // product, .hi: its bits 16..47.
    GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
    GPUVM_ASSIGN_OR_RETURN(uint32_t b, SrcReg(in.operands[2], t));
    uint32_t len = MovImm(IT::kU32, 24);
    uint32_t a24 = Bin(IOp::kBfe, s ? IT::kS32 : IT::kU32, a, I(0));
    vc_.code.back().c = len;
    uint32_t b24 = Bin(IOp::kBfe, s ? IT::kS32 : IT::kU32, b, I(0));
    vc_.code.back().c = len;
    if (in.mul_mode == MulMode::kHi) {
      uint32_t p = Bin(IOp::kMulWide, s ? IT::kS32 : IT::kU32, a24, R(b24), 0, IT::kU64);
      uint32_t sh = Bin(IOp::kShr, IT::kU64, p, I(16));
      WriteWidth(d, Cvt(IT::kU32, IT::kU64, sh), false, false);
      return Status::Ok();
    }
    BinTo(d, IOp::kMul, IT::kU32, a24, R(b24));
    return Status::Ok();
  }
  switch (in.mul_mode) {
    case MulMode::kLo: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
      BinTo(d, IOp::kMul, AluType(t), a, b);
      return Status::Ok();
    }
    case MulMode::kHi: {
      if (Is16(t)) {
        GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcExtReg(in.operands[1], t));
        GPUVM_ASSIGN_OR_RETURN(Value b, SrcExt(in.operands[2], t));
        uint32_t p = Bin(IOp::kMul, IT::kU32, a, b);
        BinTo(d, IOp::kShr, s ? IT::kS32 : IT::kU32, p, I(16));
        return Status::Ok();
      }
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
      BinTo(d, IOp::kMulHi, AluType(t), a, b);
      return Status::Ok();
    }
    case MulMode::kWide: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcExtReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value b, SrcExt(in.operands[2], t));
      if (Is16(t)) {
        BinTo(d, IOp::kMul, IT::kU32, a, b);  // a 16x16 product fits 32 bits
        return Status::Ok();
      }
      if (TypeSize(t) != 4) return Unsupported("mul.wide on 64-bit types");
      BinTo(d, IOp::kMulWide, s ? IT::kS32 : IT::kU32, a, b);
      return Status::Ok();
    }
    default:
      return Unsupported("mul needs .lo/.hi/.wide");
  }
}

Status KernelTranslator::LowerMad(const Instruction& in) {
  const ScalarType t = in.type;
  GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
  if (IsF(t)) {  // mad.f32/f64 is fma (sm_20 and later)
    GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
    GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
    GPUVM_ASSIGN_OR_RETURN(uint32_t c, SrcReg(in.operands[3], t));
    BinTo(d, IOp::kFma, AluType(t), a, b,
          RoundingMod(in.rounding) | (in.Has(kFlagSat) ? isa::kModSat : 0));
    vc_.code.back().c = c;
    return Status::Ok();
  }
  const bool s = Signed(t);
  const IT it = AluType(t);
  if (in.opcode == Opcode::kMad24) {
    if (in.Has(kFlagSat)) return Unsupported("mad24.hi.sat is not supported");
    GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
    GPUVM_ASSIGN_OR_RETURN(uint32_t b, SrcReg(in.operands[2], t));
    GPUVM_ASSIGN_OR_RETURN(Value c, Src(in.operands[3], t));
    uint32_t len = MovImm(IT::kU32, 24);
    uint32_t a24 = Bin(IOp::kBfe, s ? IT::kS32 : IT::kU32, a, I(0));
    vc_.code.back().c = len;
    uint32_t b24 = Bin(IOp::kBfe, s ? IT::kS32 : IT::kU32, b, I(0));
    vc_.code.back().c = len;
    uint32_t part;
    if (in.mul_mode == MulMode::kHi) {
      uint32_t p = Bin(IOp::kMulWide, s ? IT::kS32 : IT::kU32, a24, R(b24), 0, IT::kU64);
      part = Cvt(IT::kU32, IT::kU64, Bin(IOp::kShr, IT::kU64, p, I(16)));
    } else {
      part = Bin(IOp::kMul, IT::kU32, a24, R(b24));
    }
    BinTo(d, IOp::kAdd, IT::kU32, part, c);
    return Status::Ok();
  }
  switch (in.mul_mode) {
    case MulMode::kLo: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
      GPUVM_ASSIGN_OR_RETURN(uint32_t c, SrcReg(in.operands[3], t));
      BinTo(d, IOp::kMad, it, a, b);
      vc_.code.back().c = c;
      return Status::Ok();
    }
    case MulMode::kHi: {
      uint32_t hi;
      if (Is16(t)) {
        GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcExtReg(in.operands[1], t));
        GPUVM_ASSIGN_OR_RETURN(Value b, SrcExt(in.operands[2], t));
        hi = Bin(IOp::kShr, s ? IT::kS32 : IT::kU32, Bin(IOp::kMul, IT::kU32, a, b), I(16));
      } else {
        GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
        GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
        hi = Bin(IOp::kMulHi, it, a, b);
      }
      GPUVM_ASSIGN_OR_RETURN(Value c, Src(in.operands[3], t));
      const bool sat = in.Has(kFlagSat);
      BinTo(d, IOp::kAdd, sat ? IT::kS32 : it, hi, c, sat ? isa::kModSat : 0);
      return Status::Ok();
    }
    case MulMode::kWide: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcExtReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value b, SrcExt(in.operands[2], t));
      if (Is16(t)) {
        GPUVM_ASSIGN_OR_RETURN(uint32_t c, SrcReg(in.operands[3], ScalarType::kU32));
        BinTo(d, IOp::kMad, IT::kU32, a, b);
        vc_.code.back().c = c;
        return Status::Ok();
      }
      if (TypeSize(t) != 4) return Unsupported("mad.wide on 64-bit types");
      GPUVM_ASSIGN_OR_RETURN(uint32_t c,
                             SrcReg(in.operands[3], s ? ScalarType::kS64 : ScalarType::kU64));
      BinTo(d, IOp::kMadWide, s ? IT::kS32 : IT::kU32, a, b);
      vc_.code.back().c = c;
      return Status::Ok();
    }
    default:
      return Unsupported("mad needs .lo/.hi/.wide");
  }
}

// add.cc/addc/sub.cc/subc/mad.cc/madc: the carry flag is a u32 register (0/1) of the kernel.
Status KernelTranslator::LowerCarry(const Instruction& in) {
  const ScalarType t = in.type;
  const bool wide = TypeSize(t) == 8;
  const IT it = wide ? IT::kU64 : IT::kU32;
  if (cc_ == kNoV) cc_ = vc_.NewVReg(VKind::kReg32);
  const bool carry_in =
      in.opcode == Opcode::kAddc || in.opcode == Opcode::kSubc || in.opcode == Opcode::kMadc;
  const bool carry_out = in.Has(kFlagCc);
  const bool subtract = in.opcode == Opcode::kSub || in.opcode == Opcode::kSubc;
  GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
  uint32_t a, b;
  if (in.opcode == Opcode::kMad || in.opcode == Opcode::kMadc) {
    GPUVM_ASSIGN_OR_RETURN(uint32_t x, SrcReg(in.operands[1], t));
    GPUVM_ASSIGN_OR_RETURN(Value y, Src(in.operands[2], t));
    if (in.mul_mode == MulMode::kHi) {
      a = Bin(IOp::kMulHi, Signed(t) ? (wide ? IT::kS64 : IT::kS32) : it, x, y);
    } else if (in.mul_mode == MulMode::kLo) {
      a = Bin(IOp::kMul, it, x, y);
    } else {
      return Unsupported("carry-chain mad needs .lo or .hi");
    }
    GPUVM_ASSIGN_OR_RETURN(b, SrcReg(in.operands[3], t));
  } else {
    GPUVM_ASSIGN_OR_RETURN(a, SrcReg(in.operands[1], t));
    GPUVM_ASSIGN_OR_RETURN(b, SrcReg(in.operands[2], t));
  }
  uint32_t result, carry = kNoV;
  if (!wide) {
    // 64-bit arithmetic on zero-extended values; the high word is the carry (or all ones on a
    // borrow).
    uint32_t wa = Cvt(IT::kU64, IT::kU32, a);
    uint32_t wb = Cvt(IT::kU64, IT::kU32, b);
    uint32_t w = Bin(subtract ? IOp::kSub : IOp::kAdd, IT::kU64, wa, R(wb));
    if (carry_in)
      w = Bin(subtract ? IOp::kSub : IOp::kAdd, IT::kU64, w, R(Cvt(IT::kU64, IT::kU32, cc_)));
    result = Cvt(IT::kU32, IT::kU64, w);
    if (carry_out) {
      uint32_t hi = TempFor(IT::kU32);
      VInst& v = Emit(IOp::kHi32, IT::kU32);
      v.d = hi;
      v.a = w;
      carry = Bin(IOp::kAnd, IT::kU32, hi, I(1));
    }
  } else {
    uint32_t t1 = Bin(subtract ? IOp::kSub : IOp::kAdd, IT::kU64, a, R(b));
    // carry of the first step: add: t1 < a; sub (borrow): a < b.
    uint32_t c1 = subtract ? Setp(isa::Compare::kLt, IT::kU64, a, R(b))
                           : Setp(isa::Compare::kLt, IT::kU64, t1, R(a));
    result = t1;
    uint32_t any = c1;
    if (carry_in) {
      uint32_t cin = Cvt(IT::kU64, IT::kU32, cc_);
      uint32_t t2 = Bin(subtract ? IOp::kSub : IOp::kAdd, IT::kU64, t1, R(cin));
      uint32_t c2 = subtract ? Setp(isa::Compare::kLt, IT::kU64, t1, R(cin))
                             : Setp(isa::Compare::kLt, IT::kU64, t2, R(t1));
      any = Temp(VKind::kPred);
      PlopTo(any, isa::PlopOp::kOr, c1, false, c2, false);
      result = t2;
    }
    if (carry_out) {
      carry = TempFor(IT::kU32);
      SelTo(carry, IT::kU32, MovImm(IT::kU32, 1), I(0), any);
    }
  }
  if (d != kRZ) MovTo(d, it, result);
  if (carry != kNoV) MovTo(cc_, IT::kU32, carry);
  return Status::Ok();
}

// ---- bits
// ---------------------------------------------------------------------------------------------

Status KernelTranslator::LowerBits(const Instruction& in) {
  const ScalarType t = in.type;
  const IT it = AluType(t);
  const bool wide = TypeSize(t) == 8;
  GPUVM_ASSIGN_OR_RETURN(uint32_t d, in.opcode == Opcode::kNot && t == ScalarType::kPred
                                         ? DstPred(in.operands[0])
                                         : Dst(in.operands[0]));
  switch (in.opcode) {
    case Opcode::kAnd:
    case Opcode::kOr:
    case Opcode::kXor: {
      const IOp op = in.opcode == Opcode::kAnd  ? IOp::kAnd
                     : in.opcode == Opcode::kOr ? IOp::kOr
                                                : IOp::kXor;
      if (t == ScalarType::kPred) {
        GPUVM_ASSIGN_OR_RETURN(auto a, SrcPred(in.operands[1]));
        GPUVM_ASSIGN_OR_RETURN(auto b, SrcPred(in.operands[2]));
        GPUVM_ASSIGN_OR_RETURN(uint32_t pd, DstPred(in.operands[0]));
        PlopTo(pd,
               op == IOp::kAnd  ? isa::PlopOp::kAnd
               : op == IOp::kOr ? isa::PlopOp::kOr
                                : isa::PlopOp::kXor,
               a.first, a.second, b.first, b.second);
        return Status::Ok();
      }
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
      BinTo(d, op, wide ? IT::kU64 : IT::kU32, a, b);
      return Status::Ok();
    }
    case Opcode::kNot: {
      if (t == ScalarType::kPred) {
        GPUVM_ASSIGN_OR_RETURN(auto a, SrcPred(in.operands[1]));
        PlopTo(d, isa::PlopOp::kAnd, a.first, !a.second, kPT, false);
        return Status::Ok();
      }
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      VInst& v = Emit(IOp::kNot, wide ? IT::kU64 : IT::kU32);
      v.d = d;
      v.a = a;
      return Status::Ok();
    }
    case Opcode::kCnot: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      uint32_t z = Setp(isa::Compare::kEq, wide ? IT::kU64 : IT::kU32,
                        Is16(t) ? Bin(IOp::kAnd, IT::kU32, a, I(0xffff)) : a, I(0));
      SelTo(d, wide ? IT::kU64 : IT::kU32, MovImm(wide ? IT::kU64 : IT::kU32, 1), I(0), z);
      return Status::Ok();
    }
    case Opcode::kShl:
    case Opcode::kShr: {
      const bool ext = in.opcode == Opcode::kShr;
      GPUVM_ASSIGN_OR_RETURN(uint32_t a,
                             ext ? SrcExtReg(in.operands[1], t) : SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], ScalarType::kU32));
      const IT st = in.opcode == Opcode::kShl ? (wide ? IT::kU64 : IT::kU32) : it;
      BinTo(d, in.opcode == Opcode::kShl ? IOp::kShl : IOp::kShr, st, a, b);
      return Status::Ok();
    }
    case Opcode::kPopc:
    case Opcode::kClz:
    case Opcode::kBrev: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      VInst& v = Emit(in.opcode == Opcode::kPopc  ? IOp::kPopc
                      : in.opcode == Opcode::kClz ? IOp::kClz
                                                  : IOp::kBrev,
                      wide ? IT::kU64 : IT::kU32);
      v.d = d;
      v.a = a;
      return Status::Ok();
    }
    case Opcode::kBfind: {
      // msb of a (signed: of a ^ sign bits); no bit set: 0xffffffff. .shiftamt: the left shift that
      // would move it to the top, i.e. the leading-zero count.
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      const IT ut = wide ? IT::kU64 : IT::kU32;
      uint32_t x = a;
      if (Signed(t))
        x = Bin(IOp::kXor, ut, a,
                R(Bin(IOp::kShr, wide ? IT::kS64 : IT::kS32, a, I(wide ? 63 : 31))));
      uint32_t n = TempFor(IT::kU32);
      VInst& v = Emit(IOp::kClz, ut);
      v.d = n;
      v.a = x;
      uint32_t r = in.Has(kFlagShiftAmt) ? n : Bin(IOp::kXor, IT::kU32, n, I(wide ? 63 : 31));
      uint32_t none = Setp(isa::Compare::kEq, ut, x, I(0));
      SelTo(d, IT::kU32, MovImm(IT::kU32, 0xffffffffu), R(r), none, /*negate=*/false);
      return Status::Ok();
    }
    case Opcode::kBfe: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value pos, Src(in.operands[2], ScalarType::kU32));
      GPUVM_ASSIGN_OR_RETURN(uint32_t len, SrcReg(in.operands[3], ScalarType::kU32));
      BinTo(d, IOp::kBfe, it, a, pos);
      vc_.code.back().c = len;
      return Status::Ok();
    }
    case Opcode::kBfi: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t f, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(uint32_t b, SrcReg(in.operands[2], t));
      GPUVM_ASSIGN_OR_RETURN(uint32_t pos, SrcReg(in.operands[3], ScalarType::kU32));
      GPUVM_ASSIGN_OR_RETURN(uint32_t len, SrcReg(in.operands[4], ScalarType::kU32));
      VInst& v = Emit(IOp::kBfi, wide ? IT::kU64 : IT::kU32);
      v.d = d;
      v.a = f;
      v.b = b;
      v.c = pos;
      v.m = len;
      return Status::Ok();
    }
    case Opcode::kPrmt: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(uint32_t b, SrcReg(in.operands[2], t));
      GPUVM_ASSIGN_OR_RETURN(Value c, Src(in.operands[3], ScalarType::kU32));
      VInst& v = Emit(IOp::kPrmt);
      v.d = d;
      v.a = a;
      v.b = b;
      v.in.mod = static_cast<uint8_t>(
          in.permute == PermuteMode::kNone ? 0 : static_cast<uint8_t>(in.permute));
      if (c.is_imm) {
        v.in.has_imm = true;
        v.in.imm = c.imm & 0xffffffffu;
      } else {
        v.c = c.reg;
      }
      return Status::Ok();
    }
    case Opcode::kShf: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(uint32_t b, SrcReg(in.operands[2], t));
      GPUVM_ASSIGN_OR_RETURN(Value c, Src(in.operands[3], ScalarType::kU32));
      VInst& v = Emit(IOp::kShf);
      v.d = d;
      v.a = a;
      v.b = b;
      v.in.mod =
          (in.Has(kFlagRight) ? isa::kShfRight : 0) | (in.Has(kFlagClamp) ? isa::kShfClamp : 0);
      if (c.is_imm) {
        v.in.has_imm = true;
        v.in.imm = c.imm & 0xffffffffu;
      } else {
        v.c = c.reg;
      }
      return Status::Ok();
    }
    case Opcode::kLop3: {
      // d = immLut[(a_i << 2) | (b_i << 1) | c_i] for every bit i: the OR of the minterms the table
      // sets.
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(uint32_t b, SrcReg(in.operands[2], t));
      GPUVM_ASSIGN_OR_RETURN(uint32_t c, SrcReg(in.operands[3], t));
      if (in.operands[4].kind != OperandKind::kImmediate)
        return Unsupported("lop3 needs an immediate table");
      const uint32_t lut = static_cast<uint32_t>(in.operands[4].imm_bits & 0xff);
      if (lut == 0 || lut == 0xff) {
        MovTo(d, IT::kU32, I(lut == 0 ? 0 : 0xffffffffu));
        return Status::Ok();
      }
      auto not_of = [&](uint32_t x) {
        uint32_t r = TempFor(IT::kU32);
        VInst& v = Emit(IOp::kNot, IT::kU32);
        v.d = r;
        v.a = x;
        return r;
      };
      const uint32_t na = not_of(a), nb = not_of(b), nc = not_of(c);
      uint32_t acc = kNoV;
      for (uint32_t k = 0; k < 8; ++k) {
        if (!((lut >> k) & 1)) continue;
        uint32_t term = Bin(IOp::kAnd, IT::kU32, (k & 4) ? a : na, R((k & 2) ? b : nb));
        term = Bin(IOp::kAnd, IT::kU32, term, R((k & 1) ? c : nc));
        acc = acc == kNoV ? term : Bin(IOp::kOr, IT::kU32, acc, R(term));
      }
      MovTo(d, IT::kU32, acc);
      return Status::Ok();
    }
    case Opcode::kDp4a: {
      // d = c + sum over the four byte lanes of a.byte * b.byte (each signed or unsigned by its
      // type).
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], ScalarType::kU32));
      GPUVM_ASSIGN_OR_RETURN(uint32_t b, SrcReg(in.operands[2], ScalarType::kU32));
      GPUVM_ASSIGN_OR_RETURN(uint32_t acc, SrcReg(in.operands[3], ScalarType::kU32));
      uint32_t eight = MovImm(IT::kU32, 8);
      const IT at = Signed(in.type) ? IT::kS32 : IT::kU32;
      const IT bt = Signed(in.type2) ? IT::kS32 : IT::kU32;
      for (uint32_t k = 0; k < 4; ++k) {
        uint32_t x = Bin(IOp::kBfe, at, a, I(8 * k));
        vc_.code.back().c = eight;
        uint32_t y = Bin(IOp::kBfe, bt, b, I(8 * k));
        vc_.code.back().c = eight;
        uint32_t sum = TempFor(IT::kU32);
        BinTo(sum, IOp::kMad, IT::kU32, x, R(y));
        vc_.code.back().c = acc;
        acc = sum;
      }
      MovTo(d, IT::kU32, acc);
      return Status::Ok();
    }
    case Opcode::kSad: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcExtReg(in.operands[1], t));
      GPUVM_ASSIGN_OR_RETURN(Value b, SrcExt(in.operands[2], t));
      GPUVM_ASSIGN_OR_RETURN(Value c, Src(in.operands[3], t));
      uint32_t hi = Bin(IOp::kMax, it, a, b);
      uint32_t lo = Bin(IOp::kMin, it, a, b);
      uint32_t diff = Bin(IOp::kSub, it, hi, R(lo));
      BinTo(d, IOp::kAdd, it, diff, c);
      return Status::Ok();
    }
    default:
      return Unsupported("internal: not a bit instruction");
  }
}

// ---- comparisons and selection
// ------------------------------------------------------------------------

Status KernelTranslator::LowerCompare(const Instruction& in) {
  if (in.opcode == Opcode::kSelp) {
    const ScalarType t = in.type;
    const IT it = TypeSize(t) == 8 ? IT::kU64 : IT::kU32;
    GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
    GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
    GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
    GPUVM_ASSIGN_OR_RETURN(auto p, SrcPred(in.operands[3]));
    if (p.first == kPT) {  // a constant predicate
      MovTo(d, it, p.second ? b : R(a));
      return Status::Ok();
    }
    SelTo(d, it, a, b, p.first, p.second);
    return Status::Ok();
  }
  if (in.opcode == Opcode::kSlct) {
    const ScalarType t = in.type;
    const IT it = TypeSize(t) == 8 ? IT::kU64 : IT::kU32;
    GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
    GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], t));
    GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], t));
    GPUVM_ASSIGN_OR_RETURN(uint32_t c, SrcReg(in.operands[3], in.type2));
    const bool f = in.type2 == ScalarType::kF32;
    uint32_t p = Setp(isa::Compare::kGe, f ? IT::kF32 : IT::kS32, c, I(0));
    SelTo(d, it, a, b, p);
    return Status::Ok();
  }
  // setp / set: compare in the comparison type, then combine.
  const bool is_set = in.opcode == Opcode::kSet;
  const ScalarType ct = is_set ? in.type2 : in.type;
  using C = isa::Compare;
  C cmp;
  bool force_unsigned = false;
  switch (in.compare) {
    case CompareOp::kEq:
      cmp = C::kEq;
      break;
    case CompareOp::kNe:
      cmp = C::kNe;
      break;
    case CompareOp::kLt:
      cmp = C::kLt;
      break;
    case CompareOp::kLe:
      cmp = C::kLe;
      break;
    case CompareOp::kGt:
      cmp = C::kGt;
      break;
    case CompareOp::kGe:
      cmp = C::kGe;
      break;
    case CompareOp::kLo:
      cmp = C::kLt;
      force_unsigned = true;
      break;
    case CompareOp::kLs:
      cmp = C::kLe;
      force_unsigned = true;
      break;
    case CompareOp::kHi:
      cmp = C::kGt;
      force_unsigned = true;
      break;
    case CompareOp::kHs:
      cmp = C::kGe;
      force_unsigned = true;
      break;
    case CompareOp::kEqu:
      cmp = C::kEqu;
      break;
    case CompareOp::kNeu:
      cmp = C::kNeu;
      break;
    case CompareOp::kLtu:
      cmp = C::kLtu;
      break;
    case CompareOp::kLeu:
      cmp = C::kLeu;
      break;
    case CompareOp::kGtu:
      cmp = C::kGtu;
      break;
    case CompareOp::kGeu:
      cmp = C::kGeu;
      break;
    case CompareOp::kNum:
      cmp = C::kNum;
      break;
    case CompareOp::kNan:
      cmp = C::kNan;
      break;
    default:
      return Unsupported("comparison missing");
  }
  IT it = AluType(ct);
  if (force_unsigned || IsBitType(ct)) it = TypeSize(ct) == 8 ? IT::kU64 : IT::kU32;
  // 16-bit values: extend by the comparison's signedness.
  ScalarType ext_type = ct;
  if (Is16(ct) && (force_unsigned || IsBitType(ct))) ext_type = ScalarType::kU16;
  GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcExtReg(in.operands[1], ext_type));
  GPUVM_ASSIGN_OR_RETURN(Value b, SrcExt(in.operands[2], ext_type));
  const bool has_c = in.bool_op != BoolOp::kNone;
  if (!is_set && !has_c && in.operands[0].kind == OperandKind::kRegister) {
    // The common case: compare straight into the destination predicate.
    GPUVM_ASSIGN_OR_RETURN(uint32_t pd, DstPred(in.operands[0]));
    uint32_t p = Setp(cmp, it, a, b);
    vc_.code.back().d = pd;
    (void)p;
    return Status::Ok();
  }
  uint32_t p = Setp(cmp, it, a, b);
  uint32_t result = p;
  std::pair<uint32_t, bool> c{kPT, false};
  if (has_c) {
    GPUVM_ASSIGN_OR_RETURN(c, SrcPred(in.operands[3]));
  }
  const isa::PlopOp bop = in.bool_op == BoolOp::kAnd  ? isa::PlopOp::kAnd
                          : in.bool_op == BoolOp::kOr ? isa::PlopOp::kOr
                                                      : isa::PlopOp::kXor;
  if (is_set) {
    if (has_c) {
      result = Temp(VKind::kPred);
      PlopTo(result, bop, p, false, c.first, c.second);
    }
    GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
    const uint64_t one = in.type == ScalarType::kF32 ? 0x3f800000u : 0xffffffffu;
    SelTo(d, IT::kU32, MovImm(IT::kU32, one), I(0), result);
    return Status::Ok();
  }
  const Operand& dst = in.operands[0];
  uint32_t pd, qd = kNoV;
  if (dst.kind == OperandKind::kRegisterPair) {
    pd = FrameReg(dst.reg);
    qd = FrameReg(dst.reg2);
  } else {
    GPUVM_ASSIGN_OR_RETURN(pd, DstPred(dst));
  }
  if (has_c) {
    PlopTo(pd, bop, p, false, c.first, c.second);
    if (qd != kNoV) PlopTo(qd, bop, p, true, c.first, c.second);
  } else {
    PlopTo(pd, isa::PlopOp::kAnd, p, false, kPT, false);
    if (qd != kNoV) PlopTo(qd, isa::PlopOp::kAnd, p, true, kPT, false);
  }
  return Status::Ok();
}

// ---- moves and conversions
// ----------------------------------------------------------------------------

Status KernelTranslator::LowerMov(const Instruction& in) {
  const ScalarType t = in.type;
  const Operand& dst = in.operands[0];
  const Operand& src = in.operands[1];
  if (t == ScalarType::kPred) {
    GPUVM_ASSIGN_OR_RETURN(uint32_t d, DstPred(dst));
    GPUVM_ASSIGN_OR_RETURN(auto a, SrcPred(src));
    PlopTo(d, isa::PlopOp::kAnd, a.first, a.second, kPT, false);
    return Status::Ok();
  }
  const uint32_t size = TypeSize(t);
  if (dst.kind == OperandKind::kVector) {  // unpack
    GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(src, t));
    const size_t n = dst.elements.size();
    const uint32_t part_bits = size * 8 / static_cast<uint32_t>(n);
    std::vector<uint32_t> words;  // the 32-bit words of the source
    if (size == 8) {
      words.push_back(Cvt(IT::kU32, IT::kU64, a));
      uint32_t hi = TempFor(IT::kU32);
      VInst& v = Emit(IOp::kHi32, IT::kU32);
      v.d = hi;
      v.a = a;
      words.push_back(hi);
    } else {
      words.push_back(a);
    }
    for (size_t k = 0; k < n; ++k) {
      if (dst.elements[k].kind == OperandKind::kSink) continue;
      GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(dst.elements[k]));
      const uint32_t bit = static_cast<uint32_t>(k) * part_bits;
      if (part_bits == 32) {
        MovTo(d, IT::kU32, words[bit / 32]);
      } else {  // 16-bit parts
        const uint32_t w = words[bit / 32];
        if (bit % 32 == 0) {
          MovTo(d, IT::kU32, w);
        } else {
          BinTo(d, IOp::kShr, IT::kU32, w, I(16));
        }
      }
    }
    return Status::Ok();
  }
  GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(dst));
  if (src.kind == OperandKind::kVector) {  // pack
    const size_t n = src.elements.size();
    const uint32_t part_bytes = size / static_cast<uint32_t>(n);
    std::vector<uint32_t> parts;
    const ScalarType pt = part_bytes == 4 ? ScalarType::kU32 : ScalarType::kU16;
    for (const Operand& e : src.elements) {
      GPUVM_ASSIGN_OR_RETURN(uint32_t r, SrcReg(e, pt));
      parts.push_back(r);
    }
    std::vector<uint32_t> words;
    if (part_bytes == 4) {
      words = parts;
    } else {
      for (size_t k = 0; k < n; k += 2) {
        uint32_t lo = Bin(IOp::kAnd, IT::kU32, parts[k], I(0xffff));
        uint32_t hi = Bin(IOp::kShl, IT::kU32, parts[k + 1], I(16));
        words.push_back(Bin(IOp::kOr, IT::kU32, lo, R(hi)));
      }
    }
    if (size == 8) {
      BinTo(d, IOp::kPack, IT::kU64, words[0], R(words[1]));
    } else {
      MovTo(d, IT::kU32, words[0]);
    }
    return Status::Ok();
  }
  GPUVM_ASSIGN_OR_RETURN(Value a, Src(src, t));
  MovTo(d, size == 8 ? IT::kU64 : IT::kU32, a);
  return Status::Ok();
}

Status KernelTranslator::LowerCvt(const Instruction& in) {
  const ScalarType dt = in.type, st = in.type2;
  auto plain = [](ScalarType t) { return !IsF16Like(t) || t == ScalarType::kF16; };
  if (!plain(dt) || !plain(st))
    return Unsupported("conversions to or from bf16 or packed halves are not supported");
  GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
  GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], st));
  const IT di = dt == ScalarType::kF16 ? IT::kF16 : MemType(dt);
  const IT si = st == ScalarType::kF16 ? IT::kF16 : MemType(st);
  const uint8_t mod = RoundingMod(in.rounding) | (in.Has(kFlagSat) ? isa::kModSat : 0);
  uint32_t value;
  if (di == si && mod == 0 && TypeSize(dt) >= 4) {
    value = a;  // same type, nothing to do but copy
  } else {
    value = Cvt(di, si, a, mod);
  }
  WriteWidth(d, value, TypeSize(dt) == 8, Signed(dt));
  return Status::Ok();
}

Status KernelTranslator::LowerCvta(const Instruction& in) {
  GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
  const bool wide = TypeSize(in.type) == 8;
  const bool to = in.Has(kFlagTo);
  std::optional<isa::SpecialReg> window;
  switch (in.space) {
    case StateSpace::kGlobal:
      break;  // generic and global addresses coincide
    case StateSpace::kShared:
      window = isa::SpecialReg::kSharedWindow;
      break;
    case StateSpace::kLocal:
      window = isa::SpecialReg::kLocalWindow;
      break;
    default:
      return Unsupported("cvta for this state space is not supported (no generic window for it)");
  }
  const Operand& src = in.operands[1];
  if (src.kind == OperandKind::kSymbol && !to) {
    GPUVM_ASSIGN_OR_RETURN(uint32_t a, SymbolAddress(src, wide, /*generic=*/true));
    MovTo(d, wide ? IT::kU64 : IT::kU32, a);
    return Status::Ok();
  }
  GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(src, wide ? ScalarType::kU64 : ScalarType::kU32));
  if (!window) {
    MovTo(d, wide ? IT::kU64 : IT::kU32, a);
    return Status::Ok();
  }
  uint32_t w = S2R(*window);
  if (!wide) w = Cvt(IT::kU32, IT::kU64, w);
  BinTo(d, to ? IOp::kSub : IOp::kAdd, wide ? IT::kU64 : IT::kU32, a, R(w));
  return Status::Ok();
}

// ---- memory
// -------------------------------------------------------------------------------------------

Status KernelTranslator::LowerMemory(const Instruction& in) {
  const bool load = in.opcode == Opcode::kLd || in.opcode == Opcode::kLdu;
  const ScalarType t = in.type;
  const uint32_t esize = TypeSize(t);
  const Operand& addr_op = in.operands[load ? 1 : 0];
  const Operand& val_op = in.operands[load ? 0 : 1];
  StateSpace space = in.space;
  if (in.opcode == Opcode::kLdu && space == StateSpace::kNone) space = StateSpace::kNone;
  GPUVM_ASSIGN_OR_RETURN(Addr a, Address(addr_op, space));
  if (!load && a.space == isa::Space::kConst)
    return Unsupported("stores to constant or parameter space");
  const bool release = !load && (in.order == MemoryOrder::kRelease);
  const bool acquire = load && (in.order == MemoryOrder::kAcquire);
  if (release) Emit(IOp::kMembar).in.mod = 1;
  std::vector<const Operand*> elems;
  if (val_op.kind == OperandKind::kVector) {
    for (const Operand& e : val_op.elements) elems.push_back(&e);
  } else {
    elems.push_back(&val_op);
  }
  for (size_t k = 0; k < elems.size(); ++k) {
    const Operand& e = *elems[k];
    const int64_t off = a.offset + static_cast<int64_t>(k * esize);
    uint32_t reg;
    if (load) {
      if (e.kind == OperandKind::kSink) continue;
      GPUVM_ASSIGN_OR_RETURN(reg, Dst(e));
    } else {
      GPUVM_ASSIGN_OR_RETURN(Value v, Src(e, t));
      reg = v.is_imm ? MovImm(esize == 8 ? IT::kU64 : IT::kU32, v.imm) : v.reg;
    }
    const bool reg64 = reg != kRZ && KindOfVReg(reg) == VKind::kReg64;
    VInst& v = Emit(load ? IOp::kLd : IOp::kSt, MemType(t));
    v.in.mod = static_cast<uint8_t>(a.space) | (a.base64 ? isa::kModAddr64 : 0) |
               (reg64 && esize < 8 ? isa::kModWideReg : 0);
    if (a.space == isa::Space::kConst) v.in.type2 = a.bank;
    v.a = a.base;
    v.in.has_imm = off != 0;
    v.in.imm = static_cast<uint64_t>(off);
    if (load) {
      v.d = reg;
      if (reg == kRZ && esize < 8) v.in.mod &= ~isa::kModWideReg;
    } else {
      v.b = reg;
    }
  }
  if (acquire) Emit(IOp::kMembar).in.mod = 1;
  return Status::Ok();
}

Status KernelTranslator::LowerAtomic(const Instruction& in) {
  const bool red = in.opcode == Opcode::kRed;
  const ScalarType t = in.type;
  using A = isa::AtomOp;
  A op;
  switch (in.atomic_op) {
    case AtomicOp::kAdd:
      op = A::kAdd;
      break;
    case AtomicOp::kMin:
      op = A::kMin;
      break;
    case AtomicOp::kMax:
      op = A::kMax;
      break;
    case AtomicOp::kInc:
      op = A::kInc;
      break;
    case AtomicOp::kDec:
      op = A::kDec;
      break;
    case AtomicOp::kCas:
      op = A::kCas;
      break;
    case AtomicOp::kExch:
      op = A::kExch;
      break;
    case AtomicOp::kAnd:
      op = A::kAnd;
      break;
    case AtomicOp::kOr:
      op = A::kOr;
      break;
    case AtomicOp::kXor:
      op = A::kXor;
      break;
    default:
      return Unsupported("atomic operation not supported");
  }
  if (in.vector != 1 || IsF16Like(t)) return Unsupported("vector or f16 atomics are not supported");
  IT it = AluType(t);
  if (op == A::kAdd && it == IT::kS64) it = IT::kU64;  // the same bits
  const bool wide = TypeSize(t) == 8;
  const size_t addr_index = red ? 0 : 1;
  GPUVM_ASSIGN_OR_RETURN(Addr a, Address(in.operands[addr_index], in.space));
  if (a.space != isa::Space::kGlobal && a.space != isa::Space::kShared &&
      a.space != isa::Space::kGeneric) {
    return Unsupported("atomics on this state space are not supported");
  }
  uint32_t d = kRZ;
  if (!red) {
    GPUVM_ASSIGN_OR_RETURN(d, Dst(in.operands[0]));
  }
  GPUVM_ASSIGN_OR_RETURN(uint32_t b, SrcReg(in.operands[addr_index + 1], t));
  uint32_t c = kNoV;
  if (op == A::kCas) {
    GPUVM_ASSIGN_OR_RETURN(c, SrcReg(in.operands[addr_index + 2], t));
  }
  const bool ordered = in.order == MemoryOrder::kRelease || in.order == MemoryOrder::kAcqRel;
  if (ordered) Emit(IOp::kMembar).in.mod = 1;
  VInst& v = Emit(IOp::kAtom, it);
  v.in.type2 = static_cast<uint8_t>(op);
  v.in.mod = static_cast<uint8_t>(a.space) | (a.base64 ? isa::kModAddr64 : 0);
  v.a = a.base;
  v.in.has_imm = a.offset != 0;
  v.in.imm = static_cast<uint64_t>(a.offset);
  v.d = d;
  v.b = b;
  v.c = c;
  (void)wide;
  if (in.order == MemoryOrder::kAcquire || in.order == MemoryOrder::kAcqRel)
    Emit(IOp::kMembar).in.mod = 1;
  return Status::Ok();
}

// ---- synchronization and warp-level
// -------------------------------------------------------------------

Status KernelTranslator::LowerBarrier(const Instruction& in) {
  if (in.opcode == Opcode::kMembar || in.opcode == Opcode::kFence) {
    VInst& v = Emit(IOp::kMembar);
    v.in.mod = in.scope == MemoryScope::kCta ? 0 : in.scope == MemoryScope::kSys ? 2 : 1;
    return Status::Ok();
  }
  if (in.Has(kFlagWarp))
    return Status::Ok();  // bar.warp.sync: the running group is already in step
  if (in.Has(kFlagArrive)) return Unsupported("bar.arrive is not supported");
  const bool red = in.Has(kFlagRed);
  const Operand& id_op = in.operands[red ? 1 : 0];
  if (id_op.kind != OperandKind::kImmediate || id_op.imm_bits >= isa::kMaxBarriers) {
    return Unsupported("barrier ids must be immediates 0..15");
  }
  const size_t count_index = red ? 2 : 1;
  const bool has_count = in.operands.size() > count_index + (red ? 1 : 0);
  if (has_count) return Unsupported("barriers with a thread count are not supported");
  const uint8_t id = static_cast<uint8_t>(id_op.imm_bits);
  if (!red) {
    Emit(IOp::kBar).in.mod = id;
    return Status::Ok();
  }
  if (guard_ != kPT) return Unsupported("a guarded bar.red is not supported");
  // bar.red: count the threads whose predicate is set (for .and: the ones whose predicate is clear)
  // in a reserved shared word. Three barriers keep the uses apart: everyone is past the previous
  // read before the word is cleared, cleared before anyone adds, and done adding before anyone
  // reads.
  GPUVM_ASSIGN_OR_RETURN(auto p, SrcPred(in.operands.back()));
  const bool is_and = in.atomic_op == AtomicOp::kAnd;
  const int64_t word = bar_red_word_;
  Emit(IOp::kBar).in.mod = id;
  {
    VInst& st = Emit(IOp::kSt, IT::kU32);
    st.in.mod = static_cast<uint8_t>(isa::Space::kShared);
    st.a = kRZ;
    st.b = kRZ;
    st.in.has_imm = true;
    st.in.imm = static_cast<uint64_t>(word);
  }
  Emit(IOp::kBar).in.mod = id;
  {
    uint32_t one = MovImm(IT::kU32, 1);
    VInst& add = Emit(IOp::kAtom, IT::kU32);
    add.in.type2 = static_cast<uint8_t>(isa::AtomOp::kAdd);
    add.in.mod = static_cast<uint8_t>(isa::Space::kShared);
    add.a = kRZ;
    add.b = one;
    add.d = kRZ;
    add.in.has_imm = true;
    add.in.imm = static_cast<uint64_t>(word);
    // Only the threads whose (possibly negated) predicate counts add.
    add.guard = p.first;
    add.in.guard_negated = p.second != is_and;
    if (p.first == kPT) {
      add.guard = kPT;
      add.in.guard_negated = false;
      if (p.second != is_and) vc_.code.pop_back();  // nobody adds
    }
  }
  Emit(IOp::kBar).in.mod = id;
  uint32_t count = TempFor(IT::kU32);
  {
    VInst& ld = Emit(IOp::kLd, IT::kU32);
    ld.in.mod = static_cast<uint8_t>(isa::Space::kShared);
    ld.a = kRZ;
    ld.d = count;
    ld.in.has_imm = true;
    ld.in.imm = static_cast<uint64_t>(word);
  }
  const Operand& dst = in.operands[0];
  if (in.atomic_op == AtomicOp::kPopc) {
    GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(dst));
    MovTo(d, IT::kU32, count);
    return Status::Ok();
  }
  GPUVM_ASSIGN_OR_RETURN(uint32_t pd, DstPred(dst));
  // .and: true when no thread had a clear predicate; .or: true when some thread had it set.
  uint32_t r = Setp(is_and ? isa::Compare::kEq : isa::Compare::kNe, IT::kU32, count, I(0));
  PlopTo(pd, isa::PlopOp::kAnd, r, false, kPT, false);
  return Status::Ok();
}

Status KernelTranslator::LowerWarp(const Instruction& in) {
  if (in.opcode == Opcode::kActivemask) {
    GPUVM_ASSIGN_OR_RETURN(uint32_t d, Dst(in.operands[0]));
    MovTo(d, IT::kU32, S2R(isa::SpecialReg::kActiveMask));
    return Status::Ok();
  }
  if (in.opcode == Opcode::kVote) {
    GPUVM_ASSIGN_OR_RETURN(auto a, SrcPred(in.operands[1]));
    uint8_t mode;
    switch (in.vote) {
      case VoteMode::kAll:
        mode = static_cast<uint8_t>(isa::VoteMode::kAll);
        break;
      case VoteMode::kAny:
        mode = static_cast<uint8_t>(isa::VoteMode::kAny);
        break;
      case VoteMode::kUni:
        mode = static_cast<uint8_t>(isa::VoteMode::kUni);
        break;
      default:
        mode = static_cast<uint8_t>(isa::VoteMode::kBallot);
        break;
    }
    uint32_t d;
    if (in.vote == VoteMode::kBallot) {
      GPUVM_ASSIGN_OR_RETURN(d, Dst(in.operands[0]));
    } else {
      GPUVM_ASSIGN_OR_RETURN(d, DstPred(in.operands[0]));
    }
    VInst& v = Emit(IOp::kVote);
    v.d = d;
    v.a = a.first == kPT ? kPT : a.first;
    v.in.mod = mode | (a.second ? isa::kVoteNegA : 0);
    return Status::Ok();
  }
  // shfl.sync.mode.b32 d[|p], a, b, c, membermask
  const Operand& dst = in.operands[0];
  uint32_t d, p = kNoV;
  if (dst.kind == OperandKind::kRegisterPair) {
    d = FrameReg(dst.reg);
    p = FrameReg(dst.reg2);
  } else {
    GPUVM_ASSIGN_OR_RETURN(d, Dst(dst));
  }
  GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], ScalarType::kB32));
  GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], ScalarType::kU32));
  GPUVM_ASSIGN_OR_RETURN(Value c, Src(in.operands[3], ScalarType::kU32));
  VInst& v = Emit(IOp::kShfl);
  uint8_t mode;
  switch (in.shuffle) {
    case ShuffleMode::kUp:
      mode = static_cast<uint8_t>(isa::ShflMode::kUp);
      break;
    case ShuffleMode::kDown:
      mode = static_cast<uint8_t>(isa::ShflMode::kDown);
      break;
    case ShuffleMode::kBfly:
      mode = static_cast<uint8_t>(isa::ShflMode::kBfly);
      break;
    default:
      mode = static_cast<uint8_t>(isa::ShflMode::kIdx);
      break;
  }
  v.d = d;
  v.a = a;
  v.shfl_pred = p;
  v.in.has_imm = true;
  v.in.mod = mode;
  uint64_t imm = uint64_t{isa::kPredTrue} << 48;
  if (b.is_imm) {
    v.in.mod |= isa::kShflBImm;
    imm |= b.imm & 0x1f;
  } else {
    v.b = b.reg;
  }
  if (c.is_imm) {
    v.in.mod |= isa::kShflCImm;
    imm |= (c.imm & 0xffff) << 32;
  } else {
    v.c = c.reg;
  }
  v.in.imm = imm;
  return Status::Ok();
}

// ---- calls
// --------------------------------------------------------------------------------------------

Status KernelTranslator::InitFrame(Frame* f, const Function& fn, uint32_t fn_index) {
  f->fn = &fn;
  f->fn_index = fn_index;
  f->regs.assign(fn.registers.size(), kNoV);
  f->labels.resize(fn.labels.size());
  for (uint32_t& l : f->labels) l = vc_.NewLabel();
  f->local_offset.assign(fn.locals.size(), -1);
  uint64_t& top = vc_.region_fixed[f->region];
  for (size_t i = 0; i < fn.locals.size(); ++i) {
    const Variable& v = fn.locals[i];
    if (v.space != StateSpace::kLocal && v.space != StateSpace::kParam) continue;
    top = AlignUp(top, std::min<uint32_t>(std::max<uint32_t>(v.Alignment(), 1), 16));
    f->local_offset[i] = static_cast<int64_t>(top);
    top += v.SizeBytes();
    if (top > isa::kMaxLocalBytes) {
      return Status::ResourceExhausted(DescribeLocation(fn, v.line) + "local memory beyond " +
                                       std::to_string(isa::kMaxLocalBytes) + " bytes per thread");
    }
  }
  return Status::Ok();
}

const KernelTranslator::CallableLayout& KernelTranslator::LayoutOf(uint32_t fn_index) {
  auto it = callable_layout_.find(fn_index);
  if (it != callable_layout_.end()) return it->second;
  const Function& fn = m_.functions[fn_index];
  CallableLayout l;
  uint64_t top = 0;
  for (const Variable& v : fn.params) {
    top = AlignUp(top, std::min<uint32_t>(std::max<uint32_t>(v.Alignment(), 1), 16));
    l.param_offset.push_back(static_cast<int64_t>(top));
    top += v.SizeBytes();
  }
  for (const Variable& v : fn.returns) {
    top = AlignUp(top, std::min<uint32_t>(std::max<uint32_t>(v.Alignment(), 1), 16));
    l.return_offset.push_back(static_cast<int64_t>(top));
    top += v.SizeBytes();
  }
  l.fixed = top;
  return callable_layout_.emplace(fn_index, std::move(l)).first->second;
}

uint32_t KernelTranslator::EntryLabel(uint32_t fn_index) {
  auto it = entry_label_.find(fn_index);
  if (it != entry_label_.end()) return it->second;
  uint32_t label = vc_.NewLabel();
  entry_label_.emplace(fn_index, label);
  pending_callables_.push_back(fn_index);
  return label;
}

// Copies `size` bytes of local memory (from a caller's slot to a callee's parameter area or back).
// A `src_patch` region adds that region's frame size to the source offset (the callee's area lies
// past it).
void KernelTranslator::CopyLocal(uint32_t src_base, int64_t src_off, int32_t src_patch,
                                 uint32_t dst_base, int64_t dst_off, uint64_t size) {
  for (uint64_t done = 0; done < size;) {
    const uint64_t left = size - done;
    const int64_t s = src_off + static_cast<int64_t>(done),
                  d = dst_off + static_cast<int64_t>(done);
    uint32_t n = 1;
    if (left >= 8 && s % 8 == 0 && d % 8 == 0) {
      n = 8;
    } else if (left >= 4 && s % 4 == 0 && d % 4 == 0) {
      n = 4;
    }
    const IT t = n == 8 ? IT::kU64 : n == 4 ? IT::kU32 : IT::kU8;
    uint32_t tmp = TempFor(n == 8 ? IT::kU64 : IT::kU32);
    VInst& ld = Emit(IOp::kLd, t);
    ld.in.mod = static_cast<uint8_t>(isa::Space::kLocal);
    ld.a = src_base;
    ld.d = tmp;
    ld.in.has_imm = true;
    ld.in.imm = static_cast<uint64_t>(s);
    ld.frame_region = src_patch;
    VInst& st = Emit(IOp::kSt, t);
    st.in.mod = static_cast<uint8_t>(isa::Space::kLocal);
    st.a = dst_base;
    st.b = tmp;
    st.in.has_imm = true;
    st.in.imm = static_cast<uint64_t>(d);
    done += n;
  }
}

// A call to an out-of-line function: copy the arguments into the callee's frame (which starts where
// the caller's ends), move the stack pointer, call, move it back, copy the results out. The
// allocator saves the values live across the call around `add sp; call; sub sp`.
Status KernelTranslator::EmitRealCall(const Instruction& in, uint32_t callee_index) {
  const Function& callee = m_.functions[callee_index];
  const CallableLayout& layout = LayoutOf(callee_index);
  const uint32_t entry = EntryLabel(callee_index);
  const int32_t region = static_cast<int32_t>(frame_->region);
  auto slot_offset = [&](const Operand& op) -> Result<int64_t> {
    if (op.kind != OperandKind::kSymbol)
      return Unsupported("call arguments must be .param variables");
    const Symbol& s = op.symbol;
    if (s.kind == Symbol::Kind::kLocal && frame_->local_offset[s.index] >= 0)
      return frame_->local_offset[s.index];
    if (s.kind == Symbol::Kind::kParam && frame_->kind != FrameKind::kKernel)
      return frame_->param_offset[s.index];
    if (s.kind == Symbol::Kind::kReturn) return frame_->return_offset[s.index];
    return Unsupported("call argument is not a .param slot of the caller");
  };
  uint32_t skip = kNoV;
  if (guard_ != kPT) {
    skip = vc_.NewLabel();
    VInst& v = Emit(IOp::kBra);
    v.in.guard_negated = !guard_negated_;
    v.label = skip;
  }
  const uint32_t saved_guard = guard_;
  const bool saved_negated = guard_negated_;
  guard_ = kPT;
  guard_negated_ = false;
  const uint32_t base = LocalBase();
  uint32_t out = TempFor(IT::kU32);
  {
    VInst& add = Emit(IOp::kAdd, IT::kU32);
    add.d = out;
    add.a = sp_;
    add.in.has_imm = true;
    add.in.imm = 0;
    add.frame_region = region;
  }
  for (size_t i = 0; i < callee.params.size(); ++i) {
    GPUVM_ASSIGN_OR_RETURN(int64_t from, slot_offset(in.operands[in.call_results + i]));
    CopyLocal(base, from, -1, out, layout.param_offset[i], callee.params[i].SizeBytes());
  }
  auto move_sp = [&](IOp op) {
    VInst& v = Emit(op, IT::kU32);
    v.d = sp_;
    v.a = sp_;
    v.in.has_imm = true;
    v.in.imm = 0;
    v.frame_region = region;
  };
  move_sp(IOp::kAdd);
  {
    VInst& call = Emit(IOp::kCall);
    call.d = kLink;
    call.label = entry;
    call.frame_region = region;
  }
  move_sp(IOp::kSub);
  for (size_t i = 0; i < callee.returns.size(); ++i) {
    GPUVM_ASSIGN_OR_RETURN(int64_t to, slot_offset(in.operands[i]));
    CopyLocal(sp_, layout.return_offset[i], region, base, to, callee.returns[i].SizeBytes());
  }
  guard_ = saved_guard;
  guard_negated_ = saved_negated;
  if (skip != kNoV) vc_.Bind(skip);
  return Status::Ok();
}

// The body of an out-of-line function, once per kernel: its frame starts at the stack pointer.
Status KernelTranslator::EmitCallable(uint32_t fn_index) {
  const Function& fn = m_.functions[fn_index];
  const CallableLayout& layout = LayoutOf(fn_index);
  Frame f;
  f.kind = FrameKind::kCallable;
  f.region = static_cast<uint32_t>(vc_.region_fixed.size());
  f.sp_based = true;
  vc_.region_fixed.push_back(layout.fixed);
  GPUVM_RETURN_IF_ERROR(InitFrame(&f, fn, fn_index));
  f.param_offset = layout.param_offset;
  f.return_offset = layout.return_offset;
  cur_ = nullptr;
  guard_ = kPT;
  guard_negated_ = false;
  vc_.Bind(entry_label_.at(fn_index));
  f.ret_addr = vc_.NewVReg(VKind::kReg32);
  MovTo(f.ret_addr, IT::kU32, kLink);
  call_stack_.assign(1, fn_index);
  return EmitBody(f);
}

Status KernelTranslator::LowerCall(const Instruction& in) {
  const Function& callee = m_.functions[in.callee];
  if (!callee.has_body && callee.name == kAssertFail) {
    // A failed device-side assert: nvcc passes the message, file, line and function; there is no
    // printf channel, so the arguments are dropped and the job stops with the assert reason.
    Emit(IOp::kTrap).in.mod = uint8_t(isa::TrapCode::kAssert);
    return Status::Ok();
  }
  if (!callee.has_body)
    return Unsupported("call to '" + callee.name + "', which has no body in this module");
  if (callable_.count(in.callee)) return EmitRealCall(in, in.callee);
  if (std::find(call_stack_.begin(), call_stack_.end(), in.callee) != call_stack_.end()) {
    return Unsupported("recursive call to '" + callee.name + "' (recursion is not supported)");
  }
  if (call_stack_.size() >= kMaxInlineDepth) return Unsupported("calls nested too deeply");
  Frame f;
  f.kind = FrameKind::kInline;
  f.region = frame_->region;
  f.sp_based = frame_->sp_based;
  GPUVM_RETURN_IF_ERROR(InitFrame(&f, callee, in.callee));
  // Bind the callee's parameters and results to the caller's .param slots.
  auto slot_offset = [&](const Operand& op) -> Result<int64_t> {
    if (op.kind != OperandKind::kSymbol)
      return Unsupported("call arguments must be .param variables");
    const Symbol& s = op.symbol;
    if (s.kind == Symbol::Kind::kLocal && frame_->local_offset[s.index] >= 0)
      return frame_->local_offset[s.index];
    if (s.kind == Symbol::Kind::kParam && frame_->kind != FrameKind::kKernel)
      return frame_->param_offset[s.index];
    if (s.kind == Symbol::Kind::kReturn) return frame_->return_offset[s.index];
    return Unsupported("call argument is not a .param slot of the caller");
  };
  if (in.call_results != callee.returns.size() ||
      in.operands.size() - in.call_results != callee.params.size()) {
    return Unsupported("call does not match the callee's parameters");
  }
  for (size_t i = 0; i < callee.returns.size(); ++i) {
    GPUVM_ASSIGN_OR_RETURN(int64_t off, slot_offset(in.operands[i]));
    f.return_offset.push_back(off);
  }
  for (size_t i = 0; i < callee.params.size(); ++i) {
    GPUVM_ASSIGN_OR_RETURN(int64_t off, slot_offset(in.operands[in.call_results + i]));
    f.param_offset.push_back(off);
  }
  f.return_label = vc_.NewLabel();
  uint32_t skip = kNoV;
  if (guard_ != kPT) {  // @p call: lanes without p jump over the inlined body
    skip = vc_.NewLabel();
    VInst& v = Emit(IOp::kBra);
    v.in.guard_negated = !guard_negated_;
    v.label = skip;
  }
  Frame* caller = frame_;
  const Instruction* caller_inst = cur_;
  const uint32_t saved_guard = guard_;
  const bool saved_negated = guard_negated_;
  call_stack_.push_back(in.callee);
  Status s = EmitBody(f);
  call_stack_.pop_back();
  frame_ = caller;
  cur_ = caller_inst;
  guard_ = saved_guard;
  guard_negated_ = saved_negated;
  GPUVM_RETURN_IF_ERROR(s);
  vc_.Bind(f.return_label);
  if (skip != kNoV) vc_.Bind(skip);
  return Status::Ok();
}

// ---- the dispatcher
// -----------------------------------------------------------------------------------

Status KernelTranslator::Lower(const Instruction& in) {
  if (in.opcode == Opcode::kAdd || in.opcode == Opcode::kSub) {
    if (in.Has(kFlagCc)) return LowerCarry(in);
  }
  switch (in.opcode) {
    case Opcode::kAdd:
    case Opcode::kSub:
    case Opcode::kDiv:
    case Opcode::kRem:
    case Opcode::kAbs:
    case Opcode::kNeg:
    case Opcode::kMin:
    case Opcode::kMax:
    case Opcode::kFma:
    case Opcode::kRcp:
    case Opcode::kSqrt:
    case Opcode::kRsqrt:
    case Opcode::kSin:
    case Opcode::kCos:
    case Opcode::kLg2:
    case Opcode::kEx2:
    case Opcode::kTanh:
    case Opcode::kCopysign:
      if (IsF16Like(in.type)) return Unsupported("f16/bf16 arithmetic is not supported");
      return LowerArith(in);
    case Opcode::kMul:
    case Opcode::kMul24:
      return LowerMul(in);
    case Opcode::kMad:
    case Opcode::kMad24:
      if (in.Has(kFlagCc)) return LowerCarry(in);
      return LowerMad(in);
    case Opcode::kAddc:
    case Opcode::kSubc:
    case Opcode::kMadc:
      return LowerCarry(in);
    case Opcode::kTestp: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t p, DstPred(in.operands[0]));
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], in.type));
      VInst& v = Emit(IOp::kTestp, AluType(in.type));
      v.d = p;
      v.a = a;
      v.in.mod = static_cast<uint8_t>(static_cast<uint8_t>(in.test) - 1);
      return Status::Ok();
    }
    case Opcode::kPopc:
    case Opcode::kClz:
    case Opcode::kBfind:
    case Opcode::kBrev:
    case Opcode::kBfe:
    case Opcode::kBfi:
    case Opcode::kPrmt:
    case Opcode::kLop3:
    case Opcode::kShf:
    case Opcode::kShl:
    case Opcode::kShr:
    case Opcode::kAnd:
    case Opcode::kOr:
    case Opcode::kXor:
    case Opcode::kNot:
    case Opcode::kCnot:
    case Opcode::kDp4a:
    case Opcode::kSad:
      return LowerBits(in);
    case Opcode::kSetp:
    case Opcode::kSet:
    case Opcode::kSelp:
    case Opcode::kSlct:
      return LowerCompare(in);
    case Opcode::kMov:
      return LowerMov(in);
    case Opcode::kCvt:
      return LowerCvt(in);
    case Opcode::kCvta:
      return LowerCvta(in);
    case Opcode::kLd:
    case Opcode::kLdu:
    case Opcode::kSt:
      return LowerMemory(in);
    case Opcode::kPrefetch:
    case Opcode::kNanosleep:
      return Status::Ok();  // hints with no semantics here
    case Opcode::kIsspacep: {
      GPUVM_ASSIGN_OR_RETURN(uint32_t p, DstPred(in.operands[0]));
      GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], ScalarType::kU64));
      auto in_window = [&](isa::SpecialReg w) {
        uint32_t base = S2R(w);
        uint32_t off = Bin(IOp::kSub, IT::kU64, a, R(base));
        return Setp(isa::Compare::kLt, IT::kU64, off, I(isa::kWindowBytes));
      };
      switch (in.space) {
        case StateSpace::kShared:
          PlopTo(p, isa::PlopOp::kAnd, in_window(isa::SpecialReg::kSharedWindow), false, kPT,
                 false);
          break;
        case StateSpace::kLocal:
          PlopTo(p, isa::PlopOp::kAnd, in_window(isa::SpecialReg::kLocalWindow), false, kPT, false);
          break;
        case StateSpace::kGlobal: {
          uint32_t s = in_window(isa::SpecialReg::kSharedWindow);
          uint32_t l = in_window(isa::SpecialReg::kLocalWindow);
          uint32_t either = Temp(VKind::kPred);
          PlopTo(either, isa::PlopOp::kOr, s, false, l, false);
          PlopTo(p, isa::PlopOp::kAnd, either, true, kPT, false);
          break;
        }
        default:
          PlopTo(p, isa::PlopOp::kXor, kPT, false, kPT, false);
          break;  // no generic window: false
      }
      return Status::Ok();
    }
    case Opcode::kAtom:
    case Opcode::kRed:
      return LowerAtomic(in);
    case Opcode::kBar:
    case Opcode::kMembar:
    case Opcode::kFence:
      return LowerBarrier(in);
    case Opcode::kShfl:
    case Opcode::kVote:
    case Opcode::kActivemask:
      return LowerWarp(in);
    case Opcode::kBra: {
      VInst& v = Emit(IOp::kBra);
      v.label = frame_->labels[in.operands[0].label];
      return Status::Ok();
    }
    case Opcode::kCall:
      return LowerCall(in);
    case Opcode::kRet:
      if (frame_->kind == FrameKind::kKernel) {
        Emit(IOp::kExit);
      } else if (frame_->kind == FrameKind::kCallable) {
        Emit(IOp::kRet).a = frame_->ret_addr;
      } else {
        Emit(IOp::kBra).label = frame_->return_label;
      }
      return Status::Ok();
    case Opcode::kExit:
      Emit(IOp::kExit);
      return Status::Ok();
    case Opcode::kTrap:
      Emit(IOp::kTrap);
      return Status::Ok();
    default:
      return Unsupported("instruction not supported by the translator");
  }
}

Status KernelTranslator::EmitBody(Frame& frame) {
  frame_ = &frame;
  const Function& fn = *frame.fn;
  // Labels by the body index they precede.
  std::vector<std::vector<uint32_t>> labels_at(fn.body.size() + 1);
  for (size_t l = 0; l < fn.labels.size(); ++l)
    labels_at[fn.labels[l].target].push_back(frame.labels[l]);
  for (size_t i = 0; i <= fn.body.size(); ++i) {
    for (uint32_t l : labels_at[i]) vc_.Bind(l);
    if (i == fn.body.size()) break;
    const Instruction& in = fn.body[i];
    frame_ = &frame;
    cur_ = &in;
    guard_ = kPT;
    guard_negated_ = false;
    if (in.guard.present()) {
      guard_ = FrameReg(in.guard.reg);
      guard_negated_ = in.guard.negated;
    }
    GPUVM_RETURN_IF_ERROR(Lower(in));
    if (vc_.code.size() > options_.max_instructions) {
      return Error(StatusCode::kResourceExhausted, "the kernel grows beyond " +
                                                       std::to_string(options_.max_instructions) +
                                                       " instructions after inlining");
    }
  }
  // Falling off the end of a function returns.
  cur_ = nullptr;
  guard_ = kPT;
  guard_negated_ = false;
  if (frame.kind == FrameKind::kKernel) Emit(IOp::kExit);
  if (frame.kind == FrameKind::kCallable) Emit(IOp::kRet).a = frame.ret_addr;
  return Status::Ok();
}

// Finds what the kernel reaches through calls and lays out its shared memory.
Status KernelTranslator::Prepass() {
  std::vector<uint32_t> work{kernel_index_};
  std::set<uint32_t> seen{kernel_index_};
  std::set<uint32_t> shared_globals;
  std::map<uint32_t, std::set<uint32_t>> callees;
  bool bar_red = false;
  for (size_t w = 0; w < work.size(); ++w) {
    const Function& fn = m_.functions[work[w]];
    std::set<uint32_t>& out = callees[work[w]];
    for (const Instruction& in : fn.body) {
      if (in.opcode == Opcode::kCall && in.callee < m_.functions.size()) out.insert(in.callee);
    }
    auto visit = [&](const Operand& op) {
      if ((op.kind == OperandKind::kSymbol ||
           (op.kind == OperandKind::kAddress && op.base == AddressBase::kSymbol)) &&
          op.symbol.kind == Symbol::Kind::kGlobal && op.symbol.index < m_.globals.size() &&
          m_.globals[op.symbol.index].space == StateSpace::kShared) {
        shared_globals.insert(op.symbol.index);
      }
    };
    for (const Instruction& in : fn.body) {
      for (const Operand& op : in.operands) visit(op);
      if (in.opcode == Opcode::kBar && in.Has(kFlagRed)) bar_red = true;
      if (in.opcode == Opcode::kCall && in.callee < m_.functions.size() &&
          seen.insert(in.callee).second) {
        work.push_back(in.callee);
      }
    }
  }
  // Functions that can reach themselves run out of line with a real call stack; the rest are
  // inlined.
  for (uint32_t f : work) {
    std::vector<uint32_t> stack(callees[f].begin(), callees[f].end());
    std::set<uint32_t> visited;
    while (!stack.empty()) {
      uint32_t g = stack.back();
      stack.pop_back();
      if (g == f) {
        callable_.insert(f);
        break;
      }
      if (!visited.insert(g).second) continue;
      for (uint32_t h : callees[g]) stack.push_back(h);
    }
  }
  uint64_t top = 0;
  uint32_t dyn_align = 16;
  std::vector<std::pair<uint32_t, const Variable*>> externs;
  auto place = [&](const Variable& v) -> Result<int64_t> {
    top = AlignUp(top, std::max<uint32_t>(v.Alignment(), 1));
    int64_t at = static_cast<int64_t>(top);
    top += v.SizeBytes();
    if (top > isa::kMaxSharedBytes) {
      return Status::ResourceExhausted(DescribeLocation(kernel_, v.line) +
                                       "static shared memory beyond " +
                                       std::to_string(isa::kMaxSharedBytes) + " bytes");
    }
    return at;
  };
  for (uint32_t g : shared_globals) {
    const Variable& v = m_.globals[g];
    if (v.unsized || v.linkage == Linkage::kExtern) {
      dyn_align = std::max(dyn_align, v.Alignment());
      externs.push_back({g, &v});
      continue;
    }
    GPUVM_ASSIGN_OR_RETURN(shared_global_[g], place(v));
  }
  std::vector<std::pair<uint32_t, uint32_t>> local_externs;
  for (uint32_t f : work) {
    const Function& fn = m_.functions[f];
    for (size_t i = 0; i < fn.locals.size(); ++i) {
      const Variable& v = fn.locals[i];
      if (v.space == StateSpace::kShared) {
        if (v.unsized || v.linkage == Linkage::kExtern) {
          dyn_align = std::max(dyn_align, v.Alignment());
          local_externs.push_back({f, static_cast<uint32_t>(i)});
          continue;
        }
        GPUVM_ASSIGN_OR_RETURN(int64_t at, place(v));
        shared_local_[std::make_pair(f, static_cast<uint32_t>(i))] = at;
      } else if (v.space == StateSpace::kConst &&
                 !layout_.local_const_offset.count({f, static_cast<uint32_t>(i)})) {
        int64_t off;
        GPUVM_RETURN_IF_ERROR(layout_.PlaceConst(v, &off));
        layout_.local_const_offset[{f, static_cast<uint32_t>(i)}] = off;
      } else if (v.space == StateSpace::kGlobal) {
        return Status::Unimplemented(DescribeLocation(fn, v.line) +
                                     ".global variables inside functions");
      }
    }
  }
  if (bar_red) {
    top = AlignUp(top, 4);
    bar_red_word_ = static_cast<int64_t>(top);
    top += 4;
  }
  if (!externs.empty() || !local_externs.empty()) {
    top = AlignUp(top, dyn_align);
    for (auto& [g, v] : externs) shared_global_[g] = static_cast<int64_t>(top);
    for (auto& key : local_externs) shared_local_[key] = static_cast<int64_t>(top);
  }
  if (top > isa::kMaxSharedBytes)
    return Status::ResourceExhausted(DescribeLocation(kernel_, kernel_.line) +
                                     "shared memory beyond 64 KiB");
  shared_bytes_ = static_cast<uint32_t>(top);
  // Kernel parameters in constant bank 0.
  uint64_t p = 0;
  for (const Variable& v : kernel_.params) {
    p = AlignUp(p, std::max<uint32_t>(v.Alignment(), 1));
    kparam_offset_.push_back(static_cast<int64_t>(p));
    p += v.SizeBytes();
  }
  if (p > isa::kMaxParamBytes) {
    return Status::ResourceExhausted(DescribeLocation(kernel_, kernel_.line) +
                                     "parameters beyond " + std::to_string(isa::kMaxParamBytes) +
                                     " bytes");
  }
  param_bytes_ = static_cast<uint32_t>(p);
  return Status::Ok();
}

Result<isa::ModuleKernel> KernelTranslator::Run(KernelStats* stats) {
  GPUVM_RETURN_IF_ERROR(Prepass());
  Frame frame;
  GPUVM_RETURN_IF_ERROR(InitFrame(&frame, kernel_, kernel_index_));
  call_stack_.push_back(kernel_index_);
  if (!callable_.empty()) {
    // The stack pointer: the frame base of the running function (0 = the kernel's own frame).
    sp_ = vc_.NewVReg(VKind::kReg32);
    vc_.sp = sp_;
    vc_.stack_bytes = kStackBytes;
    frame_ = &frame;
    MovTo(sp_, IT::kU32, I(0));
  }
  GPUVM_RETURN_IF_ERROR(EmitBody(frame));
  for (size_t i = 0; i < pending_callables_.size(); ++i) {
    GPUVM_RETURN_IF_ERROR(EmitCallable(pending_callables_[i]));
  }
  isa::KernelHeader header;
  header.shared_bytes = shared_bytes_;
  header.local_bytes = 0;  // the allocator sizes local memory (frames, save areas, call stack)
  header.param_bytes = param_bytes_;
  uint64_t maxt = 0;
  for (const auto& dims : {kernel_.reqntid, kernel_.maxntid}) {
    if (dims[0] != 0) {
      maxt = uint64_t{dims[0]} * std::max<uint32_t>(dims[1], 1) * std::max<uint32_t>(dims[2], 1);
      break;
    }
  }
  header.max_threads = static_cast<uint32_t>(std::min<uint64_t>(maxt, 1024));
  translator::AllocationStats astats;
  GPUVM_ASSIGN_OR_RETURN(
      isa::Kernel kernel,
      translator::AllocateRegisters(vc_, header, "in kernel '" + kernel_.name + "'", &astats));
  // The instruction bound above counts instructions; an instruction with an immediate takes two
  // code words, so the image can still be too big for the ISA. Say so as the resource limit it is
  // (the encoder would only report a bad header field).
  uint64_t code_words = 0;
  for (const isa::Instruction& inst : kernel.code) code_words += inst.has_imm ? 2 : 1;
  if (code_words > isa::kMaxCodeWords) {
    return Status::ResourceExhausted(
        DescribeLocation(kernel_, kernel_.line) + "the kernel needs " + std::to_string(code_words) +
        " code words after inlining; the limit is " + std::to_string(isa::kMaxCodeWords));
  }
  GPUVM_ASSIGN_OR_RETURN(std::vector<uint8_t> image, isa::EncodeKernel(kernel));
  isa::ModuleKernel out;
  out.name = kernel_.name;
  out.image = std::move(image);
  for (size_t i = 0; i < kernel_.params.size(); ++i) {
    const Variable& v = kernel_.params[i];
    out.params.push_back({static_cast<uint32_t>(kparam_offset_[i]),
                          static_cast<uint32_t>(v.SizeBytes()),
                          std::max<uint32_t>(v.Alignment(), 1)});
  }
  if (stats) {
    stats->name = kernel_.name;
    stats->instructions = astats.instructions;
    stats->registers = astats.rows;
    stats->predicates = astats.predicates;
    stats->moves_removed = astats.moves_removed;
  }
  return out;
}

}  // namespace

Result<isa::Module> Translate(const Module& module, const TranslateOptions& options,
                              std::vector<KernelStats>* stats) {
  ModuleLayout layout;
  GPUVM_RETURN_IF_ERROR(layout.Build(module));
  for (uint32_t i = 0; i < module.functions.size(); ++i) {
    const Function& fn = module.functions[i];
    if (!fn.is_entry) continue;
    if (!fn.has_body) return Status::InvalidArgument("kernel '" + fn.name + "' has no body");
    KernelStats ks;
    KernelTranslator kt(module, layout, i, options);
    GPUVM_ASSIGN_OR_RETURN(isa::ModuleKernel kernel, kt.Run(&ks));
    layout.out.kernels.push_back(std::move(kernel));
    if (stats) stats->push_back(ks);
  }
  return std::move(layout.out);
}

Result<isa::Module> CompilePtx(std::string_view text, const TranslateOptions& options,
                               std::vector<KernelStats>* stats) {
  GPUVM_ASSIGN_OR_RETURN(Module module, ParseModule(text));
  return Translate(module, options, stats);
}

}  // namespace gpuvm::ptx
