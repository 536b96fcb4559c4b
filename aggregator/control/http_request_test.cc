#include "aggregator/control/http_request.h"

#include <gtest/gtest.h>

#include <string>

namespace gpuvm::control {
namespace {

using Kind = HttpVerdict::Kind;
using namespace std::string_literals;

const char kPrometheusScrape[] =
    "GET /metrics HTTP/1.1\r\n"
    "Host: 127.0.0.1:9464\r\n"
    "User-Agent: Prometheus/2.45.0\r\n"
    "Accept: "
    "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n"
    "Accept-Encoding: gzip\r\n"
    "X-Prometheus-Scrape-Timeout-Seconds: 10\r\n"
    "\r\n";

int StatusOf(std::string_view request) {
  const HttpVerdict v = ReadHttpRequest(request);
  return v.kind == Kind::kNeedMore ? 0 : v.status;
}

TEST(HttpRequestTest, ServesGetAndHeadOfMetrics) {
  HttpVerdict v = ReadHttpRequest(kPrometheusScrape);
  EXPECT_EQ(v.kind, Kind::kServeMetrics);
  EXPECT_EQ(v.status, 200);
  EXPECT_FALSE(v.head);
  v = ReadHttpRequest("HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(v.kind, Kind::kServeMetrics);
  EXPECT_TRUE(v.head);
  // HTTP/1.0 needs no Host; bare LF line ends; a query (Prometheus' `params`) is ignored; header
  // names in any case, values with tabs and obs-text.
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.0\n\n"), 200);
  EXPECT_EQ(StatusOf("GET /metrics?name[]=x HTTP/1.1\r\nhOsT: a\r\n\r\n"), 200);
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.1\r\nHost:\tx\r\nX-A: caf\xc3\xa9\r\n\r\n"), 200);
  // Bytes after the head (a body, a pipelined request) are not ours to read.
  EXPECT_EQ(StatusOf(std::string(kPrometheusScrape) + "GET / HTTP/1.1\r\n"), 200);
}

TEST(HttpRequestTest, WaitsForTheWholeHead) {
  const std::string scrape = kPrometheusScrape;
  for (size_t n = 0; n < scrape.size(); ++n) {
    EXPECT_EQ(ReadHttpRequest(scrape.substr(0, n)).kind, Kind::kNeedMore) << n;
  }
  EXPECT_EQ(ReadHttpRequest(scrape).kind, Kind::kServeMetrics);
}

TEST(HttpRequestTest, RefusesOtherPathsAndMethods) {
  EXPECT_EQ(StatusOf("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), 404);
  EXPECT_EQ(StatusOf("GET /metricsx HTTP/1.1\r\nHost: x\r\n\r\n"), 404);
  EXPECT_EQ(StatusOf("GET http://x/metrics HTTP/1.1\r\nHost: x\r\n\r\n"), 404);
  EXPECT_EQ(StatusOf("GET /Metrics HTTP/1.1\r\nHost: x\r\n\r\n"), 404);
  EXPECT_EQ(StatusOf("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"), 405);
  EXPECT_EQ(StatusOf("get /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), 405);  // methods are case-exact
  EXPECT_EQ(StatusOf("DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), 405);
  const std::string r = HttpRefusal(ReadHttpRequest("PUT /metrics HTTP/1.0\r\n\r\n"));
  EXPECT_NE(r.find("\r\nAllow: GET, HEAD\r\n"), std::string::npos) << r;
}

TEST(HttpRequestTest, RefusesMalformedRequestsAtTheFirstBadLine) {
  // The request line alone decides: no need to wait for a head that may never end.
  EXPECT_EQ(StatusOf("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n"s), 400);  // TLS, then a LF
  EXPECT_EQ(StatusOf("hello\r\n"), 400);
  EXPECT_EQ(StatusOf("\r\n"), 400);
  EXPECT_EQ(StatusOf("GET  /metrics HTTP/1.1\r\n"), 400);
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.1 \r\n"), 400);
  EXPECT_EQ(StatusOf("GET /metrics\r\n"), 400);  // HTTP/0.9
  EXPECT_EQ(StatusOf("G(T /metrics HTTP/1.1\r\n"), 400);
  EXPECT_EQ(StatusOf("GET /me\x01trics HTTP/1.1\r\n"), 400);
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.x\r\n"), 400);
  EXPECT_EQ(StatusOf("GET /metrics HTTPS/1.1\r\n"), 400);
  EXPECT_EQ(StatusOf("GET /metrics HTTP/2.0\r\n"), 505);
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.2\r\n"), 505);
  // Header lines, each as soon as it is complete.
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.1\r\nno colon\r\n"), 400);
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.1\r\nHost : x\r\n"), 400);
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.1\r\n: x\r\n"), 400);
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.1\r\nHost: x\r\n folded\r\n"), 400);
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.1\r\nX: a\0b\r\n"s), 400);
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.1\r\nX: a\rb\r\n"), 400);
  // HTTP/1.1 wants exactly one Host.
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(StatusOf("GET /metrics HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
}

TEST(HttpRequestTest, RefusesAHeadPastTheLimit) {
  // One long line without its end, a long first line, many header lines: each refused once the
  // limit is passed, without waiting for an end.
  EXPECT_EQ(StatusOf(std::string(kMaxHttpHeadBytes, 'G')), 0);
  EXPECT_EQ(StatusOf(std::string(kMaxHttpHeadBytes + 1, 'G')), 431);
  EXPECT_EQ(StatusOf("GET /" + std::string(kMaxHttpHeadBytes, 'm') + " HTTP/1.1\r\n"), 431);
  std::string many = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
  while (many.size() <= kMaxHttpHeadBytes) many += "X-Padding: yes\r\n";
  EXPECT_EQ(StatusOf(many), 431);
  EXPECT_EQ(StatusOf(many + "\r\n"), 431);
  // Just within it is served.
  std::string fits = "GET /metrics HTTP/1.1\r\nHost: x\r\nX: ";
  fits += std::string(kMaxHttpHeadBytes - fits.size() - 4, 'a') + "\r\n\r\n";
  ASSERT_EQ(fits.size(), kMaxHttpHeadBytes);
  EXPECT_EQ(StatusOf(fits), 200);
}

TEST(HttpRequestTest, ResponsesSayTheirLengthAndClose) {
  const std::string r = HttpResponse(200, kPrometheusContentType, "gpuvm_vms 1\n");
  EXPECT_EQ(r,
            "HTTP/1.1 200 OK\r\n"
            "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
            "Content-Length: 12\r\n"
            "Connection: close\r\n\r\n"
            "gpuvm_vms 1\n");
  const std::string head = HttpResponse(200, kPrometheusContentType, "gpuvm_vms 1\n", true);
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");
  EXPECT_NE(head.find("Content-Length: 12\r\n"), std::string::npos);
  const std::string refused = HttpRefusal(ReadHttpRequest("GET / HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(refused.substr(0, 24), "HTTP/1.1 404 Not Found\r\n");
  EXPECT_NE(refused.find("only /metrics"), std::string::npos);
}

}  // namespace
}  // namespace gpuvm::control
