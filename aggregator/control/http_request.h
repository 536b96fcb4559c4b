// The HTTP/1.x request reader and responder of the aggregator's metrics endpoint
// (metrics_http_server.h): what a client sent so far in, a verdict out — wait for more, serve the
// metrics, or refuse with a status — and the bytes of a response.
//
// Why our own and not a library: the endpoint has one route (GET or HEAD /metrics), answers one
// request per connection and closes; that is a request line, a header block under a size limit and
// a fixed response, a few dozen lines. The HTTP servers Debian packages for C and C++
// (libmicrohttpd, civetweb, which prometheus-cpp's exposer embeds) would add a dependency, and
// threads and an event loop of their own, to the process that owns the GPU, for one route. Being
// small, all of it is fuzzed (fuzz/http_request_fuzz.cc).
//
// What is accepted (RFC 9112, strictly, since only Prometheus and curl need to be understood): a
// request line `METHOD SP /path[?query] SP HTTP/1.0|HTTP/1.1`, header lines `name: value` (name a
// token, no control characters but tab), lines ending in CRLF or a bare LF, a Host header for
// HTTP/1.1, the whole head within kMaxHttpHeadBytes. A body is never read (we close after
// answering). Refusals: 400 (malformed, no Host), 404 (another path), 405 (another method, with
// Allow: GET, HEAD), 431 (head too long), 505 (another HTTP version). A refusal is decided as soon
// as the request line is complete when that line is already wrong, so garbage is answered at once.
//
// Threading: pure functions.
#ifndef GPUVM_AGGREGATOR_CONTROL_HTTP_REQUEST_H_
#define GPUVM_AGGREGATOR_CONTROL_HTTP_REQUEST_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace gpuvm::control {

inline constexpr size_t kMaxHttpHeadBytes = 8192;
// The Prometheus text exposition format's media type (client libraries send the same).
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

struct HttpVerdict {
  enum class Kind { kNeedMore, kServeMetrics, kRefuse };
  Kind kind = Kind::kNeedMore;
  int status = 0;     // kServeMetrics: 200; kRefuse: 400, 404, 405, 431 or 505
  bool head = false;  // a HEAD request: headers only
  std::string why;    // kRefuse: a short reason, sent as the body
};

// Judges the bytes a client has sent so far (from the start of its connection).
HttpVerdict ReadHttpRequest(std::string_view received);

// A whole response: status line, Content-Type and Content-Length of `body`, Connection: close
// (and Allow for 405), then the body unless `head`.
std::string HttpResponse(int status, std::string_view content_type, std::string_view body,
                         bool head = false);
// The response for a refusal verdict (text/plain, the reason as body).
std::string HttpRefusal(const HttpVerdict& verdict);

}  // namespace gpuvm::control

#endif  // GPUVM_AGGREGATOR_CONTROL_HTTP_REQUEST_H_
