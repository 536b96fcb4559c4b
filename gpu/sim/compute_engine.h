// The seam between the software GPU's compute class (0x90c0, whose methods PFIFO/PGRAPH decode in
// gpu/sim) and the engine that executes kernels (gpu/sim/compute). The device gathers the launch
// state from methods; at LAUNCH it asks the engine for a job and runs that job slice by slice on
// its own engine thread, so it can switch channels between slices (time slicing now, preemption and
// fair scheduling later).
//
// Threading: ComputeEngine::Start and FlushCodeCache are called from the device's engine thread
// only. ComputeJob::RunSlice is called from that same thread; inside it the engine may spread
// thread blocks over its own worker threads, but RunSlice returns only when all of them have
// stopped touching memory. ChannelMemory is called concurrently by those workers and must be
// thread-safe.
#ifndef GPUVM_GPU_SIM_COMPUTE_ENGINE_H_
#define GPUVM_GPU_SIM_COMPUTE_ENGINE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/hw/mmu_fault.h"

namespace gpuvm::sim {

// A failed translation: the address, the direction and why (the MMU's fault reason).
struct MemoryFault {
  uint64_t va = 0;
  bool write = false;
  gf100::FaultReason reason = gf100::FaultReason::kPageNotPresent;
};

// One channel's GPU virtual address space, as the MMU translates it (page tables, TLB, VRAM/SYSRAM
// targets, read-only pages). Implemented by the device; engines reach memory only through it.
class ChannelMemory {
 public:
  static constexpr uint64_t kPageSize = 4096;

  virtual ~ChannelMemory() = default;

  // Host pointer to the bytes [va, va + len), which must not cross a 4 KiB page boundary, for
  // reading (write == false) or for reading and writing (write == true). Returns nullptr and fills
  // *fault when the page is unmapped, read-only for a write, or the request is malformed. The
  // pointer stays valid until the job that asked for it ends. Thread-safe.
  virtual uint8_t* Translate(uint64_t va, uint32_t len, bool write, MemoryFault* fault) = 0;

  // Identifies the address space (e.g. the page directory's address) so caches keyed by virtual
  // address (decoded code) do not mix address spaces. Two live spaces never share an id.
  virtual uint64_t AddressSpaceId() const = 0;
};

// Everything a LAUNCH (method 0x0368) needs, as programmed by the 0x90c0 methods before it
// (gpu/hw/classes.h; docs/FERMI-FACTS.md "Classes and their methods").
struct ComputeLaunch {
  static constexpr int kConstBuffers = 16;
  struct ConstBuffer {
    bool valid = false;
    uint64_t address = 0;  // GPU virtual address
    uint32_t size = 0;     // bytes
  };

  uint32_t channel = 0;  // the launching channel, for error reports
  uint32_t grid_x = 1, grid_y = 1, grid_z = 1;
  uint32_t block_x = 1, block_y = 1, block_z = 1;
  uint32_t shared_size = 0;   // SHARED_SIZE: bytes of shared memory per block
  uint64_t code_address = 0;  // CODE_ADDRESS: base of the code region in the channel's VM
  uint32_t entry_offset = 0;  // CP_START_ID: the kernel's entry, as an offset from code_address
  std::array<ConstBuffer, kConstBuffers> const_buffers{};  // CB_BIND state at launch
  uint64_t temp_address = 0;  // TEMP_ADDRESS: backing for per-thread local memory
  uint64_t temp_size = 0;     // TEMP_SIZE
  uint32_t local_base =
      0;  // LOCAL_BASE: window of the generic address space that maps local memory
  uint32_t shared_base =
      0;  // SHARED_BASE: window of the generic address space that maps shared memory
};

// Why a job stopped for good without finishing.
struct ComputeFault {
  enum class Kind : uint8_t {
    kNone,
    kMmu,              // a translation failed: see `mmu`
    kMisaligned,       // an access not aligned to its size
    kInvalidCode,      // the code at the entry point does not decode/validate
    kOutOfRange,       // shared/local/constant access past its window or size
    kInvalidLaunch,    // launch parameters out of range (e.g. zero or oversized dimensions)
    kTrap,             // the kernel executed a trap instruction
    kAssert,           // a device-side assert failed (PTX: a call to __assertfail)
    kBarrierDeadlock,  // every live thread of a block waits at a barrier that cannot complete
  };
  Kind kind = Kind::kNone;
  MemoryFault mmu;      // valid when kind == kMmu
  std::string message;  // one sentence for logs and the channel's error record
};

enum class SliceOutcome : uint8_t { kMore, kDone, kFaulted };

// One launch in progress. Work runs in bounded slices (a slice ends after a bounded amount of work,
// on the order of a millisecond); between slices the device may run other channels. A job that
// returned kFaulted or kDone must not be sliced again.
class ComputeJob {
 public:
  virtual ~ComputeJob() = default;
  virtual SliceOutcome RunSlice() = 0;
  virtual const ComputeFault& fault() const = 0;     // valid after kFaulted
  virtual uint64_t thread_instructions() const = 0;  // executed so far, summed over threads

  // ---- preemption (docs/SOFTWARE-GPU.md "Preemption"); between slices only ----
  // Drain mode: stop starting new thread blocks; blocks already started keep running in later
  // slices. drained() is true once none is in flight (the job's state is then just "which block
  // is next"). A job that cannot drain ignores it and never reports drained.
  virtual void Drain() {}
  virtual bool drained() const { return false; }
  // Context switch: appends the job's whole state (launch, code, constant-bank snapshots, every
  // block in flight with its warps, registers, shared and local memory and barrier counts) to
  // *image and releases the job's blocks; the job must not be sliced again (ComputeEngine::Resume
  // continues it). False (image untouched) when the engine cannot save a context; the job then
  // stays usable.
  virtual bool SaveContext(std::vector<uint8_t>* /*image*/) { return false; }
};

class ComputeEngine {
 public:
  virtual ~ComputeEngine() = default;
  // Never fails by itself: a bad launch or bad code comes back as a job whose first slice faults,
  // so every failure takes the same path to the channel's error record. `memory` outlives the job.
  virtual std::unique_ptr<ComputeJob> Start(const ComputeLaunch& launch, ChannelMemory* memory) = 0;
  // FLUSH (0x1698) bit 0: the driver changed code in memory; forget decoded code.
  virtual void FlushCodeCache() = 0;
  // Continues a job from an image its SaveContext wrote (this engine or another, any number of
  // workers). Like Start, never fails by itself: an image that does not parse or validate comes
  // back as a job whose first slice faults with kInvalidLaunch. Null when the engine cannot
  // restore contexts (then no SaveContext of it succeeds either).
  virtual std::unique_ptr<ComputeJob> Resume(const std::vector<uint8_t>& /*image*/,
                                             ChannelMemory* /*memory*/) {
    return nullptr;
  }
  // A preemption is waiting for the slice in flight (PFIFO's PREEMPT names the running channel):
  // end it at the next point where it may stop (a few thousand warp instructions), not at its
  // deadline. Any thread. Harmless when no slice runs: the next slice ends early, having done
  // little. ClearYield: PFIFO served the preemption.
  virtual void RequestYield() {}
  virtual void ClearYield() {}
};

}  // namespace gpuvm::sim

#endif  // GPUVM_GPU_SIM_COMPUTE_ENGINE_H_
