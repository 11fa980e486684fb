// `/metrics`: the shared registry, the store sampled at each scrape, and
// the HTTP request families (metrics.h).
#include "kiln/web/metrics.h"

#include <prometheus/gauge.h>
#include <prometheus/text_serializer.h>

#include <mutex>
#include <set>

#include "kiln/common/file.h"
#include "kiln/common/logging.h"
#include "kiln/store/local_store.h"

namespace kiln::web {
namespace {

const std::set<std::string>& standardMethods() {
  static const std::set<std::string> kMethods{
      "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"};
  return kMethods;
}

// The central store's size, written into two gauges at each scrape.
class StoreSampler {
 public:
  StoreSampler(prometheus::Registry& registry, std::string stateDir,
               std::string storeDir)
      : stateDir_(std::move(stateDir)),
        storeDir_(std::move(storeDir)),
        paths_(prometheus::BuildGauge()
                   .Name("kiln_store_valid_paths")
                   .Help("Valid paths in the central store")
                   .Register(registry)
                   .Add({})),
        bytes_(prometheus::BuildGauge()
                   .Name("kiln_store_nar_bytes")
                   .Help("Sum of the NAR sizes of the central store's paths")
                   .Register(registry)
                   .Add({})) {}

  // Never throws: a store that cannot be read leaves the last values.
  void sample() {
    std::lock_guard lock(mu_);
    try {
      if (!store_) {
        // Only a store the scheduler made: a scrape creates nothing.
        if (!pathExists(stateDir_ + "/db/db.sqlite")) return;
        store_ = std::make_unique<store::LocalStore>(
            stateDir_, store::StoreDir(storeDir_));
      }
      auto s = store_->summary();
      paths_.Set(double(s.paths));
      bytes_.Set(double(s.narBytes));
    } catch (const std::exception& e) {
      logWarn(std::string("web: sampling the store for /metrics: ") + e.what());
    }
  }

 private:
  std::mutex mu_;
  std::string stateDir_, storeDir_;
  std::unique_ptr<store::LocalStore> store_;
  prometheus::Gauge& paths_;
  prometheus::Gauge& bytes_;
};

}  // namespace

HttpMetrics::HttpMetrics(prometheus::Registry& registry)
    : requests_(prometheus::BuildCounter()
                    .Name("kiln_http_requests_total")
                    .Help("HTTP requests answered, by route, method, status")
                    .Register(registry)),
      duration_(prometheus::BuildHistogram()
                    .Name("kiln_http_request_duration_seconds")
                    .Help("Time handlers took to answer, by route (not the "
                          "time to send long bodies)")
                    .Register(registry)) {}

void HttpMetrics::observe(const std::string& route, const std::string& method,
                          int status, double seconds) {
  std::string r = route.empty() ? "unmatched" : route;
  std::string m = standardMethods().count(method) ? method : "other";
  requests_
      .Add({{"route", r}, {"method", m}, {"status", std::to_string(status)}})
      .Increment();
  duration_
      .Add({{"route", r}},
           prometheus::Histogram::BucketBoundaries{
               0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5})
      .Observe(seconds);
}

void addMetricsRoutes(Router& router, WebContext& ctx) {
  if (!ctx.metrics) return;
  std::shared_ptr<StoreSampler> sampler;
  if (!ctx.stateDir.empty())
    sampler = std::make_shared<StoreSampler>(*ctx.metrics, ctx.stateDir,
                                             ctx.storeDir);
  const WebContext* c = &ctx;
  router.add(
      "GET", "/metrics", [c, sampler](const Request&, const RouteParams&) {
        if (sampler) sampler->sample();
        auto families = c->metrics->Collect();
        for (auto& extra : c->extraMetrics) {
          auto more = extra->Collect();
          families.insert(families.end(), more.begin(), more.end());
        }
        Response r =
            Response::text(prometheus::TextSerializer().Serialize(families));
        r.contentType = "text/plain; version=0.0.4; charset=utf-8";
        return r;
      });
}

}  // namespace kiln::web
