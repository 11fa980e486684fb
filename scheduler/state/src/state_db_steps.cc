// StateDb's steps, their dependencies, cached failures, the request
// queue and historical durations (the rest: state_db.cc).
#include <unordered_map>

#include "kiln/scheduler/state_db.h"
#include "state_rows.h"

namespace kiln::scheduler {

using namespace detail;

int64_t StateDb::upsertStep(const StepRow& r) {
  return insertSteps({r}).front();
}

// The INSERT first: the ingestor, the one caller, inserts steps it looked
// up just before and did not find, a few hundred per statement (one
// statement each cost a round trip on PostgreSQL). A row that exists
// already is read after the INSERT that skipped it.
std::vector<int64_t> StateDb::insertSteps(const std::vector<StepRow>& rows) {
  std::vector<int64_t> ids(rows.size(), 0);
  forEachChunk(rows.size(), [&](size_t first, size_t count) {
    auto s = db_->prepare(
        "INSERT INTO steps (drv_path, system, pname, features, created) "
        "VALUES " +
        placeholderRows(count, 5) +
        " ON CONFLICT (drv_path) DO NOTHING RETURNING id, drv_path");
    std::unordered_map<std::string, int64_t> inserted;
    for (size_t i = first; i < first + count; i++) {
      const StepRow& r = rows[i];
      s.bind(r.drvPath)
          .bind(r.system)
          .bind(r.pname)
          .bind(joinWords(r.features))
          .bind(r.createdMs);
    }
    while (s.step()) inserted.emplace(s.getStr(1), s.getInt(0));
    for (size_t i = first; i < first + count; i++) {
      auto it = inserted.find(rows[i].drvPath);
      if (it != inserted.end()) {
        ids[i] = it->second;
      } else if (auto existing = stepByDrv(rows[i].drvPath)) {
        ids[i] = existing->id;
      } else {
        throw Error("the step of " + rows[i].drvPath +
                    " is neither inserted nor found");
      }
    }
  });
  return ids;
}

std::optional<StepRow> StateDb::step(int64_t id) {
  auto s = db_->prepare(std::string("SELECT ") + kStepColumns +
                        " FROM steps WHERE id = ?");
  s.bind(id);
  return readOne<StepRow>(s, readStep);
}

std::optional<StepRow> StateDb::stepByDrv(const std::string& drvPath) {
  auto s = db_->prepare(std::string("SELECT ") + kStepColumns +
                        " FROM steps WHERE drv_path = ?");
  s.bind(drvPath);
  return readOne<StepRow>(s, readStep);
}

StateDb::StepLookup StateDb::lookUpStep(const std::string& drvPath,
                                        int64_t nowMs) {
  return lookUpSteps({drvPath}, nowMs)[drvPath];
}

// One statement per few hundred paths: a row per step found (its columns,
// then NULLs) and one per unexpired cached failure (NULLs, then its
// status, time and expiry), each ending with its path. Planned at each
// run (prepareEachRun): the plan PostgreSQL cached while `steps` was small
// scanned the whole table, at every statement as the evaluation grew it.
std::unordered_map<std::string, StateDb::StepLookup> StateDb::lookUpSteps(
    const std::vector<std::string>& drvPaths, int64_t nowMs) {
  std::unordered_map<std::string, StepLookup> out;
  forEachChunk(drvPaths.size(), [&](size_t first, size_t count) {
    std::string in = placeholderRows(1, count);
    auto s =
        db_->prepareEachRun(std::string("SELECT ") + kStepColumns +
                            ", NULL, NULL, NULL, drv_path FROM steps WHERE "
                            "drv_path IN " +
                            in + " UNION ALL SELECT " + kStepNulls +
                            ", status, time, expires, drv_path FROM "
                            "cached_failures WHERE drv_path IN " +
                            in + " AND (expires = 0 OR expires > ?)");
    for (int half = 0; half < 2; half++)
      for (size_t i = first; i < first + count; i++) s.bind(drvPaths[i]);
    s.bind(nowMs);
    for (size_t i = first; i < first + count; i++) out[drvPaths[i]];
    while (s.step()) {
      int first = s.columnCount() - 4;
      std::string path = s.getStr(first + 3);
      StepLookup& l = out[path];
      if (!s.isNull(0)) l.step = readStep(s);
      if (!s.isNull(first))
        l.failure = CachedFailureRow{path, static_cast<int>(s.getInt(first)),
                                     s.getInt(first + 1), s.getInt(first + 2)};
    }
  });
  return out;
}

std::optional<StepRow> StateDb::stepByBaseName(const std::string& base) {
  // Every step of a state database is in one store: any step's folder is
  // theirs, and the unique index on drv_path finds the full path.
  auto any = db_->prepare("SELECT drv_path FROM steps LIMIT 1");
  if (!any.step()) return std::nullopt;
  std::string path = any.getStr(0);
  any.reset();
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return std::nullopt;
  return stepByDrv(path.substr(0, slash + 1) + base);
}

void StateDb::addStepDep(int64_t step, int64_t dep) {
  addStepDeps({{step, dep}});
}

void StateDb::addStepDeps(
    const std::vector<std::pair<int64_t, int64_t>>& edges) {
  forEachChunk(edges.size(), [&](size_t first, size_t count) {
    auto s =
        db_->prepare("INSERT INTO step_deps (step, dep) VALUES " +
                     placeholderRows(count, 2) + " ON CONFLICT DO NOTHING");
    for (size_t i = first; i < first + count; i++)
      s.bind(edges[i].first).bind(edges[i].second);
    s.exec();
  });
}

std::vector<int64_t> StateDb::stepDeps(int64_t step) {
  auto s = db_->prepare("SELECT dep FROM step_deps WHERE step = ?");
  s.bind(step);
  std::vector<int64_t> out;
  while (s.step()) out.push_back(s.getInt(0));
  return out;
}

std::vector<StepRow> StateDb::allSteps() {
  auto s = db_->prepare(std::string("SELECT ") + kStepColumns +
                        " FROM steps ORDER BY id");
  return readAll<StepRow>(s, readStep);
}

std::vector<StepRow> StateDb::unfinishedSteps() {
  auto s = db_->prepare(std::string("SELECT ") + kStepColumns +
                        " FROM steps WHERE finished = 0 ORDER BY id");
  return readAll<StepRow>(s, readStep);
}

void StateDb::startStep(int64_t id, const std::string& worker, int64_t timeMs) {
  db_->prepare(
         "UPDATE steps SET worker = ?, start_time = ?, attempts = attempts + 1 "
         "WHERE id = ?")
      .bind(worker)
      .bind(timeMs)
      .bind(id)
      .exec();
}

void StateDb::finishStep(int64_t id, int status, int64_t timeMs,
                         const std::string& error) {
  db_->prepare(
         "UPDATE steps SET finished = 1, status = ?, stop_time = ?, error = ? "
         "WHERE id = ?")
      .bind(int64_t{status})
      .bind(timeMs)
      .bind(error)
      .bind(id)
      .exec();
}

void StateDb::setStepUsage(int64_t id, int64_t peakMemoryBytes,
                           int64_t cpuTimeUs, int64_t buildDirBytes) {
  db_->prepare(
         "UPDATE steps SET peak_memory = ?, cpu_time_us = ?, "
         "build_dir_bytes = ? WHERE id = ?")
      .bind(peakMemoryBytes)
      .bind(cpuTimeUs)
      .bind(buildDirBytes)
      .bind(id)
      .exec();
}

void StateDb::reopenStep(int64_t id) {
  db_->prepare(
         "UPDATE steps SET finished = 0, status = NULL, error = '' WHERE id = "
         "?")
      .bind(id)
      .exec();
}

void StateDb::addCachedFailure(const CachedFailureRow& f) {
  db_->prepare(
         "INSERT INTO cached_failures (drv_path, status, time, expires) "
         "VALUES (?, ?, ?, ?) ON CONFLICT (drv_path) DO UPDATE SET status = "
         "excluded.status, time = excluded.time, expires = excluded.expires")
      .bind(f.drvPath)
      .bind(int64_t{f.status})
      .bind(f.timeMs)
      .bind(f.expiresMs)
      .exec();
}

static CachedFailureRow readFailure(const SqlStmt& r) {
  return CachedFailureRow{r.getStr(0), static_cast<int>(r.getInt(1)),
                          r.getInt(2), r.getInt(3)};
}

std::optional<CachedFailureRow> StateDb::cachedFailure(
    const std::string& drvPath, int64_t nowMs) {
  auto s = db_->prepare(
      "SELECT drv_path, status, time, expires FROM cached_failures WHERE "
      "drv_path = ? AND (expires = 0 OR expires > ?)");
  s.bind(drvPath).bind(nowMs);
  return readOne<CachedFailureRow>(s, readFailure);
}

std::vector<CachedFailureRow> StateDb::cachedFailures() {
  auto s = db_->prepare(
      "SELECT drv_path, status, time, expires FROM cached_failures ORDER BY "
      "drv_path");
  return readAll<CachedFailureRow>(s, readFailure);
}

int64_t StateDb::clearCachedFailures(const std::string& drvPath) {
  if (drvPath.empty()) {
    db_->exec("DELETE FROM cached_failures");
  } else {
    db_->prepare("DELETE FROM cached_failures WHERE drv_path = ?")
        .bind(drvPath)
        .exec();
  }
  return db_->changes();
}

int64_t StateDb::addRequest(const std::string& kind, const std::string& args) {
  // The notification is delivered when the row is committed, never before.
  Transaction txn(*this);
  int64_t id = insertedId(
      db_->prepare(
             "INSERT INTO requests (kind, args) VALUES (?, ?) RETURNING id")
          .bind(kind)
          .bind(args));
  db_->notify(kRequestsChannel);
  txn.commit();
  return id;
}

static RequestRow readRequest(const SqlStmt& r) {
  return RequestRow{r.getInt(0),      r.getStr(1),      r.getStr(2),
                    r.getInt(3) != 0, r.getInt(4) != 0, r.getStr(5)};
}

std::vector<RequestRow> StateDb::pendingRequests() {
  auto s = db_->prepare(
      "SELECT id, kind, args, done, ok, result FROM requests WHERE done = 0 "
      "ORDER BY id");
  return readAll<RequestRow>(s, readRequest);
}

std::optional<RequestRow> StateDb::request(int64_t id) {
  auto s = db_->prepare(
      "SELECT id, kind, args, done, ok, result FROM requests WHERE id = ?");
  s.bind(id);
  return readOne<RequestRow>(s, readRequest);
}

void StateDb::completeRequest(int64_t id, bool ok, const std::string& result) {
  db_->prepare("UPDATE requests SET done = 1, ok = ?, result = ? WHERE id = ?")
      .bind(int64_t{ok})
      .bind(result)
      .bind(id)
      .exec();
}

std::vector<std::pair<std::string, uint64_t>> StateDb::lastPeaks() {
  auto s = db_->prepare(
      "SELECT s.pname, s.peak_memory FROM steps s JOIN (SELECT MAX(id) AS id "
      "FROM steps WHERE peak_memory > 0 AND pname <> '' GROUP BY pname) l "
      "ON s.id = l.id");
  return readAll<std::pair<std::string, uint64_t>>(s, [](const SqlStmt& r) {
    return std::pair(r.getStr(0), static_cast<uint64_t>(r.getInt(1)));
  });
}

std::vector<std::pair<std::string, double>> StateDb::historicalDurations() {
  auto s = db_->prepare(
      "SELECT pname, CAST(AVG(stop_time - start_time) AS BIGINT) FROM steps "
      "WHERE "
      "finished = 1 AND status = 0 AND pname <> '' AND stop_time > start_time "
      "AND start_time > 0 GROUP BY pname");
  return readAll<std::pair<std::string, double>>(s, [](const SqlStmt& r) {
    return std::pair(r.getStr(0),
                     std::max(0.001, static_cast<double>(r.getInt(1)) / 1000));
  });
}

}  // namespace kiln::scheduler
