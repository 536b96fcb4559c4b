// The warp interpreter's divergence and barrier bookkeeping (part of interpreter_impl.h; see there
// for how it is compiled). Divergence is min-PC: the warp runs the group of lanes with the smallest
// pc; the other groups wait in Warp::pending (runnable, or blocked at a barrier) and merge back
// when the running group reaches their pc. A barrier releases its groups once every live thread of
// the block has arrived; threads that exit no longer count.
//
// Threading: like RunWarp, everything here runs on the worker thread that owns the block being run
// (its warps' registers, its shared and local memory); only global memory is shared with other
// workers, and is touched through relaxed atomics (interpreter_memory.h).
#ifndef GPUVM_INTERP_NS
#error "define GPUVM_INTERP_NS before including interpreter_divergence.h"
#endif
#ifndef GPUVM_GPU_SIM_COMPUTE_INTERPRETER_DIVERGENCE_H_
#define GPUVM_GPU_SIM_COMPUTE_INTERPRETER_DIVERGENCE_H_

#include <cstddef>
#include <cstdint>

#include "gpu/sim/compute/exec_state.h"
#include "gpu/sim/compute/interpreter_lanes.h"

namespace gpuvm::sim::compute::GPUVM_INTERP_NS {
namespace {

void RecomputeJoin(Warp& w) {
  uint32_t m = kNoPc;
  for (uint32_t i = 0; i < w.pending_count; ++i) {
    const Group& g = w.pending[i];
    if (g.barrier == 0 && g.pc < m) m = g.pc;
  }
  w.next_join = m;
}

void RemoveGroup(Warp& w, uint32_t i) { w.pending[i] = w.pending[--w.pending_count]; }

// Adds lanes waiting at `pc` (runnable, or blocked at barrier `barrier` - 1), merging with a group
// already there.
void PushGroup(Warp& w, uint32_t pc, uint32_t mask, uint32_t barrier = 0) {
  for (uint32_t i = 0; i < w.pending_count; ++i) {
    Group& g = w.pending[i];
    if (g.pc == pc && g.barrier == barrier) {
      g.mask |= mask;
      return;
    }
  }
  w.pending[w.pending_count++] = Group{pc, mask, barrier};
  if (barrier == 0 && pc < w.next_join) w.next_join = pc;
}

// Makes the runnable group with the smallest pc current. False when there is none.
bool PopMin(Warp& w, uint32_t* pc, uint32_t* active) {
  uint32_t best = kNoPc, best_pc = kNoPc;
  for (uint32_t i = 0; i < w.pending_count; ++i) {
    const Group& g = w.pending[i];
    if (g.barrier == 0 && g.pc < best_pc) {
      best_pc = g.pc;
      best = i;
    }
  }
  if (best == kNoPc) return false;
  *pc = best_pc;
  *active = w.pending[best].mask;
  RemoveGroup(w, best);
  RecomputeJoin(w);
  return true;
}

// Removes and returns the lanes of runnable groups waiting at `pc`.
uint32_t TakeAt(Warp& w, uint32_t pc) {
  uint32_t mask = 0;
  for (uint32_t i = 0; i < w.pending_count;) {
    Group& g = w.pending[i];
    if (g.barrier == 0 && g.pc == pc) {
      mask |= g.mask;
      RemoveGroup(w, i);
    } else {
      ++i;
    }
  }
  RecomputeJoin(w);
  return mask;
}

void ReleaseBarrier(BlockState& block, uint32_t id) {
  block.bar_arrived[id] = 0;
  for (Warp& w : block.warps) {
    bool any = false;
    for (uint32_t i = 0; i < w.pending_count; ++i) {
      if (w.pending[i].barrier == id + 1) {
        w.pending[i].barrier = 0;
        any = true;
      }
    }
    if (!any) continue;
    // Merge released groups with runnable groups at the same pc.
    for (uint32_t i = 0; i < w.pending_count; ++i) {
      for (uint32_t j = i + 1; j < w.pending_count;) {
        Group& a = w.pending[i];
        Group& b = w.pending[j];
        if (a.barrier == 0 && b.barrier == 0 && a.pc == b.pc) {
          a.mask |= b.mask;
          RemoveGroup(w, j);
        } else {
          ++j;
        }
      }
    }
    RecomputeJoin(w);
    w.waiting = false;
  }
}

// After threads exit, barriers they no longer have to reach may be complete.
void CheckBarriers(BlockState& block) {
  for (uint32_t id = 0; id < isa::kMaxBarriers; ++id) {
    if (block.bar_arrived[id] != 0 && block.bar_arrived[id] >= block.live_threads)
      ReleaseBarrier(block, id);
  }
}

// ---- control-flow steps RunWarp takes at bar, call, ret, exit and trap ----

// bar.sync `id`: the executing lanes wait at pc + 1 until every live thread of the block arrived.
GPUVM_INLINE void ArriveAtBarrier(BlockState& block, Warp& w, uint32_t pc, uint32_t exec,
                                  uint32_t id) {
  PushGroup(w, pc + 1, exec, id + 1);
  block.bar_arrived[id] += Popcount(exec);
  if (block.bar_arrived[id] >= block.live_threads) ReleaseBarrier(block, id);
}

// call: the calling lanes' link register (row d) gets the return address (the immediate).
GPUVM_INLINE void WriteReturnAddress(uint8_t* regs, const Op& op, uint32_t exec) {
  alignas(64) uint32_t t[kLanes];
  for (int l = 0; l < kLanes; ++l) t[l] = static_cast<uint32_t>(op.imm);
  StoreLanes(exec, RowPtr<uint32_t>(regs, op.d), t);
}

// ret: every executing lane's link register must hold the word offset of an instruction (the
// register is the kernel's to corrupt). False, with the fault recorded, when one does not.
GPUVM_INLINE bool ReturnTargetsValid(ExecContext& ctx, const Program& program, const uint32_t* link,
                                     uint32_t exec) {
  const size_t words = program.op_of_word.size();
  for (uint32_t m = exec; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
    if (link[l] >= words || program.op_of_word[link[l]] < 0) {
      return Fail(ctx, ComputeFault::Kind::kInvalidCode,
                  "ret to a word offset that is not an instruction", l, link[l]);
    }
  }
  return true;
}

// ret: each executing lane waits at its own return target (validated by ReturnTargetsValid).
GPUVM_INLINE void PushReturnGroups(Warp& w, const Program& program, const uint32_t* link,
                                   uint32_t exec) {
  for (uint32_t m = exec; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
    PushGroup(w, static_cast<uint32_t>(program.op_of_word[link[l]]), 1u << l);
  }
}

// exit: the executing lanes are done; barriers they no longer have to reach may complete.
GPUVM_INLINE void ExitLanes(BlockState& block, Warp& w, uint32_t exec) {
  w.exited |= exec;
  block.live_threads -= Popcount(exec);
  CheckBarriers(block);
}

// trap (or a failed device-side assert, which the translator lowers to trap): faults the block.
GPUVM_INLINE void RaiseTrap(ExecContext& ctx, const Op& op, uint32_t exec) {
  if (op.aux == uint32_t(isa::TrapCode::kAssert)) {
    Fail(ctx, ComputeFault::Kind::kAssert, "a device-side assert failed",
         static_cast<uint32_t>(__builtin_ctz(exec)), 0);
  } else {
    Fail(ctx, ComputeFault::Kind::kTrap, "the kernel executed trap",
         static_cast<uint32_t>(__builtin_ctz(exec)), 0);
  }
}

}  // namespace
}  // namespace gpuvm::sim::compute::GPUVM_INTERP_NS

#endif  // GPUVM_GPU_SIM_COMPUTE_INTERPRETER_DIVERGENCE_H_
