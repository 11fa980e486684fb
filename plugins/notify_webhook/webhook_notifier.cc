// The `webhook` notifier plugin (docs/plugin-abi.md, docs/operations.md
// "Notifications"): POSTs each event's JSON to a configured http:// or
// https:// URL. Over https the server's certificate is verified (OpenSSL,
// through Boost.Beast's ssl_stream) against the system's CAs, or only the
// configured `ca-file`, and must name the URL's host (DNS name or IP
// address); the host name goes in SNI. With a secret (read from a file,
// never given on a command line) the request carries
// `X-Kiln-Signature-256: sha256=<hex HMAC-SHA256 of the body>`. Any answer
// but 2xx, a refused certificate, or no answer within the time limit is a
// failure, so the event is retried.
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <type_traits>

#include "kiln/plugin/plugin.hpp"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = boost::asio::ssl;
using boost::asio::ip::tcp;
using kiln::plugin::Failure;

std::string readSecret(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Failure::sys("reading the webhook secret file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (s.empty() || s.size() > 4096)
    throw Failure(KILN_ERR_INVALID,
                  "webhook secret file " + path + " is empty or too long");
  return s;
}

std::string hmacHex(const std::string& key, const std::string& body) {
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

// The TLS client context of an https webhook: peer verification against
// `caFile`, or the system's default CA paths when it is empty.
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
                  "webhook CAs " +
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

class WebhookNotifier {
 public:
  explicit WebhookNotifier(kiln::plugin::Host host) {
    auto url = host.config("url");
    static const std::regex re(
        R"((https?)://([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\])(?::([0-9]{1,5}))?(/[^\s]*)?)");
    std::smatch m;
    if (!url || !std::regex_match(*url, m, re))
      throw Failure(KILN_ERR_INVALID,
                    "webhook URL '" + url.value_or("") +
                        "' is not http(s)://HOST[:PORT][/PATH]");
    bool tls = m[1].str() == "https";
    host_ = m[2].str();
    if (host_.front() == '[') host_ = host_.substr(1, host_.size() - 2);
    port_ = m[3].matched ? m[3].str() : tls ? "443" : "80";
    if (std::stoul(port_) == 0 || std::stoul(port_) > 65535)
      throw Failure(KILN_ERR_INVALID, "webhook port out of range: " + port_);
    target_ = m[4].matched ? m[4].str() : "/";
    where_ = m[1].str() + "://" + m[2].str() + ":" + port_ + target_;
    auto caFile = host.config("ca-file");
    if (caFile && !tls)
      throw Failure(KILN_ERR_INVALID,
                    "webhook ca-file is for https URLs, not " + *url);
    if (tls) tls_ = tlsContext(caFile.value_or(""));
    if (auto f = host.config("secret-file")) secret_ = readSecret(*f);
    if (auto t = host.config("timeout-ms")) {
      long ms = std::atol(t->c_str());
      if (ms <= 0) throw Failure(KILN_ERR_INVALID, "timeout-ms must be > 0");
      timeout_ = std::chrono::milliseconds(ms);
    }
  }

  void deliver(const std::string& event, const std::string& body) {
    http::request<http::string_body> req(http::verb::post, target_, 11);
    req.set(http::field::host, host_);
    req.set(http::field::user_agent, "kiln-webhook/1");
    req.set(http::field::content_type, "application/json");
    req.set("X-Kiln-Event", event);
    if (!secret_.empty())
      req.set("X-Kiln-Signature-256", "sha256=" + hmacHex(secret_, body));
    req.body() = body;
    req.prepare_payload();
    unsigned status = 0;
    boost::asio::io_context io;
    beast::error_code result;
    std::string why;
    if (tls_) {
      beast::ssl_stream<beast::tcp_stream> stream(io, *tls_);
      expectPeer(stream.native_handle(), host_);
      status = exchange(io, stream, req, result);
      // A refused certificate: OpenSSL's reason is more telling than the
      // handshake's "certificate verify failed".
      long v = SSL_get_verify_result(stream.native_handle());
      if (result && v != X509_V_OK)
        why = std::string(" (") + X509_verify_cert_error_string(v) + ")";
    } else {
      beast::tcp_stream stream(io);
      status = exchange(io, stream, req, result);
    }
    if (result)
      throw Failure(KILN_ERR_FAILED,
                    "webhook " + where_ + ": " + result.message() + why);
    if (status < 200 || status >= 300)
      throw Failure(KILN_ERR_FAILED,
                    "webhook answered HTTP " + std::to_string(status));
  }

 private:
  // Connects (and, over TLS, shakes hands), sends `req` and reads the
  // answer within the time limit; returns its status, or sets `result`.
  // Asynchronous operations, because only they honour the stream's time
  // limit; run() returns when the chain ends or times out.
  template <class Stream>
  unsigned exchange(boost::asio::io_context& io, Stream& stream,
                    http::request<http::string_body>& req,
                    beast::error_code& result) {
    constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;
    beast::flat_buffer buf;
    http::response_parser<http::string_body> res;
    res.body_limit(64 * 1024);
    auto endpoints = tcp::resolver(io).resolve(host_, port_, result);
    if (result) return 0;
    auto& tcpStream = beast::get_lowest_layer(stream);
    tcpStream.expires_after(timeout_);
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
    return result ? 0 : res.get().result_int();
  }

  std::string host_, port_, target_, where_, secret_;
  std::unique_ptr<ssl::context> tls_;
  std::chrono::milliseconds timeout_{10000};
};

}  // namespace

KILN_NOTIFIER_PLUGIN(WebhookNotifier, "webhook", "1.1.0",
                     "POSTs each event's JSON to an http(s) URL, HMAC-signed")
