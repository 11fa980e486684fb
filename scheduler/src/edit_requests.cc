// Editing projects and jobsets through the request path (edit_requests.h):
// only the arguments given change; the jobset passes createJobset's checks.
#include "edit_requests.h"

#include "kiln/scheduler/service.h"

namespace kiln::scheduler {

using nlohmann::json;

namespace {

json editProject(StateDb& db, const json& a) {
  auto p = db.projectByName(strArg(a, "project"));
  if (!p)
    throw SchedulerStateError("no project named '" + strArg(a, "project") +
                              "'");
  p->description = strArg(a, "description", p->description);
  p->enabled = boolArg(a, "enabled", p->enabled);
  db.updateProject(*p);
  return {{"id", p->id},
          {"name", p->name},
          {"description", p->description},
          {"enabled", p->enabled}};
}

json editJobset(StateDb& db, const json& a) {
  auto j = db.jobsetByName(strArg(a, "project"), strArg(a, "jobset"));
  if (!j) throw SchedulerStateError("no such jobset");
  j->kind = strArg(a, "kind", j->kind);
  j->location = strArg(a, "location", j->location);
  j->branch = strArg(a, "branch", j->branch);
  j->file = strArg(a, "file", j->file);
  j->attribute = strArg(a, "attribute", j->attribute);
  if (a.contains("arguments")) {
    if (!a["arguments"].is_object())
      throw SchedulerStateError("arguments must be a JSON object");
    j->arguments = a["arguments"].dump();
  }
  j->checkIntervalSec = intArg(a, "checkInterval", j->checkIntervalSec);
  j->shares = intArg(a, "shares", j->shares);
  j->enabled = boolArg(a, "enabled", j->enabled);
  j->evaluator = strArg(a, "evaluator", j->evaluator);
  db.updateJobset(*j);
  json out = jobsetJson(*j);
  out["enabled"] = j->enabled;
  return out;
}

}  // namespace

void addEditRequests(RequestTable& t, StateDb& db) {
  const ArgSpec project{"project", ArgType::kString, true, "project name"};
  t.set({"project-edit",
         "change a project's description or enabled flag",
         {project,
          {"description", ArgType::kString, false, "one line"},
          {"enabled", ArgType::kBool, false, "its jobsets are evaluated"}},
         [&db](const json& a) { return editProject(db, a); }});
  t.set({"jobset-edit",
         "change a jobset's settings (only those given)",
         {project,
          {"jobset", ArgType::kString, true, "jobset name"},
          {"kind", ArgType::kString, false, "path or git"},
          {"location", ArgType::kString, false, "folder or repository"},
          {"branch", ArgType::kString, false, "git branch"},
          {"file", ArgType::kString, false, "Nix file"},
          {"attribute", ArgType::kString, false, "attribute path of the jobs"},
          {"arguments", ArgType::kAny, false, "--arg expressions by name"},
          {"checkInterval", ArgType::kInt, false, "seconds (0: on demand)"},
          {"shares", ArgType::kInt, false, "scheduling shares"},
          {"enabled", ArgType::kBool, false, "evaluated on schedule"},
          {"evaluator", ArgType::kString, false, "builtin or nix"}},
         [&db](const json& a) { return editJobset(db, a); }});
}

}  // namespace kiln::scheduler
