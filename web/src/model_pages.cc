// The page models of the overview, projects, jobsets, evaluations and
// their comparison (model.h). Each reads bounded pages only.
#include "kiln/web/model.h"
#include "model_release.h"
#include "model_repeat.h"
#include "model_util.h"

namespace kiln::web {

using scheduler::Page;
using scheduler::StateView;

json evaluationJson(const scheduler::EvaluationSummary& e) {
  return {{"id", e.eval.id},
          {"jobsetId", e.eval.jobset},
          {"project", e.project},
          {"jobset", e.jobset},
          {"inputsHash", e.eval.inputsHash},
          {"timeMs", e.eval.timeMs},
          {"durationMs", e.eval.durationMs},
          {"jobs", e.eval.jobs},
          {"error", e.eval.error},
          {"builds", e.counts.all},
          {"finished", e.counts.finished},
          {"succeeded", e.counts.succeeded},
          {"failed", e.counts.finished - e.counts.succeeded},
          {"unfinished", e.counts.all - e.counts.finished}};
}

json pageJson(const Page& page, bool more, json rows) {
  return {{"offset", page.offset},
          {"limit", page.limit},
          {"more", more},
          {"rows", std::move(rows)}};
}

namespace {

json runningSteps(StateView& view, const scheduler::SchedulerSnapshot& snap) {
  std::vector<int64_t> ids;
  for (auto& q : snap.queue)
    if (q.state == "running") ids.push_back(q.stepId);
  json out = json::array();
  for (auto& s : view.stepsById(ids)) {
    json j = stepJson(s);
    j["elapsedMs"] = s.startMs ? snap.takenMs - s.startMs : 0;
    out.push_back(std::move(j));
  }
  return out;
}

json metricsJson(const scheduler::SchedulerSnapshot& snap) {
  auto& m = snap.metrics;
  return {{"runningSteps", m.runningSteps},
          {"waitingSteps", m.waitingSteps},
          {"waitingRepeats", m.waitingRepeats},
          {"runningRepeats", m.runningRepeats},
          {"backoffSteps", m.backoffSteps},
          {"failedSteps", m.failedSteps},
          {"workers", m.workers},
          {"totalSlots", m.totalSlots},
          {"freeSlots", m.freeSlots},
          {"dispatches", snap.dispatches},
          {"meanDispatchLatencyMs",
           snap.dispatches
               ? snap.dispatchLatencySum * 1000.0 / double(snap.dispatches)
               : 0.0},
          {"idleSlotSeconds", m.idleSlotSeconds},
          {"longestIdleWithWorkMs",
           std::chrono::duration_cast<std::chrono::milliseconds>(
               m.longestIdleWithWork)
               .count()}};
}

}  // namespace

json overviewModel(StateView& view, const scheduler::SchedulerSnapshot* snap,
                   const MetricsHistory* history, int64_t nowMs) {
  json out = {{"nowMs", nowMs}, {"scheduler", snap != nullptr}};
  json queue = json::array();
  if (snap) {
    for (auto& [system, n] : snap->metrics.queuedBySystem)
      if (n) queue.push_back({{"system", system}, {"queued", n}});
    out["running"] = runningSteps(view, *snap);
    out["workers"] = workersModel(snap)["workers"];
    out["metrics"] = metricsJson(*snap);
  } else {
    out["running"] = json::array();
    out["workers"] = json::array();
    out["metrics"] = nullptr;
  }
  out["queue"] = std::move(queue);
  json evals = json::array();
  for (auto& e : view.evaluations(0, Page::checked(0, 10)).rows)
    evals.push_back(evaluationJson(e));
  out["evaluations"] = std::move(evals);
  constexpr int64_t kHour = 3'600'000;
  json rate = json::array();
  for (auto& b : view.failureRate(nowMs, kHour, 24))
    rate.push_back({{"startMs", b.startMs},
                    {"finished", b.finished},
                    {"failed", b.failed}});
  out["failureRate"] = std::move(rate);
  out["history"] = history ? history->series() : json::array();
  return out;
}

json projectsModel(StateView& view) {
  json out = json::array();
  for (auto& p : view.projects()) {
    json jobsets = json::array();
    for (auto& j : view.jobsetsOf(p.id)) jobsets.push_back(jobsetRowJson(j));
    out.push_back({{"id", p.id},
                   {"name", p.name},
                   {"description", p.description},
                   {"enabled", p.enabled},
                   {"jobsets", std::move(jobsets)}});
  }
  return {{"projects", std::move(out)}};
}

json jobsetModel(StateView& view, const std::string& project,
                 const std::string& jobset, const Page& evals, const Page& jobs,
                 int matrixEvals) {
  auto js = findJobset(view, project, jobset);
  json out = {{"project", project}, {"jobset", jobsetRowJson(js)}};
  auto page = view.evaluations(js.id, evals);
  json rows = json::array();
  for (auto& e : page.rows) rows.push_back(evaluationJson(e));
  out["evaluations"] = pageJson(evals, page.more, std::move(rows));
  auto m = view.jobMatrix(js.id, matrixEvals, jobs);
  json cols = json::array();
  for (auto& e : m.evals) cols.push_back({{"id", e.id}, {"timeMs", e.timeMs}});
  json cells = json::array();
  for (size_t i = 0; i < m.jobs.size(); ++i) {
    json row = json::array();
    for (auto& c : m.cells[i])
      row.push_back(
          c.build ? json{{"build", c.build},
                         {"statusName", statusName(c.finished ? c.status : -1)}}
                  : json(nullptr));
    cells.push_back({{"job", m.jobs[i]}, {"cells", std::move(row)}});
  }
  out["matrix"] = {{"evaluations", std::move(cols)},
                   {"jobs", pageJson(jobs, m.moreJobs, std::move(cells))}};
  out["channel"] = channelModel(view, project, jobset, 10);
  out["nonDeterministic"] = nonDeterministicJson(view, js.id);
  return out;
}

json evaluationModel(StateView& view, int64_t eval,
                     const scheduler::BuildFilter& filter, const Page& builds,
                     const Page& errors) {
  auto e = view.evaluationSummary(eval);
  if (!e) throw NotFound("evaluation " + std::to_string(eval) + " not found");
  json out = {{"evaluation", evaluationJson(*e)},
              {"previous", view.previousEvaluation(eval)}};
  auto b = view.evaluationBuilds(eval, filter, builds);
  json rows = json::array();
  for (auto& r : b.rows) rows.push_back(buildJson(r));
  out["builds"] = pageJson(builds, b.more, std::move(rows));
  static const char* kStates[] = {"all", "succeeded", "failed", "unfinished"};
  out["filter"] = {{"state", kStates[int(filter.state)]},
                   {"job", filter.jobPrefix},
                   {"system", filter.system}};
  auto er = view.evaluationErrors(eval, errors);
  json errs = json::array();
  for (auto& r : er.rows)
    errs.push_back({{"attr", r.attr}, {"error", r.error}});
  out["errors"] = pageJson(errors, er.more, std::move(errs));
  out["regressions"] = regressionsJson(view, eval);
  return out;
}

json comparisonModel(StateView& view, int64_t eval, int64_t base,
                     scheduler::ChangeKind kind, const Page& page) {
  auto e = view.evaluationSummary(eval);
  if (!e) throw NotFound("evaluation " + std::to_string(eval) + " not found");
  if (base == 0) base = view.previousEvaluation(eval);
  auto b = base ? view.evaluationSummary(base) : std::nullopt;
  if (!b)
    throw NotFound(base ? "evaluation " + std::to_string(base) + " not found"
                        : "evaluation " + std::to_string(eval) +
                              " has no previous evaluation to compare with");
  json counts = json::object();
  auto c = view.compareCounts(eval, base);
  for (size_t k = 0; k < scheduler::kChangeKinds; ++k)
    counts[changeKindName(scheduler::ChangeKind(k))] = c[k];
  auto p = view.compare(eval, base, kind, page);
  json rows = json::array();
  for (auto& r : p.rows)
    rows.push_back({{"job", r.job},
                    {"before", r.before ? buildJson(*r.before) : json(nullptr)},
                    {"after", r.after ? buildJson(*r.after) : json(nullptr)}});
  return {{"evaluation", evaluationJson(*e)},
          {"base", evaluationJson(*b)},
          {"counts", std::move(counts)},
          {"kind", changeKindName(kind)},
          {"changes", pageJson(page, p.more, std::move(rows))},
          {"regressions", regressionsJson(view, eval)}};
}

}  // namespace kiln::web
