// The requests table as clients use it (request_queue.h): queue a request
// for the running scheduler and wait for its answer, or apply it at once
// when none holds the state directory's lock.
#include "kiln/scheduler/request_queue.h"

#include "kiln/common/file.h"
#include "kiln/scheduler/scheduler_lock.h"
#include "kiln/scheduler/snapshot_store.h"

namespace kiln::scheduler {

using nlohmann::json;

int64_t queueRequest(StateDb& db, const std::string& kind, const json& args) {
  int64_t id = 0;
  retryTransient([&] { id = db.addRequest(kind, args.dump()); });
  return id;
}

std::unique_ptr<SqlListener> listenForRequests(const DatabaseSpec& database,
                                               SqlListenerOptions options) {
  if (!database.isPostgres()) return nullptr;
  return listenPostgres(database.url, database.passwordFile, kRequestsChannel,
                        options);
}

std::optional<json> requestAnswer(StateDb& db, int64_t id) {
  auto r = db.request(id);
  if (!r) throw SchedulerStateError("no request " + std::to_string(id));
  if (!r->done) return std::nullopt;
  if (!r->ok) {
    // {"error": text, "caller": true when the request itself was wrong}
    json err = json::parse(r->result, nullptr, false);
    std::string msg =
        err.is_object() ? err.value("error", r->result) : r->result;
    if (err.is_object() && err.value("caller", false))
      throw SchedulerStateError(msg);
    throw Error(msg);
  }
  return json::parse(r->result);
}

namespace {

// Pauses between looks (at the answer, at the lock): 5 ms doubling to 200.
std::chrono::milliseconds nextPause(std::chrono::milliseconds pause) {
  return std::min(pause * 2, std::chrono::milliseconds(200));
}

// The farm's lock for a command, or nullptr when a scheduler holds it.
// Another command holding it is waited for, until `deadline`.
std::unique_ptr<SchedulerLock> lockForCommand(const DatabaseSpec& database,
                                              const std::string& stateDir,
                                              const Clock& clock,
                                              Clock::TimePoint deadline) {
  for (auto pause = std::chrono::milliseconds(5);; pause = nextPause(pause)) {
    try {
      return SchedulerLock::tryAcquire(database, stateDir, LockUse::kCommand);
    } catch (const LockHeldByCommand&) {
      if (clock.now() >= deadline) throw;
      clock.sleepFor(pause);
    }
  }
}

}  // namespace

json submitRequest(const std::string& stateDir, const std::string& kind,
                   const json& args, std::chrono::milliseconds timeout,
                   EvaluatorCheck checkEvaluator) {
  return submitRequest(DatabaseSpec::inStateDir(stateDir), stateDir, kind, args,
                       timeout, std::move(checkEvaluator));
}

json submitRequest(const DatabaseSpec& database, const std::string& stateDir,
                   const std::string& kind, const json& args,
                   std::chrono::milliseconds timeout,
                   EvaluatorCheck checkEvaluator, const Clock& clock) {
  auto deadline = clock.now() + timeout;
  if (auto lock = lockForCommand(database, stateDir, clock, deadline)) {
    StateDb db(database);
    // PostgreSQL: a scheduler that vouched for its snapshot within
    // kSchedulerVouchWindow runs, between sessions of the lock (the
    // database restarted); it answers queued requests once it holds the
    // lock again, and a change applied here would escape its memory.
    if (!database.isPostgres() ||
        !snapshotVouchedSince(db,
                              clock.nowMs() - kSchedulerVouchWindow.count()))
      return applyRequestOffline(db, kind, args, std::move(checkEvaluator));
  }
  StateDb db(database, StateDb::Existing{});
  int64_t id = queueRequest(db, kind, args);
  for (auto pause = std::chrono::milliseconds(5); clock.now() < deadline;
       pause = nextPause(pause)) {
    if (auto answer = requestAnswer(db, id)) return *answer;
    clock.sleepFor(pause);
  }
  throw Error("the scheduler did not answer request " + std::to_string(id) +
              " within " + std::to_string(timeout.count()) + " ms");
}

}  // namespace kiln::scheduler
