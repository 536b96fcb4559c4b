// The pushbuffer builder: collects the 32-bit words of one submission — GF100 method headers
// (gpu/hw/gpfifo.h: increasing, non-increasing, increase-once, immediate) and their data — before a
// channel copies them into its pushbuffer ring and points an IB entry at them. Counts beyond the
// 13-bit header field are split into several headers.
//
// Threading: a value type; one thread builds one PushBuffer.
#ifndef GPUVM_GUEST_PV_DRIVER_PUSHBUF_H_
#define GPUVM_GUEST_PV_DRIVER_PUSHBUF_H_

#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

namespace gpuvm::guest {

class PushBuffer {
 public:
  // Data to `method`, `method + 4`, ... (SecOp INC_METHOD).
  PushBuffer& Inc(uint32_t subchannel, uint32_t method, std::span<const uint32_t> data);
  PushBuffer& Inc(uint32_t subchannel, uint32_t method, std::initializer_list<uint32_t> data) {
    return Inc(subchannel, method, std::span<const uint32_t>(data.begin(), data.size()));
  }
  // All data to `method` (NON_INC_METHOD): uploads such as M2MF DATA and CB_DATA.
  PushBuffer& NonInc(uint32_t subchannel, uint32_t method, std::span<const uint32_t> data);
  // First word to `method`, the rest to `method + 4` (ONE_INC).
  PushBuffer& OneInc(uint32_t subchannel, uint32_t method, std::span<const uint32_t> data);
  // One value: in the header itself when it fits in 13 bits (IMMD_DATA_METHOD), else INC with one
  // data word.
  PushBuffer& Method(uint32_t subchannel, uint32_t method, uint32_t value);

  std::span<const uint32_t> words() const { return words_; }
  size_t size() const { return words_.size(); }
  bool empty() const { return words_.empty(); }
  void Clear() { words_.clear(); }

 private:
  std::vector<uint32_t> words_;
};

}  // namespace gpuvm::guest

#endif  // GPUVM_GUEST_PV_DRIVER_PUSHBUF_H_
