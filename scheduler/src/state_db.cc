// StateDb: opening, migrating and the row accessors (docs/scheduler.md);
// the schema's SQL is in state_schema.cc.
#include "kiln/scheduler/state_db.h"

#include <algorithm>
#include <regex>

#include "state_rows.h"

namespace kiln::scheduler {
namespace {

std::string joinWords(const std::vector<std::string>& v) {
  std::string out;
  for (auto& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}

std::vector<std::string> splitWords(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(' ', i);
    if (j == std::string::npos) j = s.size();
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

void checkName(const std::string& what, const std::string& name) {
  static const std::regex re("[A-Za-z_][A-Za-z0-9_.-]{0,99}");
  if (!std::regex_match(name, re))
    throw SchedulerStateError(what + " name '" + name +
                              "' is invalid: use letters, digits, '_', '.', "
                              "'-', starting with a letter or '_'");
}

}  // namespace

namespace detail {

const char* const kJobsetColumns =
    "id, project, name, kind, location, branch, file, attribute, arguments, "
    "check_interval, shares, enabled, last_checked, last_inputs, evaluator";

JobsetRow readJobset(const SqliteStmt& s) {
  JobsetRow j;
  j.id = s.getInt(0);
  j.project = s.getInt(1);
  j.name = s.getStr(2);
  j.kind = s.getStr(3);
  j.location = s.getStr(4);
  j.branch = s.getStr(5);
  j.file = s.getStr(6);
  j.attribute = s.getStr(7);
  j.arguments = s.getStr(8);
  j.checkIntervalSec = s.getInt(9);
  j.shares = s.getInt(10);
  j.enabled = s.getInt(11) != 0;
  j.lastCheckedMs = s.getInt(12);
  j.lastInputs = s.getStr(13);
  j.evaluator = s.getStr(14);
  return j;
}

const char* const kBuildColumns =
    "id, eval, jobset, job, nix_name, system, drv_path, finished, status, "
    "global_priority, local_priority, created, stop_time, error, reused_from, "
    "max_silent, timeout";

BuildRow readBuild(const SqliteStmt& s) { return *readBuildAt(s, 0); }

std::optional<BuildRow> readBuildAt(const SqliteStmt& s, int c) {
  if (s.isNull(c)) return std::nullopt;
  BuildRow b;
  b.id = s.getInt(c);
  b.eval = s.getInt(c + 1);
  b.jobset = s.getInt(c + 2);
  b.job = s.getStr(c + 3);
  b.nixName = s.getStr(c + 4);
  b.system = s.getStr(c + 5);
  b.drvPath = s.getStr(c + 6);
  b.finished = s.getInt(c + 7) != 0;
  b.status = s.isNull(c + 8) ? -1 : static_cast<int>(s.getInt(c + 8));
  b.globalPriority = static_cast<int>(s.getInt(c + 9));
  b.localPriority = static_cast<int>(s.getInt(c + 10));
  b.createdMs = s.getInt(c + 11);
  b.stopMs = s.getInt(c + 12);
  b.error = s.getStr(c + 13);
  b.reusedFrom = s.getInt(c + 14);
  b.maxSilentSec = s.getInt(c + 15);
  b.timeoutSec = s.getInt(c + 16);
  return b;
}

std::string buildColumnsOf(const std::string& alias) {
  std::string out;
  std::string_view cols = kBuildColumns;
  while (!cols.empty()) {
    size_t comma = cols.find(", ");
    out += (out.empty() ? "" : ", ") + alias + "." +
           std::string(cols.substr(0, comma));
    cols = comma == std::string_view::npos ? "" : cols.substr(comma + 2);
  }
  return out;
}

const char* const kStepColumns =
    "id, drv_path, system, pname, features, finished, status, error, "
    "attempts, worker, created, start_time, stop_time";

StepRow readStep(const SqliteStmt& s) {
  StepRow r;
  r.id = s.getInt(0);
  r.drvPath = s.getStr(1);
  r.system = s.getStr(2);
  r.pname = s.getStr(3);
  r.features = splitWords(s.getStr(4));
  r.finished = s.getInt(5) != 0;
  r.status = s.isNull(6) ? -1 : static_cast<int>(s.getInt(6));
  r.error = s.getStr(7);
  r.attempts = s.getInt(8);
  r.worker = s.getStr(9);
  r.createdMs = s.getInt(10);
  r.startMs = s.getInt(11);
  r.stopMs = s.getInt(12);
  return r;
}

EvaluationRow readEval(const SqliteStmt& s) {
  return {s.getInt(0), s.getInt(1), s.getStr(2), s.getInt(3),
          s.getInt(4), s.getInt(5), s.getStr(6)};
}

}  // namespace detail

using namespace detail;

namespace {

template <class Row, class Read>
std::vector<Row> readAll(SqliteStmt& s, Read read) {
  std::vector<Row> out;
  while (s.step()) out.push_back(read(s));
  return out;
}

template <class Row, class Read>
std::optional<Row> readOne(SqliteStmt& s, Read read) {
  if (!s.step()) return std::nullopt;
  return read(s);
}

}  // namespace

namespace {
SqliteOptions stateDbOptions() {
  SqliteOptions o;
  o.fullSync = false;
  return o;
}
}  // namespace

StateDb::StateDb(const std::string& path) : db_(path, stateDbOptions()) {
  migrateSchema(db_, stateMigrations());
}

StateDb::StateDb(const std::string& path, ReadOnly)
    : db_(path, [] {
        SqliteOptions o;
        o.readOnly = true;
        return o;
      }()) {
  auto s = db_.prepare("PRAGMA user_version");
  int64_t v = s.step() ? s.getInt(0) : 0;
  if (v != schemaVersion())
    throw SchemaError(path + " has schema version " + std::to_string(v) +
                      ", this kiln reads version " +
                      std::to_string(schemaVersion()));
}

int64_t StateDb::schemaVersion() { return stateMigrations().back().version; }

int64_t StateDb::createProject(const ProjectRow& p) {
  checkName("project", p.name);
  if (projectByName(p.name))
    throw SchedulerStateError("project '" + p.name + "' already exists");
  db_.prepare(
         "INSERT INTO projects (name, description, enabled) VALUES (?, ?, ?)")
      .bind(p.name)
      .bind(p.description)
      .bind(int64_t{p.enabled})
      .exec();
  return db_.lastInsertRowId();
}

std::optional<ProjectRow> StateDb::projectByName(const std::string& name) {
  auto s = db_.prepare(
      "SELECT id, name, description, enabled FROM projects WHERE name = ?");
  s.bind(name);
  return readOne<ProjectRow>(s, [](const SqliteStmt& r) {
    return ProjectRow{r.getInt(0), r.getStr(1), r.getStr(2), r.getInt(3) != 0};
  });
}

namespace {

// Throws SchedulerStateError if `j`'s declaration is invalid.
void checkJobset(const JobsetRow& j) {
  checkName("jobset", j.name);
  if (j.kind != "path" && j.kind != "git")
    throw SchedulerStateError("jobset '" + j.name +
                              "': kind must be 'path' "
                              "or 'git', got '" +
                              j.kind + "'");
  if (j.location.empty())
    throw SchedulerStateError("jobset '" + j.name + "': empty location");
  if (!isEvaluatorName(j.evaluator))
    throw SchedulerStateError("jobset '" + j.name + "': evaluator '" +
                              j.evaluator +
                              "' is not a plugin name (1 to 64 letters, "
                              "digits, '-' or '_')");
  if (j.shares < 1 || j.checkIntervalSec < 0)
    throw SchedulerStateError("jobset '" + j.name +
                              "': shares must be >= 1 and the check "
                              "interval >= 0");
}

// Binds the declaration of `j` (kind ... evaluator, in the columns' order).
SqliteStmt& bindJobsetDeclaration(SqliteStmt& s, const JobsetRow& j) {
  return s.bind(j.kind)
      .bind(j.location)
      .bind(j.branch)
      .bind(j.file)
      .bind(j.attribute)
      .bind(j.arguments)
      .bind(j.checkIntervalSec)
      .bind(j.shares)
      .bind(int64_t{j.enabled})
      .bind(j.evaluator);
}

}  // namespace

int64_t StateDb::createJobset(const JobsetRow& j) {
  checkJobset(j);
  auto s = db_.prepare("SELECT 1 FROM jobsets WHERE project = ? AND name = ?");
  s.bind(j.project).bind(j.name);
  if (s.step())
    throw SchedulerStateError("jobset '" + j.name + "' already exists");
  auto ins = db_.prepare(
      "INSERT INTO jobsets (project, name, kind, location, branch, file, "
      "attribute, arguments, check_interval, shares, enabled, evaluator) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  ins.bind(j.project).bind(j.name);
  bindJobsetDeclaration(ins, j).exec();
  return db_.lastInsertRowId();
}

void StateDb::updateJobset(const JobsetRow& j) {
  checkJobset(j);
  auto s = db_.prepare(
      "UPDATE jobsets SET kind = ?, location = ?, branch = ?, file = ?, "
      "attribute = ?, arguments = ?, check_interval = ?, shares = ?, "
      "enabled = ?, evaluator = ? WHERE id = ?");
  bindJobsetDeclaration(s, j).bind(j.id).exec();
  if (db_.changes() == 0)
    throw SchedulerStateError("no jobset with id " + std::to_string(j.id));
}

void StateDb::updateProject(const ProjectRow& p) {
  db_.prepare("UPDATE projects SET description = ?, enabled = ? WHERE id = ?")
      .bind(p.description)
      .bind(int64_t{p.enabled})
      .bind(p.id)
      .exec();
  if (db_.changes() == 0)
    throw SchedulerStateError("no project with id " + std::to_string(p.id));
}

std::optional<JobsetRow> StateDb::jobset(int64_t id) {
  auto s = db_.prepare(std::string("SELECT ") + kJobsetColumns +
                       " FROM jobsets WHERE id = ?");
  s.bind(id);
  return readOne<JobsetRow>(s, readJobset);
}

std::optional<JobsetRow> StateDb::jobsetByName(const std::string& project,
                                               const std::string& name) {
  auto s =
      db_.prepare(std::string("SELECT j.") +
                  std::regex_replace(kJobsetColumns, std::regex(", "), ", j.") +
                  " FROM jobsets j JOIN projects p ON j.project = p.id "
                  "WHERE p.name = ? AND j.name = ?");
  s.bind(project).bind(name);
  return readOne<JobsetRow>(s, readJobset);
}

std::vector<JobsetRow> StateDb::jobsets() {
  auto s = db_.prepare(std::string("SELECT ") + kJobsetColumns +
                       " FROM jobsets ORDER BY id");
  return readAll<JobsetRow>(s, readJobset);
}

void StateDb::setJobsetChecked(int64_t id, int64_t timeMs,
                               const std::optional<std::string>& inputs) {
  if (inputs)
    db_.prepare(
           "UPDATE jobsets SET last_checked = ?, last_inputs = ? WHERE id = ?")
        .bind(timeMs)
        .bind(*inputs)
        .bind(id)
        .exec();
  else
    db_.prepare("UPDATE jobsets SET last_checked = ? WHERE id = ?")
        .bind(timeMs)
        .bind(id)
        .exec();
}

int64_t StateDb::createEvaluation(const EvaluationRow& e,
                                  const std::vector<EvalErrorRow>& errors) {
  SqliteTxn txn(db_);
  db_.prepare(
         "INSERT INTO evaluations (jobset, inputs_hash, time, duration, jobs, "
         "error) VALUES (?, ?, ?, ?, ?, ?)")
      .bind(e.jobset)
      .bind(e.inputsHash)
      .bind(e.timeMs)
      .bind(e.durationMs)
      .bind(e.jobs)
      .bind(e.error)
      .exec();
  int64_t id = db_.lastInsertRowId();
  auto ins = db_.prepare(
      "INSERT INTO eval_errors (eval, attr, error) VALUES (?, ?, ?)");
  for (auto& err : errors) ins.bind(id).bind(err.attr).bind(err.error).exec();
  txn.commit();
  return id;
}

std::optional<EvaluationRow> StateDb::evaluation(int64_t id) {
  auto s = db_.prepare(
      "SELECT id, jobset, inputs_hash, time, duration, jobs, error FROM "
      "evaluations WHERE id = ?");
  s.bind(id);
  return readOne<EvaluationRow>(s, readEval);
}

std::vector<EvaluationRow> StateDb::evaluations(int64_t jobset) {
  auto s = db_.prepare(
      "SELECT id, jobset, inputs_hash, time, duration, jobs, error FROM "
      "evaluations WHERE jobset = ? ORDER BY id");
  s.bind(jobset);
  return readAll<EvaluationRow>(s, readEval);
}

std::vector<EvalErrorRow> StateDb::evaluationErrors(int64_t eval) {
  auto s = db_.prepare(
      "SELECT attr, error FROM eval_errors WHERE eval = ? ORDER BY attr");
  s.bind(eval);
  return readAll<EvalErrorRow>(s, [](const SqliteStmt& r) {
    return EvalErrorRow{r.getStr(0), r.getStr(1)};
  });
}

int64_t StateDb::createBuild(const BuildRow& b) {
  db_.prepare(
         "INSERT INTO builds (eval, jobset, job, nix_name, system, drv_path, "
         "finished, status, global_priority, local_priority, created, "
         "stop_time, error, reused_from, max_silent, timeout) VALUES "
         "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
      .bind(b.eval)
      .bind(b.jobset)
      .bind(b.job)
      .bind(b.nixName)
      .bind(b.system)
      .bind(b.drvPath)
      .bind(int64_t{b.finished})
      .bind(b.finished ? std::optional<std::string>(std::to_string(b.status))
                       : std::nullopt)
      .bind(int64_t{b.globalPriority})
      .bind(int64_t{b.localPriority})
      .bind(b.createdMs)
      .bind(b.stopMs)
      .bind(b.error)
      .bind(b.reusedFrom)
      .bind(b.maxSilentSec)
      .bind(b.timeoutSec)
      .exec();
  return db_.lastInsertRowId();
}

std::optional<BuildRow> StateDb::build(int64_t id) {
  auto s = db_.prepare(std::string("SELECT ") + kBuildColumns +
                       " FROM builds WHERE id = ?");
  s.bind(id);
  return readOne<BuildRow>(s, readBuild);
}

std::vector<BuildRow> StateDb::unfinishedBuilds() {
  auto s = db_.prepare(std::string("SELECT ") + kBuildColumns +
                       " FROM builds WHERE finished = 0 ORDER BY id");
  return readAll<BuildRow>(s, readBuild);
}

std::vector<BuildRow> StateDb::allBuilds() {
  auto s = db_.prepare(std::string("SELECT ") + kBuildColumns +
                       " FROM builds ORDER BY id");
  return readAll<BuildRow>(s, readBuild);
}

namespace {
/// The (all, finished, succeeded) row of a count query.
BuildCounts readCounts(SqliteStmt& s) {
  BuildCounts c;
  if (s.step()) {
    c.all = s.getInt(0);
    c.finished = s.getInt(1);
    c.succeeded = s.getInt(2);
  }
  return c;
}
}  // namespace

BuildCounts StateDb::buildCounts(int64_t eval) {
  // eval_counts: kept by triggers on builds (migration 8).
  auto s = db_.prepare(
      "SELECT coalesce(sum(builds), 0), coalesce(sum(finished), 0), "
      "coalesce(sum(succeeded), 0) FROM eval_counts" +
      std::string(eval ? " WHERE eval = ?" : " WHERE ? = 0"));
  s.bind(eval);
  return readCounts(s);
}

BuildCounts StateDb::buildCountsInRange(int64_t jobset, int64_t firstId,
                                        int64_t lastId) {
  auto s = db_.prepare(
      "SELECT count(*), coalesce(sum(finished), 0), "
      "coalesce(sum(finished AND status = 0), 0) FROM builds "
      "WHERE id BETWEEN ? AND ? AND jobset = ?");
  s.bind(firstId).bind(lastId).bind(jobset);
  return readCounts(s);
}

std::vector<BuildRow> StateDb::buildsOfEval(int64_t eval) {
  auto s = db_.prepare(std::string("SELECT ") + kBuildColumns +
                       " FROM builds WHERE eval = ? ORDER BY id");
  s.bind(eval);
  return readAll<BuildRow>(s, readBuild);
}

std::optional<BuildRow> StateDb::finishedBuildOfDrv(const std::string& drv) {
  auto s = db_.prepare(std::string("SELECT ") + kBuildColumns +
                       " FROM builds WHERE drv_path = ? AND finished = 1 "
                       "ORDER BY id DESC LIMIT 1");
  s.bind(drv);
  return readOne<BuildRow>(s, readBuild);
}

std::vector<BuildRow> StateDb::unfinishedBuildsOfDrv(const std::string& drv) {
  auto s = db_.prepare(std::string("SELECT ") + kBuildColumns +
                       " FROM builds WHERE drv_path = ? AND finished = 0 "
                       "ORDER BY id");
  s.bind(drv);
  return readAll<BuildRow>(s, readBuild);
}

void StateDb::finishBuild(int64_t id, int status, int64_t timeMs,
                          const std::string& error) {
  db_.prepare(
         "UPDATE builds SET finished = 1, status = ?, stop_time = ?, error = ? "
         "WHERE id = ?")
      .bind(int64_t{status})
      .bind(timeMs)
      .bind(error)
      .bind(id)
      .exec();
}

void StateDb::reopenBuild(int64_t id) {
  db_.prepare(
         "UPDATE builds SET finished = 0, status = NULL, stop_time = 0, "
         "error = '', reused_from = 0 WHERE id = ?")
      .bind(id)
      .exec();
}

void StateDb::setBuildPriority(int64_t id, int globalPriority) {
  db_.prepare("UPDATE builds SET global_priority = ? WHERE id = ?")
      .bind(int64_t{globalPriority})
      .bind(id)
      .exec();
}

void StateDb::setBuildOutputs(
    int64_t id,
    const std::vector<std::pair<std::string, std::string>>& nameToPath) {
  auto s = db_.prepare(
      "INSERT OR REPLACE INTO build_outputs (build, name, path) VALUES "
      "(?, ?, ?)");
  for (auto& [n, p] : nameToPath) s.bind(id).bind(n).bind(p).exec();
}

std::vector<std::pair<std::string, std::string>> StateDb::buildOutputs(
    int64_t id) {
  auto s = db_.prepare(
      "SELECT name, path FROM build_outputs WHERE build = ? ORDER BY name");
  s.bind(id);
  return readAll<std::pair<std::string, std::string>>(
      s,
      [](const SqliteStmt& r) { return std::pair(r.getStr(0), r.getStr(1)); });
}

int64_t StateDb::upsertStep(const StepRow& r) {
  if (auto existing = stepByDrv(r.drvPath)) return existing->id;
  db_.prepare(
         "INSERT INTO steps (drv_path, system, pname, features, created) "
         "VALUES (?, ?, ?, ?, ?)")
      .bind(r.drvPath)
      .bind(r.system)
      .bind(r.pname)
      .bind(joinWords(r.features))
      .bind(r.createdMs)
      .exec();
  return db_.lastInsertRowId();
}

std::optional<StepRow> StateDb::step(int64_t id) {
  auto s = db_.prepare(std::string("SELECT ") + kStepColumns +
                       " FROM steps WHERE id = ?");
  s.bind(id);
  return readOne<StepRow>(s, readStep);
}

std::optional<StepRow> StateDb::stepByDrv(const std::string& drvPath) {
  auto s = db_.prepare(std::string("SELECT ") + kStepColumns +
                       " FROM steps WHERE drv_path = ?");
  s.bind(drvPath);
  return readOne<StepRow>(s, readStep);
}

void StateDb::addStepDep(int64_t step, int64_t dep) {
  db_.prepare("INSERT OR IGNORE INTO step_deps (step, dep) VALUES (?, ?)")
      .bind(step)
      .bind(dep)
      .exec();
}

std::vector<int64_t> StateDb::stepDeps(int64_t step) {
  auto s = db_.prepare("SELECT dep FROM step_deps WHERE step = ?");
  s.bind(step);
  std::vector<int64_t> out;
  while (s.step()) out.push_back(s.getInt(0));
  return out;
}

std::vector<StepRow> StateDb::allSteps() {
  auto s = db_.prepare(std::string("SELECT ") + kStepColumns +
                       " FROM steps ORDER BY id");
  return readAll<StepRow>(s, readStep);
}

std::vector<StepRow> StateDb::unfinishedSteps() {
  auto s = db_.prepare(std::string("SELECT ") + kStepColumns +
                       " FROM steps WHERE finished = 0 ORDER BY id");
  return readAll<StepRow>(s, readStep);
}

void StateDb::startStep(int64_t id, const std::string& worker, int64_t timeMs) {
  db_.prepare(
         "UPDATE steps SET worker = ?, start_time = ?, attempts = attempts + 1 "
         "WHERE id = ?")
      .bind(worker)
      .bind(timeMs)
      .bind(id)
      .exec();
}

void StateDb::finishStep(int64_t id, int status, int64_t timeMs,
                         const std::string& error) {
  db_.prepare(
         "UPDATE steps SET finished = 1, status = ?, stop_time = ?, error = ? "
         "WHERE id = ?")
      .bind(int64_t{status})
      .bind(timeMs)
      .bind(error)
      .bind(id)
      .exec();
}

void StateDb::reopenStep(int64_t id) {
  db_.prepare(
         "UPDATE steps SET finished = 0, status = NULL, error = '' WHERE id = "
         "?")
      .bind(id)
      .exec();
}

void StateDb::addCachedFailure(const CachedFailureRow& f) {
  db_.prepare(
         "INSERT OR REPLACE INTO cached_failures (drv_path, status, time, "
         "expires) VALUES (?, ?, ?, ?)")
      .bind(f.drvPath)
      .bind(int64_t{f.status})
      .bind(f.timeMs)
      .bind(f.expiresMs)
      .exec();
}

static CachedFailureRow readFailure(const SqliteStmt& r) {
  return CachedFailureRow{r.getStr(0), static_cast<int>(r.getInt(1)),
                          r.getInt(2), r.getInt(3)};
}

std::optional<CachedFailureRow> StateDb::cachedFailure(
    const std::string& drvPath, int64_t nowMs) {
  auto s = db_.prepare(
      "SELECT drv_path, status, time, expires FROM cached_failures WHERE "
      "drv_path = ? AND (expires = 0 OR expires > ?)");
  s.bind(drvPath).bind(nowMs);
  return readOne<CachedFailureRow>(s, readFailure);
}

std::vector<CachedFailureRow> StateDb::cachedFailures() {
  auto s = db_.prepare(
      "SELECT drv_path, status, time, expires FROM cached_failures ORDER BY "
      "drv_path");
  return readAll<CachedFailureRow>(s, readFailure);
}

int64_t StateDb::clearCachedFailures(const std::string& drvPath) {
  if (drvPath.empty()) {
    db_.exec("DELETE FROM cached_failures");
  } else {
    db_.prepare("DELETE FROM cached_failures WHERE drv_path = ?")
        .bind(drvPath)
        .exec();
  }
  return db_.changes();
}

int64_t StateDb::addRequest(const std::string& kind, const std::string& args) {
  db_.prepare("INSERT INTO requests (kind, args) VALUES (?, ?)")
      .bind(kind)
      .bind(args)
      .exec();
  return db_.lastInsertRowId();
}

static RequestRow readRequest(const SqliteStmt& r) {
  return RequestRow{r.getInt(0),      r.getStr(1),      r.getStr(2),
                    r.getInt(3) != 0, r.getInt(4) != 0, r.getStr(5)};
}

std::vector<RequestRow> StateDb::pendingRequests() {
  auto s = db_.prepare(
      "SELECT id, kind, args, done, ok, result FROM requests WHERE done = 0 "
      "ORDER BY id");
  return readAll<RequestRow>(s, readRequest);
}

std::optional<RequestRow> StateDb::request(int64_t id) {
  auto s = db_.prepare(
      "SELECT id, kind, args, done, ok, result FROM requests WHERE id = ?");
  s.bind(id);
  return readOne<RequestRow>(s, readRequest);
}

void StateDb::completeRequest(int64_t id, bool ok, const std::string& result) {
  db_.prepare("UPDATE requests SET done = 1, ok = ?, result = ? WHERE id = ?")
      .bind(int64_t{ok})
      .bind(result)
      .bind(id)
      .exec();
}

std::vector<std::pair<std::string, double>> StateDb::historicalDurations() {
  auto s = db_.prepare(
      "SELECT pname, CAST(AVG(stop_time - start_time) AS INTEGER) FROM steps "
      "WHERE "
      "finished = 1 AND status = 0 AND pname <> '' AND stop_time > start_time "
      "AND start_time > 0 GROUP BY pname");
  return readAll<std::pair<std::string, double>>(s, [](const SqliteStmt& r) {
    return std::pair(r.getStr(0),
                     std::max(0.001, static_cast<double>(r.getInt(1)) / 1000));
  });
}

}  // namespace kiln::scheduler
