// StateDb: opening, migrating, and the project, jobset, evaluation and
// build accessors (steps and the rest: state_db_steps.cc; the schema's
// SQL: state_schema.cc; row readers: state_rows.cc).
#include "kiln/scheduler/state_db.h"

#include <algorithm>
#include <map>
#include <regex>

#include "kiln/scheduler/repeat_check.h"
#include "state_rows.h"

namespace kiln::scheduler {
namespace {

void checkName(const std::string& what, const std::string& name) {
  static const std::regex re("[A-Za-z_][A-Za-z0-9_.-]{0,99}");
  if (!std::regex_match(name, re))
    throw SchedulerStateError(what + " name '" + name +
                              "' is invalid: use letters, digits, '_', '.', "
                              "'-', starting with a letter or '_'");
}

}  // namespace

using namespace detail;

int64_t StateDb::createProject(const ProjectRow& p) {
  checkName("project", p.name);
  if (projectByName(p.name))
    throw SchedulerStateError("project '" + p.name + "' already exists");
  return insertedId(db_->prepare("INSERT INTO projects (name, description, "
                                 "enabled) VALUES (?, ?, ?) RETURNING id")
                        .bind(p.name)
                        .bind(p.description)
                        .bind(int64_t{p.enabled}));
}

std::optional<ProjectRow> StateDb::projectByName(const std::string& name) {
  auto s = db_->prepare(
      "SELECT id, name, description, enabled FROM projects WHERE name = ?");
  s.bind(name);
  return readOne<ProjectRow>(s, [](const SqlStmt& r) {
    return ProjectRow{r.getInt(0), r.getStr(1), r.getStr(2), r.getInt(3) != 0};
  });
}

namespace {

// Throws SchedulerStateError if `j`'s declaration is invalid.
}  // namespace

bool isChannelJobName(const std::string& name) {
  if (name.empty() || name.size() > 200) return false;
  for (char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  return true;
}

namespace {

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
  if (!isChannelJobName(j.channelJob))
    throw SchedulerStateError("jobset '" + j.name +
                              "': the channel job must be 1 to 200 bytes "
                              "without control characters");
  if (j.maxClosureGrowthPct < 0 || j.maxClosureGrowthPct > 1000000 ||
      j.maxBuildTimeGrowthPct < 0 || j.maxBuildTimeGrowthPct > 1000000)
    throw SchedulerStateError("jobset '" + j.name +
                              "': growth limits are 0 (none) to 1000000 %");
  if (j.repeatPpm < 0 || j.repeatPpm > kRepeatPpmScale)
    throw SchedulerStateError("jobset '" + j.name +
                              "': the repeat fraction is 0 (none) to 1");
  if (j.shares < 1 || j.checkIntervalSec < 0)
    throw SchedulerStateError("jobset '" + j.name +
                              "': shares must be >= 1 and the check "
                              "interval >= 0");
}

// Binds the declaration of `j` (kind ... channel job, in the columns'
// order).
SqlStmt& bindJobsetDeclaration(SqlStmt& s, const JobsetRow& j) {
  return s.bind(j.kind)
      .bind(j.location)
      .bind(j.branch)
      .bind(j.file)
      .bind(j.attribute)
      .bind(j.arguments)
      .bind(j.checkIntervalSec)
      .bind(j.shares)
      .bind(int64_t{j.enabled})
      .bind(j.evaluator)
      .bind(j.channelJob)
      .bind(j.maxClosureGrowthPct)
      .bind(j.maxBuildTimeGrowthPct)
      .bind(j.repeatPpm);
}

}  // namespace

int64_t StateDb::createJobset(const JobsetRow& j) {
  checkJobset(j);
  auto s = db_->prepare("SELECT 1 FROM jobsets WHERE project = ? AND name = ?");
  s.bind(j.project).bind(j.name);
  if (s.step())
    throw SchedulerStateError("jobset '" + j.name + "' already exists");
  auto ins = db_->prepare(
      "INSERT INTO jobsets (project, name, kind, location, branch, file, "
      "attribute, arguments, check_interval, shares, enabled, evaluator, "
      "channel_job, max_closure_growth, max_build_time_growth, repeat_ppm) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id");
  ins.bind(j.project).bind(j.name);
  return insertedId(bindJobsetDeclaration(ins, j));
}

void StateDb::updateJobset(const JobsetRow& j) {
  checkJobset(j);
  auto s = db_->prepare(
      "UPDATE jobsets SET kind = ?, location = ?, branch = ?, file = ?, "
      "attribute = ?, arguments = ?, check_interval = ?, shares = ?, "
      "enabled = ?, evaluator = ?, channel_job = ?, max_closure_growth = ?, "
      "max_build_time_growth = ?, repeat_ppm = ? WHERE id = ?");
  bindJobsetDeclaration(s, j).bind(j.id).exec();
  if (db_->changes() == 0)
    throw SchedulerStateError("no jobset with id " + std::to_string(j.id));
}

void StateDb::updateProject(const ProjectRow& p) {
  db_->prepare("UPDATE projects SET description = ?, enabled = ? WHERE id = ?")
      .bind(p.description)
      .bind(int64_t{p.enabled})
      .bind(p.id)
      .exec();
  if (db_->changes() == 0)
    throw SchedulerStateError("no project with id " + std::to_string(p.id));
}

std::optional<JobsetRow> StateDb::jobset(int64_t id) {
  auto s = db_->prepare(std::string("SELECT ") + kJobsetColumns +
                        " FROM jobsets WHERE id = ?");
  s.bind(id);
  return readOne<JobsetRow>(s, readJobset);
}

std::optional<JobsetRow> StateDb::jobsetByName(const std::string& project,
                                               const std::string& name) {
  auto s = db_->prepare(
      std::string("SELECT j.") +
      std::regex_replace(kJobsetColumns, std::regex(", "), ", j.") +
      " FROM jobsets j JOIN projects p ON j.project = p.id "
      "WHERE p.name = ? AND j.name = ?");
  s.bind(project).bind(name);
  return readOne<JobsetRow>(s, readJobset);
}

std::vector<JobsetRow> StateDb::jobsets() {
  auto s = db_->prepare(std::string("SELECT ") + kJobsetColumns +
                        " FROM jobsets ORDER BY id");
  return readAll<JobsetRow>(s, readJobset);
}

void StateDb::setJobsetChecked(int64_t id, int64_t timeMs,
                               const std::optional<std::string>& inputs) {
  if (inputs)
    db_->prepare(
           "UPDATE jobsets SET last_checked = ?, last_inputs = ? WHERE id = ?")
        .bind(timeMs)
        .bind(*inputs)
        .bind(id)
        .exec();
  else
    db_->prepare("UPDATE jobsets SET last_checked = ? WHERE id = ?")
        .bind(timeMs)
        .bind(id)
        .exec();
}

int64_t StateDb::createEvaluation(const EvaluationRow& e,
                                  const std::vector<EvalErrorRow>& errors) {
  SqlConnection::Txn txn(*db_);
  int64_t id =
      insertedId(db_->prepare("INSERT INTO evaluations (jobset, inputs_hash, "
                              "time, duration, jobs, "
                              "error) VALUES (?, ?, ?, ?, ?, ?) RETURNING id")
                     .bind(e.jobset)
                     .bind(e.inputsHash)
                     .bind(e.timeMs)
                     .bind(e.durationMs)
                     .bind(e.jobs)
                     .bind(e.error));
  auto ins = db_->prepare(
      "INSERT INTO eval_errors (eval, attr, error) VALUES (?, ?, ?)");
  for (auto& err : errors) ins.bind(id).bind(err.attr).bind(err.error).exec();
  txn.commit();
  return id;
}

std::optional<EvaluationRow> StateDb::evaluation(int64_t id) {
  auto s = db_->prepare(
      "SELECT id, jobset, inputs_hash, time, duration, jobs, error FROM "
      "evaluations WHERE id = ?");
  s.bind(id);
  return readOne<EvaluationRow>(s, readEval);
}

std::vector<EvaluationRow> StateDb::evaluations(int64_t jobset) {
  auto s = db_->prepare(
      "SELECT id, jobset, inputs_hash, time, duration, jobs, error FROM "
      "evaluations WHERE jobset = ? ORDER BY id");
  s.bind(jobset);
  return readAll<EvaluationRow>(s, readEval);
}

std::vector<EvalErrorRow> StateDb::evaluationErrors(int64_t eval) {
  auto s = db_->prepare(
      "SELECT attr, error FROM eval_errors WHERE eval = ? ORDER BY attr");
  s.bind(eval);
  return readAll<EvalErrorRow>(s, [](const SqlStmt& r) {
    return EvalErrorRow{r.getStr(0), r.getStr(1)};
  });
}

int64_t StateDb::createBuild(const BuildRow& b) {
  return createBuilds({b}).front();
}

// A few multi-row INSERTs instead of one per build: on PostgreSQL each
// statement is a round trip to the server (and each INSERT statement one
// update of the evaluation's eval_counts row, migration 10).
std::vector<int64_t> StateDb::createBuilds(
    const std::vector<BuildRow>& builds) {
  std::vector<int64_t> ids(builds.size());
  forEachChunk(builds.size(), [&](size_t first, size_t count) {
    auto s = db_->prepare(
        "INSERT INTO builds (eval, jobset, job, nix_name, system, drv_path, "
        "finished, status, global_priority, local_priority, created, "
        "stop_time, error, reused_from, max_silent, timeout) VALUES " +
        placeholderRows(count, 16) + " RETURNING id, eval, job");
    // RETURNING's order is not promised: (eval, job) is unique.
    std::map<std::pair<int64_t, std::string>, size_t> index;
    for (size_t i = first; i < first + count; i++) {
      const BuildRow& b = builds[i];
      index[{b.eval, b.job}] = i;
      s.bind(b.eval)
          .bind(b.jobset)
          .bind(b.job)
          .bind(b.nixName)
          .bind(b.system)
          .bind(b.drvPath)
          .bind(int64_t{b.finished})
          .bind(b.finished
                    ? std::optional<std::string>(std::to_string(b.status))
                    : std::nullopt)
          .bind(int64_t{b.globalPriority})
          .bind(int64_t{b.localPriority})
          .bind(b.createdMs)
          .bind(b.stopMs)
          .bind(b.error)
          .bind(b.reusedFrom)
          .bind(b.maxSilentSec)
          .bind(b.timeoutSec);
    }
    size_t returned = 0;
    while (s.step()) {
      auto it = index.find({s.getInt(1), s.getStr(2)});
      if (it == index.end())
        throw Error("an INSERT … RETURNING gave a build it did not insert");
      ids[it->second] = s.getInt(0);
      returned++;
    }
    if (returned != count)
      throw Error("an INSERT of " + std::to_string(count) +
                  " builds returned " + std::to_string(returned));
  });
  return ids;
}

std::optional<BuildRow> StateDb::build(int64_t id) {
  auto s = db_->prepare(std::string("SELECT ") + kBuildColumns +
                        " FROM builds WHERE id = ?");
  s.bind(id);
  return readOne<BuildRow>(s, readBuild);
}

std::vector<BuildRow> StateDb::unfinishedBuilds() {
  auto s = db_->prepare(std::string("SELECT ") + kBuildColumns +
                        " FROM builds WHERE finished = 0 ORDER BY id");
  return readAll<BuildRow>(s, readBuild);
}

std::vector<BuildRow> StateDb::allBuilds() {
  auto s = db_->prepare(std::string("SELECT ") + kBuildColumns +
                        " FROM builds ORDER BY id");
  return readAll<BuildRow>(s, readBuild);
}

namespace {
/// The (all, finished, succeeded) row of a count query.
BuildCounts readCounts(SqlStmt& s) {
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
  auto s = db_->prepare(
      "SELECT coalesce(sum(builds), 0), coalesce(sum(finished), 0), "
      "coalesce(sum(succeeded), 0) FROM eval_counts" +
      std::string(eval ? " WHERE eval = ?" : " WHERE ? = 0"));
  s.bind(eval);
  return readCounts(s);
}

BuildCounts StateDb::buildCountsInRange(int64_t jobset, int64_t firstId,
                                        int64_t lastId) {
  auto s = db_->prepare(
      "SELECT count(*), coalesce(sum(finished), 0), "
      "coalesce(sum(CASE WHEN finished = 1 AND status = 0 THEN 1 ELSE 0 END), "
      "0) FROM builds "
      "WHERE id BETWEEN ? AND ? AND jobset = ?");
  s.bind(firstId).bind(lastId).bind(jobset);
  return readCounts(s);
}

std::vector<BuildRow> StateDb::buildsOfEval(int64_t eval) {
  auto s = db_->prepare(std::string("SELECT ") + kBuildColumns +
                        " FROM builds WHERE eval = ? ORDER BY id");
  s.bind(eval);
  return readAll<BuildRow>(s, readBuild);
}

std::optional<BuildRow> StateDb::finishedBuildOfDrv(const std::string& drv) {
  auto s = db_->prepare(std::string("SELECT ") + kBuildColumns +
                        " FROM builds WHERE drv_path = ? AND finished = 1 "
                        "ORDER BY id DESC LIMIT 1");
  s.bind(drv);
  return readOne<BuildRow>(s, readBuild);
}

std::map<std::string, BuildRow> StateDb::finishedBuildsOfDrvs(
    const std::vector<std::string>& drvPaths) {
  std::map<std::string, BuildRow> out;
  forEachChunk(drvPaths.size(), [&](size_t first, size_t count) {
    // Planned at each run: see lookUpSteps.
    auto s = db_->prepareEachRun(
        std::string("SELECT ") + kBuildColumns +
        " FROM builds WHERE id IN (SELECT max(id) FROM builds WHERE "
        "finished = 1 AND drv_path IN " +
        placeholderRows(1, count) + " GROUP BY drv_path)");
    for (size_t i = first; i < first + count; i++) s.bind(drvPaths[i]);
    while (s.step()) {
      BuildRow b = readBuild(s);
      out.insert_or_assign(b.drvPath, std::move(b));
    }
  });
  return out;
}

std::vector<BuildRow> StateDb::unfinishedBuildsOfDrv(const std::string& drv) {
  auto s = db_->prepare(std::string("SELECT ") + kBuildColumns +
                        " FROM builds WHERE drv_path = ? AND finished = 0 "
                        "ORDER BY id");
  s.bind(drv);
  return readAll<BuildRow>(s, readBuild);
}

void StateDb::finishBuild(int64_t id, int status, int64_t timeMs,
                          const std::string& error) {
  db_->prepare(
         "UPDATE builds SET finished = 1, status = ?, stop_time = ?, error = ? "
         "WHERE id = ?")
      .bind(int64_t{status})
      .bind(timeMs)
      .bind(error)
      .bind(id)
      .exec();
}

void StateDb::reopenBuild(int64_t id) {
  db_->prepare(
         "UPDATE builds SET finished = 0, status = NULL, stop_time = 0, "
         "error = '', reused_from = 0 WHERE id = ?")
      .bind(id)
      .exec();
}

void StateDb::setBuildPriority(int64_t id, int globalPriority) {
  db_->prepare("UPDATE builds SET global_priority = ? WHERE id = ?")
      .bind(int64_t{globalPriority})
      .bind(id)
      .exec();
}

void StateDb::setBuildOutputs(
    int64_t id,
    const std::vector<std::pair<std::string, std::string>>& nameToPath) {
  auto s = db_->prepare(
      "INSERT INTO build_outputs (build, name, path) VALUES (?, ?, ?) "
      "ON CONFLICT (build, name) DO UPDATE SET path = excluded.path");
  for (auto& [n, p] : nameToPath) s.bind(id).bind(n).bind(p).exec();
}

std::vector<std::pair<std::string, std::string>> StateDb::buildOutputs(
    int64_t id) {
  auto s = db_->prepare(
      "SELECT name, path FROM build_outputs WHERE build = ? ORDER BY name");
  s.bind(id);
  return readAll<std::pair<std::string, std::string>>(
      s, [](const SqlStmt& r) { return std::pair(r.getStr(0), r.getStr(1)); });
}

}  // namespace kiln::scheduler
