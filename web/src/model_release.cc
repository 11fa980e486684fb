// The read model of release engineering (docs/release.md): aggregate
// builds' constituents.
#include "model_release.h"

#include "kiln/scheduler/release_store.h"
#include "model_util.h"

namespace kiln::web {

json aggregateJson(scheduler::StateView& view, int64_t build) {
  auto rows = scheduler::aggregateConstituents(view.rows(), build);
  if (rows.empty()) return nullptr;
  json constituents = json::array();
  json failed = json::array();
  int64_t unfinished = 0;
  for (auto& c : rows) {
    constituents.push_back(buildJson(c));
    if (!c.finished)
      ++unfinished;
    else if (c.status != 0)
      failed.push_back(c.job);
  }
  return {
      {"constituents", std::move(constituents)},
      {"failed", std::move(failed)},
      {"unfinished", unfinished},
      {"truncated", int64_t(rows.size()) >= scheduler::kMaxListedConstituents}};
}

namespace {

// The size of the output charted for build `id` (nullopt: none known).
std::optional<PathSize> chartedSize(scheduler::StateView& view, int64_t id,
                                    const PathSizeFn& sizes) {
  if (!sizes) return std::nullopt;
  auto outputs = view.rows().buildOutputs(id);
  if (outputs.empty()) return std::nullopt;
  const std::string* path = &outputs.front().second;
  for (auto& [name, p] : outputs)
    if (name == "out") path = &p;
  return sizes(*path);
}

json advanceJson(scheduler::StateView& view,
                 const scheduler::ChannelAdvance& a) {
  auto e = view.rows().evaluation(a.eval);
  return {{"id", a.id},
          {"eval", a.eval},
          {"build", a.build},
          {"timeMs", a.timeMs},
          {"inputsHash", e ? e->inputsHash : ""}};
}

}  // namespace

json jobHistoryJson(scheduler::StateView& view, int64_t jobset,
                    const std::string& job, const PathSizeFn& sizes) {
  auto h = view.jobHistory(jobset, job, scheduler::Page{0, kHistoryPoints});
  json points = json::array();
  for (auto it = h.rows.rbegin(); it != h.rows.rend(); ++it) {
    auto& b = it->build;
    bool ran = it->startMs && it->stopMs >= it->startMs;
    auto size = b.finished && b.status == 0 ? chartedSize(view, b.id, sizes)
                                            : std::nullopt;
    points.push_back(
        {{"eval", b.eval},
         {"build", b.id},
         {"statusName", statusName(b.finished ? b.status : -1)},
         {"durationMs", ran ? json(it->stopMs - it->startMs) : json(nullptr)},
         {"outputSize", size ? json(size->narSize) : json(nullptr)},
         {"closureSize", size ? json(size->closureSize) : json(nullptr)}});
  }
  return {{"points", std::move(points)}};
}

json regressionsJson(scheduler::StateView& view, int64_t eval) {
  json out = json::array();
  for (auto& r : scheduler::evalRegressions(view.rows(), eval))
    out.push_back({{"job", r.job},
                   {"kind", r.kind},
                   {"baseEval", r.baseEval},
                   {"before", r.before},
                   {"after", r.after},
                   {"growthPercent", r.before > 0 ? double(r.after - r.before) *
                                                        100 / double(r.before)
                                                  : 0.0}});
  return out;
}

json channelModel(scheduler::StateView& view, const std::string& project,
                  const std::string& jobset, int64_t limit) {
  auto js = findJobset(view, project, jobset);
  json advances = json::array();
  for (auto& a : scheduler::channelAdvances(view.rows(), js.id, limit))
    advances.push_back(advanceJson(view, a));
  json latest = advances.empty() ? json(nullptr) : advances.front();
  return {{"project", project},
          {"jobset", jobset},
          {"channelJob", js.channelJob},
          {"latest", std::move(latest)},
          {"advances", std::move(advances)}};
}

}  // namespace kiln::web
