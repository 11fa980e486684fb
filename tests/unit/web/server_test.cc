// The HTTP server on loopback: answers, bounds, files with ranges, streams,
// and clients that misbehave (malformed, oversized, slow, too many).
#include "kiln/web/server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "http_client.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln::web {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// A stream producing "a", nothing once, "b", then the end.
class StepStream : public BodyStream {
 public:
  Next next(std::string& out, size_t) override {
    switch (calls_++) {
      case 0:
        out += "a";
        return Next::kData;
      case 1:
        return Next::kWait;
      case 2:
        out += "b";
        return Next::kData;
      default:
        return Next::kEnd;
    }
  }

 private:
  int calls_ = 0;
};

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router.add("GET", "/hello", [](const Request& r, const RouteParams&) {
      return Response::text("hello " + r.queryArg("who", "world"));
    });
    router.add("POST", "/echo", [](const Request& r, const RouteParams&) {
      return Response::json({{"body", r.body}, {"type", r.header("X-Type")}});
    });
    router.add("GET", "/file", [this](const Request&, const RouteParams&) {
      return Response::file(dir.path() + "/data", "application/octet-stream");
    });
    router.add("GET", "/stream", [](const Request&, const RouteParams&) {
      return Response::streamed(std::make_shared<StepStream>(), "text/plain");
    });
    writeFile(dir.path() + "/data", "0123456789");
  }
  // Starts the server with `cfg` (port 0 on loopback).
  void start(WebServerConfig cfg = {}) {
    cfg.listen = "127.0.0.1:0";
    server = std::make_unique<WebServer>(
        cfg, router,
        [this](const std::string& route, const std::string& method, int status,
               double) {
          std::lock_guard lock(mu);
          seen.push_back(method + " " + route + " " + std::to_string(status));
        });
    port = server->port();
  }

  TempDir dir;
  Router router;
  std::unique_ptr<WebServer> server;
  int port = 0;
  std::mutex mu;
  std::vector<std::string> seen;
};

TEST_F(ServerTest, AnswersAndKeepsTheConnectionAlive) {
  start();
  test::RawConnection c(port);
  ASSERT_TRUE(c.send("GET /hello?who=a%20b HTTP/1.1\r\nHost: localhost\r\n\r\n"));
  auto a = c.read(10s);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 200);
  EXPECT_EQ(a->body, "hello a b");
  ASSERT_TRUE(
      c.send("POST /echo HTTP/1.1\r\nHost: localhost\r\nX-Type: t1\r\n"
             "Content-Length: 3\r\n\r\nabc"));
  auto b = c.read(10s);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->header("content-type"), "application/json");
  auto j = nlohmann::json::parse(b->body);
  EXPECT_EQ(j["body"], "abc");
  EXPECT_EQ(j["type"], "t1");
  std::lock_guard lock(mu);
  EXPECT_THAT(seen, ::testing::ElementsAre("GET /hello 200", "POST /echo 200"));
}

TEST_F(ServerTest, UnknownRouteIs404WithAClearMessage) {
  start();
  auto a = test::webGet(port, "/no/such/page");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 404);
  EXPECT_EQ(a->body, "404 Not Found: no page at /no/such/page\n");
  auto j = test::webGet(port, "/no/such/page?format=json");
  ASSERT_TRUE(j);
  EXPECT_EQ(nlohmann::json::parse(j->body)["error"],
            "no page at /no/such/page");
}

TEST_F(ServerTest, OversizedBodyIs413) {
  WebServerConfig cfg;
  cfg.maxBodyBytes = 1000;
  start(cfg);
  // Announced too large: refused from the headers alone.
  auto a = test::exchange(port,
                          "POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: "
                          "5000000\r\n\r\nxx");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 413);
  EXPECT_THAT(a->body, HasSubstr("larger than 1000 bytes"));
  // Chunked, growing past the limit while it arrives.
  std::string chunked =
      "POST /echo HTTP/1.1\r\nHost: localhost\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; i++)
    chunked += "200\r\n" + std::string(512, 'x') + "\r\n";
  auto b = test::exchange(port, chunked);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->status, 413);
}

