#pragma once
// Per-thread figures of threaded evaluation, for KILN_EVAL_CPU_TIMES
// (bench/eval_workers.sh): how long the calling thread waited for thunks
// other threads were evaluating.
#include <cstdint>

namespace kiln::eval {

/// Nanoseconds the calling thread spent waiting for other threads' thunks.
uint64_t threadWaitNanos();

}  // namespace kiln::eval
