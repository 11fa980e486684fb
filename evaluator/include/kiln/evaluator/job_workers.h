#pragma once
/// Parallel job evaluation in worker processes, as nix-eval-jobs does: once
/// the top-level job names are known, the evaluating process forks workers
/// that share everything evaluated so far (copy-on-write), hands each one
/// item (a top-level entry) at a time and forwards the job lines they print.
/// A worker whose resident memory exceeds the limit after an item exits and
/// is replaced by a fresh fork, so memory an evaluation never frees is
/// returned to the system between items.

#include <cstddef>
#include <string>

#include "kiln/common/spawner.h"

namespace kiln::eval {

/// How many jobs an item produced and how many of them failed.
struct JobCounts {
  size_t jobs = 0;
  size_t failed = 0;
};

/// What the worker pool does in the processes it forks and in the parent.
/// The worker-side calls run in a forked child whose stdout (fd 1) is a
/// pipe to the parent; everything it prints there is job output.
class JobWorkerHooks {
 public:
  virtual ~JobWorkerHooks() = default;
  /// In a new worker, right after the fork: drop what belongs to the parent
  /// (open store connections) and prepare to write on its own.
  virtual void startWorker() = 0;
  /// In a worker: evaluates item `index` and prints its job lines through
  /// `print` (which keeps them in order with the pool's own markers; a
  /// caller that holds lines back must pass them on in the same order).
  virtual JobCounts evaluate(size_t index) = 0;
  /// In a worker: prints `marker` after every line printed so far (through
  /// the same channel as the job lines, once they may be shown).
  virtual void print(const std::string& marker) = 0;
  /// In a worker about to exit: makes everything durable and writes out
  /// every held line. Throws Error when it cannot.
  virtual void stopWorker() = 0;
  /// In the parent: the output (job line) for item `index` whose worker
  /// died while evaluating it, saying `why`.
  virtual std::string lostItem(size_t index, const std::string& why) = 0;
};

/// Settings of the worker pool.
struct JobWorkerOptions {
  unsigned workers = 1;  ///< processes evaluating at once (at least 1)
  size_t maxMemoryBytes =
      0;  ///< resident size after which a worker is replaced (0: never)
  /// Forks the workers (SpawnOptions{}); null: systemSpawner().
  ProcessSpawner* spawner = nullptr;
};

/// Evaluates items 0..items-1 in worker processes forked from the calling
/// process and writes their output to file descriptor `outFd` as it comes,
/// whole items at a time (the lines of one item are never interleaved with
/// another's; items are in order within a worker). An item whose worker is
/// killed by a signal is reported with `hooks.lostItem` and counted as a
/// failed job; the items it had finished but not yet passed on are
/// evaluated again by another worker. A worker checks its peak resident
/// size after each item against `maxMemoryBytes`. Throws Error when a worker
/// exits with an error (it printed why on stderr) or a process cannot be made.
/// Call with stdout flushed and from the only thread that uses the evaluator.
JobCounts runJobWorkers(size_t items, const JobWorkerOptions& options,
                        JobWorkerHooks& hooks, int outFd);

}  // namespace kiln::eval
