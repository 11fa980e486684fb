#pragma once
/// Where the scheduler keeps build logs: one file per attempt of a step,
/// `<state>/logs/<drv base name>.<attempt>.log` (docs/operations.md). The
/// service writes them; `kiln log` and the web read them.

#include <string>
#include <vector>

namespace kiln::scheduler {

/// The log file of attempt `attempt` (1-based) of the step building
/// `drvPath` (a full logical path or a base name). Pure; no I/O.
std::string stepLogPath(const std::string& stateDir, const std::string& drvPath,
                        int attempt);

/// The existing log files of the step building `drvPath`, by attempt
/// number (oldest first). Empty when there is none (or no logs folder).
/// Throws SysError if the logs folder cannot be read.
std::vector<std::pair<int, std::string>> stepLogFiles(
    const std::string& stateDir, const std::string& drvPath);
/// The same, looking only for attempts 1..`attempts` (the step's attempt
/// count in the state database, which bounds its logs' numbers; at most
/// 10,000) instead of reading the logs folder, which holds a file per
/// attempt of every step ever built.
std::vector<std::pair<int, std::string>> stepLogFiles(
    const std::string& stateDir, const std::string& drvPath,
    int64_t attempts);

}  // namespace kiln::scheduler
