// The list of the web module's route groups, and the front end that serves
// them (routes.h). A page module adds one line here.
#include "kiln/web/routes.h"

#include "kiln/web/pages.h"

namespace kiln::web {

void addAllRoutes(Router& router, WebContext& ctx) {
  addPageRoutes(router, ctx);
}

WebFrontend::WebFrontend(WebServerConfig config, WebContext ctx)
    : ctx_(std::make_unique<WebContext>(std::move(ctx))) {
  addAllRoutes(router_, *ctx_);
  server_ = std::make_unique<WebServer>(std::move(config), router_);
}

WebFrontend::~WebFrontend() = default;

}  // namespace kiln::web
