#pragma once
/// Build and step status codes, shared by the scheduler's core, the worker
/// and the protocol (as Nix's `BuildResult::Status` is shared by its
/// builders). The numbers are Hydra's (design decision 3) and travel on the
/// wire and in the scheduler's database: never renumber them.

#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

/// Hydra's build/step status numbers (0 to 12). 5 is unused (Hydra's old
/// "failed with output" slot). 13 to 15 are kiln's own, after Hydra's: a
/// build stopped at one of its control group's limits (docs/worker.md,
/// "Limits per build").
enum class StepStatus : uint8_t {
  kSuccess = 0,              ///< built (or already valid)
  kFailed = 1,               ///< the builder failed
  kDepFailed = 2,            ///< a dependency failed
  kAborted = 3,              ///< stopped by kiln (worker lost, retries spent)
  kCancelled = 4,            ///< cancelled by the operator
  kFailedWithOutput = 6,     ///< failed, but left outputs
  kTimedOut = 7,             ///< silence or total timeout
  kCachedFailure = 8,        ///< failed before; not retried until cleared
  kUnsupported = 9,          ///< no worker for the system
  kLogLimitExceeded = 10,    ///< the log exceeded its limit
  kOutputLimitExceeded = 11, ///< the outputs exceeded their limit
  kNotDeterministic = 12,    ///< a rebuild produced other bytes
  kOutOfMemory = 13,            ///< killed at its memory limit
  kProcessLimitExceeded = 14,   ///< reached its process (pids) limit
  kDiskLimitExceeded = 15,      ///< its build directory passed its limit
};

/// Whether `status` is one of the numbers above.
bool isValidStepStatus(uint8_t status);

/// The status's stable name for APIs and logs: "success", "failed",
/// "dependency-failed", "aborted", "cancelled", "failed-with-output",
/// "timed-out", "cached-failure", "unsupported", "log-limit-exceeded",
/// "output-limit-exceeded", "not-deterministic", "out-of-memory",
/// "process-limit-exceeded", "disk-limit-exceeded".
std::string_view stepStatusName(StepStatus status);

/// The status named `name` (see stepStatusName), or nullopt.
std::optional<StepStatus> stepStatusFromName(std::string_view name);

}  // namespace kiln
