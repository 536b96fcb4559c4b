// The software GPU's copy engines: the M2MF object (class 0x9039, part of PGRAPH) and PCOPY (class
// 0x90b5). Both latch their methods and, on EXEC / LAUNCH_DMA, either copy inline data (M2MF PUSH)
// or start a CopyJob: a linear (pitch) copy between two GPU virtual addresses, VRAM or SYSRAM on
// either side, run in chunks so the channel scheduler can time-slice between channels. Consecutive
// pages that are contiguous in host memory are coalesced into one memmove, so large copies run at
// memcpy speed. Block-linear layouts and PCOPY's component remapping are not modelled: they end in
// a channel error.
//
// Threading: not thread-safe; objects and jobs belong to one channel, run by the device's engine
// thread.
#ifndef GPUVM_GPU_SIM_COPY_ENGINE_H_
#define GPUVM_GPU_SIM_COPY_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "gpu/hw/pfifo.h"
#include "gpu/sim/channel_types.h"
#include "gpu/sim/object_context.h"

namespace gpuvm::sim {

struct CopyCompletion {
  Report report;
  bool notify = false;  // raise the non-stall (NOTIFY) interrupt of the job's engine
};

struct CopyRequest {
  uint64_t src = 0;
  uint64_t dst = 0;
  uint64_t pitch_in = 0;
  uint64_t pitch_out = 0;
  uint64_t line_length = 0;  // bytes per line
  uint64_t line_count = 0;
};

class CopyJob {
 public:
  // Bytes copied between deadline checks. (our choice) 1 MiB: about 0.1 ms, small against a time
  // slice.
  static constexpr uint64_t kChunk = 1 << 20;

  CopyJob(FaultSource source, gf100::pfifo::Engine engine, CopyRequest request,
          CopyCompletion completion)
      : source_(source), engine_(engine), request_(request), completion_(completion) {}

  enum class Progress : uint8_t { kMore, kDone, kFaulted };
  // Copies until done, a fault, or `now_ns()` passes `deadline_ns` (checked between chunks).
  template <typename Clock>
  Progress Continue(const VmView& vm, uint64_t deadline_ns, Clock now_ns, MemoryFault* fault);

  const FaultSource& source() const { return source_; }
  gf100::pfifo::Engine engine() const { return engine_; }
  const CopyCompletion& completion() const { return completion_; }
  uint64_t bytes_copied() const { return bytes_copied_; }

 private:
  // One chunk of at most kChunk bytes of the current line.
  Progress Chunk(const VmView& vm, MemoryFault* fault);

  FaultSource source_;
  gf100::pfifo::Engine engine_;
  CopyRequest request_;
  CopyCompletion completion_;
  uint64_t line_ = 0;
  uint64_t offset_ = 0;  // within the current line
  uint64_t bytes_copied_ = 0;
};

template <typename Clock>
CopyJob::Progress CopyJob::Continue(const VmView& vm, uint64_t deadline_ns, Clock now_ns,
                                    MemoryFault* fault) {
  while (line_ < request_.line_count && request_.line_length != 0) {
    Progress p = Chunk(vm, fault);
    if (p != Progress::kMore) return p;
    if (now_ns() >= deadline_ns) {
      return (line_ < request_.line_count) ? Progress::kMore : Progress::kDone;
    }
  }
  return Progress::kDone;
}

// FERMI_MEMORY_TO_MEMORY_FORMAT_A.
class M2mfObject {
 public:
  MethodStatus Method(uint32_t method, uint32_t data, ObjectContext* ctx, bool* ignored);

 private:
  MethodStatus Exec(uint32_t data, ObjectContext* ctx);
  MethodStatus PushData(uint32_t data, ObjectContext* ctx);
  MethodStatus Finish(ObjectContext* ctx);

  uint64_t offset_in_ = 0, offset_out_ = 0;
  uint32_t pitch_in_ = 0, pitch_out_ = 0, line_length_ = 0, line_count_ = 0;
  uint64_t query_address_ = 0;
  uint32_t query_sequence_ = 0;
  uint32_t exec_ = 0;
  // An inline (PUSH) transfer in progress.
  bool pushing_ = false;
  uint32_t push_line_ = 0, push_offset_ = 0;
};

// GF100_DMA_COPY.
class CopyObject {
 public:
  MethodStatus Method(uint32_t method, uint32_t data, ObjectContext* ctx, bool* ignored);

 private:
  MethodStatus Launch(uint32_t data, ObjectContext* ctx);

  uint64_t offset_in_ = 0, offset_out_ = 0;
  uint32_t pitch_in_ = 0, pitch_out_ = 0, line_length_ = 0, line_count_ = 0;
  uint64_t semaphore_address_ = 0;
  uint32_t semaphore_payload_ = 0;
};

}  // namespace gpuvm::sim

#endif  // GPUVM_GPU_SIM_COPY_ENGINE_H_
