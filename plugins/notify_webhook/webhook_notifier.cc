// The `webhook` notifier plugin (docs/plugin-abi.md, docs/operations.md
// "Notifications"): POSTs each event's JSON to a configured http:// or
// https:// URL. Over https the server's certificate is verified (OpenSSL,
// through Boost.Beast's ssl_stream; plugins/support/http_client.h) against
// the system's CAs, or only the configured `ca-file`, and must name the
// URL's host (DNS name or IP address); the host name goes in SNI. With a
// secret (read from a file, never given on a command line) the request
// carries `X-Kiln-Signature-256: sha256=<hex HMAC-SHA256 of the body>`.
// Any answer but 2xx, a refused certificate, or no answer within the time
// limit is a failure, so the event is retried.
#include <chrono>
#include <memory>
#include <string>

#include "http_client.h"
#include "kiln/plugin/plugin.hpp"

namespace {

using kiln::plugin::Failure;

class WebhookNotifier {
 public:
  explicit WebhookNotifier(kiln::plugin::Host host) {
    auto url =
        kiln::plugin::parseHttpUrl(host.config("url").value_or(""), "webhook");
    if (auto f = host.config("secret-file"))
      secret_ = kiln::plugin::readSecretFile(*f, "webhook secret");
    auto timeout = kiln::plugin::timeoutSetting(host.config("timeout-ms"),
                                                std::chrono::seconds(10));
    client_ = std::make_unique<kiln::plugin::HttpClient>(
        url, host.config("ca-file").value_or(""), timeout);
  }

  void deliver(const std::string& event, const std::string& body) {
    std::vector<std::pair<std::string, std::string>> headers = {
        {"User-Agent", "kiln-webhook/1"},
        {"Content-Type", "application/json"},
        {"X-Kiln-Event", event}};
    if (!secret_.empty())
      headers.emplace_back(
          "X-Kiln-Signature-256",
          "sha256=" + kiln::plugin::hmacSha256Hex(secret_, body));
    auto answer = client_->send("POST", client_->base().target, headers, body);
    if (answer.status < 200 || answer.status >= 300)
      throw Failure(KILN_ERR_FAILED,
                    "webhook answered HTTP " + std::to_string(answer.status));
  }

 private:
  std::unique_ptr<kiln::plugin::HttpClient> client_;
  std::string secret_;
};

}  // namespace

KILN_NOTIFIER_PLUGIN(WebhookNotifier, "webhook", "1.1.0",
                     "POSTs each event's JSON to an http(s) URL, HMAC-signed")
