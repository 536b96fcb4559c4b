// The PTX -> GVISA translator (translator.h): Translate and CompilePtx, and the frame of
// KernelTranslator (kernel_translator.h) — the prepass that finds the call graph and lays out
// shared memory and parameters, the walk over a function body, the dispatcher that hands each
// PTX instruction to its lowering (lower_*.cc), and the final step: register allocation
// (regalloc.h) and encoding.
#include "ptx/translator/translator.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gpu/isa/encoding.h"
#include "ptx/parser.h"
#include "ptx/printer.h"
#include "ptx/translator/kernel_translator.h"
#include "ptx/translator/ptx_to_isa.h"
#include "ptx/translator/regalloc.h"

namespace gpuvm::ptx {
namespace translator {
namespace {

// Local memory reserved per thread for the call stack of recursive functions (beyond the kernel's
// frame).
constexpr uint32_t kStackBytes = 8192;

}  // namespace

Status KernelTranslator::Error(StatusCode code, const std::string& what) const {
  std::string text = DescribeLocation(*frame_->fn, cur_ ? cur_->line : frame_->fn->line);
  if (cur_) text += "instruction '" + PrintInstruction(m_, *frame_->fn, *cur_) + "': ";
  if (frame_->fn != &kernel_) text += "(inlined into kernel '" + kernel_.name + "') ";
  return Status(code, text + what);
}

// -------------------------------------------------------------------------------------------------
// The dispatcher

Status KernelTranslator::Lower(const Instruction& in) {
  if (IsHalfArith(in)) return LowerHalf(in);
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
    case Opcode::kBmsk:
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
    case Opcode::kIsspacep:
      return LowerIsspacep(in);
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
    SetCurrent(&in);
    SetGuard(kPT, false);
    if (in.guard.present()) SetGuard(FrameReg(in.guard.reg), in.guard.negated);
    GPUVM_RETURN_IF_ERROR(Lower(in));
    if (vc_.code.size() > options_.max_instructions) {
      return Error(StatusCode::kResourceExhausted, "the kernel grows beyond " +
                                                       std::to_string(options_.max_instructions) +
                                                       " instructions after inlining");
    }
  }
  // Falling off the end of a function returns.
  SetCurrent(nullptr);
  SetGuard(kPT, false);
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
    const uint64_t before = top;
    top = AlignUp(top, 4);
    bar_red_word_ = static_cast<int64_t>(top);
    top += 4;
    internal_shared_bytes_ = static_cast<uint32_t>(top - before);
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
  header.internal_shared_bytes = internal_shared_bytes_;
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

}  // namespace translator

Result<isa::Module> Translate(const Module& module, const TranslateOptions& options,
                              std::vector<KernelStats>* stats) {
  translator::ModuleLayout layout;
  GPUVM_RETURN_IF_ERROR(layout.Build(module));
  for (uint32_t i = 0; i < module.functions.size(); ++i) {
    const Function& fn = module.functions[i];
    if (!fn.is_entry) continue;
    if (!fn.has_body) return Status::InvalidArgument("kernel '" + fn.name + "' has no body");
    KernelStats ks;
    translator::KernelTranslator kt(module, layout, i, options);
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
