// The binary cache's routes (binary_cache.h): nix-cache-info, narinfo,
// NAR files and build logs, each name checked before any file is touched.
#include <algorithm>

#include "kiln/common/stream.h"
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
    throw HttpError(404,
                    cache.remote()
                        ? "the cache has no narinfo '" + hash + "'"
                        : "no valid store path has hash part '" + hash + "'");
  Response r = Response::text(*text);
  r.contentType = "text/x-nix-narinfo";
  return r;
}

// A source's bytes as a chunked body.
class SourceBody : public BodyStream {
 public:
  explicit SourceBody(std::unique_ptr<Source> src) : src_(std::move(src)) {}
  Next next(std::string& out, size_t max) override {
    size_t at = out.size();
    out.resize(at + max);
    size_t n = src_->read(out.data() + at, max);
    out.resize(at + n);
    return n == 0 ? Next::kEnd : Next::kData;
  }

 private:
  std::unique_ptr<Source> src_;
};

// A NAR file of the remote cache, passed through (the object store
// checked nothing; the client checks FileHash and NarHash as always).
Response remoteNarFile(const BinaryCache& cache, const std::string& name) {
  std::unique_ptr<Source> src;
  try {
    src = cache.openRemoteNar(singleName(name, "NAR file"));
  } catch (const FormatError& e) {
    throw HttpError(400, "malformed NAR file name: " + std::string(e.what()));
  }
  if (!src) throw HttpError(404, "the cache has no NAR file '" + name + "'");
  return Response::streamed(std::make_shared<SourceBody>(std::move(src)),
                            "application/x-nix-nar");
}

Response narFile(const BinaryCache& cache, const std::string& name) {
  if (cache.remote()) return remoteNarFile(cache, name);
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
