#include "aggregator/control/metrics_http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "aggregator/control/http_request.h"

namespace gpuvm::control {
namespace {

// Serves on a thread of its own (as the aggregator's server loop would) until destroyed; the
// server's counters are read after that.
class Serving {
 public:
  explicit Serving(MetricsHttpServer* server)
      : thread_([this, server] {
          while (!stop_) {
            pollfd p{server->fd(), POLLIN, 0};
            if (::poll(&p, 1, 10) > 0) server->Serve();
          }
        }) {}
  ~Serving() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::unique_ptr<MetricsHttpServer> Start(std::function<std::string()> render,
                                         MetricsHttpServerOptions options = {}) {
  Result<ListenAddress> address = ParseListenAddress("127.0.0.1:0");
  EXPECT_TRUE(address.ok());
  Result<std::unique_ptr<MetricsHttpServer>> server =
      MetricsHttpServer::Create(*address, std::move(render), options);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(*server) : nullptr;
}

os::UniqueFd Connect(uint16_t port) {
  os::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  timeval limit{10, 0};  // a hung server fails the test instead of hanging it
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  return fd;
}

// Everything the server sends until it closes ("<timeout>" appended if it does not).
std::string ReadToClose(int fd) {
  std::string all;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n == 0) return all;
    if (n < 0) return all + (errno == EAGAIN ? "<timeout>" : "<error>");
    all.append(buffer, static_cast<size_t>(n));
  }
}

std::string Exchange(uint16_t port, std::string_view request) {
  os::UniqueFd fd = Connect(port);
  EXPECT_EQ(::send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  return ReadToClose(fd.get());
}

constexpr char kGet[] = "GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n";

TEST(MetricsHttpServerTest, ServesTheFiguresAndCloses) {
  std::atomic<int> renders{0};
  auto server = Start([&] { return "gpuvm_vms " + std::to_string(++renders) + "\n"; },
                      {.min_render_interval = std::chrono::milliseconds(0)});
  ASSERT_NE(server, nullptr);
  EXPECT_NE(server->port(), 0);
  EXPECT_EQ(server->url(), "http://127.0.0.1:" + std::to_string(server->port()) + "/metrics");
  {
    Serving serving(server.get());
    EXPECT_EQ(Exchange(server->port(), kGet),
              HttpResponse(200, kPrometheusContentType, "gpuvm_vms 1\n"));
    EXPECT_EQ(Exchange(server->port(), kGet),
              HttpResponse(200, kPrometheusContentType, "gpuvm_vms 2\n"));
    EXPECT_EQ(Exchange(server->port(), "HEAD /metrics HTTP/1.0\r\n\r\n"),
              HttpResponse(200, kPrometheusContentType, "gpuvm_vms 3\n", true));
  }
  EXPECT_EQ(server->responses(), 3u);
  EXPECT_EQ(server->open_connections(), 0u);
}

TEST(MetricsHttpServerTest, RendersAtMostOncePerInterval) {
  std::atomic<int> renders{0};
  auto server = Start([&] { return "n " + std::to_string(++renders) + "\n"; },
                      {.min_render_interval = std::chrono::hours(1)});
  ASSERT_NE(server, nullptr);
  Serving serving(server.get());
  for (int i = 0; i < 3; ++i) {
    EXPECT_NE(Exchange(server->port(), kGet).find("\r\n\r\nn 1\n"), std::string::npos);
  }
  EXPECT_EQ(renders, 1);
}

TEST(MetricsHttpServerTest, RefusesEverythingElse) {
  auto server = Start([] { return std::string("x 1\n"); });
  ASSERT_NE(server, nullptr);
  {
    Serving serving(server.get());
    EXPECT_EQ(Exchange(server->port(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n").substr(0, 12),
              "HTTP/1.1 404");
    EXPECT_EQ(Exchange(server->port(), "POST /metrics HTTP/1.0\r\n\r\n").substr(0, 12),
              "HTTP/1.1 405");
    // Garbage is answered at once, while the connection stays open on the client's side.
    EXPECT_EQ(Exchange(server->port(), "\x01\x02 garbage\n").substr(0, 12), "HTTP/1.1 400");
    // An oversize head: refused once past the limit; the rest is read away, so the client still
    // reads the refusal rather than a reset.
    const std::string huge = "GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'a');
    EXPECT_EQ(Exchange(server->port(), huge).substr(0, 12), "HTTP/1.1 431");
    // A client that leaves before its request is whole is just closed.
    {
      os::UniqueFd fd = Connect(server->port());
      ASSERT_EQ(::send(fd.get(), "GET /met", 8, 0), 8);
      ::shutdown(fd.get(), SHUT_WR);
      EXPECT_EQ(ReadToClose(fd.get()), "");
    }
    EXPECT_EQ(Exchange(server->port(), kGet).substr(0, 12), "HTTP/1.1 200");
  }
  EXPECT_EQ(server->refusals(), 4u);
  EXPECT_EQ(server->responses(), 1u);
}

TEST(MetricsHttpServerTest, DropsSilentAndSlowClientsAtTheirDeadline) {
  auto server =
      Start([] { return std::string("x 1\n"); }, {.deadline = std::chrono::milliseconds(500)});
  ASSERT_NE(server, nullptr);
  {
    Serving serving(server.get());
    os::UniqueFd silent = Connect(server->port());
    os::UniqueFd slow = Connect(server->port());
    // A slowloris: a byte every 50 ms, never the end of its head, until the server hangs up.
    const std::string trickle = "GET /metrics HTTP/1.1\r\nX: " + std::string(1000, 'a');
    for (size_t i = 0; i < trickle.size(); ++i) {
      pollfd p{slow.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) != 0) break;  // closed (a send racing the close may see a reset)
      (void)::send(slow.get(), &trickle[i], 1, MSG_NOSIGNAL);
    }
    EXPECT_EQ(ReadToClose(silent.get()), "");  // closed by the server, no answer
    const std::string slow_got = ReadToClose(slow.get());
    EXPECT_TRUE(slow_got == "" || slow_got == "<error>") << slow_got;
    // Meanwhile and after, scrapes are served.
    EXPECT_EQ(Exchange(server->port(), kGet).substr(0, 12), "HTTP/1.1 200");
  }
  EXPECT_EQ(server->dropped(), 2u);
  EXPECT_EQ(server->open_connections(), 0u);
}

TEST(MetricsHttpServerTest, NewConnectionsPushOutTheOldest) {
  auto server = Start([] { return std::string("x 1\n"); }, {.max_clients = 3});
  ASSERT_NE(server, nullptr);
  {
    Serving serving(server.get());
    std::vector<os::UniqueFd> idle;
    for (int i = 0; i < 3; ++i) idle.push_back(Connect(server->port()));
    // The scrape takes the oldest idle connection's slot, and is answered.
    EXPECT_EQ(Exchange(server->port(), kGet).substr(0, 12), "HTTP/1.1 200");
    EXPECT_EQ(ReadToClose(idle[0].get()), "");
  }
  EXPECT_EQ(server->dropped(), 1u);
  EXPECT_EQ(server->responses(), 1u);
}

TEST(MetricsHttpServerTest, BindErrorsAreErrors) {
  auto first = Start([] { return std::string(); });
  ASSERT_NE(first, nullptr);
  Result<ListenAddress> taken = ParseListenAddress("127.0.0.1:" + std::to_string(first->port()));
  ASSERT_TRUE(taken.ok());
  Result<std::unique_ptr<MetricsHttpServer>> second =
      MetricsHttpServer::Create(*taken, [] { return std::string(); });
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("127.0.0.1:" + std::to_string(first->port())),
            std::string::npos)
      << second.status().ToString();
  // An address that is not this host's.
  Result<ListenAddress> foreign = ParseListenAddress("192.0.2.1:9464");  // TEST-NET-1
  ASSERT_TRUE(foreign.ok());
  EXPECT_FALSE(MetricsHttpServer::Create(*foreign, [] { return std::string(); }).ok());
}

TEST(MetricsHttpServerTest, ParsesListenAddresses) {
  Result<ListenAddress> a = ParseListenAddress("127.0.0.1:9464");
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->ipv6);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 9464);
  a = ParseListenAddress("[::1]:0");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->ipv6);
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 0);
  EXPECT_TRUE(ParseListenAddress("0.0.0.0:65535").ok());
  for (const char* bad : {"", "9464", ":9464", "localhost:9464", "127.0.0.1", "127.0.0.1:",
                          "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:94a", "::1:9464",
                          "[::1:9464", "[127.0.0.1]:9464", "1.2.3:80", "127.0.0.1:0000009"}) {
    Result<ListenAddress> r = ParseListenAddress(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("ADDRESS:PORT"), std::string::npos);
    }
  }
}

TEST(MetricsHttpServerTest, ServesOverIpv6Loopback) {
  Result<ListenAddress> address = ParseListenAddress("[::1]:0");
  ASSERT_TRUE(address.ok());
  Result<std::unique_ptr<MetricsHttpServer>> server =
      MetricsHttpServer::Create(*address, [] { return std::string("x 1\n"); });
  if (!server.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << server.status().ToString();
  EXPECT_EQ((*server)->url(), "http://[::1]:" + std::to_string((*server)->port()) + "/metrics");
  Serving serving(server->get());
  os::UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons((*server)->port());
  a.sin6_addr = in6addr_loopback;
  ASSERT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::send(fd.get(), kGet, sizeof kGet - 1, 0), static_cast<ssize_t>(sizeof kGet - 1));
  EXPECT_EQ(ReadToClose(fd.get()).substr(0, 12), "HTTP/1.1 200");
}

}  // namespace
}  // namespace gpuvm::control
