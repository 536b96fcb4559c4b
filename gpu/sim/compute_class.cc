#include "gpu/sim/compute_class.h"

#include "gpu/hw/classes.h"

namespace gpuvm::sim {

namespace cp = gf100::compute;
using gf100::pfifo::Engine;

namespace {
uint64_t SetHigh(uint64_t v, uint32_t data) {
  return (v & 0xffffffffull) | (uint64_t(data & 0xff) << 32);
}
uint64_t SetLow(uint64_t v, uint32_t data) { return (v & ~0xffffffffull) | data; }
}  // namespace

MethodStatus ComputeObject::Method(uint32_t method, uint32_t data, ObjectContext* ctx,
                                   bool* ignored) {
  if (method >= cp::kCbData && method < cp::kCbData + 4 * cp::kCbDataCount) {
    return UploadConstant(data, ctx);
  }
  switch (method) {
    case cp::kGridDimYX:
      launch_.grid_x = data & 0xffff;
      launch_.grid_y = data >> 16;
      return MethodStatus::kDone;
    case cp::kGridDimZ:
      launch_.grid_z = data;
      return MethodStatus::kDone;
    case cp::kBlockDimYX:
      launch_.block_x = data & 0xffff;
      launch_.block_y = data >> 16;
      return MethodStatus::kDone;
    case cp::kBlockDimZ:
      launch_.block_z = data;
      return MethodStatus::kDone;
    case cp::kSharedSize:
      launch_.shared_size = data;
      return MethodStatus::kDone;
    case cp::kSharedBase:
      launch_.shared_base = data;
      return MethodStatus::kDone;
    case cp::kLocalBase:
      launch_.local_base = data;
      return MethodStatus::kDone;
    case cp::kCodeAddressHigh:
      launch_.code_address = SetHigh(launch_.code_address, data);
      return MethodStatus::kDone;
    case cp::kCodeAddressLow:
      launch_.code_address = SetLow(launch_.code_address, data);
      return MethodStatus::kDone;
    case cp::kCpStartId:
      launch_.entry_offset = data;
      return MethodStatus::kDone;
    case cp::kTempAddressHigh:
      launch_.temp_address = SetHigh(launch_.temp_address, data);
      return MethodStatus::kDone;
    case cp::kTempAddressLow:
      launch_.temp_address = SetLow(launch_.temp_address, data);
      return MethodStatus::kDone;
    case cp::kTempSizeHigh:
      launch_.temp_size = (launch_.temp_size & 0xffffffffull) | (uint64_t(data) << 32);
      return MethodStatus::kDone;
    case cp::kTempSizeLow:
      launch_.temp_size = SetLow(launch_.temp_size, data);
      return MethodStatus::kDone;
    case cp::kCbSize:
      cb_size_ = data;
      return MethodStatus::kDone;
    case cp::kCbAddressHigh:
      cb_address_ = SetHigh(cb_address_, data);
      return MethodStatus::kDone;
    case cp::kCbAddressLow:
      cb_address_ = SetLow(cb_address_, data);
      return MethodStatus::kDone;
    case cp::kCbPos:
      cb_pos_ = data;
      return MethodStatus::kDone;
    case cp::kCbBind: {
      const uint32_t index = (data >> cp::kCbBindIndexShift) & cp::kCbBindIndexMask;
      if (index >= ComputeLaunch::kConstBuffers) {
        return ctx->Fail(
            ChannelError::Kind::kIllegalMethod,
            "CB_BIND index " + std::to_string(index) + " is past the 16 constant buffers");
      }
      auto& cb = launch_.const_buffers[index];
      cb.valid = (data & cp::kCbBindValid) != 0;
      cb.address = cb_address_;
      cb.size = cb_size_;
      return MethodStatus::kDone;
    }
    case cp::kFlush:
      if (data & cp::kFlushCode) ctx->FlushCode();
      return MethodStatus::kDone;
    case cp::kWatchdogTimer:
      watchdog_ = data;  // (our choice) accepted and ignored: slices bound every job anyway
      return MethodStatus::kDone;
    case cp::kLaunch:
      return ctx->StartCompute(launch_);
    case cp::kQueryAddressHigh:
      query_address_ = SetHigh(query_address_, data);
      return MethodStatus::kDone;
    case cp::kQueryAddressLow:
      query_address_ = SetLow(query_address_, data);
      return MethodStatus::kDone;
    case cp::kQuerySequence:
      query_sequence_ = data;
      return MethodStatus::kDone;
    case cp::kQueryGet: {
      // Everything the channel issued before this method has finished: methods run in order and a
      // channel does not go past a running grid.
      const Report report{(data & cp::kQueryGetShort) ? Report::Size::kShort : Report::Size::kLong,
                          query_address_, query_sequence_};
      if (ctx->WriteReport(kComputeSource, report) == MethodStatus::kError) {
        return MethodStatus::kError;
      }
      if ((data & cp::kQueryGetIntr) || (data & 3) == 3) ctx->RaiseNonStall(Engine::kPgraph);
      return MethodStatus::kDone;
    }
  }
  *ignored = true;  // texture, barrier and cache state we do not model
  return MethodStatus::kDone;
}

MethodStatus ComputeObject::UploadConstant(uint32_t data, ObjectContext* ctx) {
  // (our choice) an upload past CB_SIZE is refused: the driver described a smaller buffer.
  if (uint64_t(cb_pos_) + 4 > cb_size_) {
    return ctx->Fail(ChannelError::Kind::kIllegalMethod,
                     "CB_DATA upload at position " + std::to_string(cb_pos_) + " is past CB_SIZE " +
                         std::to_string(cb_size_));
  }
  MemoryFault fault;
  if (!ctx->vm().Write(cb_address_ + cb_pos_, &data, 4, kComputeSource.privileged, &fault)) {
    return ctx->Fault(kComputeSource, fault);
  }
  cb_pos_ += 4;
  return MethodStatus::kDone;
}

}  // namespace gpuvm::sim
