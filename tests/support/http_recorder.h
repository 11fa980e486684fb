#pragma once
// A forge's REST API played on loopback for tests (docs/ci.md): an
// HTTP/1.1 server that records every request (method, path, lower-case
// headers, body) and answers each with the next queued status (200 when
// none is queued) and the queued headers; and a small client that POSTs
// with headers and returns the answer's status and body.

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kiln::test {

/// One request the recorder received.
struct RecordedRequest {
  std::string method, path, body;
  std::map<std::string, std::string> headers;  ///< names lower-cased
};

/// Listens on 127.0.0.1 (a free port) until destroyed.
class HttpRecorder {
 public:
  HttpRecorder();
  ~HttpRecorder();
  HttpRecorder(const HttpRecorder&) = delete;
  HttpRecorder& operator=(const HttpRecorder&) = delete;
  int port() const { return port_; }
  /// The requests so far, in arrival order.
  std::vector<RecordedRequest> requests();
  /// Answers the next request with `status` and `headers` (then 200 again).
  void queueAnswer(int status, std::map<std::string, std::string> headers = {});

 private:
  void serve();
  void handle(int fd);

  int fd_ = -1;
  int port_ = 0;
  std::mutex mu_;
  std::vector<RecordedRequest> got_;
  std::deque<std::pair<int, std::map<std::string, std::string>>> answers_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// POSTs `body` with `headers` to http://127.0.0.1:<port><path>; returns
/// the status and body. Throws Error when there is no answer.
std::pair<int, std::string> httpPost(
    int port, const std::string& path,
    const std::map<std::string, std::string>& headers, const std::string& body);

/// The lower-case hex HMAC-SHA256 of `body` under `key` (a webhook's
/// signature).
std::string hmacSha256Hex(const std::string& key, const std::string& body);

}  // namespace kiln::test
