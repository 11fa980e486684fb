// Response headers and file bodies with ranges (response_body.h).
#include "response_body.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <charconv>

#include "kiln/web/html.h"

namespace kiln::web {
namespace {

std::string clean(const std::string& v) {
  std::string out = v;
  for (char& c : out)
    if (c == '\r' || c == '\n') c = ' ';
  return out;
}

bool parseU64(std::string_view s, uint64_t& v) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

std::optional<ByteRange> parseRange(const std::string& header, uint64_t size) {
  std::string_view h = header;
  if (h.substr(0, 6) != "bytes=") return std::nullopt;
  h.remove_prefix(6);
  if (h.find(',') != std::string_view::npos) return std::nullopt;
  auto dash = h.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  std::string_view a = h.substr(0, dash), b = h.substr(dash + 1);
  uint64_t first = 0, last = 0;
  if (a.empty()) {  // the last `b` bytes
    if (!parseU64(b, last) || last == 0) return std::nullopt;
    if (size == 0) return ByteRange{1, 0};
    return ByteRange{size - std::min(last, size), size - 1};
  }
  if (!parseU64(a, first)) return std::nullopt;
  if (b.empty()) {
    last = size == 0 ? 0 : size - 1;
  } else if (!parseU64(b, last) || last < first) {
    return std::nullopt;
  }
  if (first >= size) return ByteRange{1, 0};
  return ByteRange{first, std::min(last, size - 1)};
}

std::optional<FileBody> openFileBody(const Request& req, Response& resp) {
  bool json = req.wantsJson();
  AutoCloseFD fd(::open(resp.filePath.c_str(),
                        O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    resp = Response::error(404, "no file at " + req.path, json);
    return std::nullopt;
  }
  FileBody body;
  body.fd = std::move(fd);
  uint64_t size = static_cast<uint64_t>(st.st_size);
  body.length = size;
  resp.headers.emplace_back("Accept-Ranges", "bytes");
  auto range = parseRange(req.header("range"), size);
  if (!range) return body;
  if (range->first > range->last) {
    resp = Response::error(416,
                           "the range " + req.header("range") +
                               " starts past the end (" + std::to_string(size) +
                               " bytes)",
                           json);
    resp.headers.emplace_back("Content-Range",
                              "bytes */" + std::to_string(size));
    return std::nullopt;
  }
  resp.status = 206;
  resp.headers.emplace_back("Content-Range",
                            "bytes " + std::to_string(range->first) + "-" +
                                std::to_string(range->last) + "/" +
                                std::to_string(size));
  body.offset = range->first;
  body.length = range->last - range->first + 1;
  return body;
}

std::string headerText(const Response& resp, uint64_t length, bool chunked,
                       bool keepAlive, bool http11) {
  std::string h = std::string(http11 ? "HTTP/1.1 " : "HTTP/1.0 ") +
                  std::to_string(resp.status) + " " +
                  std::string(reasonPhrase(resp.status)) + "\r\n";
  h += "Server: kiln\r\n";
  h += "Content-Type: " + clean(resp.contentType) + "\r\n";
  h += "X-Content-Type-Options: nosniff\r\n";
  h += "X-Frame-Options: DENY\r\n";
  h += "Referrer-Policy: same-origin\r\n";
  h += "Content-Security-Policy: " + contentSecurityPolicy() + "\r\n";
  for (auto& [k, v] : resp.headers) h += clean(k) + ": " + clean(v) + "\r\n";
  if (chunked)
    h += "Transfer-Encoding: chunked\r\n";
  else
    h += "Content-Length: " + std::to_string(length) + "\r\n";
  if (!keepAlive)
    h += "Connection: close\r\n";
  else if (!http11)
    h += "Connection: keep-alive\r\n";
  h += "\r\n";
  return h;
}

}  // namespace kiln::web
