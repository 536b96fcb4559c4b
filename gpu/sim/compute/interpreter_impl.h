// The warp interpreter: RunWarp, the software GPU's hot path. This file is included by
// interpreter_generic.cc (baseline x86-64) and interpreter_avx2.cc (AVX2 + FMA), each with
// GPUVM_INTERP_NS set to its own namespace; everything here and in the parts below except RunWarp
// has internal linkage, so the two copies never mix. interpreter.cc picks one at run time.
//
// Design (docs/ISA.md "Execution model"): registers are structure-of-arrays rows (regs[row][lane]);
// a handler computes all 32 lanes into a local array with a branch-free loop the compiler
// vectorises, then stores the lanes the instruction executes (a plain copy when all 32 do).
// Divergence is min-PC: the warp runs the group of lanes with the smallest pc; other groups wait in
// Warp::pending and merge back when the running group reaches their pc. Memory handlers resolve
// each lane's address (page cache for global memory) and fault cleanly on anything out of bounds.
//
// The handlers live in parts, one per class of instruction, all compiled into this one translation
// unit so that RunWarp's single switch inlines them:
//   interpreter_lanes.h       lane plumbing (Map1/2/3, StoreLanes), shared scalar semantics, faults
//   interpreter_alu.h         element-wise ALU table, selp/bfi/prmt/shf/testp/setp/plop
//   interpreter_memory.h      ld/st per state space, the warp-wide fast path, atomics
//   interpreter_warp_ops.h    special registers, shfl, vote, immediates, slow cvt/float paths
//   interpreter_divergence.h  reconvergence groups, barriers, call/ret/exit/trap steps
// RunWarp itself keeps what needs the loop's own state (pc, the active mask, the budget): dispatch,
// branches and the bar/ret/exit transitions.
//
// Threading: RunWarp runs on the worker thread that owns the warp's block (registers, shared and
// local memory are that worker's while it runs the block); global memory is shared with other
// workers and accessed with relaxed atomics.
#ifndef GPUVM_INTERP_NS
#error "define GPUVM_INTERP_NS before including interpreter_impl.h"
#endif

#include <cstdint>

#include "gpu/sim/compute/exec_state.h"
#include "gpu/sim/compute/interpreter_alu.h"
#include "gpu/sim/compute/interpreter_divergence.h"
#include "gpu/sim/compute/interpreter_lanes.h"
#include "gpu/sim/compute/interpreter_memory.h"
#include "gpu/sim/compute/interpreter_warp_ops.h"

