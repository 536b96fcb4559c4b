// The GF100 pushbuffer decoder: turns the 32-bit words of a channel's pushbuffer segments into
// (subchannel, method, data) calls. Pure state machine, no memory access, so it can be fuzzed
// alone. The state persists across segments: a header's data words may continue in the next IB
// entry, as on hardware. Header format: gpu/hw/gpfifo.h.
//
// Threading: not thread-safe; one decoder per channel, used by the thread running that channel.
#ifndef GPUVM_GPU_SIM_PUSHBUF_H_
#define GPUVM_GPU_SIM_PUSHBUF_H_

#include <cstdint>

namespace gpuvm::sim {

struct MethodCall {
  uint32_t subchannel = 0;
  uint32_t method = 0;  // byte offset, 0..0x3ffc
  uint32_t data = 0;
};

class MethodDecoder {
 public:
  enum class Result : uint8_t {
    kNone,        // the word was a header (or a sub-device mask command); nothing to execute
    kMethod,      // *call holds a method to execute
    kEndSegment,  // END_PB_SEGMENT: skip the rest of this segment
    kIllegal,     // an illegal command header (legacy or reserved opcode); the channel must stop
  };

  Result Feed(uint32_t word, MethodCall* call);
  void Reset() { *this = MethodDecoder(); }
  // True while a header still expects data words.
  bool in_method() const { return remaining_ != 0; }

 private:
  enum class Mode : uint8_t { kInc, kNonInc, kOneInc };
  Mode mode_ = Mode::kInc;
  uint32_t subchannel_ = 0;
  uint32_t method_ = 0;
  uint32_t remaining_ = 0;
};

}  // namespace gpuvm::sim

#endif  // GPUVM_GPU_SIM_PUSHBUF_H_
