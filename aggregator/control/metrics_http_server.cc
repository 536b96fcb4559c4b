#include "aggregator/control/metrics_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "aggregator/control/http_request.h"

namespace gpuvm::control {
namespace {

constexpr uint64_t kListenTag = ~uint64_t{0};
constexpr uint64_t kTimerTag = ~uint64_t{0} - 1;
constexpr int kEventsPerServe = 16;
// Bytes read and thrown away before closing an answered connection: a client whose unread bytes
// are still queued would get a reset that can destroy the response before it reads it.
constexpr size_t kDrainBytes = 64 << 10;

}  // namespace

Result<ListenAddress> ParseListenAddress(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(
        "--metrics-listen wants ADDRESS:PORT (127.0.0.1:9464, [::1]:9464): " + why + " in '" +
        std::string(text) + "'");
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad("no port");
  ListenAddress a;
  std::string_view host = text.substr(0, colon);
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 2 || host.back() != ']') return bad("an unclosed '['");
    host = host.substr(1, host.size() - 2);
    a.ipv6 = true;
  }
  a.host = std::string(host);
  unsigned char scratch[sizeof(in6_addr)];
  if (::inet_pton(a.ipv6 ? AF_INET6 : AF_INET, a.host.c_str(), scratch) != 1) {
    return bad(a.ipv6 ? "not an IPv6 address" : "not an IPv4 address (IPv6 goes in brackets)");
  }
  const std::string_view port = text.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return bad("not a port number");
  }
  const unsigned long n = std::stoul(std::string(port));
  if (n > 65535) return bad("a port past 65535");
  a.port = static_cast<uint16_t>(n);
  return a;
}

Result<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Create(
    const ListenAddress& address, std::function<std::string()> render,
    MetricsHttpServerOptions options) {
  if (!render) return Status::InvalidArgument("metrics server needs its figures");
  if (options.max_clients == 0) return Status::InvalidArgument("metrics server needs a slot");
  std::unique_ptr<MetricsHttpServer> s(new MetricsHttpServer(address, std::move(render), options));
  const int family = address.ipv6 ? AF_INET6 : AF_INET;
  s->listen_ = os::UniqueFd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s->listen_.valid()) return Status::FromErrno(errno, "socket");
  const int one = 1;
  // A restarted aggregator binds again while its last connections sit in TIME_WAIT.
  (void)::setsockopt(s->listen_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage storage{};
  socklen_t length = 0;
  if (address.ipv6) {
    (void)::setsockopt(s->listen_.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(address.port);
    if (::inet_pton(AF_INET6, address.host.c_str(), &in6->sin6_addr) != 1) {
      return Status::InvalidArgument("not an IPv6 address: " + address.host);
    }
    length = sizeof *in6;
  } else {
    auto* in = reinterpret_cast<sockaddr_in*>(&storage);
    in->sin_family = AF_INET;
    in->sin_port = htons(address.port);
    if (::inet_pton(AF_INET, address.host.c_str(), &in->sin_addr) != 1) {
      return Status::InvalidArgument("not an IPv4 address: " + address.host);
    }
    length = sizeof *in;
  }
  const std::string where =
      (address.ipv6 ? "[" + address.host + "]" : address.host) + ":" + std::to_string(address.port);
  if (::bind(s->listen_.get(), reinterpret_cast<sockaddr*>(&storage), length) != 0) {
    return Status::FromErrno(errno, "cannot listen on " + where);
  }
  if (::listen(s->listen_.get(), 64) != 0) {
    return Status::FromErrno(errno, "cannot listen on " + where);
  }
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof bound;
  if (::getsockname(s->listen_.get(), reinterpret_cast<sockaddr*>(&bound), &bound_length) != 0) {
    return Status::FromErrno(errno, "getsockname");
  }
  s->port_ = ntohs(address.ipv6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  s->timer_ = os::UniqueFd(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  if (!s->timer_.valid()) return Status::FromErrno(errno, "timerfd_create");
  s->epoll_ = os::UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!s->epoll_.valid()) return Status::FromErrno(errno, "epoll_create1");
  for (const auto& [fd, tag] :
       {std::pair{s->listen_.get(), kListenTag}, std::pair{s->timer_.get(), kTimerTag}}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    if (::epoll_ctl(s->epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      return Status::FromErrno(errno, "epoll_ctl");
    }
  }
  return s;
}

MetricsHttpServer::~MetricsHttpServer() = default;

std::string MetricsHttpServer::url() const {
  return "http://" + (address_.ipv6 ? "[" + address_.host + "]" : address_.host) + ":" +
         std::to_string(port_) + "/metrics";
}

void MetricsHttpServer::Serve() {
  epoll_event events[kEventsPerServe];
  const int n = ::epoll_wait(epoll_.get(), events, kEventsPerServe, 0);
  bool accepting = false;
  for (int i = 0; i < n; ++i) {
    const uint64_t tag = events[i].data.u64;
    if (tag == kListenTag) {
      accepting = true;
    } else if (tag == kTimerTag) {
      uint64_t expirations;
      (void)::read(timer_.get(), &expirations, sizeof expirations);
    } else if (auto it = clients_.find(static_cast<int>(tag)); it != clients_.end()) {
      if (it->second.reply.empty()) {
        Read(it->second);
      } else {
        Write(it->second);
      }
    }
  }
  // Requests already in are served before new connections can push their senders out.
  if (accepting) Accept();
  ExpireAndArm();
}

void MetricsHttpServer::Accept() {
  for (int i = 0; i < kEventsPerServe; ++i) {
    os::UniqueFd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd.valid()) return;  // nothing more (or out of descriptors: the next wakeup retries)
    if (clients_.size() >= options_.max_clients) {
      auto oldest = std::min_element(clients_.begin(), clients_.end(), [](auto& a, auto& b) {
        return a.second.order < b.second.order;
      });
      ++dropped_;
      Close(oldest->first);
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = static_cast<uint64_t>(fd.get());
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd.get(), &ev) != 0) continue;
    const int key = fd.get();
    Client& c = clients_[key];
    c.fd = std::move(fd);
    c.deadline = Clock::now() + options_.deadline;
    c.order = ++accepted_;
    Read(c);  // a scraper's request is often here already
  }
}

void MetricsHttpServer::Read(Client& c) {
  const int fd = c.fd.get();
  bool closed = false;
  // The verdict only changes when a line is completed or the limit passed: a client trickling its
  // head a byte at a time costs one judgement of it per line, not per byte.
  bool judge = false;
  // Never more than one byte past the limit: that is enough to refuse.
  while (c.received.size() <= kMaxHttpHeadBytes) {
    char buffer[4096];
    const size_t want = std::min(sizeof buffer, kMaxHttpHeadBytes + 1 - c.received.size());
    const ssize_t got = ::recv(fd, buffer, want, MSG_DONTWAIT);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (got <= 0) {
      closed = true;
      break;
    }
    c.received.append(buffer, static_cast<size_t>(got));
    judge |= std::memchr(buffer, '\n', static_cast<size_t>(got)) != nullptr;
  }
  judge |= c.received.size() > kMaxHttpHeadBytes;
  const HttpVerdict verdict = judge ? ReadHttpRequest(c.received) : HttpVerdict{};
  if (verdict.kind == HttpVerdict::Kind::kNeedMore) {
    if (closed) Close(fd);  // gone before its request was whole: nothing to answer
    return;
  }
  if (verdict.kind == HttpVerdict::Kind::kServeMetrics) {
    ++responses_;
    c.reply = HttpResponse(200, kPrometheusContentType, Rendered(), verdict.head);
  } else {
    ++refusals_;
    c.reply = HttpRefusal(verdict);
  }
  c.received.clear();
  epoll_event ev{};
  ev.events = EPOLLOUT;
  ev.data.u64 = static_cast<uint64_t>(fd);
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev) != 0) {
    Close(fd);
    return;
  }
  Write(c);
}

