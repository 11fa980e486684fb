// The recording HTTP server and the POST client of tests (http_recorder.h).
#include "http_recorder.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>

#include "kiln/common/error.h"
#include "kiln/common/file.h"

namespace kiln::test {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(c));
  return s;
}

// Reads a whole HTTP message (headers, then Content-Length bytes) from
// `fd` within 10 s; "" if it did not arrive.
std::string readMessage(int fd, size_t& headEnd, size_t& length) {
  std::string data;
  char buf[65536];
  headEnd = std::string::npos;
  length = 0;
  while (headEnd == std::string::npos || data.size() < headEnd + 4 + length) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) return "";
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return headEnd == std::string::npos ? "" : data;
    data.append(buf, static_cast<size_t>(n));
    if (headEnd == std::string::npos &&
        (headEnd = data.find("\r\n\r\n")) != std::string::npos) {
      std::string head = lower(data.substr(0, headEnd));
      auto at = head.find("\r\ncontent-length:");
      if (at != std::string::npos)
        length = std::stoul(head.substr(at + 17, head.find("\r\n", at + 2)));
    }
  }
  return data;
}

std::map<std::string, std::string> headersOf(const std::string& head) {
  std::map<std::string, std::string> out;
  size_t at = head.find("\r\n");
  while (at != std::string::npos && at + 2 < head.size()) {
    size_t end = head.find("\r\n", at + 2);
    std::string line = head.substr(
        at + 2, end == std::string::npos ? std::string::npos : end - at - 2);
    auto colon = line.find(':');
    if (colon != std::string::npos) {
      std::string v = line.substr(colon + 1);
      while (!v.empty() && v.front() == ' ') v.erase(0, 1);
      out[lower(line.substr(0, colon))] = v;
    }
    at = end;
  }
  return out;
}

int loopbackSocket(int port, bool listenOn) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throwSysError("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  int rc = listenOn ? bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a)
                    : connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  if (rc != 0 || (listenOn && listen(fd, 16) != 0)) {
    close(fd);
    throwSysError("loopback socket on port " + std::to_string(port));
  }
  return fd;
}

}  // namespace

HttpRecorder::HttpRecorder() {
  fd_ = loopbackSocket(0, true);
  sockaddr_in a{};
  socklen_t n = sizeof a;
  getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n);
  port_ = ntohs(a.sin_port);
  thread_ = std::thread([this] { serve(); });
}

HttpRecorder::~HttpRecorder() {
  stop_ = true;
  thread_.join();
  close(fd_);
}

std::vector<RecordedRequest> HttpRecorder::requests() {
  std::lock_guard<std::mutex> l(mu_);
  return got_;
}

void HttpRecorder::queueAnswer(int status,
                               std::map<std::string, std::string> headers) {
  std::lock_guard<std::mutex> l(mu_);
  answers_.emplace_back(status, std::move(headers));
}

void HttpRecorder::serve() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) continue;
    AutoCloseFD c(accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC));
    if (c.get() >= 0) handle(c.get());
  }
}

void HttpRecorder::handle(int fd) {
  size_t headEnd = 0, length = 0;
  std::string data = readMessage(fd, headEnd, length);
  if (data.empty()) return;
  std::string head = data.substr(0, headEnd);
  std::string first = head.substr(0, head.find("\r\n"));
  RecordedRequest r;
  r.method = first.substr(0, first.find(' '));
  r.path = first.substr(first.find(' ') + 1);
  r.path = r.path.substr(0, r.path.rfind(' '));
  r.headers = headersOf(head);
  r.body = data.substr(headEnd + 4, length);
  int status = 200;
  std::map<std::string, std::string> extra;
  {
    std::lock_guard<std::mutex> l(mu_);
    got_.push_back(std::move(r));
    if (!answers_.empty()) {
      std::tie(status, extra) = answers_.front();
      answers_.pop_front();
    }
  }
  std::string out = "HTTP/1.1 " + std::to_string(status) + " X\r\n";
  for (auto& [k, v] : extra) out += k + ": " + v + "\r\n";
  out += "Content-Length: 2\r\nConnection: close\r\n\r\n{}";
  (void)!write(fd, out.data(), out.size());
}

std::pair<int, std::string> httpPost(
    int port, const std::string& path,
    const std::map<std::string, std::string>& headers,
    const std::string& body) {
  AutoCloseFD fd(loopbackSocket(port, false));
  std::string req = "POST " + path +
                    " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                    "\r\n";
  for (auto& [k, v] : headers) req += k + ": " + v + "\r\n";
  req += "Content-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
  if (write(fd.get(), req.data(), req.size()) !=
      static_cast<ssize_t>(req.size()))
    throwSysError("writing to port " + std::to_string(port));
  size_t headEnd = 0, length = 0;
  std::string data = readMessage(fd.get(), headEnd, length);
  if (data.empty()) throw Error("no answer from port " + std::to_string(port));
  int status = std::stoi(data.substr(9, 3));
  return {status, data.substr(headEnd + 4, length)};
}

std::string hmacSha256Hex(const std::string& key, const std::string& body) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(body.data()), body.size(), mac,
       &len);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; i++) {
    out += hex[mac[i] >> 4];
    out += hex[mac[i] & 15];
  }
  return out;
}

}  // namespace kiln::test
