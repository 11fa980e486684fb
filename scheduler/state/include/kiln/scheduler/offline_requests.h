#pragma once
/// The operator requests that work on the state database alone
/// (docs/scheduler.md, "Operations"): the table a client applies when no
/// scheduler runs, and the one a live service starts from and wraps where
/// its core must know too (`SchedulerService::Impl::setUpRequests`).

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/common/clock.h"
#include "kiln/common/status.h"
#include "kiln/scheduler/requests.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// A jobset's settings as the requests answer them (id, name, kind,
/// location, branch, file, attribute, checkInterval, shares, evaluator);
/// the web adds its own fields.
nlohmann::json jobsetJson(const JobsetRow& j);

/// Checks the evaluator a jobset is given at create/edit: throws
/// SchedulerStateError (naming the jobset, the name and the loaded
/// evaluator plugins) when no evaluator of that name is available. The
/// state layer does not know the plugins: `loadedEvaluatorCheck`
/// (evaluation.h) asks a plugin registry.
using EvaluatorCheck = std::function<void(const std::string& jobset,
                                          const std::string& evaluator)>;

/// The request handlers that work on the database alone (no running
/// scheduler); a live service wraps the ones that concern its core.
/// Borrows `db` and `clock` for the table's lifetime. `checkEvaluator` is
/// asked about a jobset's new evaluator at jobset-create/jobset-update;
/// empty, any well-formed name (isEvaluatorName) is accepted.
RequestTable offlineRequests(StateDb& db, const Clock& clock,
                             EvaluatorCheck checkEvaluator);

/// Applies a request without a running scheduler (directly to the
/// database, on the real clock); `queue` then lists unfinished steps from
/// the database. The caller must hold the scheduler lock (see
/// submitRequest). `checkEvaluator` as for offlineRequests.
nlohmann::json applyRequestOffline(StateDb& db, const std::string& kind,
                                   const nlohmann::json& args,
                                   EvaluatorCheck checkEvaluator);

/// Creates an evaluation ("manual" inputs) of `jobset` holding one
/// unfinished build of `drvPath`; returns the build row. The scheduler
/// ingests it (at once when live, at its next start otherwise). Throws
/// SchedulerStateError for an unknown jobset or a non-.drv path.
BuildRow createManualBuild(StateDb& db, int64_t jobset, const std::string& job,
                           const std::string& drvPath, int localPriority,
                           const Clock& clock = RealClock::instance());

// ---- for handlers that wrap the offline ones (the live service's) -------

/// The build named by the request's `build` argument; throws
/// SchedulerStateError when there is none.
BuildRow requireBuild(StateDb& db, const nlohmann::json& args);

/// The id of the jobset named by the request's `project` and `jobset`
/// arguments; throws SchedulerStateError when there is none.
int64_t jobsetIdOf(StateDb& db, const nlohmann::json& args);

/// The jobset a `jobset-eval` request evaluates (`project`, `jobset`),
/// with `revision` set from the optional argument of that name: a commit
/// id (40 or 64 hex digits) of a git jobset. Throws SchedulerStateError
/// when there is no such jobset or the revision is malformed or names no
/// git jobset's commit.
JobsetRow evalJobsetOf(StateDb& db, const nlohmann::json& args);

/// A build's answer with its status by name and Hydra's number:
/// {"build", "status", "statusCode"}.
nlohmann::json buildStatusJson(int64_t build, StepStatus status);

/// One entry of the `queue` request's answer: {"stepId", "drvPath",
/// "system", "state", "reason"}.
nlohmann::json queueEntryJson(int64_t stepId, const std::string& drvPath,
                              const std::string& system,
                              const std::string& state,
                              const std::string& reason);

}  // namespace kiln::scheduler
