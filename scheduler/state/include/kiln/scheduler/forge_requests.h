#pragma once
/// The requests of continuous integration through the forges (docs/ci.md):
/// `project-webhook` (a project's webhook secret file) and `forge-event`
/// (a verified webhook's push or pull request, queued by the web). The
/// database part is here; the live scheduler then evaluates the jobsets
/// named at the commits named and cancels the builds named.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/common/clock.h"
#include "kiln/scheduler/requests.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// The name of pull request `number`'s jobset ("pr-<number>").
std::string pullJobsetName(int64_t number);

/// What a `forge-event` asks of the live scheduler besides the rows it
/// wrote.
struct ForgeActions {
  struct Eval {
    int64_t jobset = 0;
    std::string revision;  ///< the commit to evaluate
    int64_t request = 0;   ///< its queued `jobset-eval` request
  };
  std::vector<Eval> evaluate;
  std::vector<int64_t> cancel;  ///< unfinished builds to cancel
  nlohmann::json answer;        ///< the request's answer
};

/// Applies a `forge-event` request's database part at `nowMs` in one
/// transaction: a delivery id recorded before changes nothing; a push
/// names the enabled jobsets following that branch of that repository
/// (by the payload's URLs); a pull request opened or updated creates or
/// updates its jobset (`pr-N`, on-demand, settings of its base branch's
/// jobset) and names its unfinished builds (of the previous head); a
/// closed one is disabled (its builds are cancelled after a grace period:
/// sweepClosedPulls). Each evaluation it names is queued, in the same
/// transaction, as a `jobset-eval` request with its `revision` (its id in
/// Eval::request and the answer's `evalRequests`). Throws SchedulerStateError
/// for malformed arguments.
ForgeActions applyForgeEvent(StateDb& db, const nlohmann::json& args,
                             int64_t nowMs);

/// The unfinished builds of the pull requests closed at or before
/// `closedBeforeMs` and not swept yet, which it marks swept; the caller
/// cancels them.
std::vector<int64_t> sweepClosedPulls(StateDb& db, int64_t closedBeforeMs);

/// Adds `project-webhook` and `forge-event` to `t` (the latter cancelling
/// in the database: no scheduler runs to evaluate). Borrows `db`, `clock`.
void addForgeRequests(RequestTable& t, StateDb& db, const Clock& clock);

}  // namespace kiln::scheduler
