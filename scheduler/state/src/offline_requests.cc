// The operator requests that work on the state database alone
// (offline_requests.h): projects, jobsets, builds, tokens, the queue as the
// database knows it. A live service wraps the ones its core must know.
#include "kiln/scheduler/offline_requests.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>
#include <vector>

#include "edit_requests.h"
#include "kiln/common/file.h"
#include "kiln/scheduler/forge_requests.h"
#include "kiln/scheduler/repeat_check.h"
#include "kiln/scheduler/tokens.h"

namespace kiln::scheduler {

using nlohmann::json;

json jobsetJson(const JobsetRow& j) {
  return {{"id", j.id},
          {"name", j.name},
          {"kind", j.kind},
          {"location", j.location},
          {"branch", j.branch},
          {"file", j.file},
          {"attribute", j.attribute},
          {"checkInterval", j.checkIntervalSec},
          {"shares", j.shares},
          {"evaluator", j.evaluator},
          {"channelJob", j.channelJob},
          {"maxClosureGrowth", j.maxClosureGrowthPct},
          {"maxBuildTimeGrowth", j.maxBuildTimeGrowthPct},
          {"repeatFraction", repeatPpmToFraction(uint32_t(j.repeatPpm))}};
}

// The repeat share `a` gives as `repeatFraction` (a JSON number from 0 to
// 1), in parts per million; `dflt` when absent.
int64_t repeatPpmArg(const json& a, int64_t dflt) {
  if (!a.contains("repeatFraction")) return dflt;
  const json& v = a["repeatFraction"];
  if (!v.is_number())
    throw SchedulerStateError("repeatFraction must be a number from 0 to 1");
  try {
    return repeatFractionToPpm(v.get<double>());
  } catch (const std::invalid_argument& e) {
    throw SchedulerStateError(e.what());
  }
}

BuildRow requireBuild(StateDb& db, const json& a) {
  int64_t id = intArg(a, "build");
  auto b = db.build(id);
  if (!b) throw SchedulerStateError("no build with id " + std::to_string(id));
  return *b;
}

int64_t jobsetIdOf(StateDb& db, const json& a) {
  auto js = db.jobsetByName(strArg(a, "project"), strArg(a, "jobset"));
  if (!js) throw SchedulerStateError("no such jobset");
  return js->id;
}

JobsetRow evalJobsetOf(StateDb& db, const json& a) {
  auto js = db.jobsetByName(strArg(a, "project"), strArg(a, "jobset"));
  if (!js) throw SchedulerStateError("no such jobset");
  js->revision = strArg(a, "revision", "");
  if (js->revision.empty()) return *js;
  bool hex = std::all_of(js->revision.begin(), js->revision.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) != 0;
  });
  if (!hex || (js->revision.size() != 40 && js->revision.size() != 64))
    throw SchedulerStateError("revision: a commit id of 40 or 64 hex digits");
  if (js->kind != "git")
    throw SchedulerStateError("revision: jobset '" + js->name +
                              "' is not a git jobset");
  return *js;
}

json buildStatusJson(int64_t build, StepStatus status) {
  return {{"build", build},
          {"status", std::string(stepStatusName(status))},
          {"statusCode", static_cast<int>(status)}};
}

json queueEntryJson(int64_t stepId, const std::string& drvPath,
                    const std::string& system, const std::string& state,
                    const std::string& reason) {
  return {{"stepId", stepId},
          {"drvPath", drvPath},
          {"system", system},
          {"state", state},
          {"reason", reason}};
}

