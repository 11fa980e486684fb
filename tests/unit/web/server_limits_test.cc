// The HTTP server against a hostile client (server.h): live streams that
// never end cannot lock the pages and the cache out, idle streams end,
// requests naming a foreign host (DNS rebinding) are refused, and every
// answer carries the headers that keep a browser from being misled.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "http_client.h"
#include "kiln/web/html.h"
#include "kiln/web/server.h"
#include "test_support.h"

namespace kiln::web {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// A stream that never has anything to send (a build that waits forever).
class SilentStream : public BodyStream {
 public:
  Next next(std::string&, size_t) override { return Next::kWait; }
};

class ServerLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router.add("GET", "/", [](const Request&, const RouteParams&) {
      return Response::html("<p>overview</p>");
    });
    router.add("GET", "/nix-cache-info",
               [](const Request&, const RouteParams&) {
                 return Response::text("StoreDir: /nix/store\n");
               });
    router.add("GET", "/build/{id}/log/live",
               [](const Request&, const RouteParams&) {
                 return Response::streamed(std::make_shared<SilentStream>(),
                                           "text/event-stream");
               });
  }
  void start(WebServerConfig cfg = {}) {
    cfg.listen = "127.0.0.1:0";
    server = std::make_unique<WebServer>(cfg, router);
    port = server->port();
  }
  // GET `path` on a new connection; the answer if it came within `limit`.
  std::optional<test::HttpAnswer> getWithin(
      const std::string& path, std::chrono::milliseconds limit,
      const std::string& host = "localhost") {
    test::RawConnection c(port);
    if (!c.send("GET " + path + " HTTP/1.1\r\nHost: " + host +
                "\r\nConnection: close\r\n\r\n"))
      return std::nullopt;
    return c.read(limit);
  }

  Router router;
  std::unique_ptr<WebServer> server;
  int port = 0;
};

// 300 live streams from one address, all held open: a few are served, the
// rest refused at once, and the overview and the cache still answer
// within a second, from the same address too.
TEST_F(ServerLimitsTest, LiveStreamsFromOneClientLeavePagesAndCacheServed) {
  start();
  std::vector<std::unique_ptr<test::RawConnection>> streams;
  for (int i = 0; i < 300; i++) {
    streams.push_back(std::make_unique<test::RawConnection>(port));
    ASSERT_TRUE(streams.back()->send(
        "GET /build/1/log/live HTTP/1.1\r\nHost: localhost\r\n\r\n"));
  }
  int served = 0, refused = 0;
  for (auto& s : streams) {
    auto a = s->read(10s, true);
    ASSERT_TRUE(a);
    if (a->status == 200) {
      served++;
    } else {
      EXPECT_TRUE(a->status == 429 || a->status == 503) << a->status;
      refused++;
    }
  }
  WebServerConfig defaults;
  EXPECT_EQ(served, int(defaults.maxStreamsPerClient));
  EXPECT_EQ(refused, 300 - served);
  EXPECT_EQ(server->streams(), defaults.maxStreamsPerClient);
  for (const char* path : {"/", "/nix-cache-info"}) {
    auto a = getWithin(path, 1000ms);
    ASSERT_TRUE(a) << path << " did not answer within a second";
    EXPECT_EQ(a->status, 200) << path << ": " << a->body;
  }
}

TEST_F(ServerLimitsTest, RefusedStreamsAre429AndClosed) {
  WebServerConfig cfg;
  cfg.maxStreamsPerClient = 1;
  start(cfg);
  test::RawConnection first(port), second(port);
  const std::string live =
      "GET /build/1/log/live HTTP/1.1\r\nHost: localhost\r\n\r\n";
  ASSERT_TRUE(first.send(live));
  ASSERT_EQ(first.read(10s, true)->status, 200);
  ASSERT_TRUE(second.send(live));
  auto a = second.read(10s);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 429);
  EXPECT_THAT(a->body,
              HasSubstr("too many live streams (at most 1 per client"));
  EXPECT_FALSE(a->header("retry-after").empty());
  EXPECT_TRUE(second.closedWithin(10s));
  EXPECT_EQ(server->streams(), 1u);
}

