// The `webhook` notifier plugin (docs/plugin-abi.md, docs/operations.md
// "Notifications"): POSTs each event's JSON to a configured http:// URL.
// With a secret (read from a file, never given on a command line) the
// request carries `X-Kiln-Signature-256: sha256=<hex HMAC-SHA256 of the
// body>`. Any answer but 2xx, or no answer within the time limit, is a
// failure, so the event is retried.
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "kiln/plugin/plugin.hpp"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
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

class WebhookNotifier {
 public:
  explicit WebhookNotifier(kiln::plugin::Host host) {
    auto url = host.config("url");
    static const std::regex re(
        R"(http://([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\])(?::([0-9]{1,5}))?(/[^\s]*)?)");
    std::smatch m;
    if (!url || !std::regex_match(*url, m, re))
      throw Failure(KILN_ERR_INVALID,
                    "webhook URL '" + url.value_or("") +
                        "' is not http://HOST[:PORT][/PATH] (https is not "
                        "supported)");
    host_ = m[1].str();
    if (host_.front() == '[') host_ = host_.substr(1, host_.size() - 2);
    port_ = m[2].matched ? m[2].str() : "80";
    if (std::stoul(port_) == 0 || std::stoul(port_) > 65535)
      throw Failure(KILN_ERR_INVALID, "webhook port out of range: " + port_);
    target_ = m[3].matched ? m[3].str() : "/";
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
    // Asynchronous operations, because only they honour the stream's
    // time limit; run() returns when the chain ends or times out.
    boost::asio::io_context io;
    beast::tcp_stream stream(io);
    beast::flat_buffer buf;
    http::response_parser<http::string_body> res;
    res.body_limit(64 * 1024);
    beast::error_code result;
    auto endpoints = tcp::resolver(io).resolve(host_, port_);
    stream.expires_after(timeout_);
    stream.async_connect(endpoints, [&](beast::error_code ec,
                                        const tcp::endpoint&) {
      if (ec) return void(result = ec);
      http::async_write(stream, req, [&](beast::error_code ec, size_t) {
        if (ec) return void(result = ec);
        http::async_read(stream, buf, res,
                         [&](beast::error_code ec, size_t) { result = ec; });
      });
    });
    io.run();
    if (result)
      throw Failure(KILN_ERR_FAILED, "webhook " + host_ + ":" + port_ +
                                         target_ + ": " + result.message());
    unsigned status = res.get().result_int();
    if (status < 200 || status >= 300)
      throw Failure(KILN_ERR_FAILED,
                    "webhook answered HTTP " + std::to_string(status));
  }

 private:
  std::string host_, port_, target_, secret_;
  std::chrono::milliseconds timeout_{10000};
};

}  // namespace

KILN_NOTIFIER_PLUGIN(WebhookNotifier, "webhook", "1.0.0",
                     "POSTs each event's JSON to a URL, HMAC-signed")
