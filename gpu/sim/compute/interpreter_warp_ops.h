// The warp interpreter's warp-wide and special operations (part of interpreter_impl.h; see there
// for how it is compiled): special registers (%tid, %ctaid, %clock, %lanemask_*, ...), shfl and
// vote across the warp's lanes, the immediate scratch row, and the slow paths that go through the
// scalar semantics of semantics.h (generic cvt, the float operations with rounding modes).
//
// Threading: like RunWarp, everything here runs on the worker thread that owns the block being run
// (its warps' registers, its shared and local memory); only global memory is shared with other
// workers, and is touched through relaxed atomics (interpreter_memory.h).
#ifndef GPUVM_INTERP_NS
#error "define GPUVM_INTERP_NS before including interpreter_warp_ops.h"
#endif
#ifndef GPUVM_GPU_SIM_COMPUTE_INTERPRETER_WARP_OPS_H_
#define GPUVM_GPU_SIM_COMPUTE_INTERPRETER_WARP_OPS_H_

#include <cstdint>
#include <cstring>
#include <ctime>

#include "gpu/sim/compute/exec_state.h"
#include "gpu/sim/compute/interpreter_lanes.h"
#include "gpu/sim/compute/semantics.h"

namespace gpuvm::sim::compute::GPUVM_INTERP_NS {
namespace {

uint64_t NowNanoseconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void SpecialRegister(ExecContext& ctx, Warp& w, const Op& op, uint32_t exec, uint32_t active) {
  using S = isa::SpecialReg;
  const LaunchConstants& lc = *ctx.launch;
  const BlockState& b = *ctx.block;
  const auto sr = static_cast<S>(op.aux);
  if (isa::IsSpecialReg64(sr)) {
    uint64_t v = 0;
    switch (sr) {
      case S::kClock64:
      case S::kGlobalTimer:
        v = NowNanoseconds();
        break;
      case S::kSharedWindow:
        v = lc.shared_window;
        break;
      default:
        v = lc.local_window;
        break;
    }
    alignas(64) uint64_t t[kLanes];
    for (int l = 0; l < kLanes; ++l) t[l] = v;
    StoreLanes(exec, RowPtr<uint64_t>(w.regs, op.d), t);
    return;
  }
  alignas(64) uint32_t t[kLanes];
  const uint32_t bx = lc.block[0], by = lc.block[1];
  for (uint32_t l = 0; l < kLanes; ++l) {
    const uint32_t thread = w.index * kLanes + l;
    uint32_t v = 0;
    switch (sr) {
      case S::kTidX:
        v = thread % bx;
        break;
      case S::kTidY:
        v = (thread / bx) % by;
        break;
      case S::kTidZ:
        v = thread / (bx * by);
        break;
      case S::kNtidX:
        v = lc.block[0];
        break;
      case S::kNtidY:
        v = lc.block[1];
        break;
      case S::kNtidZ:
        v = lc.block[2];
        break;
      case S::kCtaidX:
        v = b.ctaid[0];
        break;
      case S::kCtaidY:
        v = b.ctaid[1];
        break;
      case S::kCtaidZ:
        v = b.ctaid[2];
        break;
      case S::kNctaidX:
        v = lc.grid[0];
        break;
      case S::kNctaidY:
        v = lc.grid[1];
        break;
      case S::kNctaidZ:
        v = lc.grid[2];
        break;
      case S::kLaneId:
        v = l;
        break;
      case S::kWarpId:
        v = w.index;
        break;
      case S::kNWarpId:
        v = lc.warps_per_block;
        break;
      case S::kSmId:
        v = ctx.worker->index;
        break;
      case S::kNSmId:
        v = lc.workers;
        break;
      case S::kGridId:
        v = lc.grid_id;
        break;
      case S::kClock:
        v = static_cast<uint32_t>(NowNanoseconds());
        break;
      case S::kLanemaskEq:
        v = 1u << l;
        break;
      case S::kLanemaskLt:
        v = (1u << l) - 1;
        break;
      case S::kLanemaskLe:
        v = l == 31 ? kFullMask : (2u << l) - 1;
        break;
      case S::kLanemaskGt:
        v = l == 31 ? 0 : ~((2u << l) - 1);
        break;
      case S::kLanemaskGe:
        v = ~((1u << l) - 1);
        break;
      case S::kActiveMask:
        v = active;
        break;
      case S::kDynamicSmemSize:
        v = lc.shared_size - ctx.program->header.shared_bytes;
        break;
      case S::kTotalSmemSize:
        v = lc.shared_size;
        break;
      default:
        break;
    }
    t[l] = v;
  }
  StoreLanes(exec, RowPtr<uint32_t>(w.regs, op.d), t);
}

void Shuffle(Warp& w, const Op& op, uint32_t exec) {
  const uint32_t mode = op.aux & isa::kShflModeMask;
  const uint32_t* a = RowPtr<const uint32_t>(w.regs, op.a);
  const uint32_t* b = RowPtr<const uint32_t>(w.regs, op.b);
  const uint32_t* c = RowPtr<const uint32_t>(w.regs, op.c);
  const bool b_imm = op.aux & isa::kShflBImm;
  const bool c_imm = op.aux & isa::kShflCImm;
  alignas(64) uint32_t t[kLanes];
  uint32_t valid = 0;
  for (uint32_t l = 0; l < kLanes; ++l) {
    const uint32_t bv = (b_imm ? (op.aux >> 8) : b[l]) & 0x1f;
    const uint32_t cv = c_imm ? (op.aux >> 16) & 0x1fff : c[l];
    const uint32_t seg = (cv >> 8) & 0x1f;
    const uint32_t clamp = cv & 0x1f;
    const uint32_t max_lane = (l & seg) | (clamp & ~seg);
    const uint32_t min_lane = l & seg;
    int32_t j = 0;
    bool in = false;
    switch (static_cast<isa::ShflMode>(mode)) {
      case isa::ShflMode::kUp:
        j = static_cast<int32_t>(l) - static_cast<int32_t>(bv);
        in = j >= static_cast<int32_t>(max_lane);
        break;
      case isa::ShflMode::kDown:
        j = static_cast<int32_t>(l + bv);
        in = j <= static_cast<int32_t>(max_lane);
        break;
      case isa::ShflMode::kBfly:
        j = static_cast<int32_t>(l ^ bv);
        in = j <= static_cast<int32_t>(max_lane);
        break;
      default:
        j = static_cast<int32_t>(min_lane | (bv & ~seg));
        in = j <= static_cast<int32_t>(max_lane);
        break;
    }
    if (!in) j = static_cast<int32_t>(l);
    t[l] = a[j & 31];
    valid |= uint32_t{in} << l;
  }
  StoreLanes(exec, RowPtr<uint32_t>(w.regs, op.d), t);
  if (op.imm != kPredTrue) SetPred(w, static_cast<uint32_t>(op.imm), exec, valid);
}

void Vote(Warp& w, const Op& op, uint32_t exec) {
  const uint32_t mode = op.aux & isa::kVoteModeMask;
  const uint32_t pred = (w.preds[op.a] ^ ((op.aux & isa::kVoteNegA) ? kFullMask : 0)) & exec;
  switch (static_cast<isa::VoteMode>(mode)) {
    case isa::VoteMode::kAll:
      SetPred(w, op.d, exec, pred == exec ? kFullMask : 0);
      break;
    case isa::VoteMode::kAny:
      SetPred(w, op.d, exec, pred != 0 ? kFullMask : 0);
      break;
    case isa::VoteMode::kUni:
      SetPred(w, op.d, exec, (pred == 0 || pred == exec) ? kFullMask : 0);
      break;
    case isa::VoteMode::kBallot: {
      alignas(64) uint32_t t[kLanes];
      for (int l = 0; l < kLanes; ++l) t[l] = pred;
      StoreLanes(exec, RowPtr<uint32_t>(w.regs, op.d), t);
      break;
    }
  }
}

void FillScratch(uint8_t* regs, const Program& p, const Op& op) {
  if (op.flags & kOpScratch64) {
    uint64_t* s = RowPtr<uint64_t>(regs, p.scratch_row);
    for (int l = 0; l < kLanes; ++l) s[l] = op.imm;
  } else {
    uint32_t* s = RowPtr<uint32_t>(regs, p.scratch_row);
    for (int l = 0; l < kLanes; ++l) s[l] = static_cast<uint32_t>(op.imm);
  }
}

template <typename T>
GPUVM_INLINE uint64_t LaneBits(uint8_t* regs, uint32_t row, uint32_t l) {
  return RowPtr<const T>(regs, row)[l];
}

void GenericCvt(uint8_t* regs, const Op& op, uint32_t exec) {
  const auto dst = static_cast<isa::Type>(op.aux & 0xf);
  const auto src = static_cast<isa::Type>((op.aux >> 4) & 0xf);
  const bool src64 = isa::Is64(src), dst64 = isa::Is64(dst);
  alignas(64) uint64_t t[kLanes];
  for (uint32_t m = exec; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
    uint64_t v = src64 ? LaneBits<uint64_t>(regs, op.a, l) : LaneBits<uint32_t>(regs, op.a, l);
    t[l] = ConvertValue(op.aux, v);
  }
  for (uint32_t m = exec; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
    if (dst64) {
      RowPtr<uint64_t>(regs, op.d)[l] = t[l];
    } else {
      RowPtr<uint32_t>(regs, op.d)[l] = static_cast<uint32_t>(t[l]);
    }
  }
}

void SlowFloat(uint8_t* regs, const Op& op, uint32_t exec) {
  const bool wide = static_cast<isa::Type>((op.aux >> 8) & 0xf) == isa::Type::kF64;
  alignas(64) uint64_t t[kLanes];
  for (uint32_t m = exec; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
    uint64_t a, b, c;
    if (wide) {
      a = LaneBits<uint64_t>(regs, op.a, l);
      b = LaneBits<uint64_t>(regs, op.b, l);
      c = LaneBits<uint64_t>(regs, op.c, l);
    } else {
      a = LaneBits<uint32_t>(regs, op.a, l);
      b = LaneBits<uint32_t>(regs, op.b, l);
      c = LaneBits<uint32_t>(regs, op.c, l);
    }
    t[l] = FloatSlowOp(op.aux, a, b, c);
  }
  for (uint32_t m = exec; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
    if (wide) {
      RowPtr<uint64_t>(regs, op.d)[l] = t[l];
    } else {
      RowPtr<uint32_t>(regs, op.d)[l] = static_cast<uint32_t>(t[l]);
    }
  }
}

}  // namespace
}  // namespace gpuvm::sim::compute::GPUVM_INTERP_NS

#endif  // GPUVM_GPU_SIM_COMPUTE_INTERPRETER_WARP_OPS_H_
