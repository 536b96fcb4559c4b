// What the GVISA `vprintf` instruction does for one thread (gpu/isa/device_printf.h has the FIFO
// and record format): read the format string through the thread's generic address, walk its
// conversions to size the arguments, copy the arguments (and %s strings) out of the packed buffer,
// reserve room in the FIFO with a compare-and-swap and write the record.
//
// Kernels are untrusted and the engine may run inside the host's aggregator, so everything is
// bounded (gpu/isa/device_printf.h: format, string and argument limits) and every memory access
// goes through PrintfMemory, which the interpreter implements with the same checked resolution as
// ld/st: a bad address is the thread's fault (recorded by PrintfMemory), never a host access.
//
// This lives outside the interpreter (which is compiled twice, interpreter_impl.h): it is rare and
// irregular, so one out-of-line copy serves both variants, as semantics.h does for atomics.
//
// Threading: DevicePrintf runs on the worker thread that runs the calling warp; records of threads
// on other workers are reserved atomically, so concurrent calls never overlap in the FIFO.
#ifndef GPUVM_GPU_SIM_COMPUTE_DEVICE_PRINTF_H_
#define GPUVM_GPU_SIM_COMPUTE_DEVICE_PRINTF_H_

#include <cstdint>
#include <vector>

namespace gpuvm::sim::compute {

// The calling thread's view of memory. Each function returns false (nullptr) after recording a
// fault of the thread (the instruction then faults the job).
class PrintfMemory {
 public:
  virtual ~PrintfMemory() = default;
  // The n (1, 4 or 8) bytes at the generic address `addr`, little-endian, zero-extended. A
  // misaligned address faults.
  virtual bool Read(uint64_t addr, uint32_t n, uint64_t* value) = 0;
  // A host pointer to the writable, 8-byte aligned global word at `addr`, for atomic updates.
  virtual uint64_t* GlobalWord(uint64_t addr) = 0;
};

// Runs vprintf(format, args) for one thread with the FIFO at global address `fifo`. Returns false
// when the thread faulted; otherwise *ret is vprintf's result: the argument slots consumed (also
// when the FIFO was full and the record was dropped), kPrintfNullFormat for a NULL format,
// kPrintfInternalError for a format beyond the limits, a misaligned FIFO or none (address 0: the
// driver never set one up). A NULL `args` reads every argument as 0 (nvcc passes NULL when the
// call has none, and a format from memory may still ask for some). `record` is scratch space the
// caller keeps between calls.
bool DevicePrintf(PrintfMemory& mem, uint64_t format, uint64_t args, uint64_t fifo,
                  std::vector<uint8_t>* record, int32_t* ret);

}  // namespace gpuvm::sim::compute

#endif  // GPUVM_GPU_SIM_COMPUTE_DEVICE_PRINTF_H_
