// StateDb's steps, their dependencies, cached failures, the request
// queue and historical durations (the rest: state_db.cc).
#include "kiln/scheduler/state_db.h"
#include "state_rows.h"

namespace kiln::scheduler {

using namespace detail;

// The INSERT first: the ingestor, the one caller, upserts mostly new
// steps (it looked the row up just before), and a statement less per step
// is a round trip less on PostgreSQL. An existing row is read after the
// INSERT that did nothing (on PostgreSQL that costs an id of the sequence).
int64_t StateDb::upsertStep(const StepRow& r) {
  auto ins = db_->prepare(
      "INSERT INTO steps (drv_path, system, pname, features, created) "
      "VALUES (?, ?, ?, ?, ?) ON CONFLICT (drv_path) DO NOTHING RETURNING id");
  ins.bind(r.drvPath)
      .bind(r.system)
      .bind(r.pname)
      .bind(joinWords(r.features))
      .bind(r.createdMs);
  if (ins.step()) return ins.getInt(0);
  if (auto existing = stepByDrv(r.drvPath)) return existing->id;
  throw Error("the step of " + r.drvPath + " is neither inserted nor found");
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
  // One row whatever exists: the step's columns (NULL when it has none),
  // then its cached failure's status, time and expiry.
  auto s = db_->prepare(
      std::string("SELECT s.*, f.status, f.time, f.expires FROM (SELECT 1 "
                  "AS one) o LEFT JOIN (SELECT ") +
      kStepColumns +
      " FROM steps WHERE drv_path = ?) s ON 1 = 1 LEFT JOIN cached_failures "
      "f ON f.drv_path = ? AND (f.expires = 0 OR f.expires > ?)");
  s.bind(drvPath).bind(drvPath).bind(nowMs);
  StepLookup out;
  if (!s.step()) return out;
  int first = s.columnCount() - 3;
  if (!s.isNull(0)) out.step = readStep(s);
  if (!s.isNull(first))
    out.failure = CachedFailureRow{drvPath, static_cast<int>(s.getInt(first)),
                                   s.getInt(first + 1), s.getInt(first + 2)};
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
  db_->prepare(
         "INSERT INTO step_deps (step, dep) VALUES (?, ?) "
         "ON CONFLICT DO NOTHING")
      .bind(step)
      .bind(dep)
      .exec();
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
