#pragma once
/// The read model's row types (docs/web.md): what `StateView`'s page
/// queries return. Every query is bounded: it takes a `Page` (at most
/// `Page::kMaxLimit` rows) or has a fixed cap, and walks an index (schema
/// migration 5), so a page costs the same with a million builds.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// Rows [offset, offset + limit) of a listing.
struct Page {
  int64_t offset = 0;
  int64_t limit = 50;
  static constexpr int64_t kMaxLimit = 500;
  static constexpr int64_t kMaxOffset = 1'000'000;
  /// A validated page; SchedulerStateError naming the bound when `limit`
  /// is not in 1..kMaxLimit or `offset` not in 0..kMaxOffset.
  static Page checked(int64_t offset, int64_t limit);
};

/// One page of rows; `more` when rows follow it.
template <class T>
struct Paged {
  std::vector<T> rows;
  bool more = false;
};

/// Which builds an evaluation listing keeps.
enum class BuildState { kAll, kSucceeded, kFailed, kUnfinished };

/// The filters of an evaluation's build listing ("" = any).
struct BuildFilter {
  BuildState state = BuildState::kAll;
  std::string jobPrefix;
  std::string system;
};

/// An evaluation with its jobset's names and its build counts.
struct EvaluationSummary {
  EvaluationRow eval;
  std::string project;
  std::string jobset;
  BuildCounts counts;
};

/// The categories of an evaluation comparison (eval against base), by job:
/// failed now and succeeded or unfinished before; succeeded now and failed
/// before; failed in both; absent from base; absent from eval; unfinished
/// now (present in both); present in both with another derivation (what a
/// change to the collection rebuilds; overlaps the other kinds).
enum class ChangeKind {
  kNewlyFailing,
  kNewlySucceeding,
  kStillFailing,
  kNewJob,
  kRemovedJob,
  kUnfinished,
  kChanged,
};
inline constexpr size_t kChangeKinds = 7;

/// A job's build in the base and the compared evaluation (either absent).
struct BuildChange {
  std::string job;
  std::optional<BuildRow> before;
  std::optional<BuildRow> after;
};

/// How many jobs fall into each ChangeKind (indexed by its value).
using ChangeCounts = std::array<int64_t, kChangeKinds>;

/// One cell of the job x evaluation matrix.
struct MatrixCell {
  int64_t build = 0;  ///< 0: the job has no build in that evaluation
  bool finished = false;
  int status = -1;
};

/// Jobs (rows) x the newest evaluations (columns) of a jobset.
struct JobMatrix {
  std::vector<EvaluationRow> evals;  ///< newest first
  std::vector<std::string> jobs;     ///< of the newest evaluation, by name
  std::vector<std::vector<MatrixCell>> cells;  ///< [job][eval]
  bool moreJobs = false;
};

/// A build with the times of its top-level step (0 when it never ran).
struct BuildTimes {
  BuildRow build;
  int64_t startMs = 0;
  int64_t stopMs = 0;
};

/// A job found by name: its jobset and newest build.
struct JobHit {
  std::string project;
  std::string jobset;
  std::string job;
  int64_t latestBuild = 0;
};

/// A registered output found by path.
struct OutputHit {
  int64_t build = 0;
  std::string name;
  std::string path;
};

/// Results of a search, each list capped.
struct SearchResults {
  std::vector<JobHit> jobs;
  std::vector<BuildRow> builds;  ///< whose .drv matches
  std::vector<OutputHit> outputs;
};

/// Finished builds (and how many failed) in one time bucket.
struct FailureBucket {
  int64_t startMs = 0;
  int64_t finished = 0;
  int64_t failed = 0;
};

/// The steps of a build's closure that ran for it (started at or after its
/// creation), and its top step's direct dependencies.
struct BuildSteps {
  std::optional<StepRow> top;
  std::vector<StepRow> ran;           ///< by start time, capped
  std::vector<StepRow> dependencies;  ///< direct, by derivation, capped
  bool truncated = false;  ///< the closure walk or a list hit its cap
};

}  // namespace kiln::scheduler
