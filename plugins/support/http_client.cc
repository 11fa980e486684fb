// The notifier plugins' HTTP(S) client (http_client.h).
#include "http_client.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <type_traits>

#include "kiln/plugin/plugin.hpp"

namespace kiln::plugin {

namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = boost::asio::ssl;
using boost::asio::ip::tcp;

namespace {

// The TLS client context: peer verification against `caFile`, or the
// system's default CA paths when it is empty.
std::unique_ptr<ssl::context> tlsContext(const std::string& caFile) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                   ssl::context::no_tlsv1_1);
  boost::system::error_code ec;
  if (caFile.empty())
    ctx->set_default_verify_paths(ec);
  else
    ctx->load_verify_file(caFile, ec);
  if (ec)
    throw Failure(KILN_ERR_INVALID,
                  "CAs " +
                      (caFile.empty() ? std::string("(the system's)")
                                      : "file " + caFile) +
                      ": " + ec.message());
  ctx->set_verify_mode(ssl::verify_peer);
  return ctx;
}

// Makes `ssl` check that the certificate names `host` (an IP address is
// matched against the IP SANs) and sends a DNS name as SNI.
void expectPeer(SSL* ssl, const std::string& host) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(host, ec);
  bool isIp = !ec;
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  int ok = isIp ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str())
                : X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
  if (ok != 1 || (!isIp && SSL_set_tlsext_host_name(ssl, host.c_str()) != 1))
    throw Failure(KILN_ERR_FAILED, "cannot set the expected TLS peer " + host);
}

// Connects (and, over TLS, shakes hands), sends `req` and reads the
// answer within the time limit into `res`; sets `result` on failure.
// Asynchronous operations, because only they honour the stream's time
// limit; run() returns when the chain ends or times out.
template <class Stream>
void exchange(boost::asio::io_context& io, Stream& stream, const HttpUrl& url,
              std::chrono::milliseconds timeout,
              http::request<http::string_body>& req,
              http::response_parser<http::string_body>& res,
              beast::error_code& result) {
  constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;
  beast::flat_buffer buf;
  auto endpoints = tcp::resolver(io).resolve(url.host, url.port, result);
  if (result) return;
  auto& tcpStream = beast::get_lowest_layer(stream);
  tcpStream.expires_after(timeout);
  auto send = [&] {
    http::async_write(stream, req, [&](beast::error_code ec, size_t) {
      if (ec) return void(result = ec);
      http::async_read(stream, buf, res,
                       [&](beast::error_code ec, size_t) { result = ec; });
    });
  };
  tcpStream.async_connect(
      endpoints, [&](beast::error_code ec, const tcp::endpoint&) {
        if (ec) return void(result = ec);
        if constexpr (kTls)
          stream.async_handshake(ssl::stream_base::client,
                                 [&](beast::error_code ec) {
                                   if (ec) return void(result = ec);
                                   send();
                                 });
        else
          send();
      });
  io.run();
}

}  // namespace

HttpUrl parseHttpUrl(const std::string& url, const std::string& what) {
  static const std::regex re(
      R"((https?)://([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\])(?::([0-9]{1,5}))?(/[^\s]*)?)");
  std::smatch m;
  if (!std::regex_match(url, m, re))
    throw Failure(
        KILN_ERR_INVALID,
        what + " URL '" + url + "' is not http(s)://HOST[:PORT][/PATH]");
  HttpUrl u;
  u.tls = m[1].str() == "https";
  u.host = m[2].str();
  if (u.host.front() == '[') u.host = u.host.substr(1, u.host.size() - 2);
  u.port = m[3].matched ? m[3].str() : u.tls ? "443" : "80";
  if (std::stoul(u.port) == 0 || std::stoul(u.port) > 65535)
    throw Failure(KILN_ERR_INVALID, what + " port out of range: " + u.port);
  u.target = m[4].matched ? m[4].str() : "/";
  u.where = m[1].str() + "://" + m[2].str() + ":" + u.port + u.target;
  return u;
}

HttpClient::HttpClient(HttpUrl base, const std::string& caFile,
                       std::chrono::milliseconds timeout)
    : base_(std::move(base)), timeout_(timeout) {
  if (!caFile.empty() && !base_.tls)
    throw Failure(KILN_ERR_INVALID,
                  "ca-file is for https URLs, not " + base_.where);
  if (base_.tls) tls_ = tlsContext(caFile);
}

HttpClient::~HttpClient() = default;

HttpAnswer HttpClient::send(
    const std::string& method, const std::string& target,
    const std::vector<std::pair<std::string, std::string>>& headers,
    const std::string& body) {
  http::request<http::string_body> req(http::string_to_verb(method), target,
                                       11);
  req.set(http::field::host, base_.host);
  for (auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  boost::asio::io_context io;
  beast::error_code result;
  http::response_parser<http::string_body> res;
  res.body_limit(64 * 1024);
  std::string why;
  if (tls_) {
    beast::ssl_stream<beast::tcp_stream> stream(io, *tls_);
    expectPeer(stream.native_handle(), base_.host);
    exchange(io, stream, base_, timeout_, req, res, result);
    // A refused certificate: OpenSSL's reason is more telling than the
    // handshake's "certificate verify failed".
    long v = SSL_get_verify_result(stream.native_handle());
    if (result && v != X509_V_OK)
      why = std::string(" (") + X509_verify_cert_error_string(v) + ")";
  } else {
    beast::tcp_stream stream(io);
    exchange(io, stream, base_, timeout_, req, res, result);
  }
  if (result)
    throw Failure(KILN_ERR_FAILED, base_.where + ": " + result.message() + why);
  HttpAnswer a;
  a.status = res.get().result_int();
  for (auto& f : res.get()) {
    std::string name(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(c));
    a.headers[name] = std::string(f.value());
  }
  a.body = res.get().body();
  return a;
}

std::string readSecretFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Failure::sys("reading the " + what + " file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (s.empty() || s.size() > 4096)
    throw Failure(KILN_ERR_INVALID,
                  what + " file " + path + " is empty or too long");
  return s;
}

std::chrono::milliseconds timeoutSetting(const std::optional<std::string>& v,
                                         std::chrono::milliseconds def) {
  if (!v) return def;
  char* end = nullptr;
  long ms = std::strtol(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || ms <= 0)
    throw Failure(KILN_ERR_INVALID, "timeout-ms must be a number > 0");
  return std::chrono::milliseconds(ms);
}

std::string hmacSha256Hex(const std::string& key, const std::string& body) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(body.data()), body.size(),
            mac, &len))
    throw Failure(KILN_ERR_FAILED, "HMAC-SHA256 failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; i++) {
    out += hex[mac[i] >> 4];
    out += hex[mac[i] & 15];
  }
  return out;
}

}  // namespace kiln::plugin
