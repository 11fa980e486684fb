#pragma once
/// Reading the scheduler's state from outside its thread (docs/scheduler.md,
/// "State"): `StateView` is a read-only connection of its own on
/// `<state>/scheduler.sqlite` (WAL: it sees what the scheduler committed
/// and never blocks it), for the CLI, the tests' farm and the web. Callers
/// get typed rows and counts; the scheduler's SQL stays in StateDb and
/// here. What only the running scheduler knows (the queue's wait reasons,
/// the workers) is in `SchedulerSnapshot` (service.h).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// A read-only view of a state directory's database. Not thread-safe: one
/// per thread.
class StateView {
 public:
  /// Opens `<stateDir>/scheduler.sqlite` read-only. SqliteError if it
  /// does not exist, SchemaError if another kiln version made it.
  explicit StateView(const std::string& stateDir);
  /// The view, or nullptr if the scheduler has not created its database.
  static std::unique_ptr<StateView> openIfExists(const std::string& stateDir);

  /// How many builds exist, are finished, succeeded (of evaluation `eval`,
  /// or of all when 0).
  BuildCounts buildCounts(int64_t eval = 0) { return db_.buildCounts(eval); }
  /// Builds of evaluation `eval` (all when 0), by id.
  std::vector<BuildRow> builds(int64_t eval = 0);
  /// Every step, by id.
  std::vector<StepRow> steps();
  /// One registered output of a finished build.
  struct Output {
    int64_t build = 0;
    std::string job;
    std::string name;  ///< "out", ...
    std::string path;  ///< full logical store path
  };
  /// Outputs of the builds of evaluation `eval` (all when 0).
  std::vector<Output> outputs(int64_t eval = 0);
  /// The cached failure of `drvPath` (expired or not), if any.
  std::optional<CachedFailureRow> cachedFailure(const std::string& drvPath);
  /// The newest evaluation's id (0 if none).
  int64_t latestEvaluation();
  /// Typed reads of everything else (jobsets, evaluations, requests) on
  /// the same read-only connection; a write throws SqliteError.
  StateDb& rows() { return db_; }

 private:
  StateDb db_;
};

}  // namespace kiln::scheduler
