#pragma once
/// Repeating an operation that failed for a passing reason (a busy SQLite
/// file, a lost database connection), with exponential backoff.

#include <algorithm>
#include <chrono>
#include <functional>

#include "kiln/common/clock.h"

namespace kiln {

/// Calls `fn` until it returns; an exception of type E for which
/// `transient(e)` holds is retried after a pause (1 ms, doubling up to
/// `maxDelay`) until `timeout` has passed, then propagates; any other
/// exception propagates at once. `fn` must be safe to repeat. The pauses
/// and the deadline are `clock`'s.
template <class E, class Fn, class Transient>
void retryWithBackoff(Fn&& fn, Transient&& transient,
                      std::chrono::milliseconds timeout,
                      std::chrono::milliseconds maxDelay,
                      const Clock& clock = RealClock::instance()) {
  auto deadline = clock.now() + timeout;
  auto delay = std::chrono::milliseconds(1);
  for (;;) {
    try {
      fn();
      return;
    } catch (const E& e) {
      if (!transient(e) || clock.now() >= deadline) throw;
    }
    clock.sleepFor(delay);
    delay = std::min(delay * 2, maxDelay);
  }
}

}  // namespace kiln
