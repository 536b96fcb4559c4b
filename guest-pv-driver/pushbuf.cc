#include "guest-pv-driver/pushbuf.h"

#include <algorithm>

#include "gpu/hw/gpfifo.h"

namespace gpuvm::guest {

namespace gp = gf100::gpfifo;

PushBuffer& PushBuffer::Inc(uint32_t subchannel, uint32_t method, std::span<const uint32_t> data) {
  while (!data.empty()) {
    const size_t n = std::min<size_t>(data.size(), gp::kCountMask);
    words_.push_back(gp::IncHeader(subchannel, method, uint32_t(n)));
    words_.insert(words_.end(), data.begin(), data.begin() + n);
    data = data.subspan(n);
    method += uint32_t(n) * 4;
  }
  return *this;
}

PushBuffer& PushBuffer::NonInc(uint32_t subchannel, uint32_t method,
                               std::span<const uint32_t> data) {
  while (!data.empty()) {
    const size_t n = std::min<size_t>(data.size(), gp::kCountMask);
    words_.push_back(gp::NonIncHeader(subchannel, method, uint32_t(n)));
    words_.insert(words_.end(), data.begin(), data.begin() + n);
    data = data.subspan(n);
  }
  return *this;
}

PushBuffer& PushBuffer::OneInc(uint32_t subchannel, uint32_t method,
                               std::span<const uint32_t> data) {
  if (data.empty()) return *this;
  if (data.size() > gp::kCountMask) {
    // The first header takes the first word to `method`; what does not fit continues non-increasing
    // at method + 4.
    OneInc(subchannel, method, data.first(gp::kCountMask));
    return NonInc(subchannel, method + 4, data.subspan(gp::kCountMask));
  }
  words_.push_back(gp::OneIncHeader(subchannel, method, uint32_t(data.size())));
  words_.insert(words_.end(), data.begin(), data.end());
  return *this;
}

PushBuffer& PushBuffer::Method(uint32_t subchannel, uint32_t method, uint32_t value) {
  if (value <= gp::kCountMask) {
    words_.push_back(gp::ImmediateHeader(subchannel, method, value));
  } else {
    words_.push_back(gp::IncHeader(subchannel, method, 1));
    words_.push_back(value);
  }
  return *this;
}

}  // namespace gpuvm::guest
