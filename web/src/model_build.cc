// The page models of a build, a job, the queue, the workers and search
// (model.h).
#include "kiln/scheduler/logs.h"
#include "kiln/scheduler/offline_requests.h"
#include "kiln/web/model.h"
#include "model_release.h"
#include "model_repeat.h"
#include "model_util.h"

namespace kiln::web {

using scheduler::Page;
using scheduler::StateView;

json jobsetRowJson(const scheduler::JobsetRow& j) {
  json out = scheduler::jobsetJson(j);
  out["enabled"] = j.enabled;
  out["lastCheckedMs"] = j.lastCheckedMs;
  return out;
}

scheduler::JobsetRow findJobset(StateView& view, const std::string& project,
                                const std::string& jobset) {
  auto js = view.rows().jobsetByName(project, jobset);
  if (!js) throw NotFound("jobset " + project + ":" + jobset + " not found");
  return *js;
}

namespace {

json outputsJson(StateView& view, int64_t build, const PathSizeFn& sizes) {
  json out = json::array();
  for (auto& [name, path] : view.rows().buildOutputs(build)) {
    json o = {{"name", name}, {"path", path}};
    auto size = sizes ? sizes(path) : std::nullopt;
    o["narSize"] = size ? json(size->narSize) : json(nullptr);
    o["closureSize"] = size ? json(size->closureSize) : json(nullptr);
    out.push_back(std::move(o));
  }
  return out;
}

json stepsJson(const std::vector<scheduler::StepRow>& steps) {
  json out = json::array();
  for (auto& s : steps) out.push_back(stepJson(s));
  return out;
}

}  // namespace

json buildModel(StateView& view, const std::string& stateDir, int64_t id,
                const PathSizeFn& sizes) {
  auto b = view.rows().build(id);
  if (!b) throw NotFound("build " + std::to_string(id) + " not found");
  auto js = view.rows().jobset(b->jobset);
  auto project = js ? view.project(js->project) : std::nullopt;
  json out = {{"build", buildJson(*b)},
              {"project", project ? project->name : ""},
              {"jobset", js ? js->name : ""}};
  auto steps = view.buildSteps(*b);
  out["step"] = steps.top ? stepJson(*steps.top) : json(nullptr);
  out["steps"] = stepsJson(steps.ran);
  out["dependencies"] = stepsJson(steps.dependencies);
  out["stepsTruncated"] = steps.truncated;
  out["outputs"] = outputsJson(view, id, sizes);
  out["aggregate"] = aggregateJson(view, id);
  out["reproducibility"] =
      steps.top ? repeatCheckJson(view, steps.top->id) : json(nullptr);
  json logs = json::array();
  // Probed by attempt (the top step's count), not by reading the logs
  // folder: it holds a file per attempt of every step ever built.
  if (steps.top)
    for (auto& log : scheduler::stepLogs(view.rows(), stateDir, *steps.top))
      logs.push_back({{"attempt", log.attempt}});
  out["logs"] = std::move(logs);
  return out;
}

json jobModel(StateView& view, const std::string& project,
              const std::string& jobset, const std::string& job,
              const Page& page, const PathSizeFn& sizes) {
  auto js = findJobset(view, project, jobset);
  auto h = view.jobHistory(js.id, job, page);
  json rows = json::array();
  for (auto& r : h.rows) {
    json j = buildJson(r.build);
    j["durationMs"] = r.startMs && r.stopMs >= r.startMs
                          ? json(r.stopMs - r.startMs)
                          : json(nullptr);
    rows.push_back(std::move(j));
  }
  return {{"project", project},
          {"jobset", jobset},
          {"job", job},
          {"latest", view.latestBuild(js.id, job, false)},
          {"latestFinished", view.latestBuild(js.id, job, true)},
          {"builds", pageJson(page, h.more, std::move(rows))},
          {"history", jobHistoryJson(view, js.id, job, sizes)}};
}

json queueModel(const scheduler::SchedulerSnapshot* snap, const Page& page) {
  json rows = json::array();
  bool more = false;
  if (snap) {
    auto& q = snap->queue;
    for (size_t i = size_t(page.offset); i < q.size(); ++i) {
      if (int64_t(rows.size()) == page.limit) {
        more = true;
        break;
      }
      rows.push_back({{"stepId", q[i].stepId},
                      {"drvPath", q[i].drvPath},
                      {"system", q[i].system},
                      {"state", q[i].state},
                      {"whyWaiting", q[i].reason}});
    }
  }
  return {{"scheduler", snap != nullptr},
          {"takenMs", snap ? snap->takenMs : 0},
          {"total", snap ? snap->queue.size() : 0},
          {"steps", pageJson(page, more, std::move(rows))}};
}

json workersModel(const scheduler::SchedulerSnapshot* snap) {
  json out = json::array();
  if (snap)
    for (auto& w : snap->workers)
      out.push_back({{"name", w.name},
                     {"systems", w.systems},
                     {"slots", w.slots},
                     {"runningSteps", w.runningSteps},
                     {"load", w.slots ? double(w.runningSteps) / w.slots : 0},
                     {"features", w.features},
                     {"steps", w.steps},
                     {"lastSeenMs", w.lastSeenMs},
                     {"succeededSteps", w.succeededSteps},
                     {"failedSteps", w.failedSteps},
                     {"pressure", w.pressure},
                     {"health", w.health}});
  return {{"scheduler", snap != nullptr}, {"workers", std::move(out)}};
}

json searchModel(StateView& view, const std::string& storeDir,
                 const std::string& query) {
  auto r = view.search(query, storeDir);
  json jobs = json::array();
  for (auto& j : r.jobs)
    jobs.push_back({{"project", j.project},
                    {"jobset", j.jobset},
                    {"job", j.job},
                    {"latestBuild", j.latestBuild}});
  json builds = json::array();
  for (auto& b : r.builds) builds.push_back(buildJson(b));
  json outputs = json::array();
  for (auto& o : r.outputs)
    outputs.push_back(
        {{"build", o.build}, {"name", o.name}, {"path", o.path}});
  return {{"query", query},
          {"jobs", std::move(jobs)},
          {"builds", std::move(builds)},
          {"outputs", std::move(outputs)}};
}

}  // namespace kiln::web
