#pragma once
// Per-thread figures of threaded evaluation, for KILN_EVAL_CPU_TIMES
// (bench/eval_workers.sh): how long the calling thread waited for thunks
// other threads were evaluating.
#include <time.h>

#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

namespace kiln::eval {

/// CPU seconds of `clock` (CLOCK_PROCESS_CPUTIME_ID, or the calling
/// thread's CLOCK_THREAD_CPUTIME_ID).
double cpuSeconds(clockid_t clock);

/// Nanoseconds the calling thread spent waiting for other threads' thunks.
uint64_t threadWaitNanos();
/// The calling thread's waits that ended by their poll's timeout with the
/// thunk published meanwhile: a wake-up its publisher did not send (or, in
/// a rare race, sent just as the poll ended).
uint64_t threadLateWakes();
/// How long a wait for another thread's thunk sleeps before it looks again
/// without a wake-up (50 ms unless set; waits for a cycle poll 5 ms). Tests
/// that count late wakes set it long: then only a wake-up that never came
/// ends a wait by its poll, not a publisher the machine's load held between
/// publishing and waking.
void setWaitPoll(std::chrono::milliseconds poll);
std::chrono::milliseconds waitPoll();
/// Whether waits are attributed to the place that forced the thunk waited
/// for (KILN_EVAL_CPU_TIMES set: read once).
bool waitSitesRecorded();
/// The calling thread's waits by where the thunk was forced (the forcing
/// expression's position), as (position, nanoseconds), largest first:
/// what made this thread wait for another's work (recorded only when
/// waitSitesRecorded()).
std::vector<std::pair<uint32_t, uint64_t>> threadWaitSites();

}  // namespace kiln::eval
