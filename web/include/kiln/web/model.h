#pragma once
/// The web's read model as JSON (docs/web.md): one function per page that
/// gathers its data from a `StateView` (bounded page queries,
/// state_queries.h) and the scheduler's `SchedulerSnapshot`. A page's JSON
/// answer is this value; its HTML is rendered from the same value
/// (pages.h), so both always show the same data.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kiln/common/error.h"
#include "kiln/scheduler/snapshot.h"
#include "kiln/scheduler/state_view.h"

namespace kiln::web {

using nlohmann::json;

/// Something a page names does not exist (answered 404).
class NotFound : public Error {
 public:
  using Error::Error;
};

/// Hydra's label of a build or step status ("Succeeded", "Dependency
/// failed", ...); -1 (unfinished) is "Queued", unknown numbers "Unknown".
std::string statusLabel(int status);
/// The stable API name (stepStatusName; "queued" for -1).
std::string statusName(int status);

/// A build row as JSON (status number, name and label included).
json buildJson(const scheduler::BuildRow& b);
/// A step row as JSON (with its duration when it ran).
json stepJson(const scheduler::StepRow& s);

/// The size of an output in the store: its NAR and its closure's.
struct PathSize {
  int64_t narSize = 0;
  int64_t closureSize = 0;
};
/// Looks sizes up by full store path (nullopt: not in the store). Must be
/// callable from several threads.
using PathSizeFn =
    std::function<std::optional<PathSize>(const std::string& path)>;

/// Samples of the scheduler's cumulative counters, kept to draw dispatch
/// latency and idle-with-work time over time. Thread-safe; at most one
/// sample per `minIntervalMs`, the newest `capacity` kept.
class MetricsHistory {
 public:
  explicit MetricsHistory(int64_t minIntervalMs = 10000, size_t capacity = 360)
      : minIntervalMs_(minIntervalMs), capacity_(capacity) {}
  /// Records `snap` unless the previous sample is too recent.
  void record(const scheduler::SchedulerSnapshot& snap);
  /// Per interval between samples: {"atMs", "dispatchLatencyMs" (mean of
  /// the dispatches in it, null when none), "idleSlotSeconds" (accrued
  /// in it)}, oldest first.
  json series() const;

 private:
  struct Sample {
    int64_t atMs;
    uint64_t dispatches;
    double latencySum;
    double idleSlotSeconds;
  };
  int64_t minIntervalMs_;
  size_t capacity_;
  mutable std::mutex mu_;
  std::vector<Sample> samples_;
};

/// Overview: queue per system, running steps with elapsed time, workers,
/// recent evaluations, metrics, failure rate (24 hourly buckets before
/// `nowMs`) and `history`'s series. `snap` may be null (no scheduler).
json overviewModel(scheduler::StateView& view,
                   const scheduler::SchedulerSnapshot* snap,
                   const MetricsHistory* history, int64_t nowMs);
/// Every project with its jobsets.
json projectsModel(scheduler::StateView& view);
/// A jobset: its row, a page of evaluations, the job x evaluation matrix
/// (a page of jobs) of its newest `matrixEvals` evaluations. NotFound.
json jobsetModel(scheduler::StateView& view, const std::string& project,
                 const std::string& jobset, const scheduler::Page& evals,
                 const scheduler::Page& jobs, int matrixEvals);
/// An evaluation: summary, previous evaluation, a page of its builds
/// passing `filter`, a page of its errors. NotFound.
json evaluationModel(scheduler::StateView& view, int64_t eval,
                     const scheduler::BuildFilter& filter,
                     const scheduler::Page& builds,
                     const scheduler::Page& errors);
/// The comparison of `eval` with `base` (0: its previous evaluation):
/// counts of every category and a page of `kind`. NotFound.
json comparisonModel(scheduler::StateView& view, int64_t eval, int64_t base,
                     scheduler::ChangeKind kind, const scheduler::Page& page);
/// A build: row, evaluation, jobset, steps that ran, dependencies,
/// outputs with sizes, log attempts of its top step. NotFound.
json buildModel(scheduler::StateView& view, const std::string& stateDir,
                int64_t build, const PathSizeFn& sizes);
/// A job's history (a page), its latest builds and the series of its
/// newest builds' durations and `out` sizes (`sizes`; none when null) for
/// its charts. NotFound for an unknown jobset.
json jobModel(scheduler::StateView& view, const std::string& project,
              const std::string& jobset, const std::string& job,
              const scheduler::Page& page, const PathSizeFn& sizes = {});
/// The queue (a page of waiting and running steps with why they wait).
json queueModel(const scheduler::SchedulerSnapshot* snap,
                const scheduler::Page& page);
/// The workers the running scheduler knows.
json workersModel(const scheduler::SchedulerSnapshot* snap);
/// Search results for `query` (job prefix, .drv or output path).
json searchModel(scheduler::StateView& view, const std::string& storeDir,
                 const std::string& query);

/// The comparison category named `name` ("newly-failing",
/// "newly-succeeding", "still-failing", "new", "removed", "unfinished",
/// "changed").
std::optional<scheduler::ChangeKind> changeKindFromName(const std::string& name);
/// The name of `kind` (see changeKindFromName).
std::string changeKindName(scheduler::ChangeKind kind);

}  // namespace kiln::web
