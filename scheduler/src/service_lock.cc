// SchedulerService and the farm's scheduler lock (docs/scheduler.md,
// "State"; scheduler_lock.h): dispatching only while the lock is known
// held, noticing at once that its session ended, taking it again after
// the database came back, stopping when another scheduler took it over.
#include "kiln/common/logging.h"
#include "kiln/scheduler/service.h"
#include "service_impl.h"

namespace kiln::scheduler {

// How long the lock may go unconfirmed before dispatching pauses: well
// under the time PostgreSQL takes to drop a silent lock holder's session
// (scheduler_lock.cc's keepalives), so two schedulers never dispatch at
// once.
constexpr auto kLockGrace = std::chrono::seconds(5);
// While the lock's session is known ended, how often the lock is tried
// again; dispatching goes on meanwhile only while the last try found the
// database unreachable (then nobody can take the lock), at most this long.
constexpr auto kLockRetry = std::chrono::milliseconds(200);

bool SchedulerService::Impl::mayDispatch() {
  // One poll(2) of the lock's idle connection (PostgreSQL): its session
  // ending (a restart, pg_terminate_backend) stops dispatching before the
  // next BuildStep, and the loop tries the lock again at once.
  if (!lockSessionEnded && lock->sessionEnded()) {
    lockSessionEnded = true;
    lockCheckDue = true;
    logWarn("the session holding the farm's scheduler lock ended (" +
            lock->describe() + "): dispatching pauses until it is held again");
  }
  auto now = clock.now();
  if (lockSessionEnded)
    return databaseUnreachableAt && now - *databaseUnreachableAt < kLockRetry &&
           now - lockConfirmed < kLockGrace;
  // A state directory's flock cannot lapse while the process lives.
  return db.dialect() == SqlDialect::kSqlite ||
         now - lockConfirmed < kLockGrace;
}

// This process's writer is fenced by the lock now held (no wait for
// it). A failure to run the fence on the writer's session (the server just
// restarted) keeps it set: each session the writer opens runs it first.
void SchedulerService::Impl::fenceWriter() {
  try {
    lock->fence(db.db());
  } catch (const SqlError& e) {
    if (!e.transient()) {  // another scheduler waits to take over
      logError(std::string("this scheduler stops scheduling: ") + e.what());
      lockLost = true;
      return;
    }
    logWarn(std::string("fencing the scheduler's writes (done when its "
                        "connection is open again): ") +
            e.what());
  }
}

bool SchedulerService::Impl::lockCheckIsDue(Clock::TimePoint now) const {
  return lockCheckDue ||
         now - lastLockCheck >=
             (lockSessionEnded ? Clock::Duration(kLockRetry)
                               : Clock::Duration(std::chrono::seconds(1)));
}

void SchedulerService::Impl::checkLock() {
  lockCheckDue = false;
  if (!lockSessionEnded && lock->held()) {
    lockConfirmed = clock.now();
    return;
  }
  lockSessionEnded = true;  // not held, or not known to be: not dispatching
  try {
    auto again = SchedulerLock::tryAcquire(cfg.loopDatabase(), cfg.stateDir);
    databaseUnreachableAt.reset();
    if (again) {
      logWarn("the farm's scheduler lock was lost (" + lock->describe() +
              ") and is held again");
      // Ours before the fence: dropping it on a failed fence would leave
      // its backend holding it a moment, which the next try would take
      // for another scheduler.
      lock = std::move(again);
      lockSessionEnded = false;
      lockConfirmed = clock.now();
      fenceWriter();
      return;
    }
    logError("another scheduler holds the farm's lock (" + lock->describe() +
             "): this one stops scheduling");
    lockLost = true;
  } catch (const LockHeldByCommand& e) {
    // A command applying a request itself, having found the lock free
    // (submitRequest): not dispatching, tried again in kLockRetry.
    databaseUnreachableAt.reset();
    logInfo(e.what());
  } catch (const std::exception& e) {
    // The database is away (nobody can take the lock meanwhile): keep
    // dispatching from memory within kLockGrace, and try again.
    if (!databaseUnreachableAt)
      logWarn(std::string("the state database is unavailable (retrying; "
                          "workers are served from memory): cannot check "
                          "the farm's scheduler lock: ") +
              e.what());
    databaseUnreachableAt = clock.now();
  }
}

}  // namespace kiln::scheduler
