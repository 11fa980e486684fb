// The scheduler's snapshot in the state database (snapshot_store.h).
#include "kiln/scheduler/snapshot_store.h"

#include <nlohmann/json.hpp>

#include "kiln/common/logging.h"

namespace kiln::scheduler {

using nlohmann::json;

namespace {

json metricsToJson(const SchedulerMetrics& m) {
  return {{"queuedBySystem", m.queuedBySystem},
          {"workerSystems", m.workerSystems},
          {"runningSteps", m.runningSteps},
          {"waitingSteps", m.waitingSteps},
          {"waitingRepeats", m.waitingRepeats},
          {"runningRepeats", m.runningRepeats},
          {"backoffSteps", m.backoffSteps},
          {"failedSteps", m.failedSteps},
          {"builds", m.builds},
          {"workers", m.workers},
          {"totalSlots", m.totalSlots},
          {"freeSlots", m.freeSlots},
          {"dispatchDecisions", m.dispatchDecisions},
          {"retries", m.retries},
          {"stepsSucceeded", m.stepsSucceeded},
          {"stepsFailed", m.stepsFailed},
          {"workersRemoved", m.workersRemoved},
          {"idleSlotSeconds", m.idleSlotSeconds}};
}

SchedulerMetrics metricsFromJson(const json& j) {
  SchedulerMetrics m;
  m.queuedBySystem =
      j.at("queuedBySystem").get<std::map<std::string, size_t>>();
  m.workerSystems = j.at("workerSystems").get<std::set<std::string>>();
  j.at("runningSteps").get_to(m.runningSteps);
  j.at("waitingSteps").get_to(m.waitingSteps);
  // An older scheduler's snapshot has no repeats' counts.
  m.waitingRepeats = j.value("waitingRepeats", size_t{0});
  m.runningRepeats = j.value("runningRepeats", size_t{0});
  j.at("backoffSteps").get_to(m.backoffSteps);
  j.at("failedSteps").get_to(m.failedSteps);
  j.at("builds").get_to(m.builds);
  j.at("workers").get_to(m.workers);
  j.at("totalSlots").get_to(m.totalSlots);
  j.at("freeSlots").get_to(m.freeSlots);
  j.at("dispatchDecisions").get_to(m.dispatchDecisions);
  j.at("retries").get_to(m.retries);
  j.at("stepsSucceeded").get_to(m.stepsSucceeded);
  j.at("stepsFailed").get_to(m.stepsFailed);
  j.at("workersRemoved").get_to(m.workersRemoved);
  j.at("idleSlotSeconds").get_to(m.idleSlotSeconds);
  return m;
}

json workerToJson(const WorkerEntry& w) {
  return {{"name", w.name},
          {"systems", w.systems},
          {"slots", w.slots},
          {"runningSteps", w.runningSteps},
          {"features", w.features},
          {"steps", w.steps},
          {"lastSeenMs", w.lastSeenMs},
          {"succeeded", w.succeededSteps},
          {"failed", w.failedSteps},
          {"pressure", w.pressure},
          {"health", w.health}};
}

WorkerEntry workerFromJson(const json& j) {
  WorkerEntry w;
  j.at("name").get_to(w.name);
  j.at("systems").get_to(w.systems);
  j.at("slots").get_to(w.slots);
  j.at("runningSteps").get_to(w.runningSteps);
  j.at("features").get_to(w.features);
  j.at("steps").get_to(w.steps);
  j.at("lastSeenMs").get_to(w.lastSeenMs);
  j.at("succeeded").get_to(w.succeededSteps);
  j.at("failed").get_to(w.failedSteps);
  // Absent from a snapshot stored by a scheduler before them.
  w.pressure = j.value("pressure", std::string());
  w.health = j.value("health", std::string());
  return w;
}

}  // namespace

std::string encodeSnapshot(const SchedulerSnapshot& snap) {
  json queue = json::array();
  for (size_t i = 0; i < snap.queue.size() && i < kMaxStoredQueue; ++i) {
    auto& q = snap.queue[i];
    queue.push_back({q.stepId, q.drvPath, q.system, q.state, q.reason});
  }
  json workers = json::array();
  for (auto& w : snap.workers) workers.push_back(workerToJson(w));
  return json{{"version", 1},
              {"takenMs", snap.takenMs},
              {"queue", queue},
              {"queueLength", snap.queue.size()},
              {"workers", workers},
              {"metrics", metricsToJson(snap.metrics)},
              {"dispatches", snap.dispatches},
              {"dispatchLatencySum", snap.dispatchLatencySum}}
      .dump();
}

SchedulerSnapshot decodeSnapshot(const std::string& text) {
  try {
    json j = json::parse(text);
    if (j.at("version").get<int>() != 1)
      throw FormatError("unknown snapshot version");
    SchedulerSnapshot s;
    j.at("takenMs").get_to(s.takenMs);
    auto& queue = j.at("queue");
    if (queue.size() > kMaxStoredQueue)
      throw FormatError("snapshot queue too long");
    for (auto& q : queue)
      s.queue.push_back({q.at(0).get<int64_t>(), q.at(1).get<std::string>(),
                         q.at(2).get<std::string>(), q.at(3).get<std::string>(),
                         q.at(4).get<std::string>()});
    auto& workers = j.at("workers");
    if (workers.size() > 100000) throw FormatError("too many workers");
    for (auto& w : workers) s.workers.push_back(workerFromJson(w));
    s.metrics = metricsFromJson(j.at("metrics"));
    j.at("dispatches").get_to(s.dispatches);
    j.at("dispatchLatencySum").get_to(s.dispatchLatencySum);
    return s;
  } catch (const json::exception& e) {
    throw FormatError(std::string("malformed scheduler snapshot: ") + e.what());
  }
}

void storeSnapshot(StateDb& db, const SchedulerSnapshot* snap, int64_t nowMs) {
  if (!snap) {
    db.db()
        .prepare("UPDATE scheduler_snapshot SET taken = ? WHERE id = 1")
        .bind(nowMs)
        .exec();
    return;
  }
  db.db()
      .prepare(
          "INSERT INTO scheduler_snapshot (id, taken, body) VALUES (1, ?, ?) "
          "ON CONFLICT (id) DO UPDATE SET taken = excluded.taken, body = "
          "excluded.body")
      .bind(nowMs)
      .bind(encodeSnapshot(*snap))
      .exec();
}

bool snapshotVouchedSince(StateDb& db, int64_t sinceMs) {
  auto s = db.db().prepare("SELECT taken FROM scheduler_snapshot WHERE id = 1");
  return s.step() && s.getInt(0) > 0 && s.getInt(0) >= sinceMs;
}

void withdrawSnapshot(StateDb& db) {
  db.db().exec("UPDATE scheduler_snapshot SET taken = 0 WHERE id = 1");
}

std::shared_ptr<const SchedulerSnapshot> loadSnapshot(StateDb& db,
                                                      int64_t nowMs,
                                                      int64_t maxAgeMs) {
  auto s = db.db().prepare(
      "SELECT taken, body FROM scheduler_snapshot WHERE id = 1");
  if (!s.step() || nowMs - s.getInt(0) > maxAgeMs) return nullptr;
  try {
    return std::make_shared<const SchedulerSnapshot>(
        decodeSnapshot(s.getStr(1)));
  } catch (const FormatError& e) {
    logWarn(e.what());
    return nullptr;
  }
}

}  // namespace kiln::scheduler
