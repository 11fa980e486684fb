// The list of the web module's route groups, and the front end that serves
// them (routes.h). A page module adds one line here.
#include "kiln/web/routes.h"

#include "api_request.h"
#include "kiln/web/api.h"
#include "kiln/web/binary_cache.h"
#include "kiln/web/pages.h"

namespace kiln::web {

void addAllRoutes(Router& router, WebContext& ctx) {
  addPageRoutes(router, ctx);
  addMetricsRoutes(router, ctx);
  addCacheRoutes(router, ctx);
  addApiRoutes(router, ctx);
  if (ctx.privateReads) router.setGuard(privateReadGuard(ctx));
}

WebFrontend::WebFrontend(WebServerConfig config, WebContext ctx, RouteSet which)
    : ctx_(std::make_unique<WebContext>(std::move(ctx))) {
  if (which == RouteSet::kAll)
    addAllRoutes(router_, *ctx_);
  else
    addMetricsRoutes(router_, *ctx_);
  RequestObserver observer;
  if (ctx_->metrics) {
    httpMetrics_ = std::make_unique<HttpMetrics>(*ctx_->metrics);
    observer = [m = httpMetrics_.get()](const std::string& route,
                                        const std::string& method, int status,
                                        double seconds) {
      m->observe(route, method, status, seconds);
    };
  }
  server_ = std::make_unique<WebServer>(std::move(config), router_, observer);
}

WebFrontend::~WebFrontend() = default;

}  // namespace kiln::web
