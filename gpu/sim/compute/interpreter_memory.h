// The warp interpreter's memory handlers (part of interpreter_impl.h; see there for how it is
// compiled): one Space type per PTX state space (global through the worker's page cache, shared,
// local, constant, and generic, which resolves to one of the others), the warp-wide fast path when
// every lane's access falls in one contiguous host range, the per-lane path that also produces the
// exact fault, ld/st for every access kind, atomics, and vprintf's view of a lane's memory.
// Anything out of bounds faults cleanly (FaultRecord); nothing a kernel computes can reach host
// memory outside its windows.
//
// Threading: like RunWarp, everything here runs on the worker thread that owns the block being run
// (its warps' registers, its shared and local memory); only global memory is shared with other
// workers, and is touched through relaxed atomics (interpreter_memory.h).
#ifndef GPUVM_INTERP_NS
#error "define GPUVM_INTERP_NS before including interpreter_memory.h"
#endif
#ifndef GPUVM_GPU_SIM_COMPUTE_INTERPRETER_MEMORY_H_
#define GPUVM_GPU_SIM_COMPUTE_INTERPRETER_MEMORY_H_

#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gpu/sim/compute/device_printf.h"
#include "gpu/sim/compute/exec_state.h"
#include "gpu/sim/compute/interpreter_lanes.h"
#include "gpu/sim/compute/semantics.h"

