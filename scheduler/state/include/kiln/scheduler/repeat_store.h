#pragma once
/// Reproducibility checks' rows (docs/release.md, "Reproducibility
/// checks"; schema migration 17): one row of `repeat_checks` per step that
/// is built a second time, from pending to its verdict and report.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/scheduler/repeat_check.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// The most bytes of a diffoscope report kept per check.
inline constexpr size_t kMaxRepeatReport = 1 << 20;
/// The most checks one listing returns.
inline constexpr int64_t kMaxListedRepeats = 1000;

/// One reproducibility check of a step.
struct RepeatCheck {
  int64_t step = 0;
  int64_t jobset = 0;
  /// "pending" (not sent yet), "running", "same", "differs" (the step is
  /// not deterministic) or "failed" (the second build did not succeed).
  std::string state;
  std::string firstWorker;
  std::string secondWorker;
  std::vector<std::string> differing;  ///< output names, when "differs"
  std::string sideLocation;  ///< where the second build's NARs are kept
  std::string report;        ///< diffoscope's text, "" until it is made
  int64_t createdMs = 0;
  int64_t finishedMs = 0;
  std::string drvPath;  ///< the step's derivation
  /// Workers that refused its second build (they hold its outputs;
  /// migration 18), in the order they refused.
  std::vector<std::string> refusedBy;
};

/// Records that step `step` (of jobset `jobset`, first built on
/// `firstWorker`) is to be built again. Returns false, changing nothing,
/// when the step already has a check.
bool addRepeatCheck(StateDb& db, int64_t step, int64_t jobset,
                    const std::string& firstWorker, int64_t nowMs);

/// The check of step `step`, if any.
std::optional<RepeatCheck> repeatCheck(StateDb& db, int64_t step);

/// Pending checks, oldest first, at most `limit` (≤ kMaxListedRepeats).
std::vector<RepeatCheck> pendingRepeatChecks(StateDb& db, int64_t limit);

/// Running checks, oldest first, at most `limit` (≤ kMaxListedRepeats).
std::vector<RepeatCheck> runningRepeatChecks(StateDb& db, int64_t limit);

/// Checks left "running" by a scheduler that stopped wait again
/// ("pending"; their second build is sent anew). Returns how many.
size_t requeueRunningRepeatChecks(StateDb& db);

/// The second build of step `step` waits again (its worker refused it).
void waitRepeatCheckAgain(StateDb& db, int64_t step);

/// The workers that refused the second build of step `step` are
/// `refusedBy` (replacing what was recorded; at most kMaxRefusers names of
/// at most 1,000 bytes without a line break, else SchedulerStateError).
void setRepeatCheckRefusedBy(StateDb& db, int64_t step,
                             const std::vector<std::string>& refusedBy);
/// The most refusing workers recorded per check.
inline constexpr size_t kMaxRefusers = 1000;

/// The second build of step `step` went to `secondWorker`.
void startRepeatCheck(StateDb& db, int64_t step,
                      const std::string& secondWorker);

/// The second build ended: `verdict` compares its NAR hashes with the
/// first's (ok), or it failed (!ok); its NARs are at `sideLocation`.
void finishRepeatCheck(StateDb& db, int64_t step, bool ok,
                       const RepeatVerdict& verdict,
                       const std::string& sideLocation, int64_t nowMs);

/// Checks whose side location (the second build's NARs and log) is still
/// kept and may go: `same` checks, and `differs` or `failed` checks whose
/// report is stored and that finished before `nowMs - keepDiffersMs`;
/// oldest first, at most `limit` (≤ kMaxListedRepeats).
std::vector<RepeatCheck> repeatNarsToPrune(StateDb& db, int64_t nowMs,
                                           int64_t keepDiffersMs,
                                           int64_t limit);

/// The NARs of step `step`'s check are gone: its side location is cleared.
void forgetRepeatNars(StateDb& db, int64_t step);

/// Stores the diffoscope report of step `step` (cut at kMaxRepeatReport).
void setRepeatReport(StateDb& db, int64_t step, const std::string& report);

/// A step of a jobset found not deterministic, with the job whose build
/// has it as its top step ("" and 0 for a dependency of a job).
struct NonDeterministicJob {
  RepeatCheck check;
  std::string job;
  int64_t build = 0;
};

/// The jobset's steps found not deterministic, newest first (at most
/// kMaxListedRepeats).
std::vector<NonDeterministicJob> nonDeterministicJobs(StateDb& db,
                                                      int64_t jobset);

}  // namespace kiln::scheduler
