#pragma once
// Threads that share the elements of the strict list builtins while one
// thread evaluates a collection's root (docs/evaluator.md, "Parallel list
// builtins before the jobs"). Evaluator-internal.

#include <pthread.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace kiln::eval {

class EvalState;

/// While alive, `threads - 1` helper threads (slots 2..threads) stand by
/// and the calling thread evaluates as slot 1, the state in threaded mode:
/// `concatMap` and `filter` over long lists hand their elements out to
/// whichever of these threads is free (parallelFor). Construct and destroy
/// on the state's own thread; at most one at a time per state. Throws
/// Error for a thread count outside 2..EvalState::kMaxThreads; when no
/// helper thread can be started, parallelFor takes nothing (one thread).
class ListHelpers {
 public:
  ListHelpers(EvalState& state, unsigned threads);
  ~ListHelpers();
  ListHelpers(const ListHelpers&) = delete;
  ListHelpers& operator=(const ListHelpers&) = delete;

  /// Runs `work(i)` once for each i < n on this thread and the free
  /// helpers, returning once every started call returned, or false at once
  /// (nothing run) when the calling thread is not slot 1, a run is in
  /// progress or n is below kMinElements. After a call throws, calls for
  /// larger i are not started (those already running finish); the
  /// exception of the smallest i that threw is rethrown: the one a loop in
  /// index order would have stopped at.
  bool parallelFor(size_t n, const std::function<void(size_t)>& work);

  /// Lists shorter than this are not worth waking a thread for.
  static constexpr size_t kMinElements = 128;

 private:
  struct Run;
  static void* helperMain(void* arg);
  void serve(uint32_t slot);
  static void drain(Run& run, unsigned part);

  EvalState& state_;
  unsigned threads_;
  std::vector<pthread_t> ids_;
  // Each helper's argument (this, its slot): reserved before the threads
  // start, never reallocated while they read it.
  std::vector<std::pair<ListHelpers*, uint32_t>> args_;
  std::mutex mu_;                // guards run_, stop_ and Run::workers
  std::condition_variable wake_;  // a run was published, or stop
  std::condition_variable done_;  // a run's last worker left it
  Run* run_ = nullptr;
  uint64_t runs_ = 0;  // runs published so far (a helper joins each once)
  bool stop_ = false;
};

/// CPU seconds the list helpers of every ListHelpers so far used (counted
/// as each ends), and seconds their publishers waited for the helpers'
/// last elements: with the publisher's own CPU, the longest path of the
/// phase (KILN_EVAL_CPU_TIMES, bench/eval_workers.sh).
struct ListHelperTimes {
  double helperCpu = 0;
  double publisherWait = 0;
};
ListHelperTimes listHelperTimes();

/// `work(i)` for each i < n, in parallel when `state` has list helpers
/// that can take it (ListHelpers::parallelFor); false when it has none or
/// they cannot take it: the caller then loops itself.
bool parallelFor(EvalState& state, size_t n, const std::function<void(size_t)>& work);

}  // namespace kiln::eval
