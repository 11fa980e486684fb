// The read model's cross-evaluation queries on StateView (state_queries.h):
// the comparison of two evaluations, the job x evaluation matrix, search
// and the failure rate. Joins go through the (eval, job) unique index.
#include <algorithm>
#include <map>

#include "kiln/scheduler/state_view.h"
#include "state_rows.h"

namespace kiln::scheduler {

using namespace detail;

namespace {

// The condition on `a` (the compared evaluation's build) and `b` (the
// base's, LEFT JOINed on the job) of each kind but kRemovedJob.
const char* changeCondition(ChangeKind kind) {
  switch (kind) {
    case ChangeKind::kNewlyFailing:
      return "b.id IS NOT NULL AND a.finished = 1 AND a.status <> 0 AND "
             "NOT (b.finished = 1 AND b.status <> 0)";
    case ChangeKind::kNewlySucceeding:
      return "b.id IS NOT NULL AND a.finished = 1 AND a.status = 0 AND "
             "b.finished = 1 AND b.status <> 0";
    case ChangeKind::kStillFailing:
      return "b.id IS NOT NULL AND a.finished = 1 AND a.status <> 0 AND "
             "b.finished = 1 AND b.status <> 0";
    case ChangeKind::kNewJob:
      return "b.id IS NULL";
    case ChangeKind::kUnfinished:
      return "b.id IS NOT NULL AND a.finished = 0";
    case ChangeKind::kChanged:
      return "b.id IS NOT NULL AND a.drv_path <> b.drv_path";
    case ChangeKind::kRemovedJob:
      break;
  }
  return "1 = 0";
}

}  // namespace

ChangeCounts StateView::compareCounts(int64_t eval, int64_t base) {
  ChangeCounts out{};
  std::string sql = "SELECT ";
  for (size_t k = 0; k < kChangeKinds; ++k) {
    auto kind = static_cast<ChangeKind>(k);
    if (kind == ChangeKind::kRemovedJob) {
      sql += "0, ";
      continue;
    }
    sql += std::string("coalesce(sum(CASE WHEN ") + changeCondition(kind) +
           " THEN 1 ELSE 0 END), 0), ";
  }
  sql.resize(sql.size() - 2);
  sql +=
      " FROM builds a LEFT JOIN builds b ON b.eval = ? AND b.job = a.job "
      "WHERE a.eval = ?";
  auto s = db_.db().prepare(sql);
  s.bind(base).bind(eval);
  if (s.step())
    for (size_t k = 0; k < kChangeKinds; ++k) out[k] = s.getInt(int(k));
  auto r = db_.db().prepare(
      "SELECT count(*) FROM builds b WHERE b.eval = ? AND NOT EXISTS "
      "(SELECT 1 FROM builds a WHERE a.eval = ? AND a.job = b.job)");
  r.bind(base).bind(eval);
  if (r.step()) out[size_t(ChangeKind::kRemovedJob)] = r.getInt(0);
  return out;
}

Paged<BuildChange> StateView::compare(int64_t eval, int64_t base,
                                      ChangeKind kind, const Page& page) {
  bool removed = kind == ChangeKind::kRemovedJob;
  // For removed jobs the listing walks the base and "a" is the absent one.
  std::string sql =
      "SELECT " + buildColumnsOf("b") + ", " + buildColumnsOf("a") +
      " FROM builds a LEFT JOIN builds b ON b.eval = ? AND b.job = a.job "
      "WHERE a.eval = ? AND " +
      changeCondition(kind) + " ORDER BY a.job LIMIT ? OFFSET ?";
  if (removed)
    sql = "SELECT " + buildColumnsOf("b") + ", " + buildColumnsOf("a") +
          " FROM builds b LEFT JOIN builds a ON a.eval = ? AND a.job = b.job "
          "WHERE b.eval = ? AND a.id IS NULL ORDER BY b.job LIMIT ? OFFSET ?";
  auto s = db_.db().prepare(sql);
  s.bind(removed ? eval : base).bind(removed ? base : eval);
  s.bind(page.limit + 1).bind(page.offset);
  Paged<BuildChange> out;
  while (s.step()) {
    if (static_cast<int64_t>(out.rows.size()) == page.limit) {
      out.more = true;
      break;
    }
    BuildChange c;
    c.before = readBuildAt(s, 0);
    c.after = readBuildAt(s, kBuildColumnCount);
    c.job = c.after ? c.after->job : c.before->job;
    out.rows.push_back(std::move(c));
  }
  return out;
}

JobMatrix StateView::jobMatrix(int64_t jobset, int evals, const Page& page) {
  JobMatrix m;
  evals = std::clamp(evals, 1, 20);
  auto e = db_.db().prepare(
      "SELECT id, jobset, inputs_hash, time, duration, jobs, error FROM "
      "evaluations WHERE jobset = ? ORDER BY id DESC LIMIT ?");
  e.bind(jobset).bind(int64_t{evals});
  while (e.step()) m.evals.push_back(readEval(e));
  if (m.evals.empty()) return m;
  auto j = db_.db().prepare(
      "SELECT job FROM builds WHERE eval = ? ORDER BY job LIMIT ? OFFSET ?");
  j.bind(m.evals.front().id).bind(page.limit + 1).bind(page.offset);
  while (j.step()) {
    if (static_cast<int64_t>(m.jobs.size()) == page.limit) {
      m.moreJobs = true;
      break;
    }
    m.jobs.push_back(j.getStr(0));
  }
  m.cells.assign(m.jobs.size(), std::vector<MatrixCell>(m.evals.size()));
  if (m.jobs.empty()) return m;
  std::map<std::string, size_t> row;
  for (size_t i = 0; i < m.jobs.size(); ++i) row[m.jobs[i]] = i;
  // One range scan of (eval, job) per evaluation, over this page's jobs.
  auto c = db_.db().prepare(
      "SELECT job, id, finished, status FROM builds WHERE eval = ? AND job "
      ">= ? AND job <= ?");
  for (size_t col = 0; col < m.evals.size(); ++col) {
    c.reset();
    c.bind(m.evals[col].id).bind(m.jobs.front()).bind(m.jobs.back());
    while (c.step()) {
      auto it = row.find(c.getStr(0));
      if (it == row.end()) continue;
      m.cells[it->second][col] = {
          c.getInt(1), c.getInt(2) != 0,
          c.isNull(3) ? -1 : static_cast<int>(c.getInt(3))};
    }
  }
  return m;
}

}  // namespace kiln::scheduler
