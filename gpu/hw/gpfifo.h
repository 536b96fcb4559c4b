// The command stream a channel consumes: indirect-buffer (GPFIFO) entries and the GF100 pushbuffer
// method headers, plus encoders a driver uses to build them. Sources:
// docs/FERMI-FACTS.md; nouveau include/nvhw/class/cl906f.h (NV906F_DMA_* header fields:
// SEC_OP bits 29-31, TERT_OP bits 16-17, METHOD_ADDRESS bits 0-11, SUBCHANNEL bits 13-15, COUNT /
// IMMD_DATA bits 16-28). Facts only; the decoder lives in gpu/sim/pushbuf.h.
#ifndef GPUVM_GPU_HW_GPFIFO_H_
#define GPUVM_GPU_HW_GPFIFO_H_

#include <cstdint>

namespace gpuvm::gf100::gpfifo {

// ---- IB entry (64-bit) ----
// word 0: bits 2-31 address bits 2-31. word 1: bits 0-7 address bits 32-39, bit 9 NOT_MAIN, bits
// 10-30 length in 32-bit words, bit 31 NO_PREFETCH.
inline constexpr uint32_t kIbEntrySize = 8;
inline constexpr uint32_t kIbAddrLoMask = 0xfffffffc;
inline constexpr uint32_t kIbAddrHiMask = 0xff;
inline constexpr uint32_t kIbNotMain = 1u << 9;
inline constexpr uint32_t kIbLengthShift = 10;
inline constexpr uint32_t kIbLengthMask = 0x1fffff;
inline constexpr uint32_t kIbNoPrefetch = 1u << 31;

struct IbEntry {
  uint64_t address = 0;  // GPU virtual address of the pushbuffer segment
  uint32_t words = 0;    // length in 32-bit words
  bool not_main = false;
  bool no_prefetch = false;
};
constexpr IbEntry DecodeIbEntry(uint32_t w0, uint32_t w1) {
  return {uint64_t(w0 & kIbAddrLoMask) | (uint64_t(w1 & kIbAddrHiMask) << 32),
          (w1 >> kIbLengthShift) & kIbLengthMask, (w1 & kIbNotMain) != 0,
          (w1 & kIbNoPrefetch) != 0};
}
constexpr uint64_t EncodeIbEntry(uint64_t address, uint32_t words) {
  uint32_t w0 = uint32_t(address) & kIbAddrLoMask;
  uint32_t w1 = uint32_t(address >> 32) & kIbAddrHiMask;
  w1 |= (words & kIbLengthMask) << kIbLengthShift;
  return uint64_t(w0) | (uint64_t(w1) << 32);
}

// ---- Method header (32-bit) ----
inline constexpr uint32_t kSecOpShift = 29;
inline constexpr uint32_t kCountShift = 16;
inline constexpr uint32_t kCountMask = 0x1fff;  // also the 13-bit immediate value
inline constexpr uint32_t kSubchannelShift = 13;
inline constexpr uint32_t kSubchannelMask = 0x7;
inline constexpr uint32_t kMethodMask = 0xfff;  // method address >> 2
inline constexpr uint32_t kTertOpShift = 16;
inline constexpr uint32_t kTertOpMask = 0x3;
inline constexpr uint32_t kSubchannels = 8;

enum class SecOp : uint8_t {
  kGrp0UseTert = 0,     // TERT_OP: 0 legacy increasing, 1-3 sub-device mask operations
  kIncMethod = 1,       // increasing: count data words to method, method+4, ...
  kGrp2UseTert = 2,     // TERT_OP 0: legacy non-increasing
  kNonIncMethod = 3,    // non-increasing: count data words all to one method
  kImmdDataMethod = 4,  // inline: the 13-bit value in bits 16-28 is the data, no words follow
  kOneInc = 5,          // increase-once: first word to method, the rest to method+4
  kReserved6 = 6,
  kEndPbSegment = 7,  // ends the current pushbuffer segment
};

constexpr uint32_t Header(SecOp op, uint32_t subchannel, uint32_t method, uint32_t count) {
  return (uint32_t(op) << kSecOpShift) | ((count & kCountMask) << kCountShift) |
         ((subchannel & kSubchannelMask) << kSubchannelShift) | ((method >> 2) & kMethodMask);
}
constexpr uint32_t IncHeader(uint32_t subc, uint32_t method, uint32_t count) {
  return Header(SecOp::kIncMethod, subc, method, count);
}
constexpr uint32_t NonIncHeader(uint32_t subc, uint32_t method, uint32_t count) {
  return Header(SecOp::kNonIncMethod, subc, method, count);
}
constexpr uint32_t ImmediateHeader(uint32_t subc, uint32_t method, uint32_t value) {
  return Header(SecOp::kImmdDataMethod, subc, method, value);
}
constexpr uint32_t OneIncHeader(uint32_t subc, uint32_t method, uint32_t count) {
  return Header(SecOp::kOneInc, subc, method, count);
}

}  // namespace gpuvm::gf100::gpfifo

#endif  // GPUVM_GPU_HW_GPFIFO_H_
