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

/// Who takes the farm's lock: a scheduler (`kiln serve`, a standby), or a
/// command applying one request itself because no scheduler runs
/// (submitRequest). PostgreSQL names each kind's lock session apart, so a
/// scheduler can tell a command's moment of holding it from another
/// scheduler.
enum class LockUse { kScheduler, kCommand };

/// Thrown (transient) by tryAcquire and by a fenced writer's session while
/// a command holds the farm's lock to apply one request (PostgreSQL): it is
/// released within moments, and is not another scheduler.
class LockHeldByCommand : public SqlError {
 public:
  explicit LockHeldByCommand(const std::string& msg) : SqlError(msg, true) {}
};

/// A held scheduler lock; released on destruction (PostgreSQL: the lock's
/// connection is closed).
class SchedulerLock {
 public:
  virtual ~SchedulerLock() = default;
  /// Takes the lock of the farm whose state is `database` (and, on SQLite,
  /// in `stateDir`) for `use` if no other process holds it; nullptr if one
  /// does. Throws SqlError if PostgreSQL cannot be reached, or (transient)
  /// while a session of this process that was dropped (its query deadline
  /// passed) still holds the lock; LockHeldByCommand while a command holds
  /// it (PostgreSQL); SysError if the lock file cannot be made.
  static std::unique_ptr<SchedulerLock> tryAcquire(
      const DatabaseSpec& database, const std::string& stateDir,
      LockUse use = LockUse::kScheduler);
  /// Whether the lock is still held: false once PostgreSQL has dropped the
  /// lock's connection (another scheduler may have taken over since).
  virtual bool held() = 0;
  /// Whether the lock is known lost without asking the database, cheap
  /// enough for every dispatch: on PostgreSQL, the lock's session ended
  /// (the server closed its connection: pg_terminate_backend, a restart),
  /// and stays so; false says nothing more (held() asks). SQLite: false.
  virtual bool sessionEnded() { return false; }
  /// What holds it, for messages ("<dir>/scheduler.lock", "advisory lock
  /// 7164351 in postgresql://…").
  virtual std::string describe() const = 0;
  /// Waits until no session of an earlier scheduler of the farm can still
  /// write (PostgreSQL: takes the writers' fence, advisory lock 7164352,
  /// exclusively and releases it; a dead scheduler's sessions end at once,
  /// a silent host's within 12 s, a live one exits within a second of
  /// losing the farm's lock). Call it before reading the state. SQLite:
  /// nothing (the lock file is enough on one host). Throws SqlError.
  virtual void waitForEarlierWriters() {}
  /// Fences `writer`, the scheduler's own state connection: every session
  /// of it (PostgreSQL, re-opened ones included) holds the writers' fence
  /// shared and checks that this lock's session holds the farm's lock, so
  /// no write of this scheduler lands once another one may have read the
  /// state. A session that finds the farm's lock held by another process,
  /// or a newer scheduler waiting, fails with a SqlError that is not
  /// transient; one that finds it held by nobody (the database restarted,
  /// the lock not taken again yet) with a transient one, and one that finds
  /// a command holding it with LockHeldByCommand. SQLite: nothing.
  virtual void fence(SqlConnection& writer) { (void)writer; }
};

}  // namespace kiln::scheduler
