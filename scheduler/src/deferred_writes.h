#pragma once
// Writes of the scheduler's state that wait for the database (docs/
// scheduler.md, "State"): when a write fails transiently (PostgreSQL
// restarting, a lost connection), the scheduler has already told the
// worker and the core; the write is kept, in order, and done again each
// turn until the database takes it. Later writes queue behind it, so the
// rows change in the order the scheduler decided. While messages are
// handled and the slots they freed are filled, writes are held (Hold) and
// made after the dispatch, once no further message waits: a BuildStep
// never waits for a round trip to the database. A write may carry what
// waits for it to be durable (a worker's result is acknowledged only once
// its row committed: docs/protocol.md, "Results"). Service thread only.

#include <cstddef>
#include <deque>
#include <functional>

#include "kiln/common/clock.h"

namespace kiln::scheduler {

class DeferredWrites {
 public:
  /// `clock` (borrowed) paces the warnings.
  explicit DeferredWrites(const Clock& clock) : clock_(clock) {}

  /// Called once a write ended: true after it committed, false if it
  /// failed for good (dropped; another scheduler may hold the farm now).
  using Done = std::function<void(bool committed)>;

  /// Runs `write` (a whole transaction) now if nothing waits and no Hold
  /// is open, else queues it; a transient SqlError queues it too. Any
  /// other error propagates, after `done(false)`. `done` (optional) is
  /// called once the write committed or was dropped, never before.
  void run(std::function<void()> write, Done done = nullptr);
  /// Runs the queued writes in order until one fails transiently (it stays
  /// first); one failing otherwise is logged and dropped. Returns how many
  /// still wait.
  size_t flush();
  /// Runs the first queued write as flush() does (a Hold may be open);
  /// false when none waits, the database was away before (the periodic
  /// flush paces the retries), or it failed transiently now.
  bool flushOne();
  /// How many writes wait.
  size_t pending() const { return queue_.size(); }

  /// Holds the writes run() is given while it lives (RAII; not nested):
  /// they are queued, and made in order when it ends, unless the database
  /// was away (then the service's periodic flush tries them again).
  class Hold {
   public:
    /// Starts holding the writes of `writes`, which must outlive it.
    explicit Hold(DeferredWrites& writes);
    ~Hold();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    DeferredWrites& writes_;
  };

 private:
  struct Write {
    std::function<void()> write;
    Done done;
  };
  void warn(const char* what);
  /// Tells `w.done` (if any) how `w` ended; what it throws is logged.
  static void finished(const Write& w, bool committed);
  // Runs the first queued write; false if it failed transiently (it
  // stays first), else it is gone (a lasting failure is logged) and its
  // `done` told.
  bool runFirst();

  const Clock& clock_;
  std::deque<Write> queue_;
  Clock::TimePoint lastWarning_{};
  bool held_ = false;     ///< a Hold is open
  bool stalled_ = false;  ///< the first queued write failed transiently
};

}  // namespace kiln::scheduler