TEST_F(ServerTest, MalformedRequestsAre400Or431) {
  WebServerConfig cfg;
  cfg.maxHeaderBytes = 2048;
  start(cfg);
  for (const char* bad : {"GARBAGE\r\n\r\n", "GET /x HTTP/9\r\n\r\n",
                          "GET /hello HTTP/1.1\r\nBad Header\r\n\r\n",
                          "GET http://x/hello HTTP/1.1\r\nHost: localhost\r\n\r\n",
                          "GET /a%zz HTTP/1.1\r\nHost: localhost\r\n\r\n"}) {
    auto a = test::exchange(port, bad);
    ASSERT_TRUE(a) << bad;
    EXPECT_EQ(a->status, 400) << bad;
    EXPECT_THAT(a->body, HasSubstr("400 Bad Request: ")) << bad;
  }
  auto big = test::exchange(port, "GET /hello HTTP/1.1\r\nHost: localhost\r\nX: " +
                                      std::string(4096, 'y') + "\r\n\r\n");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 431);
  // The server still answers well-formed requests.
  auto ok = test::webGet(port, "/hello");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(ServerTest, SlowLorisIsCutOffWithoutHoldingUpOthers) {
  WebServerConfig cfg;
  cfg.requestTimeout = 400ms;
  cfg.idleTimeout = 400ms;
  start(cfg);
  std::vector<std::unique_ptr<test::RawConnection>> slow;
  for (int i = 0; i < 8; i++) {
    slow.push_back(std::make_unique<test::RawConnection>(port));
    ASSERT_TRUE(slow.back()->send("GET /hello HTTP/1.1\r\nHost: localhost\r\nX-A: "));
    ASSERT_TRUE(slow.back()->send("b"));  // trickling
  }
  test::RawConnection idle(port);  // connects and never sends
  for (int i = 0; i < 5; i++) {
    auto a = test::webGet(port, "/hello");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->status, 200);
  }
  for (auto& c : slow) {
    // Told why (trickling does not extend the time), then closed.
    auto a = c->read(10s);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->status, 408);
    EXPECT_THAT(a->body, HasSubstr("not complete within 400 ms"));
    EXPECT_TRUE(c->closedWithin(10s));
  }
  EXPECT_TRUE(idle.closedWithin(10s));
  EXPECT_TRUE(test::pollUntil([&] { return server->connections() == 0; }, 10s));
}

TEST_F(ServerTest, ConnectionsBeyondTheLimitGet503) {
  WebServerConfig cfg;
  cfg.maxConnections = 2;
  start(cfg);
  test::RawConnection a(port), b(port);
  ASSERT_TRUE(test::pollUntil([&] { return server->connections() == 2; }, 10s));
  auto c = test::webGet(port, "/hello");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, 503);
  EXPECT_THAT(c->body, HasSubstr("too many connections (2)"));
  ASSERT_TRUE(
      a.send("GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
  ASSERT_TRUE(a.read(10s));
  EXPECT_TRUE(a.closedWithin(10s));
  ASSERT_TRUE(test::pollUntil([&] { return server->connections() == 1; }, 10s));
  auto d = test::webGet(port, "/hello");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, 200);
}

TEST_F(ServerTest, FilesWithRangesAndHead) {
  start();
  auto whole = test::webGet(port, "/file");
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->status, 200);
  EXPECT_EQ(whole->body, "0123456789");
  EXPECT_EQ(whole->header("accept-ranges"), "bytes");
  auto part = test::webGet(port, "/file", "Range: bytes=3-5\r\n");
  ASSERT_TRUE(part);
  EXPECT_EQ(part->status, 206);
  EXPECT_EQ(part->body, "345");
  EXPECT_EQ(part->header("content-range"), "bytes 3-5/10");
  auto tail = test::webGet(port, "/file", "Range: bytes=-2\r\n");
  EXPECT_EQ(tail->body, "89");
  auto past = test::webGet(port, "/file", "Range: bytes=10-\r\n");
  EXPECT_EQ(past->status, 416);
  EXPECT_EQ(past->header("content-range"), "bytes */10");
  auto head = test::exchange(
      port, "HEAD /file HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
      true);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->header("content-length"), "10");
  ::unlink((dir.path() + "/data").c_str());
  EXPECT_EQ(test::webGet(port, "/file")->status, 404);
}

TEST_F(ServerTest, StreamedBodiesAreChunked) {
  start();
  auto a = test::webGet(port, "/stream");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->header("transfer-encoding"), "chunked");
  EXPECT_EQ(a->body, "ab");
}

TEST(ListenAddress, ParsesAndRefuses) {
  EXPECT_EQ(parseListenAddress("0.0.0.0:80", "x"),
            std::make_pair(std::string("0.0.0.0"), 80));
  EXPECT_EQ(parseListenAddress(":8080", "x").first, "127.0.0.1");
  EXPECT_EQ(parseListenAddress("[::1]:1", "x").first, "::1");
  EXPECT_THROW(parseListenAddress("nohost", "x"), Error);
  EXPECT_THROW(parseListenAddress("1.2.3.4:99999", "x"), Error);
  EXPECT_THROW(parseListenAddress("example.org:80", "x"), Error);
}

}  // namespace
}  // namespace kiln::web
