// The read model's bounded page queries on StateView (state_queries.h):
// listings, job history, build steps, search, failure rate. Each query
// walks an index of schema migration 5 and stops at its LIMIT.
#include <algorithm>
#include <map>

#include "kiln/scheduler/state_view.h"
#include "state_rows.h"

namespace kiln::scheduler {

using namespace detail;

Page Page::checked(int64_t offset, int64_t limit) {
  if (limit < 1 || limit > kMaxLimit)
    throw SchedulerStateError("page size " + std::to_string(limit) +
                              " is out of range: use 1.." +
                              std::to_string(kMaxLimit));
  if (offset < 0 || offset > kMaxOffset)
    throw SchedulerStateError("page offset " + std::to_string(offset) +
                              " is out of range: use 0.." +
                              std::to_string(kMaxOffset));
  return {offset, limit};
}

namespace {

// Reads at most page.limit rows of `s` (which selected limit + 1) with
// `read`; `more` tells whether the extra row came.
template <class Row, class Read>
Paged<Row> readPage(SqlStmt& s, const Page& page, Read read) {
  Paged<Row> out;
  while (s.step()) {
    if (static_cast<int64_t>(out.rows.size()) == page.limit) {
      out.more = true;
      break;
    }
    out.rows.push_back(read(s));
  }
  return out;
}

// The exclusive upper bound of the strings starting with `prefix`, both
// backends comparing bytes (PostgreSQL's columns are COLLATE "C"): 0xff
// never occurs in UTF-8; PostgreSQL refuses it in text, so there the
// bound is the largest code point, U+10FFFF.
std::string prefixEnd(const SqlConnection& db, const std::string& prefix) {
  return prefix +
         (db.dialect() == SqlDialect::kPostgres ? "\xf4\x8f\xbf\xbf" : "\xff");
}

// Whether `s` may be compared with stored text: PostgreSQL refuses bytes
// that are not UTF-8 (a search or filter with them matches nothing).
bool comparable(const SqlConnection& db, std::string_view s) {
  return db.dialect() != SqlDialect::kPostgres || isUtf8(s);
}

ProjectRow readProject(const SqlStmt& s) {
  return {s.getInt(0), s.getStr(1), s.getStr(2), s.getInt(3) != 0};
}

constexpr const char* kEvalSummarySql =
    "SELECT e.id, e.jobset, e.inputs_hash, e.time, e.duration, e.jobs, "
    "e.error, p.name, j.name FROM evaluations e JOIN jobsets j ON j.id = "
    "e.jobset JOIN projects p ON p.id = j.project ";

}  // namespace

std::vector<ProjectRow> StateView::projects() {
  auto s = db_.db().prepare(
      "SELECT id, name, description, enabled FROM projects ORDER BY name "
      "LIMIT 1000");
  std::vector<ProjectRow> out;
  while (s.step()) out.push_back(readProject(s));
  return out;
}

std::optional<ProjectRow> StateView::project(int64_t id) {
  auto s = db_.db().prepare(
      "SELECT id, name, description, enabled FROM projects WHERE id = ?");
  s.bind(id);
  if (!s.step()) return std::nullopt;
  return readProject(s);
}

std::vector<JobsetRow> StateView::jobsetsOf(int64_t project) {
  auto s = db_.db().prepare(std::string("SELECT ") + kJobsetColumns +
                            " FROM jobsets WHERE project = ? ORDER BY name "
                            "LIMIT 1000");
  s.bind(project);
  std::vector<JobsetRow> out;
  while (s.step()) out.push_back(readJobset(s));
  return out;
}

Paged<EvaluationSummary> StateView::evaluations(int64_t jobset,
                                                const Page& page) {
  auto s = db_.db().prepare(std::string(kEvalSummarySql) +
                            (jobset ? "WHERE e.jobset = ? " : "WHERE ? = 0 ") +
                            "ORDER BY e.id DESC LIMIT ? OFFSET ?");
  s.bind(jobset).bind(page.limit + 1).bind(page.offset);
  auto out = readPage<EvaluationSummary>(s, page, [](const SqlStmt& r) {
    return EvaluationSummary{readEval(r), r.getStr(7), r.getStr(8), {}};
  });
  for (auto& e : out.rows) e.counts = db_.buildCounts(e.eval.id);
  return out;
}

std::optional<EvaluationSummary> StateView::evaluationSummary(int64_t eval) {
  auto s = db_.db().prepare(std::string(kEvalSummarySql) + "WHERE e.id = ?");
  s.bind(eval);
  if (!s.step()) return std::nullopt;
  EvaluationSummary e{readEval(s), s.getStr(7), s.getStr(8), {}};
  e.counts = db_.buildCounts(eval);
  return e;
}

int64_t StateView::previousEvaluation(int64_t eval) {
  auto s = db_.db().prepare(
      "SELECT p.id FROM evaluations e JOIN evaluations p ON p.jobset = "
      "e.jobset AND p.id < e.id WHERE e.id = ? ORDER BY p.id DESC LIMIT 1");
  s.bind(eval);
  return s.step() ? s.getInt(0) : 0;
}

Paged<EvalErrorRow> StateView::evaluationErrors(int64_t eval,
                                                const Page& page) {
  auto s = db_.db().prepare(
      "SELECT attr, error FROM eval_errors WHERE eval = ? ORDER BY attr "
      "LIMIT ? OFFSET ?");
  s.bind(eval).bind(page.limit + 1).bind(page.offset);
  return readPage<EvalErrorRow>(s, page, [](const SqlStmt& r) {
    return EvalErrorRow{r.getStr(0), r.getStr(1)};
  });
}

Paged<BuildRow> StateView::evaluationBuilds(int64_t eval,
                                            const BuildFilter& filter,
                                            const Page& page) {
  std::string sql =
      std::string("SELECT ") + kBuildColumns + " FROM builds WHERE eval = ?";
  switch (filter.state) {
    case BuildState::kAll:
      break;
    case BuildState::kSucceeded:
      sql += " AND finished = 1 AND status = 0";
      break;
    case BuildState::kFailed:
      sql += " AND finished = 1 AND status <> 0";
      break;
    case BuildState::kUnfinished:
      sql += " AND finished = 0";
      break;
  }
  if (!filter.jobPrefix.empty()) sql += " AND job >= ? AND job < ?";
  if (!filter.system.empty()) sql += " AND system = ?";
  sql += " ORDER BY job LIMIT ? OFFSET ?";
  auto s = db_.db().prepare(sql);
  s.bind(eval);
  if (!filter.jobPrefix.empty())
    s.bind(filter.jobPrefix).bind(prefixEnd(db_.db(), filter.jobPrefix));
  if (!filter.system.empty()) s.bind(filter.system);
  s.bind(page.limit + 1).bind(page.offset);
  return readPage<BuildRow>(s, page, readBuild);
}

Paged<BuildTimes> StateView::jobHistory(int64_t jobset, const std::string& job,
                                        const Page& page) {
  auto s = db_.db().prepare(
      "SELECT " + buildColumnsOf("b") +
      ", coalesce(s.start_time, 0), coalesce(s.stop_time, 0) FROM builds b "
      "LEFT JOIN steps s ON s.drv_path = b.drv_path WHERE b.job = ? AND "
      "b.jobset = ? ORDER BY b.id DESC LIMIT ? OFFSET ?");
  s.bind(job).bind(jobset).bind(page.limit + 1).bind(page.offset);
  return readPage<BuildTimes>(s, page, [](const SqlStmt& r) {
    return BuildTimes{readBuild(r), r.getInt(17), r.getInt(18)};
  });
}

int64_t StateView::latestBuild(int64_t jobset, const std::string& job,
                               bool finishedEval) {
  // Walks the job's builds newest first (builds_job); the evaluation check
  // is one probe of builds_eval_status per candidate.
  auto s = db_.db().prepare(
      std::string("SELECT b.id FROM builds b WHERE b.job = ? AND b.jobset = "
                  "? AND b.finished = 1 AND b.status = 0") +
      (finishedEval ? " AND NOT EXISTS (SELECT 1 FROM builds u WHERE u.eval "
                      "= b.eval AND u.finished = 0)"
                    : "") +
      " ORDER BY b.id DESC LIMIT 1");
  s.bind(job).bind(jobset);
  return s.step() ? s.getInt(0) : 0;
}

std::vector<StepRow> StateView::stepsById(const std::vector<int64_t>& ids) {
  auto s = db_.db().prepare(std::string("SELECT ") + kStepColumns +
                            " FROM steps WHERE id = ?");
  std::vector<StepRow> out;
  for (int64_t id : ids) {
    s.reset();
    s.bind(id);
    if (s.step()) out.push_back(readStep(s));
  }
  return out;
}

BuildSteps StateView::buildSteps(const BuildRow& build, int cap) {
  BuildSteps out;
  out.top = db_.stepByDrv(build.drvPath);
  if (!out.top) return out;
  // The closure walk stops after kWalk steps (a stdenv closure is a few
  // hundred); what ran for this build started after it was created.
  constexpr int64_t kWalk = 20000;
  // SQLite bounds the walk inside the recursive query; PostgreSQL cannot,
  // but runs it only as far as the outer LIMIT reads (w is computed once).
  auto s = db_.db().prepare(
      db_.dialect() == SqlDialect::kSqlite
          ? "WITH RECURSIVE c(id) AS (SELECT ? UNION SELECT d.dep FROM "
            "step_deps d JOIN c ON d.step = c.id LIMIT ?) SELECT (SELECT "
            "count(*) FROM c), id FROM steps WHERE id IN c AND start_time >= "
            "? ORDER BY start_time, id LIMIT ?"
          : "WITH RECURSIVE c(id) AS (SELECT CAST(? AS BIGINT) UNION SELECT "
            "d.dep FROM step_deps d JOIN c ON d.step = c.id), w AS (SELECT id "
            "FROM c LIMIT ?) SELECT (SELECT count(*) FROM w), id FROM steps "
            "WHERE id IN (SELECT id FROM w) AND start_time >= ? ORDER BY "
            "start_time, id LIMIT ?");
  s.bind(out.top->id).bind(kWalk).bind(build.createdMs).bind(int64_t{cap} + 1);
  std::vector<int64_t> ran;
  while (s.step()) {
    if (s.getInt(0) >= kWalk) out.truncated = true;
    if (static_cast<int>(ran.size()) == cap) {
      out.truncated = true;
      break;
    }
    ran.push_back(s.getInt(1));
  }
  out.ran = stepsById(ran);
  auto d = db_.db().prepare(std::string("SELECT ") + kStepColumns +
                            " FROM step_deps d JOIN steps ON steps.id = d.dep "
                            "WHERE d.step = ? ORDER BY steps.drv_path LIMIT ?");
  d.bind(out.top->id).bind(int64_t{cap} + 1);
  while (d.step()) {
    if (static_cast<int>(out.dependencies.size()) == cap) {
      out.truncated = true;
      break;
    }
    out.dependencies.push_back(readStep(d));
  }
  return out;
}

SearchResults StateView::search(const std::string& query,
                                const std::string& storeDir, int cap) {
  SearchResults out;
  if (query.empty() || !comparable(db_.db(), query)) return out;
  auto j = db_.db().prepare(
      "SELECT b.job, p.name, j.name, max(b.id) FROM builds b JOIN jobsets j "
      "ON j.id = b.jobset JOIN projects p ON p.id = j.project WHERE b.job >= "
      "? AND b.job < ? GROUP BY b.job, b.jobset, p.name, j.name ORDER BY "
      "b.job, b.jobset "
      "LIMIT ?");
  j.bind(query).bind(prefixEnd(db_.db(), query)).bind(int64_t{cap});
  while (j.step())
    out.jobs.push_back({j.getStr(1), j.getStr(2), j.getStr(0), j.getInt(3)});
  // A path, or a hash or name under the store directory.
  std::string path = query.starts_with('/') ? query : storeDir + "/" + query;
  auto b = db_.db().prepare(std::string("SELECT ") + kBuildColumns +
                            " FROM builds WHERE drv_path >= ? AND drv_path < "
                            "? ORDER BY drv_path, id DESC LIMIT ?");
  b.bind(path).bind(prefixEnd(db_.db(), path)).bind(int64_t{cap});
  while (b.step()) out.builds.push_back(readBuild(b));
  auto o = db_.db().prepare(
      "SELECT build, name, path FROM build_outputs WHERE path >= ? AND path "
      "< ? ORDER BY path, build DESC LIMIT ?");
  o.bind(path).bind(prefixEnd(db_.db(), path)).bind(int64_t{cap});
  while (o.step())
    out.outputs.push_back({o.getInt(0), o.getStr(1), o.getStr(2)});
  return out;
}

std::vector<FailureBucket> StateView::failureRate(int64_t nowMs,
                                                  int64_t bucketMs,
                                                  int buckets) {
  if (bucketMs <= 0 || buckets <= 0 || buckets > 1000)
    throw SchedulerStateError(
        "failure rate needs a positive bucket width "
        "and 1..1000 buckets");
  int64_t start = nowMs - bucketMs * buckets;
  std::vector<FailureBucket> out(static_cast<size_t>(buckets));
  for (int i = 0; i < buckets; ++i)
    out[size_t(i)].startMs = start + i * bucketMs;
  auto s = db_.db().prepare(
      "SELECT stop_time, status FROM builds WHERE finished = 1 AND stop_time "
      ">= ? AND stop_time < ? ORDER BY stop_time DESC LIMIT 20000");
  s.bind(start).bind(nowMs);
  while (s.step()) {
    auto& bucket = out[size_t((s.getInt(0) - start) / bucketMs)];
    ++bucket.finished;
    if (s.getInt(1) != 0) ++bucket.failed;
  }
  return out;
}

}  // namespace kiln::scheduler
