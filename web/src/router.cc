// Route matching and the error answers of a missing route (router.h).
#include "kiln/web/router.h"

#include <charconv>
#include <optional>
#include <set>

#include "kiln/common/logging.h"

namespace kiln::web {
namespace {

// "/a/b" -> {"a", "b"}; "/" -> {""}.
std::vector<std::string> splitPattern(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 1;
  for (;;) {
    size_t slash = path.find('/', start);
    parts.push_back(path.substr(start, slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return parts;
}

// The segments of a path as received, each percent-decoded on its own, so
// that an encoded '/' ("%2F") stays inside its segment; nullopt when an
// escape is malformed or decodes to NUL.
std::optional<std::vector<std::string>> splitRawPath(const std::string& raw) {
  std::vector<std::string> parts = splitPattern(raw);
  for (auto& part : parts) {
    auto decoded = percentDecode(part, false);
    if (!decoded) return std::nullopt;
    part = std::move(*decoded);
  }
  return parts;
}

bool isCapture(const std::string& seg) {
  return seg.size() >= 2 && seg.front() == '{' && seg.back() == '}';
}

bool isRestCapture(const std::string& seg) {
  return isCapture(seg) && seg.size() >= 3 && seg[seg.size() - 2] == '*';
}

std::string captureName(const std::string& seg) {
  return seg.substr(1, seg.size() - (isRestCapture(seg) ? 3 : 2));
}

// A one-segment capture with a literal suffix, "{hash}.narinfo": the
// capture's name and the suffix; nullopt for anything else.
std::optional<std::pair<std::string, std::string>> suffixCapture(
    const std::string& seg) {
  if (seg.size() < 3 || seg.front() != '{' || seg.back() == '}')
    return std::nullopt;
  auto close = seg.find('}');
  if (close == std::string::npos) return std::nullopt;
  return std::make_pair(seg.substr(1, close - 1), seg.substr(close + 1));
}

}  // namespace

const std::string& RouteParams::at(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw Error("route has no parameter '" + name + "'");
  return it->second;
}

int64_t RouteParams::id(const std::string& name) const {
  const std::string& s = at(name);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v <= 0)
    throw HttpError(
        400, "'" + s + "' is not a valid " + name + " (a positive integer)");
  return v;
}

void Router::add(const std::string& method, const std::string& pattern,
                 Handler handler) {
  if (pattern.empty() || pattern[0] != '/')
    throw Error("route pattern '" + pattern + "' must start with '/'");
  Route r{method, pattern, splitPattern(pattern), std::move(handler)};
  for (size_t i = 0; i < r.segments.size(); i++) {
    const std::string& seg = r.segments[i];
    if (auto sc = suffixCapture(seg)) {
      if (sc->first.empty() ||
          sc->second.find_first_of("{}*") != std::string::npos)
        throw Error("route pattern '" + pattern + "' has a malformed capture " +
                    seg);
      continue;
    }
    if (!isCapture(seg)) continue;
    if (captureName(seg).empty())
      throw Error("route pattern '" + pattern + "' has an unnamed capture");
    if (captureName(seg).find_first_of("{}") != std::string::npos)
      throw Error("route pattern '" + pattern + "' has a malformed capture " +
                  seg);
    if (isRestCapture(seg) && i + 1 != r.segments.size())
      throw Error("route pattern '" + pattern + "': " + seg +
                  " must be the last segment");
  }
  for (auto& other : routes_)
    if (other.method == method && other.pattern == pattern)
      throw Error("route " + method + " " + pattern + " is defined twice");
  routes_.push_back(std::move(r));
}

bool Router::matches(const Route& r, const std::vector<std::string>& parts,
                     std::map<std::string, std::string>& out) {
  out.clear();
  for (size_t i = 0; i < r.segments.size(); i++) {
    const std::string& seg = r.segments[i];
    if (isRestCapture(seg)) {
      if (i >= parts.size()) return false;
      std::string rest = parts[i];
      for (size_t j = i + 1; j < parts.size(); j++) rest += "/" + parts[j];
      if (rest.empty()) return false;
      out[captureName(seg)] = rest;
      return true;
    }
    if (i >= parts.size()) return false;
    if (auto sc = suffixCapture(seg)) {
      const std::string& part = parts[i];
      if (part.size() <= sc->second.size() || !part.ends_with(sc->second))
        return false;
      out[sc->first] = part.substr(0, part.size() - sc->second.size());
    } else if (isCapture(seg)) {
      if (parts[i].empty()) return false;
      out[captureName(seg)] = parts[i];
    } else if (seg != parts[i]) {
      return false;
    }
  }
  return r.segments.size() == parts.size();
}

Router::Match Router::match(const std::string& method,
                            const std::string& path) const {
  Match m;
  m.status = 404;
  if (path.empty() || path[0] != '/') return m;
  auto split = splitRawPath(path);
  if (!split) return m;
  const std::vector<std::string>& parts = *split;
  std::set<std::string> allowed;
  std::map<std::string, std::string> caps;
  const Route* fallback = nullptr;  // GET route for a HEAD request
  std::map<std::string, std::string> fallbackCaps;
  for (auto& r : routes_) {
    if (!matches(r, parts, caps)) continue;
    allowed.insert(r.method);
    if (r.method == method) {
      m.handler = &r.handler;
      m.params = RouteParams(std::move(caps));
      m.pattern = r.pattern;
      m.status = 200;
      return m;
    }
    if (method == "HEAD" && r.method == "GET" && !fallback) {
      fallback = &r;
      fallbackCaps = caps;
    }
  }
  if (fallback) {
    m.handler = &fallback->handler;
    m.params = RouteParams(std::move(fallbackCaps));
    m.pattern = fallback->pattern;
    m.status = 200;
    return m;
  }
  if (!allowed.empty()) {
    m.status = 405;
    if (allowed.count("GET")) allowed.insert("HEAD");
    for (auto& a : allowed) m.allow += (m.allow.empty() ? "" : ", ") + a;
  }
  return m;
}

std::vector<std::pair<std::string, std::string>> Router::routes() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& r : routes_) out.emplace_back(r.method, r.pattern);
  return out;
}

Response Router::handle(const Request& req) const {
  return handle(req, match(req.method, req.path));
}

Response Router::handle(const Request& req, const Match& m) const {
  bool json = req.wantsJson();
  if (!m.handler) {
    if (m.status == 405) {
      Response r = Response::error(405,
                                   req.method + " is not allowed on " +
                                       req.path + " (allowed: " + m.allow + ")",
                                   json);
      r.headers.emplace_back("Allow", m.allow);
      return r;
    }
    return Response::error(404, "no page at " + req.path, json);
  }
  try {
    if (guard_) guard_(req);
    return (*m.handler)(req, m.params);
  } catch (const HttpError& e) {
    Response r = Response::error(e.status(), e.what(), json);
    if (e.status() == 401)
      r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"kiln\"");
    return r;
  } catch (const std::exception& e) {
    logError("web: " + req.method + " " + req.path + ": " + e.what());
    return Response::error(500, "internal error (logged by the server)", json);
  } catch (...) {
    logError("web: " + req.method + " " + req.path + ": unknown exception");
    return Response::error(500, "internal error (logged by the server)", json);
  }
}

}  // namespace kiln::web
