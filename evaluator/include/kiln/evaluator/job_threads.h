#pragma once
/// Job enumeration on several threads sharing one EvalState (threaded
/// evaluation, docs/evaluator.md): what one thread evaluates, the others
/// use, so a dependency shared by many jobs is evaluated once.

#include <functional>
#include <string>
#include <vector>

#include "kiln/evaluator/jobs.h"

namespace kiln::eval {

/// Enumerates the jobs below every entry of `root` (as enumerateJobEntry)
/// on `threads` threads (1..EvalState::kMaxThreads) that share `state`,
/// then calls `onEntry` on the calling thread for each entry in index
/// order with that entry's jobs: the same calls, in the same order, for
/// any number of threads. Per-job errors are jobs, as in enumerateJobs;
/// any other error (a store write that failed) stops the evaluation and
/// is rethrown here once every thread has stopped.
void enumerateJobsThreaded(EvalState& state, const JobRoot& root, Bindings* autoArgs,
                           const std::string& rootAttr, unsigned threads,
                           const std::function<void(size_t, const std::vector<Job>&)>& onEntry);

}  // namespace kiln::eval