namespace gpuvm::sim::compute::GPUVM_INTERP_NS {
namespace {

// The address of lane l's access: register + offset, in the register's width. A 32-bit address
// wraps at 2^32 like the hardware's: nvcc -O3 forms `base - k` in a 32-bit register (below zero
// for a window at 0) and adds k back in the offset. A negative offset is stored two's complement.
GPUVM_INLINE uint64_t Address32(uint32_t reg, uint64_t offset) {
  return uint32_t(reg + uint32_t(offset));
}
GPUVM_INLINE uint64_t LaneAddress(uint8_t* regs, const Op& op, int l) {
  if (op.aux & kAuxAddr64) return RowPtr<const uint64_t>(regs, op.a)[l] + op.imm;
  return Address32(RowPtr<const uint32_t>(regs, op.a)[l], op.imm);
}

GPUVM_INLINE uint8_t* GlobalPtr(WorkerState& ws, uint64_t va, bool write) {
  const uint64_t page = va >> 12;
  PageCache::Entry& e = (write ? ws.pages.write : ws.pages.read)[page & (PageCache::kEntries - 1)];
  if (__builtin_expect(e.page == page, 1)) return e.base + (va & 4095);
  return GlobalMiss(ws, va, write);
}

struct GlobalSpace {
  static GPUVM_INLINE uint8_t* Resolve(ExecContext& ctx, Warp&, const Op&, uint32_t lane,
                                       uint64_t addr, uint32_t, bool write) {
    uint8_t* p = GlobalPtr(*ctx.worker, addr, write);
    if (!p) {
      ctx.worker->fault.lane = lane;
      ctx.worker->fault.address = addr;
    }
    return p;
  }
};
struct SharedSpace {
  static GPUVM_INLINE uint8_t* Resolve(ExecContext& ctx, Warp&, const Op&, uint32_t lane,
                                       uint64_t addr, uint32_t n, bool) {
    const uint64_t size = ctx.launch->shared_size;
    if (addr > size || size - addr < n) {
      Fail(ctx, ComputeFault::Kind::kOutOfRange, "shared memory access outside the block's window",
           lane, addr);
      return nullptr;
    }
    return ctx.block->shared.data.get() + addr;
  }
};
struct LocalSpace {
  static GPUVM_INLINE uint8_t* Resolve(ExecContext& ctx, Warp& w, const Op&, uint32_t lane,
                                       uint64_t addr, uint32_t n, bool) {
    const uint64_t size = ctx.block->local_bytes;
    if (addr > size || size - addr < n) {
      Fail(ctx, ComputeFault::Kind::kOutOfRange, "local memory access outside the thread's window",
           lane, addr);
      return nullptr;
    }
    return ctx.block->local.data.get() + (size_t{w.index} * kLanes + lane) * size + addr;
  }
};
struct ConstSpace {
  static GPUVM_INLINE uint8_t* Resolve(ExecContext& ctx, Warp&, const Op& op, uint32_t lane,
                                       uint64_t addr, uint32_t n, bool) {
    const uint32_t bank = (op.aux >> kAuxBankShift) & 0xf;
    const uint64_t size = ctx.launch->bank_size[bank];
    if (addr > size || size - addr < n) {
      Fail(ctx, ComputeFault::Kind::kOutOfRange, "constant bank access outside the bound buffer",
           lane, addr);
      return nullptr;
    }
    return const_cast<uint8_t*>(ctx.launch->bank_data[bank]) + addr;
  }
};
struct GenericSpace {
  static GPUVM_INLINE uint8_t* Resolve(ExecContext& ctx, Warp& w, const Op& op, uint32_t lane,
                                       uint64_t addr, uint32_t n, bool write) {
    const LaunchConstants& lc = *ctx.launch;
    if (lc.shared_window != 0 && addr - lc.shared_window < isa::kWindowBytes) {
      return SharedSpace::Resolve(ctx, w, op, lane, addr - lc.shared_window, n, write);
    }
    if (lc.local_window != 0 && addr - lc.local_window < isa::kWindowBytes) {
      return LocalSpace::Resolve(ctx, w, op, lane, addr - lc.local_window, n, write);
    }
    return GlobalSpace::Resolve(ctx, w, op, lane, addr, n, write);
  }
};

// The warp-wide fast path: when every executing lane's access lies in one contiguous host range
// (one shared/local/constant window, or one 4 KiB global page) and is aligned, one check covers the
// warp and the accesses become a plain gather/scatter. host(lane) = base + lane * lane_stride +
// addr[lane] - sub.
struct BulkView {
  uint8_t* base = nullptr;
  uint64_t lane_stride = 0;
  uint64_t sub = 0;
};

// Lane addresses (vectorised), and their min/max/or over the executing lanes.
GPUVM_INLINE void LaneAddresses(uint8_t* regs, const Op& op, uint32_t exec, uint64_t* addr,
                                uint64_t* lo, uint64_t* hi, uint64_t* bits) {
  if (op.aux & kAuxAddr64) {
    const uint64_t* a = RowPtr<const uint64_t>(regs, op.a);
    for (int l = 0; l < kLanes; ++l) addr[l] = a[l] + op.imm;
  } else {
    const uint32_t* a = RowPtr<const uint32_t>(regs, op.a);
    for (int l = 0; l < kLanes; ++l) addr[l] = Address32(a[l], op.imm);
  }
  uint64_t mn = ~uint64_t{0}, mx = 0, orr = 0;
  if (exec == kFullMask) {
    for (int l = 0; l < kLanes; ++l) {
      mn = addr[l] < mn ? addr[l] : mn;
      mx = addr[l] > mx ? addr[l] : mx;
      orr |= addr[l];
    }
  } else {
    for (int l = 0; l < kLanes; ++l) {
      const bool on = (exec >> l) & 1;
      const uint64_t v = addr[l];
      mn = (on && v < mn) ? v : mn;
      mx = (on && v > mx) ? v : mx;
      orr |= on ? v : 0;
    }
  }
  *lo = mn;
  *hi = mx;
  *bits = orr;
}

GPUVM_INLINE bool InWindow(uint64_t lo, uint64_t hi, uint64_t base) {
  return base != 0 && lo - base < isa::kWindowBytes && hi - base < isa::kWindowBytes;
}

// Fills `view` when the warp's accesses [lo, hi + n) can go through it; false means "take the
// per-lane path" (which also produces the exact fault).
template <typename Space>
GPUVM_INLINE bool Bulk(ExecContext& ctx, Warp& w, const Op& op, uint64_t lo, uint64_t hi,
                       uint32_t n, bool write, BulkView* view) {
  const LaunchConstants& lc = *ctx.launch;
  uint64_t size = 0;
  if constexpr (std::is_same_v<Space, GenericSpace>) {
    if (InWindow(lo, hi, lc.shared_window)) {
      if (!Bulk<SharedSpace>(ctx, w, op, lo - lc.shared_window, hi - lc.shared_window, n, write,
                             view))
        return false;
      view->sub += lc.shared_window;
      return true;
    }
    if (InWindow(lo, hi, lc.local_window)) {
      if (!Bulk<LocalSpace>(ctx, w, op, lo - lc.local_window, hi - lc.local_window, n, write, view))
        return false;
      view->sub += lc.local_window;
      return true;
    }
    // A single page outside both windows (windows are 16 MiB-aligned, pages 4 KiB: a page is wholly
    // in or out of a window).
    if (lc.shared_window != 0 && lo - lc.shared_window < isa::kWindowBytes) return false;
    if (lc.local_window != 0 && lo - lc.local_window < isa::kWindowBytes) return false;
    return Bulk<GlobalSpace>(ctx, w, op, lo, hi, n, write, view);
  } else if constexpr (std::is_same_v<Space, GlobalSpace>) {
    if ((lo >> 12) != (hi >> 12)) return false;
    uint8_t* p = GlobalPtr(*ctx.worker, lo, write);
    if (!p) return false;
    view->base = p - (lo & 4095);
    view->lane_stride = 0;
    view->sub = lo & ~uint64_t{4095};
    return true;
  } else {
    if constexpr (std::is_same_v<Space, SharedSpace>) {
      size = lc.shared_size;
      view->base = ctx.block->shared.data.get();
      view->lane_stride = 0;
    } else if constexpr (std::is_same_v<Space, LocalSpace>) {
      size = ctx.block->local_bytes;
      view->base = ctx.block->local.data.get() + size_t{w.index} * kLanes * size;
      view->lane_stride = size;
    } else {
      const uint32_t bank = (op.aux >> kAuxBankShift) & 0xf;
      size = lc.bank_size[bank];
      view->base = const_cast<uint8_t*>(lc.bank_data[bank]);
      view->lane_stride = 0;
    }
    view->sub = 0;
    return size >= n && hi <= size - n;
  }
}

template <typename T, bool kCrossThreadAccess>
GPUVM_INLINE T LoadAt(const uint8_t* p) {
  if constexpr (kCrossThreadAccess) {
    return __atomic_load_n(reinterpret_cast<const T*>(p), __ATOMIC_RELAXED);
  } else {
    T v;
    memcpy(&v, p, sizeof v);
    return v;
  }
}
template <typename T, bool kCrossThreadAccess>
GPUVM_INLINE void StoreAt(uint8_t* p, T v) {
  if constexpr (kCrossThreadAccess) {
    __atomic_store_n(reinterpret_cast<T*>(p), v, __ATOMIC_RELAXED);
  } else {
    memcpy(p, &v, sizeof v);
  }
}

// Global memory (and generic, which may be global) is shared with other workers: accessed with
// relaxed atomics. Shared, local and constant memory belong to this worker while it runs the block.
template <typename Space>
inline constexpr bool kCrossThread =
    std::is_same_v<Space, GlobalSpace> || std::is_same_v<Space, GenericSpace>;

template <typename MemT, typename RegT, typename Space>
bool LoadLanes(ExecContext& ctx, Warp& w, const Op& op, uint32_t exec) {
  alignas(64) uint64_t addr[kLanes];
  uint64_t lo, hi, bits;
  LaneAddresses(w.regs, op, exec, addr, &lo, &hi, &bits);
  alignas(64) RegT t[kLanes];
  BulkView view;
  if ((bits & (sizeof(MemT) - 1)) == 0 &&
      Bulk<Space>(ctx, w, op, lo, hi, sizeof(MemT), false, &view)) {
    const uint8_t* base = view.base - view.sub;
    if constexpr (!kCrossThread<Space>) {
      if (view.lane_stride == 0) {
        if (lo == hi) {  // one address for the warp (a broadcast, e.g. a tile row every lane reads)
          const RegT v = static_cast<RegT>(LoadAt<MemT, false>(base + lo));
          for (uint32_t l = 0; l < kLanes; ++l) t[l] = v;
          StoreLanes(exec, RowPtr<RegT>(w.regs, op.d), t);
          return true;
        }
        if (exec == kFullMask && hi - lo == (kLanes - 1) * sizeof(MemT)) {
          bool unit_stride = true;
          for (uint32_t l = 0; l < kLanes; ++l) unit_stride &= addr[l] == lo + l * sizeof(MemT);
          if (unit_stride) {  // consecutive elements, lane order: a block copy
            alignas(64) MemT m[kLanes];
            memcpy(m, base + lo, sizeof m);
            for (uint32_t l = 0; l < kLanes; ++l) t[l] = static_cast<RegT>(m[l]);
            StoreLanes(exec, RowPtr<RegT>(w.regs, op.d), t);
            return true;
          }
        }
      }
    }
    for (uint32_t l = 0; l < kLanes; ++l) {
      const uint64_t a = ((exec >> l) & 1) ? addr[l] : lo;
      t[l] = static_cast<RegT>(LoadAt<MemT, kCrossThread<Space>>(base + l * view.lane_stride + a));
    }
  } else {
    for (uint32_t m = exec; m; m &= m - 1) {
      const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
      const uint64_t a = addr[l];
      if (a & (sizeof(MemT) - 1))
        return Fail(ctx, ComputeFault::Kind::kMisaligned, "misaligned load", l, a);
      const uint8_t* p = Space::Resolve(ctx, w, op, l, a, sizeof(MemT), false);
      if (!p) return false;
      t[l] = static_cast<RegT>(LoadAt<MemT, true>(p));
    }
  }
  StoreLanes(exec, RowPtr<RegT>(w.regs, op.d), t);
  return true;
}

template <typename MemT, typename RegT, typename Space>
bool StoreLanesTo(ExecContext& ctx, Warp& w, const Op& op, uint32_t exec) {
  alignas(64) uint64_t addr[kLanes];
  uint64_t lo, hi, bits;
  LaneAddresses(w.regs, op, exec, addr, &lo, &hi, &bits);
  const RegT* v = RowPtr<const RegT>(w.regs, op.b);
  BulkView view;
  if ((bits & (sizeof(MemT) - 1)) == 0 &&
      Bulk<Space>(ctx, w, op, lo, hi, sizeof(MemT), true, &view)) {
    uint8_t* base = view.base - view.sub;
    // Lane order: when lanes collide, the highest lane's value stays (deterministic).
    for (uint32_t m = exec; m; m &= m - 1) {
      const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
      StoreAt<MemT, kCrossThread<Space>>(base + l * view.lane_stride + addr[l],
                                         static_cast<MemT>(v[l]));
    }
    return true;
  }
  for (uint32_t m = exec; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
    const uint64_t a = addr[l];
    if (a & (sizeof(MemT) - 1))
      return Fail(ctx, ComputeFault::Kind::kMisaligned, "misaligned store", l, a);
    uint8_t* p = Space::Resolve(ctx, w, op, l, a, sizeof(MemT), true);
    if (!p) return false;
    StoreAt<MemT, true>(p, static_cast<MemT>(v[l]));
  }
  return true;
}

// isa::kModPair: 16 bytes as two u64 per lane, single-copy atomic against other pair accesses (a
// reader never sees half of another lane's or worker's pair store). x86-64 promises that for
// aligned 16-byte SSE moves only on processors with AVX, so a small table of striped locks keyed
// by the 16-byte block serialises pair accesses instead; they are rare outside look-back scans.
inline std::atomic_flag& PairLock(const uint8_t* p) {
  static std::atomic_flag locks[64];
  return locks[(reinterpret_cast<uintptr_t>(p) >> 4) % 64];
}

template <typename Space>
bool PairLanes(ExecContext& ctx, Warp& w, const Op& op, uint32_t exec, bool load) {
  alignas(64) uint64_t addr[kLanes];
  uint64_t lo, hi, bits;
  LaneAddresses(w.regs, op, exec, addr, &lo, &hi, &bits);
  uint64_t* first = RowPtr<uint64_t>(w.regs, load ? op.d : op.b);
  uint64_t* second = RowPtr<uint64_t>(w.regs, load ? op.b : op.c);
  for (uint32_t m = exec; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
    const uint64_t a = addr[l];
    if (a & 15) return Fail(ctx, ComputeFault::Kind::kMisaligned, "misaligned pair access", l, a);
    uint8_t* p = Space::Resolve(ctx, w, op, l, a, 16, !load);
    if (!p) return false;
    std::atomic_flag& lock = PairLock(p);
    while (lock.test_and_set(std::memory_order_acquire)) {
    }
    if (load) {
      memcpy(&first[l], p, 8);
      memcpy(&second[l], p + 8, 8);
    } else {
      memcpy(p, &first[l], 8);
      memcpy(p + 8, &second[l], 8);
    }
    lock.clear(std::memory_order_release);
  }
  return true;
}

template <typename Space>
bool Load(ExecContext& ctx, Warp& w, const Op& op, uint32_t exec) {
  switch (static_cast<AccessKind>(op.aux & kAuxKindMask)) {
    case AccessKind::kU8R32:
      return LoadLanes<uint8_t, uint32_t, Space>(ctx, w, op, exec);
    case AccessKind::kS8R32:
      return LoadLanes<int8_t, uint32_t, Space>(ctx, w, op, exec);
    case AccessKind::kU16R32:
      return LoadLanes<uint16_t, uint32_t, Space>(ctx, w, op, exec);
    case AccessKind::kS16R32:
      return LoadLanes<int16_t, uint32_t, Space>(ctx, w, op, exec);
    case AccessKind::kB32R32:
      return LoadLanes<uint32_t, uint32_t, Space>(ctx, w, op, exec);
    case AccessKind::kU8R64:
      return LoadLanes<uint8_t, uint64_t, Space>(ctx, w, op, exec);
    case AccessKind::kS8R64:
      return LoadLanes<int8_t, uint64_t, Space>(ctx, w, op, exec);
    case AccessKind::kU16R64:
      return LoadLanes<uint16_t, uint64_t, Space>(ctx, w, op, exec);
    case AccessKind::kS16R64:
      return LoadLanes<int16_t, uint64_t, Space>(ctx, w, op, exec);
    case AccessKind::kU32R64:
      return LoadLanes<uint32_t, uint64_t, Space>(ctx, w, op, exec);
    case AccessKind::kS32R64:
      return LoadLanes<int32_t, uint64_t, Space>(ctx, w, op, exec);
    case AccessKind::kPair128:
      return PairLanes<Space>(ctx, w, op, exec, true);
    default:
      return LoadLanes<uint64_t, uint64_t, Space>(ctx, w, op, exec);
  }
}

template <typename Space>
bool Store(ExecContext& ctx, Warp& w, const Op& op, uint32_t exec) {
  switch (static_cast<AccessKind>(op.aux & kAuxKindMask)) {
    case AccessKind::kU8R32:
    case AccessKind::kS8R32:
      return StoreLanesTo<uint8_t, uint32_t, Space>(ctx, w, op, exec);
    case AccessKind::kU16R32:
    case AccessKind::kS16R32:
      return StoreLanesTo<uint16_t, uint32_t, Space>(ctx, w, op, exec);
    case AccessKind::kB32R32:
      return StoreLanesTo<uint32_t, uint32_t, Space>(ctx, w, op, exec);
    case AccessKind::kU8R64:
    case AccessKind::kS8R64:
      return StoreLanesTo<uint8_t, uint64_t, Space>(ctx, w, op, exec);
    case AccessKind::kU16R64:
    case AccessKind::kS16R64:
      return StoreLanesTo<uint16_t, uint64_t, Space>(ctx, w, op, exec);
    case AccessKind::kU32R64:
    case AccessKind::kS32R64:
      return StoreLanesTo<uint32_t, uint64_t, Space>(ctx, w, op, exec);
    case AccessKind::kPair128:
      return PairLanes<Space>(ctx, w, op, exec, false);
    default:
      return StoreLanesTo<uint64_t, uint64_t, Space>(ctx, w, op, exec);
  }
}

bool Atomic(ExecContext& ctx, Warp& w, const Op& op, uint32_t exec) {
  const auto aop = static_cast<isa::AtomOp>((op.aux >> kAuxAtomOpShift) & 0xf);
  const auto type = static_cast<isa::Type>((op.aux >> kAuxAtomTypeShift) & 0xf);
  const auto space = static_cast<isa::Space>((op.aux >> kAuxAtomSpaceShift) & 0x7);
  const bool wide = isa::Is64(type);
  const uint32_t n = wide ? 8 : 4;
  alignas(64) uint64_t t[kLanes];
  for (uint32_t m = exec; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
    const uint64_t addr = LaneAddress(w.regs, op, l);
    if (addr & (n - 1))
      return Fail(ctx, ComputeFault::Kind::kMisaligned, "misaligned atomic", l, addr);
    uint8_t* p;
    if (space == isa::Space::kShared) {
      p = SharedSpace::Resolve(ctx, w, op, l, addr, n, true);
    } else if (space == isa::Space::kGlobal) {
      p = GlobalSpace::Resolve(ctx, w, op, l, addr, n, true);
    } else {
      const LaunchConstants& lc = *ctx.launch;
      if (lc.local_window != 0 && addr - lc.local_window < isa::kWindowBytes) {
        return Fail(ctx, ComputeFault::Kind::kOutOfRange, "atomic on local memory", l, addr);
      }
      p = GenericSpace::Resolve(ctx, w, op, l, addr, n, true);
    }
    if (!p) return false;
    uint64_t b =
        wide ? RowPtr<const uint64_t>(w.regs, op.b)[l] : RowPtr<const uint32_t>(w.regs, op.b)[l];
    uint64_t c =
        wide ? RowPtr<const uint64_t>(w.regs, op.c)[l] : RowPtr<const uint32_t>(w.regs, op.c)[l];
    t[l] = AtomicRmw(p, aop, type, b, c);
  }
  if (wide) {
    uint64_t* d = RowPtr<uint64_t>(w.regs, op.d);
    for (uint32_t m = exec; m; m &= m - 1) d[__builtin_ctz(m)] = t[__builtin_ctz(m)];
  } else {
    uint32_t* d = RowPtr<uint32_t>(w.regs, op.d);
    for (uint32_t m = exec; m; m &= m - 1)
      d[__builtin_ctz(m)] = static_cast<uint32_t>(t[__builtin_ctz(m)]);
  }
  return true;
}

// vprintf's view of memory for one lane (device_printf.h): generic reads resolve exactly as ld
// does for that lane (its own local memory, the block's shared memory, global pages), and the
// FIFO's words are global; every failure is recorded like a load's or store's fault.
class LanePrintfMemory final : public PrintfMemory {
 public:
  LanePrintfMemory(ExecContext& ctx, Warp& w, const Op& op) : ctx_(ctx), w_(w), op_(op) {}
  uint32_t lane = 0;

