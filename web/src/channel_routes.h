#pragma once
// A jobset's channel's routes (channel_routes.cc, docs/release.md).

#include "kiln/web/context.h"
#include "kiln/web/router.h"

namespace kiln::web {

/// `/jobset/{project}/{jobset}/channel/latest` (HTML; JSON twin under
/// /api) and below it `store-paths.xz`, `nixexprs.tar.xz`, `git-revision`
/// and `binary-cache-url`.
void addChannelRoutes(Router& router, WebContext& ctx);

}  // namespace kiln::web
