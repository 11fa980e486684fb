#pragma once
/// The dashboard's routes (docs/web.md): the HTML pages, each also
/// answering JSON (`Accept: application/json`, `?format=json`, or the same
/// path under `/api/`), the job redirects and badge, build logs (download
/// per attempt, live server-sent events while the build runs).

#include "kiln/web/context.h"
#include "kiln/web/router.h"

namespace kiln::web {

/// Registers the pages' routes on `router`; they read through `ctx`, which
/// must outlive the router.
void addPageRoutes(Router& router, WebContext& ctx);

}  // namespace kiln::web
