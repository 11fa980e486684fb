#pragma once
/// Where the scheduler keeps build logs: one file per attempt of a step,
/// `<state>/logs/<drv base name>.<attempt>.log` (docs/operations.md). The
/// service writes them; `kiln log` and the web read them.

#include <string>
#include <vector>

#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// The log file of attempt `attempt` (1-based) of the step building
/// `drvPath` (a full logical path or a base name). Pure; no I/O.
std::string stepLogPath(const std::string& stateDir, const std::string& drvPath,
                        int attempt);

/// The existing log files of attempts 1..`attempts` of the step building
/// `drvPath` (the step's attempt count in the state database, which bounds
/// its logs' numbers; at most 10,000), oldest first. An attempt that wrote
/// nothing has no file and is skipped. Probes by number: the logs folder,
/// which holds a file per attempt of every step ever built, is never read.
std::vector<std::pair<int, std::string>> stepLogFiles(
    const std::string& stateDir, const std::string& drvPath, int64_t attempts);
/// The same for the step `db` records for `drvPath` (a full logical path,
/// or a base name, resolved in the store folder of the steps `db` holds).
/// Empty when `db` has no such step. Throws SqlError on a broken
/// database.
std::vector<std::pair<int, std::string>> stepLogFiles(
    StateDb& db, const std::string& stateDir, const std::string& drvPath);

}  // namespace kiln::scheduler
