// The binary cache's routes (binary_cache.h): nix-cache-info, narinfo,
// NAR files and build logs, each name checked before any file is touched.
#include <algorithm>

#include "kiln/scheduler/logs.h"
#include "kiln/scheduler/state_view.h"
#include "kiln/store/store_path.h"
#include "kiln/web/binary_cache.h"
#include "kiln/web/context.h"
#include "kiln/web/router.h"
#include "pages_logs.h"

namespace kiln::web {
namespace {

// A one-segment name from a `{x*}` capture: no '/', no dot names (so
// nothing outside the folder it is looked up in can be named).
const std::string& singleName(const std::string& name,
                              const std::string& what) {
  if (name.find('/') != std::string::npos || name == "." || name == "..")
    throw HttpError(400, what + " '" + name + "' must be a single file name");
  return name;
}

Response narInfo(BinaryCache& cache, const std::string& hash) {
  std::optional<std::string> text;
  try {
    text = cache.narInfo(hash);
  } catch (const FormatError& e) {
    throw HttpError(400, "malformed narinfo name: " + std::string(e.what()));
  }
  if (!text)
    throw HttpError(404, "no valid store path has hash part '" + hash + "'");
  Response r = Response::text(*text);
  r.contentType = "text/x-nix-narinfo";
  return r;
}

Response narFile(const BinaryCache& cache, const std::string& name) {
  std::string file;
  try {
    file = cache.narFile(singleName(name, "NAR file"));
  } catch (const FormatError& e) {
    throw HttpError(400, "malformed NAR file name: " + std::string(e.what()));
  }
  // The server answers 404 when the file is not (or no longer) kept.
  return Response::file(file, "application/x-nix-nar");
}

Response buildLog(const WebContext& ctx, const std::string& name) {
  std::optional<store::StorePath> drv;
  try {
    drv.emplace(singleName(name, "derivation"));
  } catch (const FormatError& e) {
    throw HttpError(400, "malformed derivation name: " + std::string(e.what()));
  }
  if (!drv->isDerivation())
    throw HttpError(400, "'" + name + "' is not a derivation (.drv) name");
  auto* view = ctx.view();
  auto logs =
      view ? scheduler::stepLogs(view->rows(), ctx.stateDir, drv->baseName())
           : std::vector<scheduler::StepLog>{};
  if (logs.empty())
    throw HttpError(404, "no build log of '" + drv->baseName() + "'");
  // The newest attempt, as Hydra serves a derivation's log.
  return logResponse(ctx, logs.back());
}

}  // namespace

void addCacheRoutes(Router& router, WebContext& ctx) {
  if (!ctx.binaryCache) return;
  std::shared_ptr<BinaryCache> cache = ctx.binaryCache;
  const WebContext* c = &ctx;
  router.add("GET", "/nix-cache-info",
             [cache](const Request&, const RouteParams&) {
               Response r = Response::text(cache->cacheInfo());
               r.contentType = "text/x-nix-cache-info";
               return r;
             });
  router.add("GET", "/{hash}.narinfo",
             [cache](const Request&, const RouteParams& p) {
               return narInfo(*cache, p.at("hash"));
             });
  router.add("GET", "/nar/{file*}",
             [cache](const Request&, const RouteParams& p) {
               return narFile(*cache, p.at("file"));
             });
  router.add("GET", "/log/{drv*}", [c](const Request&, const RouteParams& p) {
    return buildLog(*c, p.at("drv"));
  });
}

}  // namespace kiln::web
