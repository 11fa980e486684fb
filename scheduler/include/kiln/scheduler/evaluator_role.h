#pragma once
/// `kiln evaluator`: jobset evaluations on a host of their own
/// (docs/operations.md, "Running on many machines"), so the scheduler's
/// host does not need the evaluator's memory and the scheduler never waits
/// for an evaluation. The role claims a jobset in the state database
/// (eval_queue.h) — `jobset-eval` requests first, then jobsets whose check
/// interval passed — evaluates it into its own store under its own state
/// directory, and publishes the jobs with their `.drv` closures for a
/// scheduler started with `--evaluations remote`, which checks and imports
/// them. Several evaluators may run: each jobset is claimed by one at a
/// time, and a claim whose lease its evaluator stopped renewing (it died)
/// passes to another.

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "kiln/common/clock.h"
#include "kiln/plugin_host/registry.h"
#include "kiln/scheduler/evaluation.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// How an evaluator host runs.
struct EvaluatorRoleConfig {
  DatabaseSpec database;  ///< the farm's state (PostgreSQL)
  /// This host's own folder: work folders of the jobsets and the store the
  /// evaluations write `.drv`s into.
  std::string stateDir;
  std::string storeDir = "/nix/store";
  /// Names this evaluator in claims and results ("" = host name and pid).
  std::string name;
  /// The `kiln` executable the builtin evaluator plugin runs.
  std::string kilnBinary;
  /// Evaluator plugins (not owned; null: the process's) and their settings.
  const plugins::PluginRegistry* plugins = nullptr;
  std::map<std::string, plugins::PluginConfig> evaluatorConfig;
  /// If set, used for every jobset (tests).
  std::shared_ptr<EvalRunner> evalRunner;
  /// Null: the real fetcher (git, folders).
  std::shared_ptr<InputFetcher> inputFetcher;
  /// The largest evaluated checkout sent along as the evaluation's
  /// `source` path (NAR bytes; a channel's nixexprs.tar.xz); a larger one
  /// is logged and the evaluation is published without its sources.
  uint64_t maxSourceBytes = uint64_t{1} << 30;
  /// How often the database is asked for work when there is none.
  std::chrono::milliseconds poll{1000};
  /// How long a claim lasts unless renewed (renewed every quarter of it).
  std::chrono::milliseconds lease{60000};
  const Clock* clock = nullptr;  ///< null: the real clock
};

/// One evaluator host's loop. Not thread-safe; one run() at a time.
class EvaluatorRole {
 public:
  explicit EvaluatorRole(EvaluatorRoleConfig config);
  ~EvaluatorRole();
  EvaluatorRole(const EvaluatorRole&) = delete;
  EvaluatorRole& operator=(const EvaluatorRole&) = delete;

  /// Claims, evaluates and publishes until `stop` is set (an evaluation
  /// that runs is finished first). Database outages and failed
  /// evaluations are logged and retried; throws only for a schema this
  /// kiln cannot use (SchemaError).
  void run(const std::atomic<bool>& stop);
  /// Claims, evaluates and publishes at most one jobset (an evaluation
  /// that started is always finished); returns whether it did. Throws
  /// SqlError when the database fails.
  bool runOnce();
  /// This evaluator's name in claims and results.
  const std::string& name() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::scheduler
