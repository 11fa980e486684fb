#pragma once
/// HTTP requests and responses as plain values (design decision 8,
/// docs/architecture.md "web"): what a page handler receives and returns.
/// The server (server.h) parses, bounds and answers; handlers never see a
/// socket. A handler reports the caller's mistakes by throwing `HttpError`
/// (or returning `Response::error`); anything else it throws becomes a 500.

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/common/error.h"

namespace kiln::web {

/// A parsed request. Header names are kept in lower case.
struct Request {
  std::string method;  ///< "GET", "HEAD", "POST", ...
  /// The path as received (still percent-encoded, its escapes checked),
  /// without the query; the router decodes it segment by segment.
  std::string path;
  std::string target;  ///< the raw request target, as received
  /// Query arguments, percent-decoded ('+' is a space); the last of
  /// repeated names wins.
  std::map<std::string, std::string> query;
  /// Headers by lower-case name (repeated ones joined with ", ").
  std::map<std::string, std::string> headers;
  std::string body;           ///< at most WebServerConfig::maxBodyBytes
  std::string remoteAddress;  ///< "ip:port" of the client

  /// The header `name` (any case), or "" when absent.
  std::string header(std::string_view name) const;
  /// The query argument `name`, or `def` when absent.
  std::string queryArg(const std::string& name,
                       const std::string& def = "") const;
  /// Whether the client asked for JSON: `Accept: application/json` (and
  /// not text/html first) or `?format=json`.
  bool wantsJson() const;
  /// The token of `Authorization: Bearer <token>`, if any.
  std::optional<std::string> bearerToken() const;
};

/// A body produced piece by piece (server-sent events, a growing log),
/// sent with chunked transfer encoding. Called from the server's handler
/// threads, one call at a time per response; must not block for long.
class BodyStream {
 public:
  /// What `next` produced.
  enum class Next {
    kData,  ///< appended bytes to `out`; call again
    kWait,  ///< nothing now; the server calls again after a short pause
    kEnd,   ///< the body is complete (`out` may hold a last piece)
  };
  virtual ~BodyStream() = default;
  /// Appends at most `max` bytes to `out`. Exceptions end the response.
  virtual Next next(std::string& out, size_t max) = 0;
};

/// A response. Exactly one of `body`, `filePath` or `stream` is the body.
struct Response {
  int status = 200;
  std::string contentType = "text/plain; charset=utf-8";
  /// Further headers (name, value), e.g. Location, Cache-Control.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  /// A file sent as the body (the server answers Range requests on it with
  /// 206/416, and HEAD with its length). The handler checks that the path
  /// is one it may serve; the server opens it without following symlinks
  /// in its last component and answers 404 if it is missing.
  std::string filePath;
  /// A streamed body of unknown length (chunked).
  std::shared_ptr<BodyStream> stream;

  /// 200 with `value` as `application/json`.
  static Response json(const nlohmann::json& value, int status = 200);
  /// 200 with `html` as `text/html; charset=utf-8`.
  static Response html(std::string html, int status = 200);
  /// 200 with `text` as `text/plain; charset=utf-8`.
  static Response text(std::string text, int status = 200);
  /// A 4xx/5xx with a clear message: `{"error": message, "status": n}`
  /// when `asJson`, else "<status> <reason>: <message>\n" as text.
  static Response error(int status, const std::string& message, bool asJson);
  /// A redirect (302 by default) to `location`.
  static Response redirect(const std::string& location, int status = 302);
  /// `path` as the body, with `contentType`.
  static Response file(std::string path, std::string contentType);
  /// A chunked body from `stream`, with `contentType`.
  static Response streamed(std::shared_ptr<BodyStream> stream,
                           std::string contentType);
  /// The value of header `name` (any case) in `headers`, or "".
  std::string header(std::string_view name) const;
};

/// The caller's mistake, answered with `status` (4xx) and `what()` by the
/// server, as JSON when the request wants it.
class HttpError : public Error {
 public:
  HttpError(int status, const std::string& message)
      : Error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

/// The standard reason phrase of `status` ("Not Found"), or "Unknown".
std::string_view reasonPhrase(int status);

/// Percent-decodes `in` ('+' as space when `plusIsSpace`). nullopt when an
/// escape is malformed or decodes to a NUL byte.
std::optional<std::string> percentDecode(std::string_view in, bool plusIsSpace);

/// Percent-encodes everything but unreserved characters, '/' included:
/// one segment of a path (a project, jobset or job name).
std::string percentEncodeSegment(std::string_view in);

}  // namespace kiln::web
