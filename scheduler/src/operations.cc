// Operator requests: applied by the running scheduler (live: database and
// core) or, when none runs, directly to the database (docs/scheduler.md,
// "Operations").
#include <thread>

#include "kiln/common/logging.h"
#include "service_impl.h"

namespace kiln::scheduler {

using nlohmann::json;

namespace {

std::string strArg(const json& a, const char* k, const std::string& def = "",
                   bool required = false) {
  if (!a.contains(k)) {
    if (required)
      throw SchedulerStateError(std::string("missing argument '") + k + "'");
    return def;
  }
  if (!a[k].is_string())
    throw SchedulerStateError(std::string("argument '") + k +
                              "' must be a string");
  return a[k].get<std::string>();
}

int64_t intArg(const json& a, const char* k, int64_t def, bool required) {
  if (!a.contains(k)) {
    if (required)
      throw SchedulerStateError(std::string("missing argument '") + k + "'");
    return def;
  }
  if (!a[k].is_number_integer())
    throw SchedulerStateError(std::string("argument '") + k +
                              "' must be an integer");
  return a[k].get<int64_t>();
}

BuildRow requireBuild(StateDb& db, const json& a) {
  int64_t id = intArg(a, "build", 0, true);
  auto b = db.build(id);
  if (!b) throw SchedulerStateError("no build with id " + std::to_string(id));
  return *b;
}

// The failed steps in the recorded closure of a build's own step.
std::vector<StepRow> failedStepsOf(StateDb& db, const BuildRow& b) {
  std::vector<StepRow> out;
  auto top = db.stepByDrv(b.drvPath);
  if (!top) return out;
  std::set<int64_t> seen{top->id};
  std::vector<int64_t> todo{top->id};
  auto deps = db.db().prepare("SELECT dep FROM step_deps WHERE step = ?");
  while (!todo.empty()) {
    int64_t id = todo.back();
    todo.pop_back();
    auto s = db.step(id);
    if (s && s->finished && s->status != 0) out.push_back(*s);
    deps.bind(id);
    while (deps.step())
      if (seen.insert(deps.getInt(0)).second) todo.push_back(deps.getInt(0));
    deps.reset();
  }
  return out;
}

json jobsetJson(const JobsetRow& j) {
  return {{"id", j.id},         {"name", j.name},
          {"kind", j.kind},     {"location", j.location},
          {"branch", j.branch}, {"file", j.file},
          {"attribute", j.attribute},
          {"checkInterval", j.checkIntervalSec},
          {"shares", j.shares}};
}

int64_t jobsetIdOf(StateDb& db, const json& a) {
  auto js = db.jobsetByName(strArg(a, "project", "", true),
                            strArg(a, "jobset", "", true));
  if (!js) throw SchedulerStateError("no such jobset");
  return js->id;
}

}  // namespace

BuildRow createManualBuild(StateDb& db, int64_t jobset, const std::string& job,
                           const std::string& drvPath, int localPriority,
                           const Clock& clock) {
  if (!db.jobset(jobset))
    throw SchedulerStateError("no jobset with id " + std::to_string(jobset));
  if (drvPath.size() < 38 || drvPath.compare(drvPath.size() - 4, 4, ".drv"))
    throw SchedulerStateError("'" + drvPath + "' is not a .drv path");
  int64_t now = clock.nowMs();
  EvaluationRow e;
  e.jobset = jobset;
  e.inputsHash = "manual";
  e.timeMs = now;
  e.jobs = 1;
  BuildRow b;
  b.eval = db.createEvaluation(e, {});
  b.jobset = jobset;
  b.job = job;
  b.drvPath = drvPath;
  b.localPriority = localPriority;
  b.createdMs = now;
  b.id = db.createBuild(b);
  return b;
}

json applyRequestOffline(StateDb& db, const std::string& kind,
                         const json& a) {
  if (kind == "project-create") {
    ProjectRow p;
    p.name = strArg(a, "name", "", true);
    p.description = strArg(a, "description");
    return {{"id", db.createProject(p)}};
  }
  if (kind == "jobset-create") {
    auto p = db.projectByName(strArg(a, "project", "", true));
    if (!p) throw SchedulerStateError("no project named '" +
                                      strArg(a, "project") + "'");
    JobsetRow j;
    j.project = p->id;
    j.name = strArg(a, "name", "", true);
    j.kind = strArg(a, "kind", "path");
    j.location = strArg(a, "location", "", true);
    j.branch = strArg(a, "branch");
    j.file = strArg(a, "file", "default.nix");
    j.attribute = strArg(a, "attribute");
    j.arguments = a.contains("arguments") ? a["arguments"].dump() : "{}";
    j.checkIntervalSec = intArg(a, "checkInterval", 300, false);
    j.shares = intArg(a, "shares", 100, false);
    j.enabled = !a.contains("enabled") || a["enabled"].get<bool>();
    j.id = db.createJobset(j);
    return jobsetJson(j);
  }
  if (kind == "build-add") {
    auto js = db.jobsetByName(strArg(a, "project", "", true),
                              strArg(a, "jobset", "", true));
    if (!js) throw SchedulerStateError("no such jobset");
    std::string drv = strArg(a, "drvPath", "", true);
    std::string job = strArg(a, "job", baseNameOf(drv).substr(33));
    return {{"build", createManualBuild(db, js->id, job, drv, 0).id}};
  }
  if (kind == "cached-failure-clear") {
    return {{"cleared", db.clearCachedFailures(strArg(a, "drvPath"))}};
  }
  if (kind == "build-cancel") {
    auto b = requireBuild(db, a);
    if (b.finished)
      throw SchedulerStateError("build " + std::to_string(b.id) +
                                " already finished with status " +
                                std::to_string(b.status));
    db.finishBuild(b.id, static_cast<int>(StepStatus::kCancelled), 0,
                   "cancelled");
    return {{"build", b.id}, {"status", 4}};
  }
  if (kind == "build-bump") {
    auto b = requireBuild(db, a);
    int p = static_cast<int>(intArg(a, "priority", 100, false));
    db.setBuildPriority(b.id, p);
    return {{"build", b.id}, {"globalPriority", p}};
  }
  if (kind == "build-restart") {
    auto b = requireBuild(db, a);
    if (!b.finished || b.status == 0)
      throw SchedulerStateError("build " + std::to_string(b.id) +
                                " is not a finished, failed build");
    json steps = json::array();
    for (auto& s : failedStepsOf(db, b)) {
      db.clearCachedFailures(s.drvPath);
      db.reopenStep(s.id);
      steps.push_back(s.drvPath);
    }
    db.reopenBuild(b.id);
    return {{"build", b.id}, {"restartedSteps", steps}};
  }
  if (kind == "queue") {
    json out = json::array();
    for (auto& s : db.unfinishedSteps())
      out.push_back({{"stepId", s.id},
                     {"drvPath", s.drvPath},
                     {"system", s.system},
                     {"state", "unknown"},
                     {"reason", "the scheduler is not running"}});
    return out;
  }
  if (kind == "jobset-eval")
    throw SchedulerStateError(
        "no scheduler is running on this state directory: start `kiln "
        "scheduler` to evaluate jobsets");
  throw SchedulerStateError("unknown request kind '" + kind + "'");
}

// An evaluation can take minutes: it runs off the service thread, and the
// request that asked for it is answered when it ends, so workers keep being
// served meanwhile.
void SchedulerService::Impl::queueEvalRequest(const RequestRow& req) {
  try {
    json a = json::parse(req.args);
    auto js = db.jobset(jobsetIdOf(db, a));
    bool force = !(a.contains("ifChanged") && a["ifChanged"].get<bool>());
    evalQueue.push_back({*js, force, req.id});
  } catch (const std::exception& e) {
    failRequest(req.id, e);
  }
}

json SchedulerService::Impl::apply(const std::string& kind, const json& a) {
  if (kind == "jobset-create") {
    json r = applyRequestOffline(db, kind, a);
    core.setJobsetShares(r["id"].get<int64_t>(),
                         static_cast<unsigned>(r["shares"].get<int64_t>()));
    return r;
  }
  if (kind == "build-add") {
    json r = applyRequestOffline(db, kind, a);
    startBuild(*db.build(r["build"].get<int64_t>()));
    processEvents();
    return r;
  }
  if (kind == "build-cancel") {
    auto b = requireBuild(db, a);
    if (b.finished || !core.hasBuild(b.id))
      return applyRequestOffline(db, kind, a);
    core.cancelBuild(b.id);
    processEvents();
    return {{"build", b.id}, {"status", 4}};
  }
  if (kind == "build-bump") {
    json r = applyRequestOffline(db, kind, a);
    int64_t id = r["build"].get<int64_t>();
    if (core.hasBuild(id))
      core.bumpBuild(id, r["globalPriority"].get<int>());
    return r;
  }
  if (kind == "build-restart") {
    json r = applyRequestOffline(db, kind, a);
    restartBuild(r["build"].get<int64_t>());
    return r;
  }
  if (kind == "queue") {
    json out = json::array();
    for (auto& e : queueEntries())
      out.push_back({{"stepId", e.stepId},
                     {"drvPath", e.drvPath},
                     {"system", e.system},
                     {"state", e.state},
                     {"reason", e.reason}});
    return out;
  }
  return applyRequestOffline(db, kind, a);
}

// After the database part of a restart: failed core steps of the build are
// queued again; a build the core no longer holds is ingested afresh.
void SchedulerService::Impl::restartBuild(int64_t id) {
  auto b = db.build(id);
  if (!b) return;
  if (core.hasBuild(id)) {
    // Failed core steps whose rows were reopened are queued again; their
    // builds are revived when they succeed.
    for (auto& s : db.unfinishedSteps()) {
      auto sid = core.findStep(s.drvPath);
      if (sid && core.step(*sid).state == StepView::State::kFailed)
        core.restartStep(*sid);
    }
  } else {
    startBuild(*b);
  }
  processEvents();
}

std::vector<QueueEntry> SchedulerService::Impl::queueEntries() {
  auto& s = *this;
  static const char* names[] = {"waiting", "queued", "running", "backoff",
                                "failed"};
  std::vector<QueueEntry> out;
  for (auto& row : s.db.unfinishedSteps()) {
    auto sid = s.index.coreId(row.id);
    if (!sid) continue;
    auto v = s.core.step(*sid);
    auto w = s.core.whyWaiting(*sid);
    out.push_back({row.id, row.drvPath, row.system,
                   names[static_cast<int>(v.state)], w.detail});
  }
  return out;
}

std::vector<QueueEntry> SchedulerService::queue() const {
  return impl_->queueEntries();
}

json submitRequest(const std::string& stateDir, const std::string& kind,
                   const json& args, std::chrono::milliseconds timeout) {
  createDirs(stateDir);
  if (auto lock = FileLock::tryAcquire(stateDir + "/scheduler.lock",
                                       LockMode::kExclusive)) {
    StateDb db(stateDir + "/scheduler.sqlite");
    return applyRequestOffline(db, kind, args);
  }
  StateDb db(stateDir + "/scheduler.sqlite");
  int64_t id = 0;
  retrySqlite([&] { id = db.addRequest(kind, args.dump()); });
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto wait = std::chrono::milliseconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = db.request(id);
    if (r && r->done) {
      if (!r->ok) {
        // {"error": text, "caller": true when the request itself was wrong}
        json err = json::parse(r->result, nullptr, false);
        std::string msg = err.is_object() ? err.value("error", r->result)
                                          : r->result;
        if (err.is_object() && err.value("caller", false))
          throw SchedulerStateError(msg);
        throw Error(msg);
      }
      return json::parse(r->result);
    }
    std::this_thread::sleep_for(wait);
    wait = std::min(wait * 2, std::chrono::milliseconds(200));
  }
  throw Error("the scheduler did not answer request " + std::to_string(id) +
              " within " + std::to_string(timeout.count()) + " ms");
}

}  // namespace kiln::scheduler
