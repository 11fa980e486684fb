#pragma once
// Jobset evaluations off the service thread (docs/scheduler.md,
// "Evaluations"): one at a time, on-demand ones (`jobset-eval` requests)
// before scheduled checks. Private to the scheduler service, which records
// what an evaluation produced (database, ingestion) on its own thread.

#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kiln/common/clock.h"
#include "kiln/scheduler/drv_prefetch.h"
#include "kiln/scheduler/eval_queue.h"
#include "kiln/scheduler/evaluation.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// What an evaluation produced, before it is recorded (service thread).
struct EvalOutcome {
  int64_t jobset = 0;
  bool skipped = false;  ///< inputs unchanged
  std::string inputsHash;
  std::vector<Job> jobs;  ///< dependencies first (orderJobsByDepth)
  std::shared_ptr<const DrvMap> drvs;  ///< the jobs' closures, parsed
  std::string error;                   ///< the whole evaluation failed
  /// The evaluated sources (the checkout without `.git`) as a store path
  /// of the central store; "" when not kept (docs/release.md).
  std::string sources;
  int64_t timeMs = 0;
  int64_t durationMs = 0;
};

/// Runs evaluations through an EvalRunner and an InputFetcher. Used from
/// the service thread only; each evaluation runs on a thread of its own
/// (std::async) with its own LocalStore and never touches the core or the
/// database. The destructor waits for a running evaluation.
class Evaluations {
 public:
  /// Where the central store is, and the runner and fetcher to use.
  struct Config {
    std::string stateDir;
    std::string storeDir;
    /// By evaluator name (JobsetSpec::evaluator).
    std::map<std::string, std::shared_ptr<EvalRunner>> runners;
    /// If set, used for every jobset instead (tests).
    std::shared_ptr<EvalRunner> runner;
    /// The evaluator plugins, for a name `runners` lacks (may be null).
    std::shared_ptr<PluginEvaluators> plugins;
    std::shared_ptr<InputFetcher> fetcher;
    /// Called on the calling (service) thread as an evaluation of a jobset
    /// starts, before its inputs are fetched (may be empty).
    std::function<void(const JobsetRow&)> started;
    /// The state database, which import threads open for themselves.
    DatabaseSpec database;
    /// Whether run() parses the jobs' closures and orders the jobs (the
    /// scheduler ingests them); an evaluator host only sends them.
    bool prefetch = true;
    /// The largest checkout kept as the evaluation's `source` path (what a
    /// channel's nixexprs.tar.xz holds), in NAR bytes; a larger one is
    /// logged and the evaluation stands without its sources. An imported
    /// result's sources are held to the same bound.
    uint64_t maxSourceBytes = kDefaultMaxSourceBytes;
  };
  /// maxSourceBytes' default: 1 GiB, what the web serves as a tar at most.
  static constexpr uint64_t kDefaultMaxSourceBytes = uint64_t{1} << 30;
  Evaluations(Config config, const Clock& clock);
  ~Evaluations();
  Evaluations(const Evaluations&) = delete;
  Evaluations& operator=(const Evaluations&) = delete;

  /// Evaluates `jobset` on the calling thread (unless its inputs did not
  /// change and !force). Never throws: a failure is the outcome's error.
  EvalOutcome run(const JobsetRow& jobset, bool force) const;

  /// Marks `jobset-eval` request `id` as taken; false if it was already
  /// (kept until its evaluation ends; in memory only).
  bool take(int64_t requestId) { return taken_.insert(requestId).second; }
  /// Queues an on-demand evaluation for request `requestId` (none: no
  /// request waits for its end).
  void enqueue(const JobsetRow& jobset, bool force,
               std::optional<int64_t> requestId);
  /// An evaluation that ended, and the request that asked for it.
  struct Finished {
    EvalOutcome outcome;
    std::optional<int64_t> request;
    /// The remote result it was imported from (eval_queue.h), if any.
    std::optional<int64_t> result;
  };
  /// The running evaluation's result if it ended (it no longer runs then).
  std::optional<Finished> takeFinished();
  /// Whether an evaluation runs.
  bool busy() const { return running_.has_value(); }
  /// Starts the oldest queued on-demand evaluation; false if none.
  bool startQueued();
  /// Starts a scheduled evaluation (inputs checked, not forced).
  void startScheduled(const JobsetRow& jobset) {
    start(jobset, false, std::nullopt);
  }
  /// Starts importing `row`, an evaluator host's result, into the central
  /// store (a thread with its own database connection and store handle);
  /// its outcome ends as an evaluation's does. A result that cannot be
  /// read or checked ends as a failed evaluation saying why.
  void startImport(const EvalResultRow& row);
  /// Imports `row` on the calling thread (startImport's work).
  EvalOutcome import(const EvalResultRow& row) const;

 private:
  /// The runner of `js`'s evaluator (an override, else its plugin); throws
  /// Error naming the jobset if there is none.
  EvalRunner& runnerOf(const JobsetSpec& js) const;
  void start(const JobsetRow& jobset, bool force,
             std::optional<int64_t> request);
  /// Takes temporary roots on `o`'s jobs' .drvs in `store` and sets
  /// `o.drvs` to their parsed closure.
  static void readClosure(EvalOutcome& o, store::LocalStore& store);
  /// readClosure, then checks the jobs against it and orders them (an
  /// imported result).
  static void finishJobs(EvalOutcome& o, store::LocalStore& store);
  /// Sets `o`'s duration: the time since `start`.
  void finished(EvalOutcome& o, Clock::TimePoint start) const;
  std::string keepSources(store::LocalStore& store,
                          const std::string& dir) const;

  struct Pending {
    JobsetRow jobset;
    bool force = true;
    std::optional<int64_t> requestId;
  };
  Config config_;
  const Clock& clock_;
  std::optional<std::future<EvalOutcome>> running_;
  std::optional<int64_t> runningRequest_;
  std::optional<int64_t> runningResult_;
  std::deque<Pending> queue_;
  std::set<int64_t> taken_;
};

}  // namespace kiln::scheduler
