#include "gpu/sim/pushbuf.h"

#include "gpu/hw/gpfifo.h"

namespace gpuvm::sim {

namespace gp = gf100::gpfifo;

MethodDecoder::Result MethodDecoder::Feed(uint32_t word, MethodCall* call) {
  if (remaining_ != 0) {
    call->subchannel = subchannel_;
    call->method = method_;
    call->data = word;
    --remaining_;
    switch (mode_) {
      case Mode::kInc:
        method_ = (method_ + 4) & (gp::kMethodMask << 2);
        break;
      case Mode::kNonInc:
        break;
      case Mode::kOneInc:
        method_ = (method_ + 4) & (gp::kMethodMask << 2);
        mode_ = Mode::kNonInc;
        break;
    }
    return Result::kMethod;
  }
  const auto op = gp::SecOp(word >> gp::kSecOpShift);
  const uint32_t subchannel = (word >> gp::kSubchannelShift) & gp::kSubchannelMask;
  const uint32_t method = (word & gp::kMethodMask) << 2;
  const uint32_t count = (word >> gp::kCountShift) & gp::kCountMask;
  switch (op) {
    case gp::SecOp::kIncMethod:
    case gp::SecOp::kNonIncMethod:
    case gp::SecOp::kOneInc:
      mode_ = op == gp::SecOp::kIncMethod      ? Mode::kInc
              : op == gp::SecOp::kNonIncMethod ? Mode::kNonInc
                                               : Mode::kOneInc;
      subchannel_ = subchannel;
      method_ = method;
      remaining_ = count;  // a count of 0 is a header with no data: nothing happens
      return Result::kNone;
    case gp::SecOp::kImmdDataMethod:
      call->subchannel = subchannel;
      call->method = method;
      call->data = count;  // the 13-bit immediate value
      return Result::kMethod;
    case gp::SecOp::kGrp0UseTert:
      // TERT_OP 1-3 manage the SLI sub-device mask; with one GPU every method applies, so they do
      // nothing. TERT_OP 0 is the old (pre-Fermi) increasing header: illegal with the command types
      // nouveau enables (RAMFC 0x9c FEATURE_ENABLE.CMD_TYPES = NEW).
      if (((word >> gp::kTertOpShift) & gp::kTertOpMask) != 0) return Result::kNone;
      return Result::kIllegal;
    case gp::SecOp::kGrp2UseTert:  // old non-increasing header: see above
    case gp::SecOp::kReserved6:
      return Result::kIllegal;
    case gp::SecOp::kEndPbSegment:
      return Result::kEndSegment;
  }
  return Result::kIllegal;
}

}  // namespace gpuvm::sim
