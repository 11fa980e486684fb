#pragma once
// A raw HTTP/1.1 client for the web tests: sends exactly the bytes a test
// gives (malformed requests, slow clients) and parses what comes back.

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "kiln/common/file.h"

namespace kiln::test {

/// A parsed response.
struct HttpAnswer {
  int status = 0;
  std::map<std::string, std::string> headers;  ///< lower-case names
  std::string body;                            ///< de-chunked
  /// The header `name` (lower case), or "".
  std::string header(const std::string& name) const;
};

/// One TCP connection to 127.0.0.1:port.
class RawConnection {
 public:
  /// Connects; throws SysError.
  explicit RawConnection(int port);
  /// Sends all of `bytes`; false if the server closed the connection.
  bool send(const std::string& bytes);
  /// Reads one response (headers, then a Content-Length or chunked body,
  /// or up to the close; none for HEAD when `head`). nullopt if the
  /// connection closed or `timeout` passed first.
  std::optional<HttpAnswer> read(std::chrono::milliseconds timeout,
                                 bool head = false);
  /// Whether the server closed the connection within `timeout` (reads and
  /// drops what it still sends).
  bool closedWithin(std::chrono::milliseconds timeout);

 private:
  bool fill(std::chrono::steady_clock::time_point deadline);
  AutoCloseFD fd_;
  std::string in_;
  bool eof_ = false;
};

/// Sends `request` on a new connection and reads one answer (10 s).
std::optional<HttpAnswer> exchange(int port, const std::string& request,
                                   bool head = false);
/// `GET path` with optional extra header lines ("Name: value\r\n").
std::optional<HttpAnswer> webGet(int port, const std::string& path,
                                 const std::string& extraHeaders = "");

}  // namespace kiln::test
