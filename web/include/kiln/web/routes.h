#pragma once
/// The web module's routes and a running web front end (what `kiln
/// scheduler --web-listen` and `kiln serve` start).

#include <memory>

#include "kiln/web/context.h"
#include "kiln/web/router.h"
#include "kiln/web/server.h"

namespace kiln::web {

/// Registers every page module's routes (web/src/routes.cc holds the list).
void addAllRoutes(Router& router, WebContext& ctx);

/// A context, its routes and a server on them, owned together.
class WebFrontend {
 public:
  /// Registers every route on `ctx` and starts serving on `config.listen`.
  /// Throws Error if the address cannot be bound.
  WebFrontend(WebServerConfig config, WebContext ctx);
  ~WebFrontend();
  /// The server's "http://HOST:PORT".
  std::string url() const { return server_->url(); }
  int port() const { return server_->port(); }
  const WebContext& context() const { return *ctx_; }

 private:
  std::unique_ptr<WebContext> ctx_;  // stable address for the handlers
  Router router_;
  std::unique_ptr<WebServer> server_;
};

}  // namespace kiln::web
