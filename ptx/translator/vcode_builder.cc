// VCodeBuilder (vcode_builder.h): the emission helpers of the translator.
#include "ptx/translator/vcode_builder.h"

#include "gpu/isa/opcode_table.h"

namespace gpuvm::ptx::translator {

VInst& VCodeBuilder::Emit(IOp op, IT type) {
  vc_.code.emplace_back();
  VInst& v = vc_.code.back();
  v.in.op = op;
  v.in.type = type;
  v.guard = guard_;
  v.in.guard_negated = guard_negated_;
  v.line = line_;
  return v;
}

VInst& VCodeBuilder::EmitMem(IOp op, IT t, isa::Space space, uint32_t base, uint64_t offset) {
  VInst& v = Emit(op, t);
  v.in.mod = static_cast<uint8_t>(space);
  v.a = base;
  v.in.has_imm = true;
  v.in.imm = offset;
  return v;
}

uint32_t VCodeBuilder::MovImm(IT t, uint64_t bits) {
  uint32_t d = TempFor(t);
  VInst& v = Emit(IOp::kMov, t);
  v.d = d;
  v.in.has_imm = true;
  v.in.imm = isa::Is64(t) ? bits : (bits & 0xffffffffu);
  return d;
}

uint32_t VCodeBuilder::Cvt(IT dst, IT src, uint32_t a, uint8_t mod) {
  uint32_t d = TempFor(dst);
  VInst& v = Emit(IOp::kCvt, dst);
  v.in.type2 = static_cast<uint8_t>(src);
  v.in.mod = mod;
  v.d = d;
  v.a = a;
  return d;
}

uint32_t VCodeBuilder::Bin(IOp op, IT t, uint32_t a, Value b, uint8_t mod, IT dtype_for_temp) {
  uint32_t d = TempFor(dtype_for_temp == IT::kU8 ? t : dtype_for_temp);
  BinTo(d, op, t, a, b, mod);
  return d;
}

void VCodeBuilder::BinTo(uint32_t d, IOp op, IT t, uint32_t a, Value b, uint8_t mod) {
  VInst& v = Emit(op, t);
  v.d = d;
  v.a = a;
  v.in.mod = mod;
  if (b.is_imm) {
    // A 64-bit immediate only where b is a 64-bit operand (the type's, not a fixed 32 bits).
    const isa::OperandSpec* spec = isa::FindOpcode(op)->OperandIn(isa::Field::kB);
    const bool b64 = isa::Is64(t) && spec != nullptr && spec->rows == 0;
    v.in.has_imm = true;
    v.in.imm = b64 ? b.imm : (b.imm & 0xffffffffu);
  } else {
    v.b = b.reg;
  }
}

void VCodeBuilder::TriTo(uint32_t d, IOp op, IT t, uint32_t a, Value b, uint32_t c, uint8_t mod) {
  BinTo(d, op, t, a, b, mod);
  vc_.code.back().c = c;
}

uint32_t VCodeBuilder::Tri(IOp op, IT t, uint32_t a, Value b, uint32_t c, uint8_t mod) {
  uint32_t d = TempFor(t);
  TriTo(d, op, t, a, b, c, mod);
  return d;
}

void VCodeBuilder::MovTo(uint32_t d, IT t, uint32_t a) {
  VInst& v = Emit(IOp::kMov, t);
  v.d = d;
  v.a = a;
}

void VCodeBuilder::MovTo(uint32_t d, IT t, Value a) {
  if (!a.is_imm) return MovTo(d, t, a.reg);
  VInst& v = Emit(IOp::kMov, t);
  v.d = d;
  v.in.has_imm = true;
  v.in.imm = isa::Is64(t) ? a.imm : (a.imm & 0xffffffffu);
}

uint32_t VCodeBuilder::Setp(isa::Compare cmp, IT t, uint32_t a, Value b) {
  uint32_t p = Temp(VKind::kPred);
  VInst& v = Emit(IOp::kSetp, t);
  v.d = p;
  v.a = a;
  v.in.mod = static_cast<uint8_t>(cmp);
  SetBOrImm(v, t, b);
  return p;
}

void VCodeBuilder::PlopTo(uint32_t d, isa::PlopOp op, uint32_t a, bool neg_a, uint32_t b,
                          bool neg_b) {
  VInst& v = Emit(IOp::kPlop);
  v.d = d;
  v.a = a;
  v.b = b;
  v.in.mod = static_cast<uint8_t>(op) | (neg_a ? isa::kPlopNegA : 0) | (neg_b ? isa::kPlopNegB : 0);
}

void VCodeBuilder::SelTo(uint32_t d, IT t, uint32_t a, Value b, uint32_t p, bool negate) {
  VInst& v = Emit(IOp::kSel, t);
  v.d = d;
  v.a = a;
  v.c = p;
  v.in.mod = negate ? 1 : 0;
  SetBOrImm(v, t, b);
}

uint32_t VCodeBuilder::S2R(isa::SpecialReg sr) {
  const bool wide = isa::IsSpecialReg64(sr);
  uint32_t d = Temp(wide ? VKind::kReg64 : VKind::kReg32);
  VInst& v = Emit(IOp::kS2R, wide ? IT::kU64 : IT::kU32);
  v.d = d;
  v.in.a = static_cast<uint8_t>(sr);
  return d;
}

void VCodeBuilder::SetBOrImm(VInst& v, IT t, Value b) {
  if (b.is_imm) {
    v.in.has_imm = true;
    v.in.imm = isa::Is64(t) ? b.imm : (b.imm & 0xffffffffu);
  } else {
    v.b = b.reg;
  }
}

void VCodeBuilder::SetCOrImm(VInst& v, Value c) {
  if (c.is_imm) {
    v.in.has_imm = true;
    v.in.imm = c.imm & 0xffffffffu;
  } else {
    v.c = c.reg;
  }
}

}  // namespace gpuvm::ptx::translator
