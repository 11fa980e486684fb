// The dashboard's routes (pages.h): each page is a model (model.h)
// answered as JSON or rendered as HTML (html.h).
#include <algorithm>
#include <cstdint>
#include <mutex>

#include "channel_routes.h"
#include "kiln/common/clock.h"
#include "kiln/common/file.h"
#include "kiln/store/local_store.h"
#include "kiln/web/html.h"
#include "kiln/web/model.h"
#include "kiln/web/pages.h"
#include "model_cache.h"
#include "model_estimate.h"
#include "model_repeat.h"
#include "pages_logs.h"

namespace kiln::web {

using scheduler::Page;
using scheduler::StateView;

int64_t intArg(const Request& req, const std::string& name, int64_t def,
               int64_t min, int64_t max) {
  std::string v = req.queryArg(name);
  if (v.empty()) return def;
  size_t used = 0;
  int64_t n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || n < min || n > max)
    throw HttpError(400, "query argument '" + name + "' must be an integer in " +
                             std::to_string(min) + ".." + std::to_string(max));
  return n;
}

PathSizeFn storeSizes(const WebContext& ctx) {
  struct Shared {
    std::mutex mu;
    std::shared_ptr<store::LocalStore> store;
  };
  auto shared = std::make_shared<Shared>();
  return [shared, &ctx](const std::string& path) -> std::optional<PathSize> {
    std::shared_ptr<store::LocalStore> s;
    {
      std::lock_guard lock(shared->mu);
      if (!shared->store && pathExists(ctx.stateDir + "/db"))
        shared->store = std::make_shared<store::LocalStore>(
            ctx.stateDir, store::StoreDir(ctx.storeDir));
      s = shared->store;
    }
    if (!s) return std::nullopt;
    auto sp = s->parsePath(path);
    auto info = s->queryPathInfo(sp);
    if (!info) return std::nullopt;
    PathSize size{int64_t(info->narSize), 0};
    for (auto& q : s->queryRequisites({sp}))
      if (auto i = s->queryPathInfo(q)) size.closureSize += int64_t(i->narSize);
    return size;
  };
}

namespace {

using ModelFn =
    std::function<json(StateView&, const Request&, const RouteParams&)>;
using RenderFn = std::string (*)(const json&);

Page pageArg(const Request& req, const std::string& offsetName) {
  return Page{intArg(req, offsetName, 0, 0, Page::kMaxOffset),
              intArg(req, "limit", 50, 1, Page::kMaxLimit)};
}

// The key of a page's model in the ModelCache: its path (the /api/ twin's
// without the prefix) and query, without the answer's format.
std::string cacheKey(const Request& req, bool api) {
  std::string key = api ? req.path.substr(4) : req.path;
  for (auto& [name, value] : req.query)
    if (name != "format") key += "\n" + name + "=" + value;
  return key;
}

// A page: its model as JSON when asked (or under /api/), else as HTML.
// With `cache`, the model is shared by the requests of one second.
Handler page(WebContext& ctx, ModelFn model, RenderFn render, bool api,
             std::shared_ptr<ModelCache> cache) {
  return [&ctx, model, render, api, cache](const Request& req,
                                           const RouteParams& p) {
    bool asJson = api || req.wantsJson();
    try {
      StateView* view = ctx.view();
      if (!view)
        throw HttpError(503, "the scheduler has not created its state yet");
      json m = cache ? cache->get(cacheKey(req, api),
                                  [&] { return model(*view, req, p); })
                     : model(*view, req, p);
      return asJson ? Response::json(m) : Response::html(render(m));
    } catch (const NotFound& e) {
      if (asJson) throw HttpError(404, e.what());
      return Response::html(renderError(404, e.what()), 404);
    } catch (const scheduler::SchedulerStateError& e) {
      throw HttpError(400, e.what());
    }
  };
}

struct Pages {
  WebContext& ctx;
  std::shared_ptr<MetricsHistory> history = std::make_shared<MetricsHistory>();
  PathSizeFn sizes = storeSizes(ctx);

  std::shared_ptr<const scheduler::SchedulerSnapshot> snapshot() const {
    return ctx.snapshot ? ctx.snapshot() : nullptr;
  }

  // The overview is the page everyone keeps open: its model is made at most
  // once per kOverviewTtlMs and shared (the scheduler's snapshot it shows
  // is up to a second old anyway). Callers meanwhile wait for the one
  // making it instead of all querying at once.
  static constexpr int64_t kOverviewTtlMs = 1000;
  struct OverviewCache {
    std::mutex mu;
    int64_t madeMs = INT64_MIN / 2;
    json model;
  };
  std::shared_ptr<OverviewCache> overviewCache =
      std::make_shared<OverviewCache>();
  std::shared_ptr<EstimateModels> estimates =
      std::make_shared<EstimateModels>(RealClock::instance());

  // Each unfinished evaluation's expected finish (model_estimate.h).
  void addEstimates(StateView& v, const scheduler::SchedulerSnapshot* snap,
                    json& evals) const {
    for (auto& e : evals)
      if (e["unfinished"].get<int64_t>() > 0)
        e["estimate"] = estimates->evaluation(v, snap, e["id"], e["jobsetId"]);
  }

