// Regression gates (release_store.h, docs/release.md): which jobs of an
// evaluation grew past their jobset's limits against the channel's
// evaluation, and the record of those that held the channel.
#include <map>

#include "kiln/scheduler/release_store.h"
#include "state_rows.h"

namespace kiln::scheduler {

namespace {

// What the gate compares of a job's succeeded build.
struct JobFacts {
  std::string out;          ///< its `out` output (its first if none)
  int64_t durationMs = -1;  ///< its top step's last run; -1: never ran
};

// Job → facts, for the succeeded builds of evaluation `eval`.
std::map<std::string, JobFacts> succeededJobs(StateDb& db, int64_t eval) {
  std::map<std::string, JobFacts> jobs;
  auto s = db.db().prepare(
      "SELECT b.job, CASE WHEN s.finished = 1 AND s.status = 0 AND "
      "s.start_time > 0 AND s.stop_time >= s.start_time THEN s.stop_time - "
      "s.start_time ELSE -1 END FROM builds b LEFT JOIN steps s ON "
      "s.drv_path = b.drv_path WHERE b.eval = ? AND b.finished = 1 AND "
      "b.status = 0 ORDER BY b.id LIMIT ?");
  s.bind(eval).bind(kMaxComparedJobs);
  while (s.step()) jobs[s.getStr(0)].durationMs = s.getInt(1);
  auto o = db.db().prepare(
      "SELECT b.job, o.name, o.path FROM build_outputs o JOIN builds b ON "
      "b.id = o.build WHERE b.eval = ? AND b.finished = 1 AND b.status = 0 "
      "ORDER BY o.build, o.name");
  o.bind(eval);
  while (o.step()) {
    auto it = jobs.find(o.getStr(0));
    if (it != jobs.end() && (it->second.out.empty() || o.getStr(1) == "out"))
      it->second.out = o.getStr(2);
  }
  return jobs;
}

// Whether `after` is more than `pct` percent above `before` (pct 0: never).
bool grew(int64_t before, int64_t after, int64_t pct) {
  return pct > 0 && before > 0 && after > before &&
         (after - before) * 100 > before * pct;
}

}  // namespace

std::vector<Regression> findRegressions(StateDb& db, int64_t eval, int64_t base,
                                        int64_t maxClosureGrowthPct,
                                        int64_t maxBuildTimeGrowthPct,
                                        const ClosureSizeFn& closureSize) {
  std::vector<Regression> out;
  if (maxClosureGrowthPct <= 0 && maxBuildTimeGrowthPct <= 0) return out;
  auto before = succeededJobs(db, base);
  for (auto& [job, now] : succeededJobs(db, eval)) {
    auto was = before.find(job);
    if (was == before.end()) continue;
    const JobFacts& then = was->second;
    if (maxClosureGrowthPct > 0 && closureSize && !now.out.empty() &&
        !then.out.empty() && now.out != then.out) {
      auto a = closureSize(then.out), b = closureSize(now.out);
      if (a && b && grew(*a, *b, maxClosureGrowthPct))
        out.push_back({job, "closure", base, *a, *b});
    }
    if (then.durationMs >= kMinComparedBuildMs && now.durationMs >= 0 &&
        grew(then.durationMs, now.durationMs, maxBuildTimeGrowthPct))
      out.push_back({job, "time", base, then.durationMs, now.durationMs});
  }
  return out;
}

void recordRegressions(StateDb& db, int64_t eval,
                       const std::vector<Regression>& regressions) {
  db.db()
      .prepare("DELETE FROM eval_regressions WHERE eval = ?")
      .bind(eval)
      .exec();
  auto s = db.db().prepare(
      "INSERT INTO eval_regressions (eval, job, kind, base_eval, "
      "before_value, after_value) VALUES (?, ?, ?, ?, ?, ?)");
  for (auto& r : regressions)
    s.bind(eval)
        .bind(r.job)
        .bind(r.kind)
        .bind(r.baseEval)
        .bind(r.before)
        .bind(r.after)
        .exec();
}

std::vector<Regression> evalRegressions(StateDb& db, int64_t eval) {
  auto s = db.db().prepare(
      "SELECT job, kind, base_eval, before_value, after_value FROM "
      "eval_regressions WHERE eval = ? ORDER BY job, kind LIMIT ?");
  s.bind(eval).bind(kMaxListedConstituents);
  std::vector<Regression> out;
  while (s.step())
    out.push_back(
        {s.getStr(0), s.getStr(1), s.getInt(2), s.getInt(3), s.getInt(4)});
  return out;
}

}  // namespace kiln::scheduler
