#pragma once
/// Job enumeration on several threads sharing one EvalState (threaded
/// evaluation, docs/evaluator.md): what one thread evaluates, the others
/// use, so a dependency shared by many jobs is evaluated once.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/evaluator/jobs.h"

namespace kiln::eval {

/// Hands out the indexes 0..n-1 to `parts` threads, each index once: the
/// range is cut into `parts` contiguous blocks, thread t takes its own
/// block's indexes from the front, and a thread whose block is empty takes
/// from the back of the block with the most left. Neighbouring entries of a
/// package set tend to share dependencies, so threads that work far apart
/// in it wait less for each other's thunks than threads taking turns on
/// one queue. Lock-free; n < 2^32 (throws std::length_error otherwise).
class EntrySplitter {
 public:
  EntrySplitter(size_t n, unsigned parts);
  /// The next index for thread `part` (0-based, < parts), or nothing once
  /// every index has been handed out. Safe to call from all threads.
  std::optional<size_t> next(unsigned part);

 private:
  // One block: the front (next for its owner) in the low 32 bits, the back
  // (one past the last left) in the high 32 bits.
  struct alignas(64) Block {
    std::atomic<uint64_t> range{0};
  };
  static std::optional<size_t> takeFront(Block& b);
  static std::optional<size_t> takeBack(Block& b);
  std::unique_ptr<Block[]> blocks_;
  unsigned parts_;
};

/// The tasks of entries split into one task per attribute (large entered
/// sets: package scopes, a package set's variants), numbered in the order
/// they were added. A set's tasks go first to the thread that split it,
/// from the front; another thread takes them only once it has no entries
/// left (`ownOnly` false), from the front of the earliest set split. Two
/// threads taking turns on one set of a package set's variants (every
/// package re-evaluated with other flags: a deep chain of shared thunks)
/// kept meeting each other's unfinished packages, while entries that need
/// other thunks were left for later. Not thread-safe: callers lock.
class SplitTasks {
 public:
  /// Adds the `count` tasks of a set split by thread `owner`; returns the
  /// number of the first (the others follow it).
  size_t add(size_t count, unsigned owner);
  /// The next task for thread `thread`: one of its own sets' (the earliest
  /// split first), else, unless `ownOnly`, any set's; nothing if none.
  std::optional<size_t> next(unsigned thread, bool ownOnly);

 private:
  struct Set {
    size_t next, end;  // its tasks not yet taken
    unsigned owner;
  };
  std::vector<Set> sets_;
  size_t firstOpen_ = 0;  // sets before it have no tasks left
  size_t added_ = 0;
};

/// Turns one job into the text kept for it (appended to `out`). Runs on
/// the thread that evaluated the job, concurrently with other threads'
/// calls, so it must be thread-safe.
using JobRenderer = std::function<void(const Job& job, std::string& out)>;

/// prepareJobRoot with `threads` threads (2..EvalState::kMaxThreads): the
/// calling thread evaluates the root while the others take elements of
/// the strict list builtins it calls on long lists (`concatMap`, so
/// `filterAttrs` over a whole package set, and `filter`), which a root
/// made by filtering a package set spends most of its time in. The first
/// error in list order is the one reported, as with one thread; elements
/// after it may have been evaluated too. Throws as prepareJobRoot.
JobRoot prepareJobRootThreaded(EvalState& state, Value& root, Bindings* autoArgs,
                               const JobWalkOptions& options, unsigned threads);

/// Enumerates the jobs below every entry of `root` (as enumerateJobEntry)
/// on `threads` threads (1..EvalState::kMaxThreads) that share `state`.
/// Each job is rendered (`render`) as soon as it is made, into its entry's
/// text; once every entry is done, `onEntry` is called on the calling
/// thread for each entry in index order with that text: the same calls, in
/// the same order, for any number of threads. (Rendering on the threads
/// keeps no Job records until the end: freeing 50,000 entries' records
/// after the threads took ~90 ms of a 4.6 s run, all of it serial.)
/// Per-job errors are jobs, as in enumerateJobs; any other error (a store
/// write that failed) stops the evaluation and is rethrown here once
/// every thread has stopped.
void enumerateJobsThreaded(EvalState& state, const JobRoot& root, Bindings* autoArgs,
                           const std::string& rootAttr, unsigned threads,
                           const JobRenderer& render,
                           const std::function<void(size_t, const std::string&)>& onEntry);

}  // namespace kiln::eval
