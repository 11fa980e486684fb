#pragma once
/// The web module's routes and a running web front end (what `kiln
/// scheduler --web-listen` and `kiln serve` start).

#include <memory>

#include "kiln/web/context.h"
#include "kiln/web/metrics.h"
#include "kiln/web/router.h"
#include "kiln/web/server.h"

namespace kiln::web {

/// Registers every page module's routes (web/src/routes.cc holds the list).
void addAllRoutes(Router& router, WebContext& ctx);

/// Which routes a front end serves.
enum class RouteSet {
  kAll,          ///< every page, the API, the cache and /metrics
  kMetricsOnly,  ///< only /metrics (`kiln scheduler --metrics-port`)
};

/// A context, its routes and a server on them, owned together. Requests
/// are counted in `ctx.metrics` when it is set.
class WebFrontend {
 public:
  /// Registers the routes of `which` on `ctx` and starts serving on
  /// `config.listen`. Throws Error if the address cannot be bound.
  WebFrontend(WebServerConfig config, WebContext ctx,
              RouteSet which = RouteSet::kAll);
  ~WebFrontend();
  /// The server's "http://HOST:PORT".
  std::string url() const { return server_->url(); }
  int port() const { return server_->port(); }
  const WebContext& context() const { return *ctx_; }

 private:
  std::unique_ptr<WebContext> ctx_;  // stable address for the handlers
  Router router_;
  std::unique_ptr<HttpMetrics> httpMetrics_;
  std::unique_ptr<WebServer> server_;
};

}  // namespace kiln::web