TEST_F(ServerLimitsTest, IdleStreamsEndAfterTheirLifetime) {
  WebServerConfig cfg;
  cfg.streamIdleLifetime = 300ms;
  cfg.streamPoll = 50ms;
  start(cfg);
  test::RawConnection c(port);
  ASSERT_TRUE(
      c.send("GET /build/1/log/live HTTP/1.1\r\nHost: localhost\r\n\r\n"));
  auto a = c.read(10s);  // the whole chunked body, ended by the server
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 200);
  EXPECT_TRUE(c.closedWithin(10s));
  EXPECT_TRUE(test::pollUntil([&] { return server->streams() == 0; }, 10s));
}

TEST_F(ServerLimitsTest, ConnectionsPerClientAreBounded) {
  WebServerConfig cfg;
  cfg.maxConnectionsPerClient = 2;
  start(cfg);
  test::RawConnection a(port), b(port);
  ASSERT_TRUE(test::pollUntil([&] { return server->connections() == 2; }, 10s));
  auto c = getWithin("/", 10s);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, 503);
  EXPECT_THAT(c->body, HasSubstr("too many connections from 127.0.0.1"));
}

// DNS rebinding: a page on evil.example whose name now resolves to the
// farm sends `Host: evil.example`.
TEST_F(ServerLimitsTest, ForeignHostNamesAre421) {
  WebServerConfig cfg;
  cfg.hosts = {"farm.example.org"};
  start(cfg);
  auto evil = getWithin("/", 10s, "evil.example:8470");
  ASSERT_TRUE(evil);
  EXPECT_EQ(evil->status, 421);
  EXPECT_THAT(evil->body, HasSubstr("does not answer for host"));
  for (const char* host :
       {"127.0.0.1:8470", "localhost", "[::1]:80", "farm.example.org",
        "FARM.Example.org.:443", "app.localhost"}) {
    auto a = getWithin("/", 10s, host);
    ASSERT_TRUE(a) << host;
    EXPECT_EQ(a->status, 200) << host;
  }
}

TEST(HostAllowed, AddressesLocalhostAndConfiguredNames) {
  std::vector<std::string> none, farm{"farm.example.org"}, any{"*"};
  EXPECT_TRUE(hostAllowed("", none));
  EXPECT_TRUE(hostAllowed("10.1.2.3", none));
  EXPECT_TRUE(hostAllowed("[2001:db8::1]:8470", none));
  EXPECT_TRUE(hostAllowed("localhost:8470", none));
  EXPECT_FALSE(hostAllowed("farm.example.org", none));
  EXPECT_FALSE(hostAllowed("localhost.evil.example", none));
  EXPECT_FALSE(hostAllowed("[nonsense", none));
  EXPECT_TRUE(hostAllowed("farm.example.org:80", farm));
  EXPECT_FALSE(hostAllowed("example.org", farm));
  EXPECT_TRUE(hostAllowed("anything.example", any));
}

TEST_F(ServerLimitsTest, EveryAnswerCarriesSecurityHeaders) {
  start();
  for (const char* path : {"/", "/missing", "/nix-cache-info"}) {
    auto a = getWithin(path, 10s);
    ASSERT_TRUE(a) << path;
    EXPECT_EQ(a->header("x-content-type-options"), "nosniff") << path;
    EXPECT_EQ(a->header("x-frame-options"), "DENY") << path;
    EXPECT_EQ(a->header("content-security-policy"), contentSecurityPolicy());
  }
  EXPECT_THAT(contentSecurityPolicy(), HasSubstr("default-src 'none'"));
  EXPECT_THAT(contentSecurityPolicy(), HasSubstr("frame-ancestors 'none'"));
}

}  // namespace
}  // namespace kiln::web
