// The aggregator's Prometheus endpoint: a TCP listener (`--metrics-listen ADDR:PORT`, off by
// default) that answers `GET /metrics` with the figures `gpuvm-ctl metrics` prints, for Prometheus
// to scrape the aggregator directly (docs/OPERATOR.md, docs/SECURITY.md).
//
// One request per connection (http_request.h reads it), then the response and the close. Nothing a
// client does can hold the aggregator or another client:
//  - every socket is non-blocking; a wakeup handles at most 16 events, so a flood waits its turn;
//  - the request head is read up to kMaxHttpHeadBytes, then refused (431); garbage is refused as
//    soon as its first line is complete (400);
//  - each connection has `deadline` from its accept to read its request and take its response,
//    else it is closed (a slowloris, a half-open or a silent peer; also one that does not read);
//  - at most `max_clients` connections are open; a new one closes the oldest, so connections that
//    say nothing cannot lock a scraper out (it sends its request at once);
//  - the figures are rendered at most once per `min_render_interval` (scrapes in between get the
//    same text), so a flood of scrapes cannot make the aggregator's thread render all the time.
//
// Like the control socket it owns an epoll descriptor (fd()) that becomes readable when there is
// something to do — a connection, bytes, room to write, or a deadline (a timerfd in the set) — and
// the aggregator's server loop calls Serve() on its thread (AggregatorServer::AddWatch), so the
// figures are rendered where the VM directory may be read.
//
// Threading: Serve() and the destructor on one thread (the aggregator's server thread); the
// `render` callback is called there.
#ifndef GPUVM_AGGREGATOR_CONTROL_METRICS_HTTP_SERVER_H_
#define GPUVM_AGGREGATOR_CONTROL_METRICS_HTTP_SERVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/os.h"
#include "base/status.h"

namespace gpuvm::control {

// A listening address: `HOST:PORT` with HOST an IPv4 address in dotted form or an IPv6 address in
// brackets (`[::1]:9464`), PORT 0..65535 (0: any free port). Names are not resolved.
struct ListenAddress {
  bool ipv6 = false;
  std::string host;  // without brackets
  uint16_t port = 0;
};
Result<ListenAddress> ParseListenAddress(std::string_view text);

struct MetricsHttpServerOptions {
  size_t max_clients = 16;
  std::chrono::milliseconds deadline = std::chrono::seconds(5);
  std::chrono::milliseconds min_render_interval = std::chrono::milliseconds(100);
};

class MetricsHttpServer {
 public:
  // Binds and listens now: a bad address or a port in use is an error here (gpuvm-aggregator
  // exits 2 with it).
  static Result<std::unique_ptr<MetricsHttpServer>> Create(const ListenAddress& address,
                                                           std::function<std::string()> render,
                                                           MetricsHttpServerOptions options = {});
  ~MetricsHttpServer();

  int fd() const { return epoll_.get(); }
  uint16_t port() const { return port_; }
  // http://HOST:PORT/metrics with the bound port.
  std::string url() const;
  // Accepts, reads, answers and expires whatever is due, without blocking.
  void Serve();

  uint64_t responses() const { return responses_; }  // metrics served (200)
  uint64_t refusals() const { return refusals_; }    // 4xx/5xx answered
  uint64_t dropped() const { return dropped_; }      // closed at the deadline or for room
  size_t open_connections() const { return clients_.size(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Client {
    os::UniqueFd fd;
    Clock::time_point deadline;
    uint64_t order = 0;  // accept order: the lowest is the oldest
    std::string received;
    std::string reply;  // non-empty once answered
    size_t sent = 0;
  };
  MetricsHttpServer(ListenAddress address, std::function<std::string()> render,
                    MetricsHttpServerOptions options)
      : address_(std::move(address)), render_(std::move(render)), options_(options) {}
  void Accept();
  void Read(Client& c);
  void Write(Client& c);
  void Close(int fd);
  void ExpireAndArm();
  const std::string& Rendered();

  const ListenAddress address_;
  const std::function<std::string()> render_;
  const MetricsHttpServerOptions options_;
  os::UniqueFd listen_;
  os::UniqueFd epoll_;
  os::UniqueFd timer_;
  uint16_t port_ = 0;
  std::map<int, Client> clients_;
  uint64_t accepted_ = 0;
  std::string rendered_;
  Clock::time_point rendered_at_{};
  bool have_rendered_ = false;
  uint64_t responses_ = 0;
  uint64_t refusals_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace gpuvm::control

#endif  // GPUVM_AGGREGATOR_CONTROL_METRICS_HTTP_SERVER_H_