  json overview(StateView& v, const Request&, const RouteParams&) const {
    std::lock_guard lock(overviewCache->mu);
    int64_t now = RealClock::instance().nowMs();
    if (now - overviewCache->madeMs < kOverviewTtlMs &&
        now >= overviewCache->madeMs)
      return overviewCache->model;
    auto snap = snapshot();
    if (snap) history->record(*snap);
    overviewCache->model = overviewModel(v, snap.get(), history.get(), now);
    addEstimates(v, snap.get(), overviewCache->model["evaluations"]);
    overviewCache->model["lastEstimate"] = lastEstimateJson(v, 0);
    overviewCache->madeMs = now;
    return overviewCache->model;
  }
  json build(StateView& v, const Request&, const RouteParams& p) const {
    int64_t id = p.id("id");
    json m = buildModel(v, ctx.stateDir, id, sizes);
    m["logTail"] = latestLogTail(v, ctx.stateDir, m["build"]["drvPath"]);
    if (auto& r = m["reproducibility"];
        r.is_object() && r["state"] == "pending")
      r["waiting"] = repeatWaitReason(snapshot().get(), r["firstWorker"]);
    return m;
  }
  json evaluation(StateView& v, const Request& r, const RouteParams& p) const {
    scheduler::BuildFilter f;
    std::string state = r.queryArg("state", "all");
    static const char* kStates[] = {"all", "succeeded", "failed", "unfinished"};
    auto it = std::find(std::begin(kStates), std::end(kStates), state);
    if (it == std::end(kStates))
      throw HttpError(400, "state must be all, succeeded, failed or unfinished");
    f.state = scheduler::BuildState(it - std::begin(kStates));
    f.jobPrefix = r.queryArg("job");
    f.system = r.queryArg("system");
    json m = evaluationModel(v, p.id("id"), f, pageArg(r, "offset"),
                             pageArg(r, "errors"));
    auto& e = m["evaluation"];
    m["estimate"] =
        estimates->evaluation(v, snapshot().get(), e["id"], e["jobsetId"]);
    return m;
  }
  json compare(StateView& v, const Request& r, const RouteParams& p) const {
    auto kind = changeKindFromName(r.queryArg("kind", "newly-failing"));
    if (!kind)
      throw HttpError(400, "kind must be newly-failing, newly-succeeding, "
                           "still-failing, new, removed, unfinished or changed");
    int64_t base = intArg(r, "base", 0, 0, INT64_MAX);
    return comparisonModel(v, p.id("id"), base, *kind, pageArg(r, "offset"));
  }
};

// Adds `pattern` as a page and as its JSON twin under /api (both sharing
// `cache` when given).
void addPage(Router& router, WebContext& ctx, const std::string& pattern,
             ModelFn model, RenderFn render,
             std::shared_ptr<ModelCache> cache = nullptr) {
  router.add("GET", pattern, page(ctx, model, render, false, cache));
  router.add("GET", "/api" + (pattern == "/" ? "/overview" : pattern),
             page(ctx, model, render, true, cache));
}

}  // namespace

void addJobRoutes(Router& router, WebContext& ctx);

void addPageRoutes(Router& router, WebContext& ctx) {
  auto pages = std::make_shared<Pages>(Pages{ctx});
  // The pages that read thousands of rows (an evaluation's 5,000 builds
  // for a comparison) share their model for a second, as the overview does.
  // Not the build page: a form posted there redirects back to it and must
  // show what it changed.
  auto shared = std::make_shared<ModelCache>(RealClock::instance(),
                                             std::chrono::milliseconds(1000));
  using namespace std::placeholders;
  addPage(router, ctx, "/", std::bind(&Pages::overview, pages, _1, _2, _3),
          renderOverview);
  addPage(router, ctx, "/projects",
          [](StateView& v, const Request&, const RouteParams&) {
            return projectsModel(v);
          },
          renderProjects);
  addPage(router, ctx, "/jobset/{project}/{jobset}",
          [](StateView& v, const Request& r, const RouteParams& p) {
            return jobsetModel(v, p.at("project"), p.at("jobset"),
                               pageArg(r, "evals"), pageArg(r, "jobs"),
                               int(intArg(r, "columns", 10, 1, 20)));
          },
          renderJobset, shared);
  addPage(router, ctx, "/eval/{id}",
          std::bind(&Pages::evaluation, pages, _1, _2, _3), renderEvaluation,
          shared);
  addPage(router, ctx, "/eval/{id}/compare",
          std::bind(&Pages::compare, pages, _1, _2, _3), renderComparison,
          shared);
  addPage(router, ctx, "/build/{id}",
          std::bind(&Pages::build, pages, _1, _2, _3), renderBuild);
  addPage(router, ctx, "/queue",
          [pages](StateView&, const Request& r, const RouteParams&) {
            return queueModel(pages->snapshot().get(), pageArg(r, "offset"));
          },
          renderQueue);
  addPage(router, ctx, "/workers",
          [pages](StateView&, const Request&, const RouteParams&) {
            return workersModel(pages->snapshot().get());
          },
          renderWorkers);
  addPage(router, ctx, "/search",
          [&ctx](StateView& v, const Request& r, const RouteParams&) {
            std::string q = r.queryArg("q");
            if (q.size() > 400)
              throw HttpError(400, "search text longer than 400 bytes");
            return searchModel(v, ctx.storeDir, q);
          },
          renderSearch, shared);
  addJobRoutes(router, ctx);
  addLogRoutes(router, ctx);
  addChannelRoutes(router, ctx);
}

}  // namespace kiln::web
