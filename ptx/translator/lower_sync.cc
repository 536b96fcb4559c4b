// KernelTranslator (kernel_translator.h), synchronization and warp-level operations: membar and
// fence, bar/barrier (and bar.red through a shared counter word), vote, shfl and activemask.
#include "ptx/translator/kernel_translator.h"
#include "ptx/translator/ptx_to_isa.h"

namespace gpuvm::ptx::translator {

// -------------------------------------------------------------------------------------------------
// Synchronization and warp-level

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
  if (guard() != kPT) return Unsupported("a guarded bar.red is not supported");
  // bar.red: count the threads whose predicate is set (for .and: the ones whose predicate is clear)
  // in a reserved shared word. Three barriers keep the uses apart: everyone is past the previous
  // read before the word is cleared, cleared before anyone adds, and done adding before anyone
  // reads.
  GPUVM_ASSIGN_OR_RETURN(auto p, SrcPred(in.operands.back()));
  const bool is_and = in.atomic_op == AtomicOp::kAnd;
  const int64_t word = bar_red_word_;
  Emit(IOp::kBar).in.mod = id;
  EmitMem(IOp::kSt, IT::kU32, isa::Space::kShared, kRZ, static_cast<uint64_t>(word)).b = kRZ;
  Emit(IOp::kBar).in.mod = id;
  {
    uint32_t one = MovImm(IT::kU32, 1);
    VInst& add =
        EmitMem(IOp::kAtom, IT::kU32, isa::Space::kShared, kRZ, static_cast<uint64_t>(word));
    add.in.type2 = static_cast<uint8_t>(isa::AtomOp::kAdd);
    add.b = one;
    add.d = kRZ;
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
  EmitMem(IOp::kLd, IT::kU32, isa::Space::kShared, kRZ, static_cast<uint64_t>(word)).d = count;
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
    const uint8_t mode = static_cast<uint8_t>(VoteModeOf(in.vote));
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
  GPUVM_ASSIGN_OR_RETURN(const auto dst, DstPair(in.operands[0], /*predicate=*/false));
  const auto [d, p] = dst;
  GPUVM_ASSIGN_OR_RETURN(uint32_t a, SrcReg(in.operands[1], ScalarType::kB32));
  GPUVM_ASSIGN_OR_RETURN(Value b, Src(in.operands[2], ScalarType::kU32));
  GPUVM_ASSIGN_OR_RETURN(Value c, Src(in.operands[3], ScalarType::kU32));
  VInst& v = Emit(IOp::kShfl);
  const uint8_t mode = static_cast<uint8_t>(ShflModeOf(in.shuffle));
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

}  // namespace gpuvm::ptx::translator
