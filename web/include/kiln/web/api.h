#pragma once
/// The JSON write API under /api/ (docs/web.md, "Mutations"; described in
/// docs/openapi.yaml): evaluations, build restart/cancel/bump, cached
/// failures, projects and jobsets, each behind an API token's scope and
/// applied through the scheduler's request path; and the push webhook.

#include "kiln/web/context.h"
#include "kiln/web/router.h"

namespace kiln::web {

/// Registers the mutation routes (POST/PUT under /api/) on `router`;
/// `ctx` must outlive it.
void addApiRoutes(Router& router, WebContext& ctx);

}  // namespace kiln::web