namespace gpuvm::sim::compute::GPUVM_INTERP_NS {

// ---- the loop ----

WarpStop RunWarp(ExecContext& ctx, Warp& w, int64_t* budget_inout) {
  int64_t budget = *budget_inout;
  const Program& program = *ctx.program;
  const Op* const ops = program.ops.data();
  uint8_t* const regs = w.regs;
  BlockState& block = *ctx.block;
  WorkerState& ws = *ctx.worker;

  uint32_t pc = w.pc;
  uint32_t active = w.active;
  if (active == 0) {
    if (!PopMin(w, &pc, &active)) {
      w.waiting = !w.done;
      return w.done ? WarpStop::kDone : WarpStop::kWaiting;
    }
  } else if (w.next_join < pc) {
    // A barrier released a group behind us while we were parked: keep running the smallest pc.
    PushGroup(w, pc, active);
    PopMin(w, &pc, &active);
  }
  w.waiting = false;

  uint64_t lanes = 0;  // lane-instructions retired, flushed into ws at exit
  uint64_t steps = 0;  // instructions since `active` last changed
#define GPUVM_FLUSH()                  \
  do {                                 \
    lanes += steps * Popcount(active); \
    steps = 0;                         \
  } while (0)

  WarpStop stop = WarpStop::kBudget;
  for (;;) {
    if (pc == w.next_join) {
      GPUVM_FLUSH();
      active |= TakeAt(w, pc);
    }
    const Op& op = ops[pc];
    const uint32_t exec = active & (w.preds[op.guard] ^ op.guard_xor);
    uint32_t branch_target = 0;
    ++steps;
    Handler h = op.h;
    if (exec == 0 && h < Handler::kBar) {
      ++pc;
      goto next;
    }
  dispatch:
    switch (h) {
      case Handler::kNop:
        break;
        GPUVM_INTERP_LANE_OP_CASES()  // interpreter_alu.h
      case Handler::kSel32:
        SelLanes<uint32_t>(w, regs, op, exec);
        break;
      case Handler::kSel64:
        SelLanes<uint64_t>(w, regs, op, exec);
        break;
      case Handler::kBfi32:
        BfiLanes<uint32_t>(regs, op, exec);
        break;
      case Handler::kBfi64:
        BfiLanes<uint64_t>(regs, op, exec);
        break;
      case Handler::kPrmt:
        PrmtLanes(regs, op, exec);
        break;
      case Handler::kShf:
        ShfLanes(regs, op, exec);
        break;
      case Handler::kTestpF32:
        TestpLanes<float>(w, regs, op, exec);
        break;
      case Handler::kTestpF64:
        TestpLanes<double>(w, regs, op, exec);
        break;
      case Handler::kSetpU32:
        SetpLanes<uint32_t>(w, regs, op, exec);
        break;
      case Handler::kSetpS32:
        SetpLanes<int32_t>(w, regs, op, exec);
        break;
      case Handler::kSetpU64:
        SetpLanes<uint64_t>(w, regs, op, exec);
        break;
      case Handler::kSetpS64:
        SetpLanes<int64_t>(w, regs, op, exec);
        break;
      case Handler::kSetpF32:
        SetpLanes<float>(w, regs, op, exec);
        break;
      case Handler::kSetpF64:
        SetpLanes<double>(w, regs, op, exec);
        break;
      case Handler::kPlop:
        PlopLanes(w, op, exec);
        break;
      case Handler::kFloatSlow:
        SlowFloat(regs, op, exec);
        break;
      case Handler::kCvt:
        GenericCvt(regs, op, exec);
        break;
      case Handler::kS2R:
        SpecialRegister(ctx, w, op, exec, active);
        break;

      case Handler::kLdGlobal:
        if (!Load<GlobalSpace>(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kLdShared:
        if (!Load<SharedSpace>(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kLdLocal:
        if (!Load<LocalSpace>(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kLdConst:
        if (!Load<ConstSpace>(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kLdGeneric:
        if (!Load<GenericSpace>(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kStGlobal:
        if (!Store<GlobalSpace>(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kStShared:
        if (!Store<SharedSpace>(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kStLocal:
        if (!Store<LocalSpace>(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kStGeneric:
        if (!Store<GenericSpace>(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kAtom:
        if (!Atomic(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kVprintf:
        if (!Vprintf(ctx, w, op, exec)) goto fault;
        break;
      case Handler::kMembar:
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        break;
      case Handler::kShfl:
        Shuffle(w, op, exec);
        break;
      case Handler::kVote:
        Vote(w, op, exec);
        break;
      case Handler::kImmScratch:
        FillScratch(regs, program, op);
        h = op.h2;
        goto dispatch;

      // ---- control ----
      case Handler::kBar: {
        if (exec == 0) {
          ++pc;
          goto next;
        }
        GPUVM_FLUSH();
        const uint32_t rest = active & ~exec;
        ArriveAtBarrier(block, w, pc, exec, op.aux);
        if (rest != 0) {
          active = rest;
          ++pc;
        } else if (!PopMin(w, &pc, &active)) {
          active = 0;
          stop = WarpStop::kWaiting;
          w.waiting = true;
          goto out;
        }
        goto next;
      }
      case Handler::kBra:
        branch_target = op.aux;
        goto branch;
      case Handler::kCall: {
        if (exec != 0) WriteReturnAddress(regs, op, exec);
        branch_target = op.aux;
        goto branch;
      }
      case Handler::kRet: {
        if (exec == 0) {
          ++pc;
          goto next;
        }
        // Each lane returns to the word offset in its link register: group the lanes by target.
        const uint32_t* link = RowPtr<const uint32_t>(regs, op.a);
        if (!ReturnTargetsValid(ctx, program, link, exec)) goto fault;
        GPUVM_FLUSH();
        const uint32_t rest = active & ~exec;
        PushReturnGroups(w, program, link, exec);
        if (rest != 0) PushGroup(w, pc + 1, rest);
        PopMin(w, &pc, &active);
        goto next;
      }
      case Handler::kExit: {
        if (exec != 0) {
          GPUVM_FLUSH();
          ExitLanes(block, w, exec);
          active &= ~exec;
        }
        if (active != 0) {
          ++pc;
          goto next;
        }
        if (!PopMin(w, &pc, &active)) {
          active = 0;
          if (w.exited == kFullMask) {
            w.done = true;
            stop = WarpStop::kDone;
          } else {
            w.waiting = true;
            stop = WarpStop::kWaiting;
          }
          goto out;
        }
        goto next;
      }
      case Handler::kTrap:
        if (exec == 0) {
          ++pc;
          goto next;
        }
        RaiseTrap(ctx, op, exec);
        goto fault;
      case Handler::kCount:
        break;
    }
    ++pc;
    goto next;
  branch : {
    const uint32_t target = branch_target;
    if (exec == active || target == pc + 1) {
      pc = target;
    } else if (exec == 0) {
      ++pc;
    } else {
      GPUVM_FLUSH();
      const uint32_t fall = active & ~exec;
      if (target < pc + 1) {
        PushGroup(w, pc + 1, fall);
        active = exec;
        pc = target;
      } else {
        PushGroup(w, target, exec);
        active = fall;
        ++pc;
      }
    }
    if (pc > w.next_join) {
      GPUVM_FLUSH();
      PushGroup(w, pc, active);
      PopMin(w, &pc, &active);
    }
  }
  next:
    if (--budget <= 0) goto out;
  }

fault:
  stop = WarpStop::kFault;
  ws.fault.pc = pc;
  ws.fault.warp = w.index;
out:
  GPUVM_FLUSH();
#undef GPUVM_FLUSH
  w.pc = pc;
  w.active = active;
  ws.lane_instructions += lanes;
  *budget_inout = budget;
  return stop;
}

}  // namespace gpuvm::sim::compute::GPUVM_INTERP_NS
