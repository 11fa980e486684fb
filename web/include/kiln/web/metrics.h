#pragma once
/// `/metrics` (docs/operations.md, "Metrics"): one prometheus-cpp registry
/// shared by the scheduler service (the farm), the central store (sampled
/// at each scrape) and the web server (requests by route), in Prometheus'
/// text format, plus further registries a context names (notifiers).

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

#include "kiln/web/context.h"
#include "kiln/web/router.h"

namespace kiln::web {

/// Requests answered, by route pattern, method and status, and their
/// handler time by route. Thread-safe.
class HttpMetrics {
 public:
  /// Registers the families in `registry`, which must outlive this object.
  explicit HttpMetrics(prometheus::Registry& registry);
  /// Counts one request; `route` "" (no route matched) is "unmatched",
  /// methods other than the standard ones are "other" (labels stay few).
  void observe(const std::string& route, const std::string& method, int status,
               double seconds);

 private:
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& duration_;
};

/// Registers `GET /metrics` on `ctx.metrics` (and `ctx.extraMetrics`),
/// sampling the central store of `ctx.stateDir` into it at each scrape
/// (none when `ctx.stateDir` is empty: a worker's). A context without a
/// registry gets none (the route answers 404).
void addMetricsRoutes(Router& router, WebContext& ctx);

}  // namespace kiln::web
