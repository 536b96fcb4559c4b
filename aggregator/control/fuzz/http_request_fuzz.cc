// libFuzzer target: arbitrary bytes as what a client of the metrics endpoint sent
// (http_request.h), whole and cut at up to 16 lengths (as reads could have split it). Checked:
// nothing crashes; a verdict is one of the statuses the endpoint answers; nothing but GET or HEAD
// of /metrics is served; once a prefix is decided, every longer input gets the same verdict (so
// what arrives later cannot change an answer already sent); and past the head limit nothing waits.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "aggregator/control/http_request.h"

namespace {

using gpuvm::control::HttpVerdict;

void Check(std::string_view input, const HttpVerdict& v) {
  switch (v.kind) {
    case HttpVerdict::Kind::kNeedMore:
      if (input.size() > gpuvm::control::kMaxHttpHeadBytes) std::abort();
      break;
    case HttpVerdict::Kind::kServeMetrics:
      if (v.status != 200) std::abort();
      if (input.substr(0, v.head ? 13 : 12) != (v.head ? "HEAD /metrics" : "GET /metrics")) {
        std::abort();
      }
      break;
    case HttpVerdict::Kind::kRefuse:
      if (v.status != 400 && v.status != 404 && v.status != 405 && v.status != 431 &&
          v.status != 505) {
        std::abort();
      }
      if (gpuvm::control::HttpRefusal(v).find("\r\nConnection: close\r\n") == std::string::npos) {
        std::abort();
      }
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const HttpVerdict whole = gpuvm::control::ReadHttpRequest(input);
  Check(input, whole);
  // Prefixes at a few cut points (every one would make the fuzzer quadratic).
  for (size_t cut = 0; cut < size; cut += 1 + size / 16) {
    const HttpVerdict part = gpuvm::control::ReadHttpRequest(input.substr(0, cut));
    Check(input.substr(0, cut), part);
    if (part.kind != HttpVerdict::Kind::kNeedMore &&
        (part.kind != whole.kind || part.status != whole.status || part.head != whole.head)) {
      std::abort();
    }
  }
  return 0;
}
