// The web tests' raw HTTP client (http_client.h).
#include "http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>

#include "kiln/common/error.h"

namespace kiln::test {
namespace {

using Clock = std::chrono::steady_clock;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower((unsigned char)c));
  return s;
}

// Parses "HTTP/1.1 200 OK\r\nName: v\r\n..." (without the blank line).
HttpAnswer parseHead(const std::string& head) {
  HttpAnswer a;
  size_t eol = head.find("\r\n");
  std::string status = head.substr(0, eol);
  if (status.size() < 12) throw Error("bad status line: " + status);
  a.status = std::stoi(status.substr(9, 3));
  while (eol != std::string::npos && eol + 2 < head.size()) {
    size_t start = eol + 2;
    eol = head.find("\r\n", start);
    std::string line = head.substr(start, eol - start);
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    a.headers[lower(line.substr(0, colon))] = value;
  }
  return a;
}

}  // namespace

std::string HttpAnswer::header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? "" : it->second;
}

RawConnection::RawConnection(int port)
    : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
  if (!fd_) throwSysError("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    throwSysError("connect 127.0.0.1:" + std::to_string(port));
}

bool RawConnection::send(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(fd_.get(), bytes.data() + done, bytes.size() - done,
                       MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Reads what is available (waiting until `deadline`); false at the end of
// the stream or the deadline.
bool RawConnection::fill(Clock::time_point deadline) {
  if (eof_) return false;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - Clock::now());
  if (left.count() <= 0) return false;
  pollfd p{fd_.get(), POLLIN, 0};
  int r = ::poll(&p, 1, static_cast<int>(left.count()));
  if (r <= 0) return false;
  char buf[65536];
  ssize_t n = ::read(fd_.get(), buf, sizeof buf);
  if (n <= 0) {
    eof_ = true;
    return false;
  }
  in_.append(buf, static_cast<size_t>(n));
  return true;
}

std::optional<HttpAnswer> RawConnection::read(std::chrono::milliseconds timeout,
                                              bool head) {
  auto deadline = Clock::now() + timeout;
  size_t end;
  while ((end = in_.find("\r\n\r\n")) == std::string::npos)
    if (!fill(deadline)) return std::nullopt;
  HttpAnswer a = parseHead(in_.substr(0, end));
  in_.erase(0, end + 4);
  if (head) return a;
  if (lower(a.header("transfer-encoding")) == "chunked") {
    for (;;) {
      size_t eol;
      while ((eol = in_.find("\r\n")) == std::string::npos)
        if (!fill(deadline)) return std::nullopt;
      size_t size = std::stoul(in_.substr(0, eol), nullptr, 16);
      while (in_.size() < eol + 2 + size + 2)
        if (!fill(deadline)) return std::nullopt;
      a.body += in_.substr(eol + 2, size);
      in_.erase(0, eol + 2 + size + 2);
      if (size == 0) return a;
    }
  }
  if (!a.header("content-length").empty()) {
    size_t len = std::stoul(a.header("content-length"));
    while (in_.size() < len)
      if (!fill(deadline)) return std::nullopt;
    a.body = in_.substr(0, len);
    in_.erase(0, len);
    return a;
  }
  while (fill(deadline)) {
  }
  a.body = std::move(in_);
  in_.clear();
  return a;
}

bool RawConnection::closedWithin(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (fill(deadline)) {
  }
  return eof_;
}

std::optional<HttpAnswer> exchange(int port, const std::string& request,
                                   bool head) {
  RawConnection c(port);
  if (!c.send(request)) return std::nullopt;
  return c.read(std::chrono::seconds(10), head);
}

std::optional<HttpAnswer> webGet(int port, const std::string& path,
                                 const std::string& extraHeaders) {
  return exchange(port, "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n" +
                            extraHeaders + "Connection: close\r\n\r\n");
}

}  // namespace kiln::test
