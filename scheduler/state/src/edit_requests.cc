// Editing projects through the request path (edit_requests.h): only the
// arguments given change.
#include "edit_requests.h"

#include "kiln/scheduler/requests.h"

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

}  // namespace

void addEditRequests(RequestTable& t, StateDb& db) {
  const ArgSpec project{"project", ArgType::kString, true, "project name"};
  t.set({"project-edit",
         "change a project's description or enabled flag",
         {project,
          {"description", ArgType::kString, false, "one line"},
          {"enabled", ArgType::kBool, false, "its jobsets are evaluated"}},
         [&db](const json& a) { return editProject(db, a); }});
}

}  // namespace kiln::scheduler
