#pragma once
/// The build loop of `kiln build`: submits the evaluated derivations to
/// the embedded farm, serves the scheduler until they are done, shows a
/// progress line (built / running / queued / failed, the running steps'
/// names, the elapsed time) and gathers the outputs or the failures.

#include <atomic>
#include <string>
#include <vector>

#include "kiln/common/clock.h"
#include "kiln/scheduler/state_db.h"
#include "local_farm.h"

namespace kiln::cli {

/// One derivation output the user asked for.
struct BuildTarget {
  std::string job;         ///< attribute path (or derivation name)
  std::string drvPath;     ///< full logical path
  std::string output;      ///< "out", "dev", ...
  std::string outputPath;  ///< filled in when built
};

/// A step that failed, for the report.
struct FailedStep {
  std::string drvPath;
  std::string error;
  int64_t attempts = 0;  ///< the step's attempt count (bounds its logs)
};

/// What the build loop ended with.
struct BuildOutcome {
  std::vector<BuildTarget> targets;  ///< with outputPath when built
  std::vector<std::string> failedJobs;
  std::vector<FailedStep> failedSteps;
  std::string stoppedBecause;  ///< interrupted, the worker stopped ...
  bool ok() const { return failedJobs.empty() && stoppedBecause.empty(); }
  /// What to tell the user: each failed step with the last lines of its
  /// log (from `stateDir`'s logs), or why the build stopped.
  std::string report(const std::string& stateDir) const;
};

/// Drives `farm` for `targets`. Not thread-safe; the farm's thread.
class BuildProgress {
 public:
  /// `tty`: redraw one status line; else print a line per change.
  BuildProgress(LocalFarm& farm, std::vector<BuildTarget> targets,
                bool keepGoing, bool tty,
                const Clock& clock = RealClock::instance());
  /// Serves until every build finished, one failed (unless keepGoing),
  /// the worker stopped or `stop` became true; unfinished builds are then
  /// cancelled. Never throws for a build failure.
  BuildOutcome run(const std::atomic<bool>& stop);

 private:
  void submit();
  /// This run's builds counted in one query (their ids are contiguous:
  /// submit() creates them in a row on this thread).
  scheduler::BuildCounts counts();
  bool finished(bool& anyFailed);
  void show(bool force);
  void cancelUnfinished();
  BuildOutcome collect(std::string stoppedBecause);

  LocalFarm& farm_;
  std::vector<BuildTarget> targets_;
  std::vector<int64_t> builds_;  // unique, in order
  bool keepGoing_, tty_;
  const Clock& clock_;
  Clock::TimePoint start_;
  int64_t startMs_ = 0;
  std::string lastLine_;
};

}  // namespace kiln::cli
