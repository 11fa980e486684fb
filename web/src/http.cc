// Request and Response helpers (http.h).
#include "kiln/web/http.h"

#include <algorithm>
#include <cctype>

namespace kiln::web {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower((unsigned char)c));
  return out;
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string Request::header(std::string_view name) const {
  auto it = headers.find(lower(name));
  return it == headers.end() ? std::string() : it->second;
}

std::string Request::queryArg(const std::string& name,
                              const std::string& def) const {
  auto it = query.find(name);
  return it == query.end() ? def : it->second;
}

bool Request::wantsJson() const {
  auto f = query.find("format");
  if (f != query.end()) return f->second == "json";
  std::string accept = lower(header("accept"));
  auto json = accept.find("application/json");
  if (json == std::string::npos) return false;
  auto html = accept.find("text/html");
  return html == std::string::npos || json < html;
}

std::optional<std::string> Request::bearerToken() const {
  std::string auth = header("authorization");
  if (auth.size() < 7 || lower(auth.substr(0, 7)) != "bearer ")
    return std::nullopt;
  size_t start = auth.find_first_not_of(' ', 7);
  if (start == std::string::npos) return std::nullopt;
  size_t end = auth.find_last_not_of(' ');
  return auth.substr(start, end + 1 - start);
}

Response Response::json(const nlohmann::json& value, int status) {
  Response r;
  r.status = status;
  r.contentType = "application/json";
  // Invalid UTF-8 in stored strings (e.g. log excerpts) must not throw.
  r.body = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  r.body += '\n';
  return r;
}

Response Response::html(std::string html, int status) {
  Response r;
  r.status = status;
  r.contentType = "text/html; charset=utf-8";
  r.body = std::move(html);
  return r;
}

Response Response::text(std::string text, int status) {
  Response r;
  r.status = status;
  r.body = std::move(text);
  return r;
}

Response Response::error(int status, const std::string& message, bool asJson) {
  if (asJson) return json({{"error", message}, {"status", status}}, status);
  return text(std::to_string(status) + " " + std::string(reasonPhrase(status)) +
                  ": " + message + "\n",
              status);
}

Response Response::redirect(const std::string& location, int status) {
  Response r = text("see " + location + "\n", status);
  r.headers.emplace_back("Location", location);
  return r;
}

Response Response::file(std::string path, std::string contentType) {
  Response r;
  r.contentType = std::move(contentType);
  r.filePath = std::move(path);
  return r;
}

Response Response::streamed(std::shared_ptr<BodyStream> stream,
                            std::string contentType) {
  Response r;
  r.contentType = std::move(contentType);
  r.stream = std::move(stream);
  return r;
}

std::string Response::header(std::string_view name) const {
  std::string want = lower(name);
  for (auto& [k, v] : headers)
    if (lower(k) == want) return v;
  return "";
}

std::string_view reasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 206:
      return "Partial Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 303:
      return "See Other";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 416:
      return "Range Not Satisfiable";
    case 421:
      return "Misdirected Request";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

std::optional<std::string> percentDecode(std::string_view in,
                                         bool plusIsSpace) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); i++) {
    char c = in[i];
    if (c == '%') {
      int hi = i + 1 < in.size() ? hexValue(in[i + 1]) : -1;
      int lo = i + 2 < in.size() ? hexValue(in[i + 2]) : -1;
      if (hi < 0 || lo < 0) return std::nullopt;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plusIsSpace) {
      c = ' ';
    }
    if (c == '\0') return std::nullopt;
    out += c;
  }
  return out;
}

std::string percentEncodeSegment(std::string_view in) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : in) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace kiln::web
