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
#include "kiln/scheduler/state_queries.h"

namespace kiln::scheduler {

/// A read-only view of a state directory's database. Not thread-safe: one
/// per thread.
class StateView {
 public:
  /// Opens `<stateDir>/scheduler.sqlite` read-only. SqlError if it
  /// does not exist, SchemaError if another kiln version made it.
  explicit StateView(const std::string& stateDir);
  /// Opens `database` (read-only on SQLite). SqlError if it does not
  /// exist or cannot be reached, SchemaError if its schema is not this
  /// kiln's.
  explicit StateView(const DatabaseSpec& database);
  /// The view, or nullptr if the scheduler has not created its database.
  static std::unique_ptr<StateView> openIfExists(const std::string& stateDir);
  static std::unique_ptr<StateView> openIfExists(const DatabaseSpec& database);

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

  // ---- the read model's bounded page queries (state_queries.h) ---------
  /// Every project, by name (at most 1,000).
  std::vector<ProjectRow> projects();
  /// The jobsets of project `project` (id), by name.
  std::vector<JobsetRow> jobsetsOf(int64_t project);
  /// The project row of `id`, if any.
  std::optional<ProjectRow> project(int64_t id);
  /// Evaluations of `jobset` (0 = of all jobsets), newest first, with
  /// names and build counts.
  Paged<EvaluationSummary> evaluations(int64_t jobset, const Page& page);
  /// One evaluation with names and counts, if it exists.
  std::optional<EvaluationSummary> evaluationSummary(int64_t eval);
  /// The evaluation of the same jobset just before `eval` (0 if none).
  int64_t previousEvaluation(int64_t eval);
  /// Per-job evaluation errors of `eval`, by attribute.
  Paged<EvalErrorRow> evaluationErrors(int64_t eval, const Page& page);
  /// Builds of `eval` passing `filter`, by job name.
  Paged<BuildRow> evaluationBuilds(int64_t eval, const BuildFilter& filter,
                                   const Page& page);
  /// How many jobs of `eval` fall into each ChangeKind against `base`.
  ChangeCounts compareCounts(int64_t eval, int64_t base);
  /// The jobs of one ChangeKind of `eval` against `base`, by job name.
  Paged<BuildChange> compare(int64_t eval, int64_t base, ChangeKind kind,
                             const Page& page);
  /// The job x evaluation matrix of `jobset`: its `evals` (1..20) newest
  /// evaluations and a page of the newest one's jobs.
  JobMatrix jobMatrix(int64_t jobset, int evals, const Page& page);
  /// Builds of `job` in `jobset`, newest first, with their step times.
  Paged<BuildTimes> jobHistory(int64_t jobset, const std::string& job,
                               const Page& page);
  /// The newest successful build of `job` (0 if none); with
  /// `finishedEval`, the newest one whose evaluation has no unfinished
  /// build (Hydra's `latest-finished`).
  int64_t latestBuild(int64_t jobset, const std::string& job,
                      bool finishedEval);
  /// The steps of build `build`'s closure that ran for it, and its top
  /// step's direct dependencies (each list at most `cap`).
  BuildSteps buildSteps(const BuildRow& build, int cap = 200);
  /// Steps by id (missing ids are skipped), in the order given.
  std::vector<StepRow> stepsById(const std::vector<int64_t>& ids);
  /// Jobs whose name starts with `query`, builds whose .drv and outputs
  /// whose path start with it (a bare hash or name is looked up under
  /// `storeDir`); each list at most `cap`. An empty query finds nothing.
  SearchResults search(const std::string& query, const std::string& storeDir,
                       int cap = 50);
  /// Failure counts of the newest (at most 20,000) builds finished in
  /// [nowMs - buckets * bucketMs, nowMs), per bucket, oldest first.
  std::vector<FailureBucket> failureRate(int64_t nowMs, int64_t bucketMs,
                                         int buckets);

  /// Typed reads of everything else (jobsets, evaluations, requests) on
  /// the same read-only connection; a write throws SqlError on SQLite.
  StateDb& rows() { return db_; }

 private:
  StateDb db_;
};

}  // namespace kiln::scheduler
