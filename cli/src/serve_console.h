#pragma once
// What `kiln serve` prints about the builds it serves (docs/operations.md,
// "`kiln serve`"): it describes the latest evaluation of each jobset the
// farm serves, never older history that happens to be in the state
// directory.

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kiln/common/clock.h"
#include "kiln/scheduler/state_view.h"

namespace kiln::cli {

/// Every per-job error of evaluation `eval` (at most about 10^6), by
/// attribute. Throws SqliteError.
std::vector<scheduler::EvalErrorRow> allEvaluationErrors(
    scheduler::StateView& view, int64_t eval);

/// A jobset `kiln serve` serves: declared and enabled.
struct ServedJobset {
  std::string project;
  std::string name;
  /// serve asked for its evaluation (at start, or after a reload) and
  /// has no answer yet: its older evaluations are not described.
  bool evaluating = false;
};

/// The counts of the latest evaluations of the served jobsets.
struct ServeTotals {
  int64_t all = 0, finished = 0, succeeded = 0;
  int64_t jobErrors = 0;       ///< jobs that did not evaluate
  int64_t failedEvals = 0;     ///< evaluations that failed as a whole
  bool allEvaluated = false;   ///< every served jobset evaluated since start
  int64_t evaluating = 0;      ///< served jobsets not evaluated yet
  std::vector<int64_t> evals;  ///< the latest evaluation of each jobset
  bool operator==(const ServeTotals&) const = default;
  /// Whether every served jobset was evaluated and its builds finished.
  bool done() const { return allEvaluated && finished == all; }
};

/// Prints, to `out`: a progress line whenever the totals change; each
/// evaluation that failed as a whole, with the start of its error and
/// where to read all of it; each failed build with the command that shows
/// its log; and a summary once per change, when every served jobset was
/// evaluated since serve started (or found unchanged) and all builds of
/// those evaluations finished. Reads the state through its own read-only
/// connection. Not thread-safe.
class ServeConsole {
 public:
  /// `webUrl` ("http://HOST:PORT", or "" without a web) is used in the
  /// pointers to pages.
  ServeConsole(std::string stateDir, scheduler::DatabaseSpec database,
               std::string webUrl, std::ostream& out,
               const Clock& clock = RealClock::instance());

  /// One turn over the served `jobsets`. Throws SqlError if the
  /// state cannot be read.
  void report(const std::vector<ServedJobset>& jobsets);

 private:
  ServeTotals totals(const std::vector<ServedJobset>& jobsets);
  void announceEvalFailure(const scheduler::EvaluationSummary& e);
  int64_t jobErrors(int64_t eval);
  void announceFailedBuilds(const std::vector<int64_t>& evals);
  void printProgress(const ServeTotals& t);
  void printSummary(const ServeTotals& t);
  std::string evalPointer(int64_t eval) const;
  std::string counts(const ServeTotals& t) const;

  /// " --database URL" for the commands it suggests, "" on SQLite.
  std::string databaseFlag() const;

  std::string stateDir_;
  scheduler::DatabaseSpec database_;
  std::string webUrl_;
  std::ostream& out_;
  const Clock& clock_;
  Clock::TimePoint start_;
  std::unique_ptr<scheduler::StateView> view_;
  ServeTotals last_;
  bool printed_ = false;
  ServeTotals summarized_;  // the totals of the last summary
  bool summaryPrinted_ = false;
  int64_t failedSeen_ = -1;  // failed builds when last looked at
  std::set<int64_t> announcedEvals_;
  std::set<int64_t> announcedBuilds_;
  std::map<int64_t, int64_t> jobErrorsByEval_;
};

}  // namespace kiln::cli