namespace {

// The failed steps in the recorded closure of a build's own step.
std::vector<StepRow> failedStepsOf(StateDb& db, const BuildRow& b) {
  std::vector<StepRow> out;
  auto top = db.stepByDrv(b.drvPath);
  if (!top) return out;
  std::set<int64_t> seen{top->id};
  std::vector<int64_t> todo{top->id};
  while (!todo.empty()) {
    int64_t id = todo.back();
    todo.pop_back();
    auto s = db.step(id);
    if (s && s->finished && s->status != 0) out.push_back(*s);
    for (int64_t dep : db.stepDeps(id))
      if (seen.insert(dep).second) todo.push_back(dep);
  }
  return out;
}

const ArgSpec kBuildArg{"build", ArgType::kInt, true, "the build id"};
const ArgSpec kProjectArg{"project", ArgType::kString, true, "project name"};
const ArgSpec kJobsetArg{"jobset", ArgType::kString, true, "jobset name"};

json createProject(StateDb& db, const json& a) {
  ProjectRow p;
  p.name = strArg(a, "name");
  p.description = strArg(a, "description");
  return {{"id", db.createProject(p)}};
}

// Sets the declaration fields `a` names on `j`; the others keep what `j`
// holds (the defaults for a new jobset, the stored values for an edit).
void applyJobsetFields(JobsetRow& j, const json& a) {
  j.kind = strArg(a, "kind", j.kind);
  j.location = strArg(a, "location", j.location);
  j.branch = strArg(a, "branch", j.branch);
  j.file = strArg(a, "file", j.file);
  j.attribute = strArg(a, "attribute", j.attribute);
  if (a.contains("arguments")) {
    if (!a["arguments"].is_object())
      throw SchedulerStateError("arguments must be a JSON object");
    j.arguments = a["arguments"].dump();
  }
  j.checkIntervalSec = intArg(a, "checkInterval", j.checkIntervalSec);
  j.shares = intArg(a, "shares", j.shares);
  j.enabled = boolArg(a, "enabled", j.enabled);
  j.evaluator = strArg(a, "evaluator", j.evaluator);
  j.channelJob = strArg(a, "channelJob", j.channelJob);
  j.maxClosureGrowthPct = intArg(a, "maxClosureGrowth", j.maxClosureGrowthPct);
  j.maxBuildTimeGrowthPct =
      intArg(a, "maxBuildTimeGrowth", j.maxBuildTimeGrowthPct);
  j.repeatPpm = repeatPpmArg(a, j.repeatPpm);
}

json createJobset(StateDb& db, const json& a,
                  const EvaluatorCheck& checkEvaluator) {
  auto p = db.projectByName(strArg(a, "project"));
  if (!p)
    throw SchedulerStateError("no project named '" + strArg(a, "project") +
                              "'");
  JobsetRow j;
  j.project = p->id;
  j.name = strArg(a, "name");
  applyJobsetFields(j, a);  // over JobsetRow's defaults
  if (isEvaluatorName(j.evaluator)) checkEvaluator(j.name, j.evaluator);
  j.id = db.createJobset(j);
  return jobsetJson(j);
}

// Changes the fields `a` names of an existing jobset; the others stay.
json updateJobset(StateDb& db, const json& a,
                  const EvaluatorCheck& checkEvaluator) {
  auto found = db.jobsetByName(strArg(a, "project"), strArg(a, "jobset"));
  if (!found) throw SchedulerStateError("no such jobset");
  JobsetRow j = *found;
  applyJobsetFields(j, a);
  // A changed evaluator must be loaded; an unchanged one may be gone (the
  // jobset's evaluations then fail, saying so) without blocking edits.
  if (j.evaluator != found->evaluator && isEvaluatorName(j.evaluator))
    checkEvaluator(j.name, j.evaluator);
  db.updateJobset(j);
  json out = jobsetJson(j);
  out["enabled"] = j.enabled;
  return out;
}

json cancelBuildOffline(StateDb& db, const json& a) {
  auto b = requireBuild(db, a);
  if (b.finished)
    throw SchedulerStateError("build " + std::to_string(b.id) +
                              " already finished with status " +
                              std::to_string(b.status));
  db.finishBuild(b.id, static_cast<int>(StepStatus::kCancelled), 0,
                 "cancelled");
  return buildStatusJson(b.id, StepStatus::kCancelled);
}

json restartBuildOffline(StateDb& db, const json& a) {
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

namespace {

// The declaration fields jobset-create and jobset-update take, after
// `head`; `location` is required when creating. Defaults are a new jobset's.
std::vector<ArgSpec> jobsetFieldArgs(std::vector<ArgSpec> head, bool creating) {
  std::vector<ArgSpec> fields = {
      {"kind", ArgType::kString, false, "path or git (default path)"},
      {"location", ArgType::kString, creating, "folder or repository"},
      {"branch", ArgType::kString, false, "git branch"},
      {"file", ArgType::kString, false, "Nix file (default default.nix)"},
      {"attribute", ArgType::kString, false, "attribute path of the jobs"},
      {"arguments", ArgType::kAny, false, "--arg expressions by name"},
      {"checkInterval", ArgType::kInt, false,
       "seconds (0: on demand; default 300)"},
      {"shares", ArgType::kInt, false, "scheduling shares (default 100)"},
      {"enabled", ArgType::kBool, false, "evaluated on schedule"},
      {"evaluator", ArgType::kString, false,
       "a loaded evaluator plugin: builtin (default), nix, ..."},
      {"channelJob", ArgType::kString, false,
       "the job whose success advances the channel (default tested)"},
      {"maxClosureGrowth", ArgType::kInt, false,
       "% a job's closure may grow before the channel is held (0: none)"},
      {"maxBuildTimeGrowth", ArgType::kInt, false,
       "% a job's build time may grow before the channel is held"},
      {"repeatFraction", ArgType::kAny, false,
       "share of successful steps built again (0 to 1; 0: none)"}};
  head.insert(head.end(), fields.begin(), fields.end());
  return head;
}

void addProjectRequests(RequestTable& t, StateDb& db,
                        const EvaluatorCheck& checkEvaluator) {
  t.set({"project-create",
         "create a project",
         {{"name", ArgType::kString, true, "project name"},
          {"description", ArgType::kString, false, "one line"}},
         [&db](const json& a) { return createProject(db, a); }});
  t.set({"jobset-create", "create a jobset of a project",
         jobsetFieldArgs(
             {kProjectArg, {"name", ArgType::kString, true, "jobset name"}},
             true),
         [&db, checkEvaluator](const json& a) {
           return createJobset(db, a, checkEvaluator);
         }});
  t.set({"jobset-update",
         "change a jobset's declaration (fields not given stay)",
         jobsetFieldArgs({kProjectArg, kJobsetArg}, false),
         [&db, checkEvaluator](const json& a) {
           return updateJobset(db, a, checkEvaluator);
         }});
  t.set({"jobset-eval",
         "evaluate a jobset now",
         {kProjectArg,
          kJobsetArg,
          {"ifChanged", ArgType::kBool, false, "only if its inputs changed"},
          {"revision", ArgType::kString, false,
           "git jobsets: the commit to evaluate (default: the branch's head)"}},
         [](const json&) -> json {
           throw SchedulerStateError(
               "no scheduler is running on this state directory: start "
               "`kiln scheduler` to evaluate jobsets");
         }});
}

void addBuildRequests(RequestTable& t, StateDb& db, const Clock& clock) {
  t.set({"build-add",
         "build one .drv in a fresh evaluation of a jobset",
         {kProjectArg,
          kJobsetArg,
          {"drvPath", ArgType::kString, true, "the .drv (in the store)"},
          {"job", ArgType::kString, false, "job name"}},
         [&db, &clock](const json& a) {
           std::string drv = strArg(a, "drvPath");
           std::string job = strArg(a, "job", baseNameOf(drv).substr(33));
           BuildRow b =
               createManualBuild(db, jobsetIdOf(db, a), job, drv, 0, clock);
           return json{{"build", b.id}};
         }});
  t.set(
      {"cached-failure-clear",
       "forget cached failures",
       {{"drvPath", ArgType::kString, false, "only this .drv"}},
       [&db](const json& a) {
         return json{{"cleared", db.clearCachedFailures(strArg(a, "drvPath"))}};
       }});
  t.set({"build-cancel",
         "cancel an unfinished build",
         {kBuildArg},
         [&db](const json& a) { return cancelBuildOffline(db, a); }});
  t.set({"build-bump",
         "set a build's global priority",
         {kBuildArg, {"priority", ArgType::kInt, false, "default 100"}},
         [&db](const json& a) {
           auto b = requireBuild(db, a);
           int p = static_cast<int>(intArg(a, "priority", 100));
           db.setBuildPriority(b.id, p);
           return json{{"build", b.id}, {"globalPriority", p}};
         }});
  t.set({"build-restart",
         "build a failed build's failed steps again",
         {kBuildArg},
         [&db](const json& a) { return restartBuildOffline(db, a); }});
}

}  // namespace

RequestTable offlineRequests(StateDb& db, const Clock& clock,
                             EvaluatorCheck checkEvaluator) {
  // Without a check (the state layer knows no plugins) any well-formed
  // name goes; StateDb refuses the others.
  if (!checkEvaluator)
    checkEvaluator = [](const std::string&, const std::string&) {};
  RequestTable t;
  addProjectRequests(t, db, checkEvaluator);
  addBuildRequests(t, db, clock);
  addTokenRequests(t, db, clock);
  addEditRequests(t, db);
  addForgeRequests(t, db, clock);
  t.set({"queue", "unfinished steps and why they wait", {}, [&db](const json&) {
           json out = json::array();
           for (auto& s : db.unfinishedSteps())
             out.push_back(queueEntryJson(s.id, s.drvPath, s.system, "unknown",
                                          "the scheduler is not running"));
           return out;
         }});
  return t;
}

json applyRequestOffline(StateDb& db, const std::string& kind, const json& a,
                         EvaluatorCheck checkEvaluator) {
  return offlineRequests(db, RealClock::instance(), std::move(checkEvaluator))
      .apply(kind, a);
}

}  // namespace kiln::scheduler
