#pragma once
// Records the expected finish of new evaluations (eval_estimate.h) on a
// thread of its own with its own database connection: on a large
// evaluation its queries take hundreds of milliseconds (bench/state_bench
// record: 50,000 steps, about 0.4 s on SQLite), which the scheduler's
// loop must not wait for.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// A queue of evaluations to estimate and the thread that estimates them
/// and records the estimate (recordEvalEstimate). Errors are logged and
/// the evaluation skipped: an estimate is information, never needed.
class EstimateRecorder {
 public:
  /// Opens `database` (an existing state database) at the first request.
  explicit EstimateRecorder(DatabaseSpec database);
  /// Waits for the estimate being made; the queued ones are dropped.
  ~EstimateRecorder();
  EstimateRecorder(const EstimateRecorder&) = delete;
  EstimateRecorder& operator=(const EstimateRecorder&) = delete;

  /// Queues evaluation `eval`, whose builds and steps are committed, to be
  /// estimated as of `nowMs` with `slots` build slots. Returns at once.
  void submit(int64_t eval, unsigned slots, int64_t nowMs);
  /// Blocks until every evaluation submitted so far was handled (tests).
  void drain();

 private:
  struct Job {
    int64_t eval;
    unsigned slots;
    int64_t nowMs;
  };
  void run();
  void estimate(const Job& job);

  DatabaseSpec spec_;
  std::unique_ptr<StateDb> db_;  // the thread's only
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;  // guarded by mu_
  bool busy_ = false;     // guarded by mu_
  bool stop_ = false;     // guarded by mu_
  std::thread thread_;
};

}  // namespace kiln::scheduler
