// State the compute engine keeps while running a grid: per launch (LaunchConstants), per worker
// thread (WorkerState, with its global-memory page cache), per resident thread block (BlockState)
// and per warp (Warp). docs/ISA.md "Execution model" describes how warps diverge and reconverge.
//
// These are plain structs with no inline behaviour on purpose: the interpreter is compiled twice
// (baseline and AVX2, interpreter_impl.h), and any inline function shared by both copies could be
// linked from the wrong one. Behaviour lives in the interpreter (internal linkage) or in
// out-of-line functions here.
//
// Threading: a BlockState and its warps belong to one worker at a time (handed over between slices
// under the job's mutex). A WorkerState belongs to one worker thread. LaunchConstants are read-only
// while workers run.
#ifndef GPUVM_GPU_SIM_COMPUTE_EXEC_STATE_H_
#define GPUVM_GPU_SIM_COMPUTE_EXEC_STATE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "gpu/isa/isa.h"
#include "gpu/sim/compute/program.h"
#include "gpu/sim/compute_engine.h"

namespace gpuvm::sim::compute {

inline constexpr uint32_t kNoPc = 0xffffffffu;

// Memory with a chosen alignment, for register files (rows are read as 32-byte vectors).
struct AlignedBuffer {
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t[], Free> data;
  size_t size = 0;
  // (Re)allocates `bytes` zeroed bytes when the current buffer is smaller; returns false when out
  // of memory.
  bool Reserve(size_t bytes);
};

// A set of lanes of one warp that share a program counter. `barrier` is 0 for a runnable group, or
// id + 1 while the group waits at bar.sync id.
struct Group {
  uint32_t pc = 0;
  uint32_t mask = 0;
  uint32_t barrier = 0;
};

struct Warp {
  uint32_t index = 0;          // warp number in the block
  uint32_t pc = 0;             // of the current group
  uint32_t active = 0;         // lanes of the current group (0 when there is none)
  uint32_t exited = 0;         // lanes that finished, including lanes past the block's thread count
  uint32_t next_join = kNoPc;  // smallest pc of a runnable pending group
  uint32_t pending_count = 0;
  bool waiting = false;     // no runnable group: everything left waits at a barrier
  bool done = false;        // every lane exited
  uint8_t* regs = nullptr;  // rows of the block's register file (Program::total_rows rows)
  uint32_t preds[64] = {};  // one bit per lane; preds[isa::kPredTrue] is all ones
  Group pending[kLanes];  // groups not running now (disjoint lanes, so at most 31 plus the current)
};

// Launch facts every block reads.
struct LaunchConstants {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t block_threads = 1;
  uint32_t warps_per_block = 1;
  uint32_t shared_size = 0;    // bytes of shared memory per block (launch SHARED_SIZE)
  uint64_t shared_window = 0;  // 0: absent
  uint64_t local_window = 0;
  const uint8_t* bank_data[ComputeLaunch::kConstBuffers] =
      {};  // snapshots of the bound constant banks
  uint32_t bank_size[ComputeLaunch::kConstBuffers] = {};
  uint32_t workers = 1;
  uint32_t grid_id = 0;
};

// Why and where a warp stopped with a fault (the engine turns it into a ComputeFault message).
struct FaultRecord {
  ComputeFault::Kind kind = ComputeFault::Kind::kNone;
  MemoryFault mmu;
  uint64_t address = 0;
  uint32_t pc = 0;
  uint32_t warp = 0;
  uint32_t lane = 0;
  const char* what = "";
};

// Direct-mapped cache of host pointers for 4 KiB pages of the channel's address space. Valid for
// one job (ChannelMemory pointers live until the job ends).
struct PageCache {
  static constexpr int kEntries = 256;
  struct Entry {
    uint64_t page = ~0ull;
    uint8_t* base = nullptr;
  };
  Entry read[kEntries];
  Entry write[kEntries];
};

struct WorkerState {
  ChannelMemory* memory = nullptr;
  uint32_t index = 0;
  PageCache pages;
  FaultRecord fault;
  uint64_t lane_instructions = 0;
  uint64_t page_misses = 0;
  std::vector<uint8_t> printf_record;  // vprintf's scratch (device_printf.h)
};

struct BlockState {
  uint32_t ctaid[3] = {0, 0, 0};
  uint64_t linear = 0;
  uint32_t live_threads = 0;  // threads not exited
  uint32_t bar_arrived[isa::kMaxBarriers] = {};
  uint32_t next_warp = 0;  // round-robin position, kept across slices
  std::vector<Warp> warps;
  AlignedBuffer regs;
  AlignedBuffer shared;
  AlignedBuffer local;
  uint32_t local_bytes = 0;  // per thread
};

struct ExecContext {
  const Program* program = nullptr;
  const LaunchConstants* launch = nullptr;
  BlockState* block = nullptr;
  WorkerState* worker = nullptr;
};

enum class WarpStop : uint8_t { kBudget, kWaiting, kDone, kFault };

// Runs warp `w` of ctx.block until it waits at a barrier, finishes, faults, or has spent *budget
// instructions (*budget is decremented by what ran). The interpreter variant is chosen from the
// CPU's features (interpreter.cc).
using RunWarpFn = WarpStop (*)(ExecContext& ctx, Warp& w, int64_t* budget);
enum class InterpreterVariant : uint8_t { kBest, kGeneric, kAvx2 };
// kBest: AVX2+FMA when the CPU has them, else generic. Asking for kAvx2 on a CPU without it gives
// generic.
RunWarpFn SelectRunWarp(InterpreterVariant variant, const char** name);

// Slow path of global memory: translates the page holding `va` through ChannelMemory and fills the
// cache. Returns the host pointer for `va`, or nullptr after recording an MMU fault in ws.fault.
uint8_t* GlobalMiss(WorkerState& ws, uint64_t va, bool write);

}  // namespace gpuvm::sim::compute

#endif  // GPUVM_GPU_SIM_COMPUTE_EXEC_STATE_H_
