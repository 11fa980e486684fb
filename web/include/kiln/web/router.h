#pragma once
/// Routes: a method and a path pattern to a handler. Patterns are literal
/// segments and `{name}` captures of one segment ("/build/{id}"), which
/// may end in a literal suffix ("/{hash}.narinfo" captures `hash`); a last
/// `{name*}` captures the rest of the path, slashes included
/// ("/log/{drv*}"). A path matching no pattern is a 404, one matching only
/// under other methods a 405 (with `Allow`); `HEAD` uses the `GET` handler.
/// A 401 carries `WWW-Authenticate: Bearer`.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kiln/web/http.h"

namespace kiln::web {

/// The captures of a matched pattern.
class RouteParams {
 public:
  RouteParams() = default;
  explicit RouteParams(std::map<std::string, std::string> values)
      : values_(std::move(values)) {}
  /// The capture `name`; throws Error if the pattern has none (a bug).
  const std::string& at(const std::string& name) const;
  /// The capture `name` as a positive integer; throws HttpError(400)
  /// naming it when it is not one (or does not fit in 63 bits).
  int64_t id(const std::string& name) const;
  /// Every capture by name.
  const std::map<std::string, std::string>& all() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

/// Answers one request. May throw HttpError (answered with its status);
/// any other exception is logged and answered 500 by the server.
using Handler = std::function<Response(const Request&, const RouteParams&)>;

/// Runs before every matched handler (e.g. an access check); throws
/// HttpError to refuse the request.
using Guard = std::function<void(const Request&)>;

/// The routes of a server. Fill it before the server starts; afterwards it
/// is only read (safe from several threads).
class Router {
 public:
  /// Adds a route. Throws Error for a malformed pattern (not starting with
  /// '/', an empty capture name, `{x*}` not last) or a duplicate.
  void add(const std::string& method, const std::string& pattern,
           Handler handler);
  /// Sets the guard run before every matched handler (none by default).
  void setGuard(Guard guard) { guard_ = std::move(guard); }
  /// Every (method, pattern), in the order added.
  std::vector<std::pair<std::string, std::string>> routes() const;
  /// The result of matching a request.
  struct Match {
    const Handler* handler = nullptr;  ///< null: no route (see `status`)
    RouteParams params;
    std::string pattern;  ///< the matched pattern ("" when none)
    int status = 200;     ///< 404 or 405 when `handler` is null
    std::string allow;    ///< for 405: the methods of the path
  };
  /// The route for `method` and `path` as received (percent-encoded):
  /// routes match on its '/'-separated segments, each decoded on its own,
  /// so a capture may hold a '/' sent as "%2F" (a job named "a/b" is
  /// `/job/a%2Fb`). A malformed escape matches nothing (404).
  Match match(const std::string& method, const std::string& path) const;
  /// Runs the matching handler, turning a missing route into 404/405, an
  /// HttpError into its status and any other exception into a logged 500.
  /// Never throws.
  Response handle(const Request& req) const;
  /// Same, when the match is already known (`m` from `match(req...)`).
  Response handle(const Request& req, const Match& m) const;

 private:
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<std::string> segments;  ///< "{x}" / "{x*}" for captures
    Handler handler;
  };
  static bool matches(const Route& r, const std::vector<std::string>& parts,
                      std::map<std::string, std::string>& out);
  std::vector<Route> routes_;
  Guard guard_;
};

}  // namespace kiln::web
