// HttpCacheStorage's URI checks and a cache read from a real HTTP server
// (a kiln web front end serving a `file://` cache's files would need the
// web module; here a one-shot loopback server thread answers), and
// LocalStore::queryPathFromHashPart.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "kiln/common/file.h"
#include "kiln/store/binary_cache.h"
#include "kiln/store/local_store.h"

namespace kiln::store {
namespace {

TEST(HttpCacheStorage, RefusesMalformedUris) {
  for (auto bad : {"http://", "http://:80", "http://h:0", "http://h:99999",
                   "http://h:x", "http://h/p?x=1", "http://u@h/", "ftp://h/"}) {
    EXPECT_THROW(openCacheStorage(bad), FormatError) << bad;
  }
  EXPECT_EQ(openCacheStorage("http://127.0.0.1:8470/")->uri(),
            "http://127.0.0.1:8470/");
}

// Serves `answers` (whole HTTP responses) to successive connections on a
// loopback port, recording each request's first line.
class OneShotServer {
 public:
  explicit OneShotServer(std::vector<std::string> answers) {
    fd_ = AutoCloseFD(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        ::listen(fd_.get(), 8) != 0 ||
        ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throwSysError("listening");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this, answers] {
      for (auto& answer : answers) {
        AutoCloseFD c(::accept(fd_.get(), nullptr, nullptr));
        if (!c) return;
        std::string req;
        char buf[4096];
        while (req.find("\r\n\r\n") == std::string::npos) {
          ssize_t n = ::read(c.get(), buf, sizeof buf);
          if (n <= 0) break;
          req.append(buf, size_t(n));
        }
        lines_.push_back(req.substr(0, req.find("\r\n")));
        writeAll(c.get(), answer);
      }
    });
  }
  ~OneShotServer() {
    if (thread_.joinable()) thread_.join();
  }
  /// Waits until every answer was sent; the request lines received.
  std::vector<std::string> join() {
    thread_.join();
    return lines_;
  }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/c";
  }

 private:
  std::vector<std::string> lines_;
  AutoCloseFD fd_;
  int port_ = 0;
  std::thread thread_;
};

TEST(HttpCacheStorage, ReadsFilesAndTellsMissingFromBroken) {
  std::string big(200000, 'n');
  std::vector<std::string> answers = {
      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
      "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(big.size()) +
          "\r\n\r\n" + big,
      "HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\ntruncated"};
  OneShotServer server(answers);
  {
    HttpCacheLimits limits;
    limits.timeout = std::chrono::seconds(10);
    HttpCacheStorage s(server.url(), limits);
    EXPECT_EQ(s.get("nix-cache-info"), "hello");
    EXPECT_EQ(s.get("x.narinfo"), std::nullopt);
    EXPECT_THROW(s.get("y.narinfo"), Error);
    auto src = s.open("nar/a.nar");
    ASSERT_TRUE(src);
    StringSink sink;
    src->drainInto(sink);
    EXPECT_EQ(sink.s, big);
    auto cut = s.open("nar/b.nar");
    ASSERT_TRUE(cut);
    StringSink rest;
    EXPECT_THROW(cut->drainInto(rest), Error);
    EXPECT_THROW(s.get("../x"), FormatError);
    EXPECT_THROW(s.put("x", "y"), Error);
  }
  auto lines = server.join();
  ASSERT_GE(lines.size(), 1u);
  EXPECT_EQ(lines[0], "GET /c/nix-cache-info HTTP/1.1");
}

TEST(LocalStoreHashPart, FindsTheValidPathOfAHashPart) {
  TempDir dir;
  LocalStore store(dir.path());
  auto p = store.addText("a.txt", "a", {});
  EXPECT_EQ(store.queryPathFromHashPart(p.hashPart()), p);
  EXPECT_EQ(store.queryPathFromHashPart(std::string(32, '0')), std::nullopt);
  EXPECT_THROW(store.queryPathFromHashPart("abc"), FormatError);
  EXPECT_THROW(store.queryPathFromHashPart(std::string(32, 'e')), FormatError);
}

}  // namespace
}  // namespace kiln::store
