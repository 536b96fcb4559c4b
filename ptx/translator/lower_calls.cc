// KernelTranslator (kernel_translator.h), calls: a call to a function that cannot reach itself is
// inlined (its .param slots bound to the caller's); a recursive function is emitted once out of
// line and reached with call/ret, its frame on a stack in local memory (docs/JIT.md). nvcc's
// __assertfail becomes trap.assert, and a call of vprintf (device printf) the vprintf instruction.
#include <algorithm>
#include <string_view>

#include "ptx/translator/kernel_translator.h"
#include "ptx/translator/ptx_to_isa.h"

namespace gpuvm::ptx::translator {

namespace {

constexpr uint32_t kMaxInlineDepth = 32;
// The CUDA runtime's device-side assert handler, declared (never defined) in nvcc's PTX.
constexpr std::string_view kAssertFail = "__assertfail";
// The CUDA runtime's device printf, declared (never defined) in nvcc's PTX:
// .extern .func (.param .b32 r) vprintf(.param .b64 format, .param .b64 args).
constexpr std::string_view kVprintf = "vprintf";

}  // namespace

// -------------------------------------------------------------------------------------------------
// Calls

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

Result<int64_t> KernelTranslator::CallSlotOffset(const Operand& op) {
  if (op.kind != OperandKind::kSymbol)
    return Unsupported("call arguments must be .param variables");
  const Symbol& s = op.symbol;
  if (s.kind == Symbol::Kind::kLocal && frame_->local_offset[s.index] >= 0)
    return frame_->local_offset[s.index];
  if (s.kind == Symbol::Kind::kParam && frame_->kind != FrameKind::kKernel)
    return frame_->param_offset[s.index];
  if (s.kind == Symbol::Kind::kReturn) return frame_->return_offset[s.index];
  return Unsupported("call argument is not a .param slot of the caller");
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
    VInst& ld = EmitMem(IOp::kLd, t, isa::Space::kLocal, src_base, static_cast<uint64_t>(s));
    ld.d = tmp;
    ld.frame_region = src_patch;
    EmitMem(IOp::kSt, t, isa::Space::kLocal, dst_base, static_cast<uint64_t>(d)).b = tmp;
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
  uint32_t skip = kNoV;
  if (guard() != kPT) {
    skip = vc_.NewLabel();
    VInst& v = Emit(IOp::kBra);
    v.in.guard_negated = !guard_negated();
    v.label = skip;
  }
  const uint32_t saved_guard = guard();
  const bool saved_negated = guard_negated();
  SetGuard(kPT, false);
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
    GPUVM_ASSIGN_OR_RETURN(int64_t from, CallSlotOffset(in.operands[in.call_results + i]));
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
    GPUVM_ASSIGN_OR_RETURN(int64_t to, CallSlotOffset(in.operands[i]));
    CopyLocal(sp_, layout.return_offset[i], region, base, to, callee.returns[i].SizeBytes());
  }
  SetGuard(saved_guard, saved_negated);
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
  SetCurrent(nullptr);
  SetGuard(kPT, false);
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
  if (!callee.has_body && callee.name == kVprintf) return LowerVprintf(in);
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
  if (in.call_results != callee.returns.size() ||
      in.operands.size() - in.call_results != callee.params.size()) {
    return Unsupported("call does not match the callee's parameters");
  }
  for (size_t i = 0; i < callee.returns.size(); ++i) {
    GPUVM_ASSIGN_OR_RETURN(int64_t off, CallSlotOffset(in.operands[i]));
    f.return_offset.push_back(off);
  }
  for (size_t i = 0; i < callee.params.size(); ++i) {
    GPUVM_ASSIGN_OR_RETURN(int64_t off, CallSlotOffset(in.operands[in.call_results + i]));
    f.param_offset.push_back(off);
  }
  f.return_label = vc_.NewLabel();
  uint32_t skip = kNoV;
  if (guard() != kPT) {  // @p call: lanes without p jump over the inlined body
    skip = vc_.NewLabel();
    VInst& v = Emit(IOp::kBra);
    v.in.guard_negated = !guard_negated();
    v.label = skip;
  }
  Frame* caller = frame_;
  const Instruction* caller_inst = cur_;
  const uint32_t saved_guard = guard();
  const bool saved_negated = guard_negated();
  call_stack_.push_back(in.callee);
  Status s = EmitBody(f);
  call_stack_.pop_back();
  frame_ = caller;
  SetCurrent(caller_inst);
  SetGuard(saved_guard, saved_negated);
  GPUVM_RETURN_IF_ERROR(s);
  vc_.Bind(f.return_label);
  if (skip != kNoV) vc_.Bind(skip);
  return Status::Ok();
}

// printf in a kernel: load the format and argument pointers from the call's .param slots, the
// FIFO's address through the hidden global (module_layout.h), run vprintf and store its result in
// the result slot (gpu/isa/device_printf.h; docs/JIT.md "Device printf"). The call's guard guards
// all of it.
Status KernelTranslator::LowerVprintf(const Instruction& in) {
  const Function& callee = m_.functions[in.callee];
  if (callee.returns.size() != 1 || callee.returns[0].SizeBytes() != 4 ||
      callee.params.size() != 2 || callee.params[0].SizeBytes() != 8 ||
      callee.params[1].SizeBytes() != 8) {
    return Unsupported(
        "vprintf is declared with other parameters than CUDA's "
        "(.param .b32 r) vprintf(.param .b64 format, .param .b64 args)");
  }
  if (in.call_results != 1 || in.operands.size() != 3) {
    return Unsupported("call does not match the callee's parameters");
  }
  GPUVM_ASSIGN_OR_RETURN(int64_t result_at, CallSlotOffset(in.operands[0]));
  GPUVM_ASSIGN_OR_RETURN(int64_t format_at, CallSlotOffset(in.operands[1]));
  GPUVM_ASSIGN_OR_RETURN(int64_t args_at, CallSlotOffset(in.operands[2]));
  const uint32_t base = LocalBase();
  // A 64-bit load; `modify` adjusts the instruction before anything else is emitted.
  auto load = [&](isa::Space space, uint32_t from, uint64_t offset, auto modify) {
    const uint32_t d = TempFor(IT::kU64);
    VInst& v = EmitMem(IOp::kLd, IT::kU64, space, from, offset);
    v.d = d;
    modify(v);
    return d;
  };
  auto as_is = [](VInst&) {};
  const uint32_t format = load(isa::Space::kLocal, base, static_cast<uint64_t>(format_at), as_is);
  const uint32_t args = load(isa::Space::kLocal, base, static_cast<uint64_t>(args_at), as_is);
  const uint32_t slot_address =
      load(isa::Space::kConst, kRZ, uint64_t{layout_.PrintfFifoSlot()} * 8,
           [](VInst& v) { v.in.type2 = isa::kGlobalsBank; });
  const uint32_t fifo =
      load(isa::Space::kGlobal, slot_address, 0, [](VInst& v) { v.in.mod |= isa::kModAddr64; });
  const uint32_t result = TempFor(IT::kU32);
  VInst& call = Emit(IOp::kVprintf);
  call.d = result;
  call.a = format;
  call.b = args;
  call.c = fifo;
  EmitMem(IOp::kSt, IT::kU32, isa::Space::kLocal, base, static_cast<uint64_t>(result_at)).b =
      result;
  return Status::Ok();
}

}  // namespace gpuvm::ptx::translator
