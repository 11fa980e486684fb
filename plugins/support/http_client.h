#pragma once
// A small HTTP(S) client for notifier plugins (webhook, the forges'
// statuses): one request per connection, bounded in time and in the
// answer's size; over https the server's certificate is verified (system
// CAs or a given file) and must name the URL's host. Throws
// kiln::plugin::Failure; no kiln library is linked (plugins talk to kiln
// through the C ABI only).

#include <openssl/ssl.h>

#include <boost/asio/ssl.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::plugin {

/// An http:// or https:// URL, split.
struct HttpUrl {
  bool tls = false;
  std::string host;    ///< without brackets for IPv6
  std::string port;    ///< explicit or the scheme's
  std::string target;  ///< the path (and query), "/" at least
  std::string where;   ///< scheme://host:port/path, for messages
};

/// Splits `url` (http(s)://HOST[:PORT][/PATH]); throws Failure naming
/// `what` when it is not one.
HttpUrl parseHttpUrl(const std::string& url, const std::string& what);

/// The answer to a request.
struct HttpAnswer {
  unsigned status = 0;
  std::map<std::string, std::string> headers;  ///< names lower-cased
  std::string body;                            ///< at most 64 KiB
};

/// Sends requests to one server.
class HttpClient {
 public:
  /// `base` names the server; `caFile` ("" = the system's) is for https.
  HttpClient(HttpUrl base, const std::string& caFile,
             std::chrono::milliseconds timeout);
  ~HttpClient();
  /// Sends `method` `target` with `headers` and `body`; returns the answer
  /// (any status). Throws Failure when there is none in time (connection,
  /// TLS, certificate, time limit).
  HttpAnswer send(
      const std::string& method, const std::string& target,
      const std::vector<std::pair<std::string, std::string>>& headers,
      const std::string& body);
  const HttpUrl& base() const { return base_; }

 private:
  HttpUrl base_;
  std::unique_ptr<boost::asio::ssl::context> tls_;
  std::chrono::milliseconds timeout_;
};

/// The file's contents without trailing newlines; throws Failure naming
/// `what` when it cannot be read, is empty or is over 4096 bytes.
std::string readSecretFile(const std::string& path, const std::string& what);

/// A `timeout-ms` setting (nullopt: `def`); throws Failure unless it is a
/// positive number.
std::chrono::milliseconds timeoutSetting(const std::optional<std::string>& v,
                                         std::chrono::milliseconds def);

/// The lower-case hex HMAC-SHA256 of `body` under `key`.
std::string hmacSha256Hex(const std::string& key, const std::string& body);

}  // namespace kiln::plugin
