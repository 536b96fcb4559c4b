// KernelTranslator (kernel_translator.h), operands: PTX registers as vregs (created on first use,
// widened or narrowed to the width an instruction reads), sources and destinations, special
// registers, and symbols and memory operands resolved to ISA spaces, banks and offsets.
#include <optional>
#include <string>

#include "ptx/translator/kernel_translator.h"
#include "ptx/translator/ptx_to_isa.h"

namespace gpuvm::ptx::translator {

uint32_t KernelTranslator::FrameReg(RegId r) {
  uint32_t& v = frame_->regs[r];
  if (v == kNoV) v = vc_.NewVReg(KindOf(frame_->fn->registers[r].type));
  return v;
}

uint32_t KernelTranslator::FitWidth(uint32_t v, ScalarType t) {
  const bool want64 = TypeSize(t) == 8;
  const VKind k = KindOfVReg(v);
  if (k == VKind::kPred) return v;
  if (want64 && k == VKind::kReg32)
    return Cvt(IsSignedType(t) ? IT::kS64 : IT::kU64, IsSignedType(t) ? IT::kS32 : IT::kU32, v);
  if (!want64 && k == VKind::kReg64) return Cvt(IT::kU32, IT::kU64, v);
  return v;
}

Result<KernelTranslator::Value> KernelTranslator::Src(const Operand& op, ScalarType t) {
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

Result<uint32_t> KernelTranslator::SrcReg(const Operand& op, ScalarType t) {
  GPUVM_ASSIGN_OR_RETURN(Value v, Src(op, t));
  if (!v.is_imm) return v.reg;
  IT it = TypeSize(t) == 8 ? (IsF(t) ? IT::kF64 : IT::kU64)
                           : (t == ScalarType::kF32 ? IT::kF32 : IT::kU32);
  return MovImm(it, v.imm);
}

KernelTranslator::Value KernelTranslator::Extend16(Value v, ScalarType t) {
  if (!Is16(t)) return v;
  if (v.is_imm) {
    uint64_t x = v.imm & 0xffff;
    if (IsSignedType(t) && (x & 0x8000)) x |= 0xffff0000ull;
    return I(x);
  }
  return R(
      Cvt(IsSignedType(t) ? IT::kS32 : IT::kU32, IsSignedType(t) ? IT::kS16 : IT::kU16, v.reg));
}

Result<KernelTranslator::Value> KernelTranslator::SrcExt(const Operand& op, ScalarType t) {
  GPUVM_ASSIGN_OR_RETURN(Value v, Src(op, t));
  return Extend16(v, t);
}

Result<uint32_t> KernelTranslator::SrcExtReg(const Operand& op, ScalarType t) {
  GPUVM_ASSIGN_OR_RETURN(Value v, SrcExt(op, t));
  if (!v.is_imm) return v.reg;
  return MovImm(TypeSize(t) == 8 ? IT::kU64 : IT::kU32, v.imm);
}

Result<uint32_t> KernelTranslator::Dst(const Operand& op) {
  if (op.kind == OperandKind::kSink) return kRZ;
  if (op.kind != OperandKind::kRegister) return Unsupported("destination must be a register");
  return FrameReg(op.reg);
}

Result<uint32_t> KernelTranslator::DstPred(const Operand& op) {
  if (op.kind == OperandKind::kSink) return Temp(VKind::kPred);
  if (op.kind != OperandKind::kRegister || RegType(op.reg) != ScalarType::kPred) {
    return Unsupported("destination must be a predicate");
  }
  return FrameReg(op.reg);
}

Result<std::pair<uint32_t, bool>> KernelTranslator::SrcPred(const Operand& op) {
  if (op.kind == OperandKind::kImmediate) {
    // A constant predicate: true = PT, false = !PT.
    return std::make_pair(kPT, op.imm_bits == 0);
  }
  if (op.kind != OperandKind::kRegister || RegType(op.reg) != ScalarType::kPred) {
    return Unsupported("expected a predicate operand");
  }
  return std::make_pair(FrameReg(op.reg), op.negated);
}

void KernelTranslator::WriteWidth(uint32_t d, uint32_t value, bool value64, bool sign) {
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

// -------------------------------------------------------------------------------------------------
// Special registers and symbols

// The registers with an ISA special register of their own read it; the rest are computed here:
// halves of the 64-bit clocks; %aggr_smem_size is %total_smem_size (no shared memory is reserved
// for the system on the software GPU, so the reserved-area offsets are 0 too); %current_graph_exec
// is 0 (not launched from a graph); the performance-monitor counters %pmN and %pmN_64 read 0 (the
// software GPU has none to program) and so do the driver-defined %envregN (what NVIDIA's driver
// stores there is not documented; nothing we translate depends on it).
Result<uint32_t> KernelTranslator::Special(const Operand& op) {
  using SR = SpecialRegister;
  if (std::optional<isa::SpecialReg> sr = SpecialRegOf(op.sreg, op.component)) return S2R(*sr);
  const auto half = [&](isa::SpecialReg wide, bool high) {
    uint32_t v = S2R(wide);
    if (high) v = Bin(IOp::kShr, IT::kU64, v, I(32));
    return Cvt(IT::kU32, IT::kU64, v);
  };
  switch (op.sreg) {
    case SR::kClockHi:
      return half(isa::SpecialReg::kClock64, true);
    case SR::kGlobaltimerLo:
      return half(isa::SpecialReg::kGlobalTimer, false);
    case SR::kGlobaltimerHi:
      return half(isa::SpecialReg::kGlobalTimer, true);
    case SR::kAggrSmemSize:
      return S2R(isa::SpecialReg::kTotalSmemSize);
    default:
      break;
  }
  const SR first_zero = SR::kReservedSmemOffsetBegin;
  if (op.sreg >= first_zero && op.sreg <= kLastSpecialRegister) {
    return MovImm(SpecialRegisterType(op.sreg) == ScalarType::kU64 ? IT::kU64 : IT::kU32, 0);
  }
  return Unsupported("special register " + std::string(SpecialRegisterName(op.sreg)) +
                     " not supported");
}

uint32_t KernelTranslator::GlobalVarAddress(uint32_t global_index) {
  uint32_t d = Temp(VKind::kReg64);
  VInst& v = EmitMem(IOp::kLd, IT::kU64, isa::Space::kConst, kRZ,
                     static_cast<uint64_t>(layout_.global_slot[global_index]) * 8);
  v.d = d;
  v.in.type2 = isa::kGlobalsBank;
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
  } else if (s.kind == Symbol::Kind::kParam && frame_->kind == FrameKind::kKernel) {
    // A kernel parameter: its address in the .param space is its offset in constant bank 0,
    // which register-addressed ld.param reads (Address). No generic address (cvta.param).
    if (generic) return Unsupported("generic addresses of kernel parameters are not supported");
    offset = kparam_offset_[s.index];
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

Result<std::pair<uint32_t, uint32_t>> KernelTranslator::DstPair(const Operand& op, bool predicate) {
  if (op.kind == OperandKind::kRegisterPair) {
    const uint32_t first = FrameReg(op.reg);
    return std::make_pair(first, FrameReg(op.reg2));
  }
  GPUVM_ASSIGN_OR_RETURN(uint32_t first, predicate ? DstPred(op) : Dst(op));
  return std::make_pair(first, kNoV);
}

// Resolves a memory operand for an access in `space` (kNone = generic).
Result<KernelTranslator::Addr> KernelTranslator::Address(const Operand& op, StateSpace space) {
  if (op.kind != OperandKind::kAddress) return Unsupported("expected an address operand");
  Addr a;
  a.offset = op.offset;
  std::optional<isa::Space> isa_space = SpaceOf(space);
  if (!isa_space) return Unsupported("state space not supported");
  a.space = *isa_space;
  if (space == StateSpace::kConst) a.bank = isa::kUserConstBank;
  if (op.base == AddressBase::kRegister) {
    uint32_t r = FrameReg(op.reg);
    if (space == StateSpace::kParam) {
      // A kernel parameter's .param address (`mov.b64 %rd, param`, SymbolAddress) is its offset in
      // constant bank 0, so `ld.param [%rd+8]` reads that bank (bounds-checked by the engine);
      // CUB passes its larger parameter structs this way.
      if (frame_->kind != FrameKind::kKernel)
        return Unsupported("register-addressed .param accesses in a function are not supported");
      a.space = isa::Space::kConst;
      a.bank = isa::kParamBank;
    }
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

}  // namespace gpuvm::ptx::translator
