// SchedulerService and the farm's scheduler lock (docs/scheduler.md,
// "State"; scheduler_lock.h): dispatching only while the lock is known
// held, taking it again after the database came back, stopping when
// another scheduler took it over.
#include "kiln/common/logging.h"
#include "kiln/scheduler/service.h"
#include "service_impl.h"

namespace kiln::scheduler {

// How long the lock may go unconfirmed before dispatching pauses: well
// under the time PostgreSQL takes to drop a silent lock holder's session
// (scheduler_lock.cc's keepalives), so two schedulers never dispatch at
// once.
constexpr auto kLockGrace = std::chrono::seconds(5);

bool SchedulerService::Impl::mayDispatch() const {
  // A state directory's flock cannot lapse while the process lives.
  return db.dialect() == SqlDialect::kSqlite ||
         clock.now() - lockConfirmed < kLockGrace;
}

void SchedulerService::Impl::checkLock() {
  if (lock->held()) {
    lockConfirmed = clock.now();
    return;
  }
  try {
    auto again = SchedulerLock::tryAcquire(cfg.database(), cfg.stateDir);
    if (again) {
      again->fence(db.db());  // this process's writer: no wait for it
      logWarn("the farm's scheduler lock was lost (" + lock->describe() +
              ") and is held again");
      lock = std::move(again);
      lockConfirmed = clock.now();
      return;
    }
    logError("another scheduler holds the farm's lock (" + lock->describe() +
             "): this one stops scheduling");
    lockLost = true;
  } catch (const std::exception& e) {
    // The database is away: keep dispatching from memory, try again.
    logWarn(std::string("cannot check the farm's scheduler lock: ") + e.what());
  }
}

}  // namespace kiln::scheduler
