#pragma once
/// Which process schedules a farm (docs/scheduler.md, "State"): at most one
/// holds the farm's scheduler lock. On SQLite it is `<state>/scheduler.lock`
/// (flock); on PostgreSQL a session advisory lock on a connection of the
/// lock's own, so schedulers on other hosts and CLI commands see it. When
/// no scheduler holds it, a CLI command may take it and apply a request
/// itself (request_queue.h).

#include <memory>
#include <string>

#include "kiln/scheduler/state_db.h"

namespace kiln::scheduler {

/// A held scheduler lock; released on destruction (PostgreSQL: the lock's
/// connection is closed).
class SchedulerLock {
 public:
  virtual ~SchedulerLock() = default;
  /// Takes the lock of the farm whose state is `database` (and, on SQLite,
  /// in `stateDir`) if no other process holds it; nullptr if one does.
  /// Throws SqlError if PostgreSQL cannot be reached, SysError if the lock
  /// file cannot be made.
  static std::unique_ptr<SchedulerLock> tryAcquire(const DatabaseSpec& database,
                                                   const std::string& stateDir);
  /// Whether the lock is still held: false once PostgreSQL has dropped the
  /// lock's connection (another scheduler may have taken over since).
  virtual bool held() = 0;
  /// What holds it, for messages ("<dir>/scheduler.lock", "advisory lock
  /// 7164351 in postgresql://…").
  virtual std::string describe() const = 0;
};

}  // namespace kiln::scheduler
