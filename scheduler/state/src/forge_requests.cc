// The forge requests' database part (forge_requests.h).
#include "kiln/scheduler/forge_requests.h"

#include <algorithm>
#include <set>

#include "kiln/scheduler/forge_store.h"
#include "kiln/scheduler/offline_requests.h"

namespace kiln::scheduler {

using nlohmann::json;

namespace {

constexpr size_t kMaxUrls = 8;

// Whether `sha` is a full hex commit id.
bool isCommit(const std::string& sha) {
  return (sha.size() == 40 || sha.size() == 64) &&
         std::all_of(sha.begin(), sha.end(), [](char c) {
           return std::isxdigit(static_cast<unsigned char>(c)) != 0;
         });
}

// The event argument, checked.
struct Event {
  std::string forge, delivery, kind, repo, branch, sha, action, headRef,
      headUrl;
  int64_t number = 0;
  std::set<std::string> urls;  // normalized
};

std::string field(const json& e, const char* name) {
  if (!e.contains(name) || !e[name].is_string() ||
      e[name].get_ref<const std::string&>().size() > 4096)
    throw SchedulerStateError(std::string("forge-event: event.") + name +
                              " is not a string of at most 4096 bytes");
  return e[name].get<std::string>();
}

Event readEvent(const json& a) {
  Event ev;
  ev.forge = strArg(a, "forge");
  if (ev.forge != "github" && ev.forge != "gitea" && ev.forge != "gitlab")
    throw SchedulerStateError("forge-event: unknown forge '" + ev.forge + "'");
  ev.delivery = strArg(a, "delivery");
  if (ev.delivery.empty() || ev.delivery.size() > 200)
    throw SchedulerStateError("forge-event: a delivery id of 1 to 200 bytes");
  const json& e = a["event"];
  if (!e.is_object()) throw SchedulerStateError("forge-event: event object");
  ev.kind = field(e, "kind");
  ev.repo = field(e, "repo");
  ev.branch = field(e, "branch");
  ev.sha = field(e, "sha");
  ev.action = field(e, "action");
  ev.headRef = field(e, "headRef");
  ev.headUrl = field(e, "headUrl");
  if (ev.kind != "push" && ev.kind != "pull_request")
    throw SchedulerStateError("forge-event: event.kind push or pull_request");
  if (!isCommit(ev.sha) || ev.branch.empty())
    throw SchedulerStateError("forge-event: event.sha and event.branch");
  if (!e.contains("urls") || !e["urls"].is_array() ||
      e["urls"].size() > kMaxUrls)
    throw SchedulerStateError("forge-event: event.urls, at most 8");
  for (auto& u : e["urls"])
    if (u.is_string()) ev.urls.insert(normalizeRepoUrl(u.get<std::string>()));
  if (ev.kind == "pull_request") {
    ev.number = e.value("number", int64_t{0});
    if (ev.number <= 0 || ev.headUrl.empty() ||
        ev.headRef.rfind("refs/", 0) != 0 ||
        (ev.action != "open" && ev.action != "update" && ev.action != "close"))
      throw SchedulerStateError(
          "forge-event: a pull request needs number, headUrl, headRef and "
          "action open, update or close");
  }
  return ev;
}

void addUnfinished(StateDb& db, int64_t jobset, std::vector<int64_t>& out) {
  for (auto& b : db.unfinishedBuilds())
    if (b.jobset == jobset) out.push_back(b.id);
}

// The project's enabled branch jobsets following `ev.branch` of the
// repository (not a pull request's).
std::vector<JobsetRow> branchJobsets(StateDb& db, ForgeStore& forge,
                                     int64_t project, const Event& ev) {
  std::vector<JobsetRow> out;
  for (auto& js : db.jobsets()) {
    if (js.project != project || js.kind != "git" || !js.enabled ||
        js.branch != ev.branch || !ev.urls.count(normalizeRepoUrl(js.location)))
      continue;
    auto row = forge.jobset(js.id);
    if (row && row->number != 0) continue;
    out.push_back(js);
  }
  return out;
}

// Creates or updates the jobset of pull request `ev` from its base's.
void openPull(StateDb& db, ForgeStore& forge, const JobsetRow& base,
              const Event& ev, ForgeActions& out) {
  auto row = forge.pull(base.project, ev.forge, ev.repo, ev.number);
  JobsetRow js = base;
  js.name = pullJobsetName(ev.number);
  js.location = ev.headUrl;
  js.branch = ev.headRef;
  js.checkIntervalSec = 0;  // evaluated when the forge says so
  js.enabled = true;
  if (row) {
    js.id = row->jobset;
    db.updateJobset(js);
    if (row->head != ev.sha) addUnfinished(db, js.id, out.cancel);
  } else {
    js.id = db.createJobset(js);
  }
  forge.upsertJobset(
      {js.id, ev.forge, ev.repo, ev.number, base.id, ev.sha, 0, false});
  out.evaluate.push_back({js.id, ev.sha});
  out.answer["jobsets"].push_back(js.name);
}

void closePull(StateDb& db, ForgeStore& forge, int64_t project, const Event& ev,
               int64_t nowMs, ForgeActions& out) {
  auto row = forge.pull(project, ev.forge, ev.repo, ev.number);
  if (!row || row->closedMs) return;
  auto js = db.jobset(row->jobset);
  js->enabled = false;
  db.updateJobset(*js);
  row->closedMs = nowMs;
  row->swept = false;
  forge.upsertJobset(*row);
  out.answer["closed"].push_back(js->name);
}

// A `jobset-eval` request at its commit for each evaluation from `first`
// on, in the event's transaction: whichever takes it (the scheduler, or an
// evaluator host with remote evaluations) evaluates exactly that commit,
// and a scheduler that stops first finds the request when it starts.
void queueEvaluations(StateDb& db, const std::string& project, size_t first,
                      ForgeActions& out) {
  for (size_t i = first; i < out.evaluate.size(); ++i) {
    auto& e = out.evaluate[i];
    auto js = db.jobset(e.jobset);
    if (!js) continue;
    json args{
        {"project", project}, {"jobset", js->name}, {"revision", e.revision}};
    e.request = db.addRequest("jobset-eval", args.dump());
    out.answer["evalRequests"].push_back(e.request);
  }
}

}  // namespace

std::string pullJobsetName(int64_t number) {
  return "pr-" + std::to_string(number);
}

ForgeActions applyForgeEvent(StateDb& db, const json& a, int64_t nowMs) {
  Event ev = readEvent(a);
  ForgeActions out;
  out.answer = {{"jobsets", json::array()},
                {"closed", json::array()},
                {"evalRequests", json::array()}};
  StateDb::Transaction txn(db);
  ForgeStore forge(db);
  if (!forge.recordDelivery(ev.forge, ev.delivery, nowMs)) {
    out.answer = {{"ignored", "delivery " + ev.delivery + " seen before"}};
    return out;
  }
  if (!a.contains("projects") || !a["projects"].is_array())
    throw SchedulerStateError("forge-event: projects, an array of names");
  for (auto& name : a["projects"]) {
    auto p = name.is_string() ? db.projectByName(name.get<std::string>())
                              : std::nullopt;
    if (!p) continue;
    if (ev.kind == "pull_request" && ev.action == "close") {
      closePull(db, forge, p->id, ev, nowMs, out);
      continue;
    }
    size_t first = out.evaluate.size();
    for (auto& js : branchJobsets(db, forge, p->id, ev)) {
      if (ev.kind == "pull_request") {
        openPull(db, forge, js, ev, out);
        break;  // one jobset per pull request and project
      }
      forge.upsertJobset({js.id, ev.forge, ev.repo, 0, 0, ev.sha, 0, false});
      out.evaluate.push_back({js.id, ev.sha});
      out.answer["jobsets"].push_back(js.name);
    }
    queueEvaluations(db, p->name, first, out);
  }
  out.answer["cancelled"] = out.cancel;
  txn.commit();
  return out;
}

std::vector<int64_t> sweepClosedPulls(StateDb& db, int64_t closedBeforeMs) {
  StateDb::Transaction txn(db);
  ForgeStore forge(db);
  std::vector<int64_t> out;
  for (auto row : forge.closedUnswept(closedBeforeMs)) {
    addUnfinished(db, row.jobset, out);
    row.swept = true;
    forge.upsertJobset(row);
  }
  txn.commit();
  return out;
}

void addForgeRequests(RequestTable& t, StateDb& db, const Clock& clock) {
  t.set({"project-webhook",
         "set a project's forge webhook secret file",
         {{"project", ArgType::kString, true, "project name"},
          {"secretFile", ArgType::kString, true,
           "absolute path of the secret (\"\": none)"}},
         [&db](const json& a) {
           auto p = db.projectByName(strArg(a, "project"));
           if (!p)
             throw SchedulerStateError("no project named '" +
                                       strArg(a, "project") + "'");
           std::string file = strArg(a, "secretFile");
           if (!file.empty() && (file[0] != '/' || file.size() > 4096))
             throw SchedulerStateError(
                 "the webhook secret file must be an absolute path");
           ForgeStore(db).setWebhookSecretFile(p->id, file);
           return json{{"project", p->name}, {"webhookSecretFile", file}};
         }});
  t.set({"forge-event",
         "apply a verified forge webhook (queued by the web)",
         {{"forge", ArgType::kString, true, "github, gitea or gitlab"},
          {"delivery", ArgType::kString, true, "the delivery's id"},
          {"projects", ArgType::kAny, true, "projects whose secret signed it"},
          {"event", ArgType::kAny, true, "the event (forge_events.h)"}},
         [&db, &clock](const json& a) {
           ForgeActions r = applyForgeEvent(db, a, clock.nowMs());
           for (int64_t id : r.cancel) {
             auto b = db.build(id);
             if (b && !b->finished)
               db.finishBuild(id, static_cast<int>(StepStatus::kCancelled),
                              clock.nowMs(), "cancelled: superseded");
           }
           return r.answer;
         }});
}

}  // namespace kiln::scheduler
