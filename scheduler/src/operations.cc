// Operator requests applied by the running scheduler: the offline table of
// the state layer (offline_requests.h) wrapped where the core must know too,
// and the requests table polled (docs/scheduler.md, "Operations").
#include "kiln/common/logging.h"
#include "kiln/plugin_host/registry.h"
#include "kiln/scheduler/forge_requests.h"
#include "kiln/scheduler/offline_requests.h"
#include "kiln/scheduler/repeat_check.h"
#include "kiln/scheduler/request_queue.h"
#include "service_impl.h"

namespace kiln::scheduler {

using nlohmann::json;

json submitRequest(const std::string& stateDir, const std::string& kind,
                   const json& args, std::chrono::milliseconds timeout) {
  return submitRequest(stateDir, kind, args, timeout,
                       loadedEvaluatorCheck(plugins::processPlugins()));
}

json submitRequest(const DatabaseSpec& database, const std::string& stateDir,
                   const std::string& kind, const json& args,
                   std::chrono::milliseconds timeout) {
  return submitRequest(database, stateDir, kind, args, timeout,
                       loadedEvaluatorCheck(plugins::processPlugins()));
}

// An evaluation can take minutes: it runs off the service thread, and the
// request that asked for it is answered when it ends, so workers keep being
// served meanwhile.
void SchedulerService::Impl::queueEvalRequest(const RequestRow& req) {
  try {
    json a = json::parse(req.args);
    requests.check("jobset-eval", a);
    JobsetRow js = evalJobsetOf(db, a);  // at its `revision`, if any
    bool force = !boolArg(a, "ifChanged", false);
    evaluations.enqueue(js, force, req.id);
  } catch (const std::exception& e) {
    failRequest(req.id, e);
  }
}

// The live table: the offline handlers, with the ones that concern the
// core (shares, builds, priorities, restarts, the queue) applied to it too.
void SchedulerService::Impl::setUpRequests() {
  requests = offlineRequests(
      db, clock, [this](const std::string& jobset, const std::string& name) {
        if (cfg.evalRunner || cfg.evalRunners.count(name)) return;
        checkEvaluatorLoaded(
            cfg.plugins ? *cfg.plugins : plugins::processPlugins(), jobset,
            name);
      });
  auto wrap = [this](const std::string& name,
                     std::function<json(const RequestFn&, const json&)> fn) {
    RequestHandler h = *requests.find(name);
    RequestFn offline = h.run;
    h.run = [offline, fn](const json& a) { return fn(offline, a); };
    requests.set(std::move(h));
  };
  // A jobset's shares take effect in the core at once.
  auto withShares = [this](const RequestFn& offline, const json& a) {
    json r = offline(a);
    core.setJobsetShares(r["id"].get<int64_t>(),
                         static_cast<unsigned>(r["shares"].get<int64_t>()));
    steps.setRepeatShare(
        r["id"].get<int64_t>(),
        repeatFractionToPpm(r["repeatFraction"].get<double>()));
    return r;
  };
  wrap("jobset-create", withShares);
  wrap("jobset-update", withShares);
  wrap("build-add", [this](const RequestFn& offline, const json& a) {
    json r = offline(a);
    startBuild(*db.build(r["build"].get<int64_t>()));
    processEvents();
    return r;
  });
  wrap("build-cancel", [this](const RequestFn& offline, const json& a) {
    auto b = requireBuild(db, a);
    if (b.finished || !core.hasBuild(b.id)) return offline(a);
    core.cancelBuild(b.id);
    processEvents();
    return buildStatusJson(b.id, StepStatus::kCancelled);
  });
  wrap("build-bump", [this](const RequestFn& offline, const json& a) {
    json r = offline(a);
    int64_t id = r["build"].get<int64_t>();
    if (core.hasBuild(id)) core.bumpBuild(id, r["globalPriority"].get<int>());
    return r;
  });
  wrap("build-restart", [this](const RequestFn& offline, const json& a) {
    json r = offline(a);
    restartBuild(r["build"].get<int64_t>());
    return r;
  });
  // A forge's webhook: the rows as offline (with a `jobset-eval` request
  // at its commit per evaluation, taken by the next poll here or, with
  // remote evaluations, by an evaluator host); the core cancels the
  // superseded builds.
  RequestHandler forge = *requests.find("forge-event");
  forge.run = [this](const json& a) {
    ForgeActions r = applyForgeEvent(db, a, clock.nowMs());
    cancelBuilds(r.cancel, "cancelled: superseded by a newer push");
    return r.answer;
  };
  requests.set(std::move(forge));
  wrap("queue", [this](const RequestFn&, const json&) {
    json out = json::array();
    for (auto& e : queueEntries())
      out.push_back(
          queueEntryJson(e.stepId, e.drvPath, e.system, e.state, e.reason));
    return out;
  });
}

// Without a listening connection the table is read this often.
constexpr auto kRequestPoll = std::chrono::milliseconds(100);

bool SchedulerService::Impl::pollRequestsWhenDue(Clock::TimePoint now) {
  bool woken = requestWakeups && requestWakeups->take();
  bool listening = requestWakeups && requestWakeups->listening();
  auto since = now - lastRequestPoll;
  // A wake-up is read at once; one whose read failed (the database away)
  // is read again at the fallback pace until a read succeeds.
  bool due = since >= (listening ? std::max<Clock::Duration>(
                                       cfg.requestSafetyPoll, kRequestPoll)
                                 : kRequestPoll);
  requestsWanted = requestsWanted || woken;
  if (!woken && !due && !(requestsWanted && since >= kRequestPoll))
    return false;
  lastRequestPoll = now;
  pollRequests();
  requestsWanted = false;
  return woken;
}

// The snapshot is published before the answers: a caller that reads a
// page after its answer finds the change there too.
void SchedulerService::Impl::pollRequests() {
  std::vector<std::pair<int64_t, std::string>> answers;
  for (auto& req : db.pendingRequests()) {
    if (req.kind == "jobset-eval") {
      // With remote evaluations an evaluator host takes it.
      if (!cfg.remoteEvaluations && evaluations.take(req.id))
        queueEvalRequest(req);
      continue;
    }
    try {
      json args = json::parse(req.args);
      answers.emplace_back(req.id, requests.apply(req.kind, args).dump());
    } catch (const std::exception& e) {
      failRequest(req.id, e);
    }
  }
  if (answers.empty()) return;
  publishSnapshot(core.metrics());
  for (auto& [id, answer] : answers) {
    try {
      db.completeRequest(id, true, answer);
    } catch (const std::exception& e) {
      failRequest(id, e);
    }
  }
}

void SchedulerService::Impl::failRequest(int64_t id, const std::exception& e) {
  json answer{{"error", e.what()}};
  // The caller's mistake (no such jobset...), not the scheduler's.
  if (dynamic_cast<const SchedulerStateError*>(&e)) answer["caller"] = true;
  db.completeRequest(id, false, answer.dump());
}

// Cancels builds `ids` in the core (those it holds) or in the database.
void SchedulerService::Impl::cancelBuilds(const std::vector<int64_t>& ids,
                                          const std::string& why) {
  for (int64_t id : ids) {
    if (core.hasBuild(id)) {
      core.cancelBuild(id);
      continue;
    }
    auto b = db.build(id);
    if (b && !b->finished)
      db.finishBuild(id, static_cast<int>(StepStatus::kCancelled),
                     clock.nowMs(), why);
  }
  if (!ids.empty()) processEvents();
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

}  // namespace kiln::scheduler
