#pragma once
// Per-thread figures of threaded evaluation, for KILN_EVAL_CPU_TIMES
// (bench/eval_workers.sh): how long the calling thread waited for thunks
// other threads were evaluating.
#include <cstdint>
#include <utility>
#include <vector>

namespace kiln::eval {

/// Nanoseconds the calling thread spent waiting for other threads' thunks.
uint64_t threadWaitNanos();
/// Whether waits are attributed to the place that forced the thunk waited
/// for (KILN_EVAL_CPU_TIMES set: read once).
bool waitSitesRecorded();
/// The calling thread's waits by where the thunk was forced (the forcing
/// expression's position), as (position, nanoseconds), largest first:
/// what made this thread wait for another's work (recorded only when
/// waitSitesRecorded()).
std::vector<std::pair<uint32_t, uint64_t>> threadWaitSites();

/// Thrown through a job that a thread runs while it waits for another
/// thread's thunk (IdleWork) when that job needs a thunk being evaluated,
/// by another thread or lower on this thread's own stack: the job is
/// abandoned (the thunks it claimed are put back, as on any error; those
/// it finished stay evaluated) and run again later outside a wait. Not an
/// Error, so no evaluator handler (tryEval, a job's error) catches it.
struct WaitingJobAbandoned {};

/// Other work the calling thread may do while it waits for a thunk another
/// thread evaluates: `run(ctx)` runs one job (catching
/// WaitingJobAbandoned) and returns whether there was one.
struct IdleWork {
  bool (*run)(void* ctx) = nullptr;
  void* ctx = nullptr;
};
/// Sets the calling thread's idle work (none: {}).
void setIdleWork(IdleWork work);
/// How many jobs the calling thread ran while waiting, and how many of
/// them were abandoned (KILN_EVAL_CPU_TIMES).
std::pair<uint64_t, uint64_t> idleJobCounts();
/// Counts one job run while waiting that was abandoned.
void countAbandonedIdleJob();

}  // namespace kiln::eval
