// KernelTranslator (kernel_translator.h), data movement: mov (with vector pack/unpack), cvt,
// cvta and isspacep on the generic-address windows, ld/st (vectors, acquire/release fences) and
// atom/red.
#include <optional>
#include <vector>

#include "ptx/translator/kernel_translator.h"
#include "ptx/translator/ptx_to_isa.h"

namespace gpuvm::ptx::translator {

// -------------------------------------------------------------------------------------------------
// Moves and conversions

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
  const uint8_t mod = RoundSatMod(in);
  uint32_t value;
  if (di == si && mod == 0 && TypeSize(dt) >= 4) {
    value = a;  // same type, nothing to do but copy
  } else {
    value = Cvt(di, si, a, mod);
  }
  WriteWidth(d, value, TypeSize(dt) == 8, IsSignedType(dt));
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

Status KernelTranslator::LowerIsspacep(const Instruction& in) {
  GPUVM_ASSIGN_OR_RETURN(uint32_t p, DstPred(in.operands[0]));
  GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], ScalarType::kU64));
  auto in_window = [&](isa::SpecialReg w) {
    uint32_t base = S2R(w);
    uint32_t off = Bin(IOp::kSub, IT::kU64, a, R(base));
    return Setp(isa::Compare::kLt, IT::kU64, off, I(isa::kWindowBytes));
  };
  switch (in.space) {
    case StateSpace::kShared:
      PlopTo(p, isa::PlopOp::kAnd, in_window(isa::SpecialReg::kSharedWindow), false, kPT, false);
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

// -------------------------------------------------------------------------------------------------
// Memory

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
  // One ld/st at [base + a.offset + off] in the address's space; `mod` adds to the space and
  // address-width bits. The caller fills the value operands.
  auto access = [&](IT type, int64_t off, uint8_t mod) -> VInst& {
    VInst& v = Emit(load ? IOp::kLd : IOp::kSt, type);
    v.in.mod = static_cast<uint8_t>(a.space) | (a.base64 ? isa::kModAddr64 : 0) | mod;
    if (a.space == isa::Space::kConst) v.in.type2 = a.bank;
    v.a = a.base;
    const int64_t at = a.offset + off;
    v.in.has_imm = at != 0;
    v.in.imm = static_cast<uint64_t>(at);
    return v;
  };
  // Vector accesses to memory other blocks see (global, generic) are single-copy atomic per pair
  // of elements, as real GPUs make an aligned 8- or 16-byte vector access: CUB's decoupled
  // look-back publishes a tile's {status, value} with one st.relaxed.gpu.v2 and polls it with
  // ld.v2. Only when every register element is of `kind` (immediates and sinks fit any). (A PTX
  // vector is aligned to its whole size, so every pair is.)
  auto shared_pairs = [&](uint32_t element_bytes, VKind kind) {
    if (esize != element_bytes || elems.size() < 2) return false;
    if (a.space != isa::Space::kGlobal && a.space != isa::Space::kGeneric) return false;
    for (const Operand* e : elems) {
      if (e->kind == OperandKind::kRegister && KindOfVReg(FrameReg(e->reg)) != kind) return false;
    }
    return true;
  };
  // Pairs of 32-bit elements: one 64-bit access each.
  const bool pairs = shared_pairs(4, VKind::kReg32);
  for (size_t k = 0; pairs && k + 1 < elems.size(); k += 2) {
    const int64_t off = static_cast<int64_t>(k * esize);
    const Operand& e0 = *elems[k];
    const Operand& e1 = *elems[k + 1];
    uint32_t word;
    if (load) {
      if (e0.kind == OperandKind::kSink && e1.kind == OperandKind::kSink) continue;
      word = TempFor(IT::kU64);
    } else {
      GPUVM_ASSIGN_OR_RETURN(Value v0, Src(e0, t));
      GPUVM_ASSIGN_OR_RETURN(Value v1, Src(e1, t));
      const uint32_t lo = v0.is_imm ? MovImm(IT::kU32, v0.imm) : v0.reg;
      const uint32_t hi = v1.is_imm ? MovImm(IT::kU32, v1.imm) : v1.reg;
      word = Bin(IOp::kPack, IT::kU64, lo, R(hi));
    }
    VInst& v = access(IT::kU64, off, 0);
    if (!load) {
      v.b = word;
      continue;
    }
    v.d = word;
    if (e0.kind != OperandKind::kSink) {
      GPUVM_ASSIGN_OR_RETURN(uint32_t d0, Dst(e0));
      const uint32_t low = Cvt(IT::kU32, IT::kU64, word);
      MovTo(d0, IT::kU32, low);
    }
    if (e1.kind != OperandKind::kSink) {
      GPUVM_ASSIGN_OR_RETURN(uint32_t d1, Dst(e1));
      VInst& h = Emit(IOp::kHi32, IT::kU32);
      h.d = d1;
      h.a = word;
    }
  }
  // A .v2 of 64-bit elements: one 16-byte access (isa::kModPair).
  if (shared_pairs(8, VKind::kReg64)) {
    uint32_t regs[2];
    for (int k = 0; k < 2; ++k) {
      const Operand& e = *elems[k];
      if (load) {
        GPUVM_ASSIGN_OR_RETURN(regs[k], Dst(e));
        if (regs[k] == kRZ) regs[k] = TempFor(IT::kU64);  // a sink
      } else {
        GPUVM_ASSIGN_OR_RETURN(Value v, Src(e, t));
        regs[k] = v.is_imm ? MovImm(IT::kU64, v.imm) : v.reg;
      }
    }
    VInst& v = access(IT::kU64, 0, isa::kModPair);
    if (load) {
      v.d = regs[0];
      v.b = regs[1];
    } else {
      v.b = regs[0];
      v.c = regs[1];
    }
    elems.clear();
  }
  for (size_t k = pairs ? elems.size() & ~size_t{1} : 0; k < elems.size(); ++k) {
    const Operand& e = *elems[k];
    uint32_t reg;
    if (load) {
      if (e.kind == OperandKind::kSink) continue;
      GPUVM_ASSIGN_OR_RETURN(reg, Dst(e));
    } else {
      GPUVM_ASSIGN_OR_RETURN(Value v, Src(e, t));
      reg = v.is_imm ? MovImm(esize == 8 ? IT::kU64 : IT::kU32, v.imm) : v.reg;
    }
    const bool reg64 = reg != kRZ && KindOfVReg(reg) == VKind::kReg64;
    VInst& v = access(MemType(t), static_cast<int64_t>(k * esize),
                      reg64 && esize < 8 ? isa::kModWideReg : 0);
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
  std::optional<A> atom_op = AtomOpOf(in.atomic_op);
  if (!atom_op) return Unsupported("atomic operation not supported");
  const A op = *atom_op;
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

}  // namespace gpuvm::ptx::translator
