#pragma once
/// WAL checkpoints of the scheduler's state database off the service
/// thread (docs/scheduler.md, "The service loop"). SQLite's automatic
/// checkpoint runs inside whichever commit fills the WAL past 1000 pages,
/// copying pages back and fsyncing the database file: tens of milliseconds
/// that would land on the service thread every few hundred commits.

#include <chrono>
#include <string>
#include <thread>

#include "kiln/common/sync.h"

namespace kiln::scheduler {

/// Owns one thread with its own connection to a WAL database, running a
/// PASSIVE checkpoint (never blocks readers or writers) every `interval`.
/// The service's connection turns its automatic checkpoints off. Errors are
/// logged; none leaves the thread.
class Checkpointer {
 public:
  /// Opens `dbPath` on the thread (throws nothing; an open failure is
  /// logged and the thread ends).
  /// `clock` times the pauses between checkpoints; it must outlive this.
  Checkpointer(std::string dbPath, std::chrono::milliseconds interval,
               const Clock& clock = RealClock::instance());
  /// Stops the thread after a last checkpoint.
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  /// Checkpoints that ran so far (for tests).
  uint64_t checkpoints();

 private:
  struct State {
    bool stop = false;
    uint64_t done = 0;
  };
  void run() noexcept;

  std::string path_;
  std::chrono::milliseconds interval_;
  const Clock& clock_;
  Sync<State> state_;
  std::thread thread_;
};

}  // namespace kiln::scheduler