void MetricsHttpServer::Write(Client& c) {
  const int fd = c.fd.get();
  while (c.sent < c.reply.size()) {
    const ssize_t sent =
        ::send(fd, c.reply.data() + c.sent, c.reply.size() - c.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // EPOLLOUT brings it back
    if (sent <= 0) {
      Close(fd);
      return;
    }
    c.sent += static_cast<size_t>(sent);
  }
  // Connection: close. What the client still sent (a body, the rest of an oversize head) is read
  // away first, as far as it is here, so the close is a FIN rather than a reset.
  (void)::shutdown(fd, SHUT_WR);
  for (size_t drained = 0; drained < kDrainBytes;) {
    char buffer[4096];
    const ssize_t got = ::recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (got <= 0) break;
    drained += static_cast<size_t>(got);
  }
  Close(fd);
}

void MetricsHttpServer::Close(int fd) {
  (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  clients_.erase(fd);
}

void MetricsHttpServer::ExpireAndArm() {
  const Clock::time_point now = Clock::now();
  std::vector<int> late;
  Clock::time_point earliest = Clock::time_point::max();
  for (const auto& [fd, c] : clients_) {
    if (c.deadline <= now) {
      late.push_back(fd);
    } else {
      earliest = std::min(earliest, c.deadline);
    }
  }
  for (int fd : late) {
    ++dropped_;
    Close(fd);
  }
  itimerspec when{};  // all zero: disarmed
  if (!clients_.empty()) {
    // Relative, at least 1 ms (a zero it_value would disarm it).
    const auto wait = std::max<Clock::duration>(earliest - now, std::chrono::milliseconds(1));
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
    when.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    when.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  }
  (void)::timerfd_settime(timer_.get(), 0, &when, nullptr);
}

const std::string& MetricsHttpServer::Rendered() {
  const Clock::time_point now = Clock::now();
  if (!have_rendered_ || now - rendered_at_ >= options_.min_render_interval) {
    rendered_ = render_();
    rendered_at_ = now;
    have_rendered_ = true;
  }
  return rendered_;
}

}  // namespace gpuvm::control
