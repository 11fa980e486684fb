#pragma once
/// The `requests` table as clients use it (docs/scheduler.md,
/// "Operations"): the CLI and the web queue a request there and wait for
/// the scheduler's answer, or apply it themselves when no scheduler holds
/// the state directory's lock. The one write a client makes to the state.

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kiln/common/clock.h"
#include "kiln/scheduler/offline_requests.h"
#include "kiln/scheduler/sql_listener.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// Queues a request in the requests table of `db` (a scheduler's state
/// database) without waiting and without looking for a live scheduler: the
/// scheduler applies pending requests while it runs and when it (re)starts.
/// Returns the request's id. Throws SqlError.
int64_t queueRequest(StateDb& db, const std::string& kind,
                     const nlohmann::json& args);

/// Wakes the scheduler of `database` when a request is queued there
/// (StateDb::addRequest notifies kRequestsChannel): a listener on
/// PostgreSQL (sql_listener.h), nullptr on SQLite, where the scheduler
/// polls the table. Throws as listenPostgres does.
std::unique_ptr<SqlListener> listenForRequests(const DatabaseSpec& database,
                                               SqlListenerOptions options = {});

/// The answer to request `id` of `db`, or nullopt while it is pending.
/// Throws SchedulerStateError if the request itself was wrong (or is
/// unknown), Error with the scheduler's reason if it failed.
std::optional<nlohmann::json> requestAnswer(StateDb& db, int64_t id);

/// How long submitRequest waits for a running scheduler's answer unless
/// told otherwise.
inline constexpr std::chrono::seconds kRequestTimeout{30};

/// How recently a scheduler must have vouched for its stored snapshot
/// (PostgreSQL, about once a second; snapshot_store.h) for submitRequest to
/// take it for running while nobody holds the farm's lock: the database
/// restarted and the scheduler takes the lock again within moments.
inline constexpr std::chrono::milliseconds kSchedulerVouchWindow{30000};

/// Submits a request for the scheduler of `stateDir`: if no scheduler holds
/// `<state>/scheduler.lock` (PostgreSQL: the farm's lock, and none vouched
/// for its snapshot within kSchedulerVouchWindow), applies it at once
/// (holding the lock; with `checkEvaluator`, see applyRequestOffline);
/// otherwise queues it in the requests table and waits up to `timeout` for
/// the scheduler's answer. Another command applying a request is waited
/// for (within `timeout`).
/// Returns the result; throws Error with the reason if it failed or timed
/// out. service.h has the form that checks the process's evaluator
/// plugins.
nlohmann::json submitRequest(const std::string& stateDir,
                             const std::string& kind,
                             const nlohmann::json& args,
                             std::chrono::milliseconds timeout,
                             EvaluatorCheck checkEvaluator);
/// The same for the farm whose state is `database` (the scheduler lock of
/// scheduler_lock.h says whether a scheduler runs; `stateDir` holds the
/// SQLite lock file and may be "" on PostgreSQL). `clock` times the wait
/// and the pauses between looks at the answer.
nlohmann::json submitRequest(const DatabaseSpec& database,
                             const std::string& stateDir,
                             const std::string& kind,
                             const nlohmann::json& args,
                             std::chrono::milliseconds timeout,
                             EvaluatorCheck checkEvaluator,
                             const Clock& clock = RealClock::instance());

}  // namespace kiln::scheduler