  bool Read(uint64_t addr, uint32_t n, uint64_t* value) override {
    if (addr & (n - 1))
      return Fail(ctx_, ComputeFault::Kind::kMisaligned, "misaligned vprintf argument", lane, addr);
    const uint8_t* p = GenericSpace::Resolve(ctx_, w_, op_, lane, addr, n, false);
    if (!p) return false;
    switch (n) {
      case 1:
        *value = LoadAt<uint8_t, true>(p);
        break;
      case 4:
        *value = LoadAt<uint32_t, true>(p);
        break;
      default:
        *value = LoadAt<uint64_t, true>(p);
        break;
    }
    return true;
  }
  uint64_t* GlobalWord(uint64_t addr) override {
    if (addr & 7) {
      Fail(ctx_, ComputeFault::Kind::kMisaligned, "misaligned printf FIFO", lane, addr);
      return nullptr;
    }
    return reinterpret_cast<uint64_t*>(GlobalSpace::Resolve(ctx_, w_, op_, lane, addr, 8, true));
  }

 private:
  ExecContext& ctx_;
  Warp& w_;
  const Op& op_;
};

// d = vprintf(a, b) with the FIFO at c, lane by lane in lane order (so one warp's records keep
// their lane order). All sources are read before d is written (d may share their rows).
bool Vprintf(ExecContext& ctx, Warp& w, const Op& op, uint32_t exec) {
  const uint64_t* format = RowPtr<const uint64_t>(w.regs, op.a);
  const uint64_t* args = RowPtr<const uint64_t>(w.regs, op.b);
  const uint64_t* fifo = RowPtr<const uint64_t>(w.regs, op.c);
  alignas(64) uint32_t t[kLanes] = {};
  LanePrintfMemory mem(ctx, w, op);
  for (uint32_t m = exec; m; m &= m - 1) {
    const uint32_t l = static_cast<uint32_t>(__builtin_ctz(m));
    mem.lane = l;
    int32_t r = 0;
    if (!DevicePrintf(mem, format[l], args[l], fifo[l], &ctx.worker->printf_record, &r))
      return false;
    t[l] = static_cast<uint32_t>(r);
  }
  StoreLanes(exec, RowPtr<uint32_t>(w.regs, op.d), t);
  return true;
}

}  // namespace
}  // namespace gpuvm::sim::compute::GPUVM_INTERP_NS

#endif  // GPUVM_GPU_SIM_COMPUTE_INTERPRETER_MEMORY_H_
