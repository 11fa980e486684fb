// Expected finish of evaluations (eval_estimate.h).
#include "kiln/scheduler/eval_estimate.h"

#include <algorithm>
#include <unordered_map>

#include "state_rows.h"

namespace kiln::scheduler {

namespace {

// The unfinished steps that evaluation ?1's unfinished builds need: their
// top steps and, through step_deps, every unfinished step below them.
const char* const kRemaining =
    "WITH RECURSIVE c(id) AS (SELECT s.id FROM builds b JOIN steps s ON "
    "s.drv_path = b.drv_path WHERE b.eval = ? AND b.finished = 0 AND "
    "s.finished = 0 UNION SELECT d.dep FROM step_deps d JOIN c ON d.step = "
    "c.id JOIN steps u ON u.id = d.dep WHERE u.finished = 0) ";

}  // namespace

std::unordered_map<std::string, double> evalStepHistory(StateDb& db,
                                                        int64_t eval) {
  auto s = db.db().prepare(
      std::string(kRemaining) +
      "SELECT h.pname, CAST(AVG(h.stop_time - h.start_time) AS BIGINT) FROM "
      "steps h WHERE h.pname IN (SELECT pname FROM steps WHERE id IN (SELECT "
      "id FROM c) AND pname <> '') AND h.finished = 1 AND h.status = 0 AND "
      "h.start_time > 0 AND h.stop_time > h.start_time GROUP BY h.pname");
  s.bind(eval);
  std::unordered_map<std::string, double> out;
  while (s.step())
    out[s.getStr(0)] = std::max(0.001, static_cast<double>(s.getInt(1)) / 1000);
  return out;
}

std::optional<EvalEstimate> estimateEvaluation(
    StateDb& db, int64_t eval, unsigned slots, int64_t nowMs,
    const std::unordered_map<std::string, double>& history) {
  auto s = db.db().prepare(std::string(kRemaining) +
                           "SELECT id, pname, start_time FROM steps WHERE id "
                           "IN (SELECT id FROM c) ORDER BY id LIMIT ?");
  s.bind(eval).bind(kMaxEstimatedSteps + 1);
  std::vector<RemainingStep> steps;
  std::unordered_map<int64_t, size_t> index;
  EvalEstimate e;
  while (s.step()) {
    if (static_cast<int64_t>(steps.size()) == kMaxEstimatedSteps) {
      e.truncated = true;
      break;
    }
    RemainingStep r;
    r.pname = s.getStr(1);
    int64_t start = s.getInt(2);
    r.running = start > 0;
    r.elapsedSec = r.running ? std::max<int64_t>(0, nowMs - start) / 1000.0 : 0;
    index[s.getInt(0)] = steps.size();
    steps.push_back(std::move(r));
  }
  if (steps.empty()) return std::nullopt;
  auto d = db.db().prepare(std::string(kRemaining) +
                           "SELECT step, dep FROM step_deps WHERE step IN "
                           "(SELECT id FROM c)");
  d.bind(eval);
  while (d.step()) {
    auto a = index.find(d.getInt(0)), b = index.find(d.getInt(1));
    if (a != index.end() && b != index.end() && a != b)
      steps[a->second].deps.push_back(b->second);
  }
  e.parts =
      estimateFinish(steps, history, std::max(1u, slots), kDefaultStepSec);
  e.madeMs = nowMs;
  e.finishMs = nowMs + static_cast<int64_t>(e.parts.seconds * 1000);
  e.steps = steps.size();
  return e;
}

bool recordEvalEstimate(StateDb& db, int64_t eval, const EvalEstimate& e) {
  db.db()
      .prepare(
          "INSERT INTO eval_estimates (eval, made, estimated) VALUES (?, ?, ?) "
          "ON CONFLICT DO NOTHING")
      .bind(eval)
      .bind(e.madeMs)
      .bind(e.finishMs)
      .exec();
  return db.db().changes() > 0;
}

std::optional<PastEstimate> lastEstimate(StateDb& db, int64_t jobset) {
  // Finished: no unfinished build; actual: its last build's end.
  auto s = db.db().prepare(
      "SELECT x.eval, x.made, x.estimated, (SELECT MAX(b.stop_time) FROM "
      "builds b WHERE b.eval = x.eval) FROM eval_estimates x JOIN "
      "evaluations e ON e.id = x.eval WHERE (? = 0 OR e.jobset = ?) AND NOT "
      "EXISTS (SELECT 1 FROM builds u WHERE u.eval = x.eval AND u.finished = "
      "0) ORDER BY x.eval DESC LIMIT 1");
  s.bind(jobset).bind(jobset);
  if (!s.step()) return std::nullopt;
  PastEstimate p;
  p.eval = s.getInt(0);
  p.madeMs = s.getInt(1);
  p.estimatedMs = s.getInt(2);
  p.actualMs = s.getInt(3);
  p.error = estimateError(p.madeMs, p.estimatedMs, p.actualMs);
  return p;
}

}  // namespace kiln::scheduler
