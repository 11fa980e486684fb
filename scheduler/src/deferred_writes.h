#pragma once
// Writes of the scheduler's state that wait for the database (docs/
// scheduler.md, "State"): when a write fails transiently (PostgreSQL
// restarting, a lost connection), the scheduler has already told the
// worker and the core; the write is kept, in order, and done again each
// turn until the database takes it. Later writes queue behind it, so the
// rows change in the order the scheduler decided. Service thread only.

#include <cstddef>
#include <deque>
#include <functional>

#include "kiln/common/clock.h"

namespace kiln::scheduler {

class DeferredWrites {
 public:
  /// `clock` (borrowed) paces the warnings.
  explicit DeferredWrites(const Clock& clock) : clock_(clock) {}

  /// Runs `write` (a whole transaction) now if nothing waits, else queues
  /// it; a transient SqlError queues it too. Any other error propagates.
  void run(std::function<void()> write);
  /// Runs the queued writes in order until one fails transiently (it stays
  /// first); one failing otherwise is logged and dropped. Returns how many
  /// still wait.
  size_t flush();
  /// How many writes wait.
  size_t pending() const { return queue_.size(); }

 private:
  void warn(const char* what);

  const Clock& clock_;
  std::deque<std::function<void()>> queue_;
  Clock::TimePoint lastWarning_{};
};

}  // namespace kiln::scheduler
