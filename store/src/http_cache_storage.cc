// A read-only CacheStorage over HTTP/1.1 (Boost.Beast, blocking sockets
// with send/receive timeouts): one connection per file, bounded headers
// and bodies, 404 as "missing", anything else but 200 an error.
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>

#include "kiln/common/error.h"
#include "kiln/store/binary_cache.h"

namespace kiln::store {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr uint32_t kHeaderLimit = 64 << 10;

// An open connection with its read buffer.
struct Conn {
  asio::io_context ioc;
  tcp::socket sock{ioc};
  beast::flat_buffer buf;
};

// Sets SO_RCVTIMEO and SO_SNDTIMEO (the latter also bounds connect).
void setTimeouts(int fd, std::chrono::seconds t) {
  timeval tv{};
  tv.tv_sec = t.count();
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// The NAR (or other large file) body, read piece by piece from `conn`.
class HttpBodySource : public Source {
 public:
  HttpBodySource(std::unique_ptr<Conn> conn,
                 std::unique_ptr<http::response_parser<http::buffer_body>> p,
                 std::string what)
      : conn_(std::move(conn)), parser_(std::move(p)), what_(std::move(what)) {}
  size_t read(char* d, size_t len) override {
    while (!parser_->is_done()) {
      auto& body = parser_->get().body();
      body.data = d;
      body.size = len;
      beast::error_code ec;
      http::read(conn_->sock, conn_->buf, *parser_, ec);
      if (ec && ec != http::error::need_buffer)
        throw Error("reading " + what_ + ": " + ec.message());
      size_t n = len - body.size;
      if (n > 0) return n;
    }
    return 0;
  }

 private:
  std::unique_ptr<Conn> conn_;
  std::unique_ptr<http::response_parser<http::buffer_body>> parser_;
  std::string what_;
};

}  // namespace

HttpCacheStorage::HttpCacheStorage(std::string uri, HttpCacheLimits limits)
    : uri_(std::move(uri)), limits_(limits) {
  constexpr std::string_view kHttp = "http://";
  std::string_view rest(uri_);
  if (!rest.starts_with(kHttp))
    throw FormatError("cache URI '" + uri_ + "' is not http://HOST[:PORT]");
  rest.remove_prefix(kHttp.size());
  auto slash = rest.find('/');
  std::string_view hostPort = rest.substr(0, slash);
  prefix_ =
      slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
  auto colon = hostPort.rfind(':');
  host_ = std::string(hostPort.substr(0, colon));
  port_ = "80";
  if (colon != std::string_view::npos) port_ = hostPort.substr(colon + 1);
  int portNr = 0;
  auto [end, ec] =
      std::from_chars(port_.data(), port_.data() + port_.size(), portNr);
  if (host_.empty() || ec != std::errc() ||
      end != port_.data() + port_.size() || portNr < 1 || portNr > 65535 ||
      uri_.find_first_of("?#@ ") != std::string::npos)
    throw FormatError("cache URI '" + uri_ +
                      "' is malformed (http://HOST[:PORT][/PATH], no "
                      "query, user or fragment)");
}

// Sends GET for `rel` on a new connection and reads the response's header
// into `parser`; returns the connection, or nullptr for a 404.
template <class Parser>
static std::unique_ptr<Conn> request(const std::string& host,
                                     const std::string& port,
                                     const std::string& target,
                                     std::chrono::seconds timeout,
                                     Parser& parser, const std::string& what) {
  auto c = std::make_unique<Conn>();
  beast::error_code ec;
  tcp::resolver resolver(c->ioc);
  auto addrs = resolver.resolve(host, port, ec);
  if (ec) throw Error("resolving " + what + ": " + ec.message());
  for (auto& a : addrs) {
    c->sock = tcp::socket(c->ioc);
    c->sock.open(a.endpoint().protocol(), ec);
    if (ec) continue;
    setTimeouts(c->sock.native_handle(), timeout);
    c->sock.connect(a.endpoint(), ec);
    if (!ec) break;
  }
  if (ec) throw Error("connecting for " + what + ": " + ec.message());
  http::request<http::empty_body> req(http::verb::get, target, 11);
  req.set(http::field::host, host);
  req.set(http::field::user_agent, "kiln");
  req.set(http::field::connection, "close");
  http::write(c->sock, req, ec);
  if (ec) throw Error("sending the request for " + what + ": " + ec.message());
  parser.header_limit(kHeaderLimit);
  http::read_header(c->sock, c->buf, parser, ec);
  if (ec) throw Error("reading the answer for " + what + ": " + ec.message());
  int status = parser.get().result_int();
  if (status == 404 || status == 410) return nullptr;
  if (status != 200)
    throw Error(what + " answered HTTP " + std::to_string(status));
  return c;
}

std::string HttpCacheStorage::target(const std::string& rel) const {
  checkCacheRelPath(rel);
  return prefix_ + "/" + rel;
}

bool HttpCacheStorage::exists(const std::string& rel) {
  return get(rel).has_value();
}

std::optional<std::string> HttpCacheStorage::get(const std::string& rel) {
  auto what = uri_ + "/" + rel;
  http::response_parser<http::string_body> parser;
  parser.body_limit(limits_.maxSmallFileBytes);
  auto c = request(host_, port_, target(rel), limits_.timeout, parser, what);
  if (!c) return std::nullopt;
  beast::error_code ec;
  http::read(c->sock, c->buf, parser, ec);
  if (ec == http::error::body_limit)
    throw FormatError(what + " is larger than " +
                      std::to_string(limits_.maxSmallFileBytes) + " bytes");
  if (ec) throw Error("reading " + what + ": " + ec.message());
  return parser.release().body();
}

std::unique_ptr<Source> HttpCacheStorage::open(const std::string& rel) {
  auto what = uri_ + "/" + rel;
  auto parser = std::make_unique<http::response_parser<http::buffer_body>>();
  parser->body_limit(limits_.maxFileBytes);
  auto c = request(host_, port_, target(rel), limits_.timeout, *parser, what);
  if (!c) return nullptr;
  return std::make_unique<HttpBodySource>(std::move(c), std::move(parser),
                                          what);
}

void HttpCacheStorage::put(const std::string&, std::string_view) {
  throw Error("binary cache '" + uri_ + "' is read-only (HTTP)");
}

std::unique_ptr<CacheUpload> HttpCacheStorage::upload() {
  throw Error("binary cache '" + uri_ + "' is read-only (HTTP)");
}

}  // namespace kiln::store
