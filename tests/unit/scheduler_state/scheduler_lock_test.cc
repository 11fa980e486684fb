// The farm's scheduler lock on PostgreSQL (scheduler_lock.h): one holder,
// and the writers' fence — a scheduler taking over waits until every
// session of the one before that could still write has ended, and a
// session of a scheduler that lost the farm cannot write again.
#include "kiln/scheduler/scheduler_lock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "kiln/common/file.h"
#include "postgres_server.h"
#include "state_backends.h"
#include "test_support.h"

namespace kiln::scheduler {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

class SchedulerLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_SKIP_UNLESS_POSTGRES();
    spec_ =
        test::freshStateDatabase(test::StateBackend::kPostgres, dir_.path());
    StateDb create(spec_);  // the schema
  }

  // Ends every session holding the farm's lock, as a dropped connection
  // would.
  void terminateLockSessions() {
    auto r = test::postgresServerForState().psql(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE "
        "locktype = 'advisory' AND objid = 7164351",
        spec_.url);
    ASSERT_EQ(r.exitCode, 0) << r.err;
  }

  static void write(SqlConnection& c) {
    c.exec("INSERT INTO projects (name) VALUES ('p" +
           std::to_string(counter_++) + "')");
  }

  TempDir dir_{"kiln-sched-lock"};
  DatabaseSpec spec_;
  static inline int counter_ = 0;
};

TEST_F(SchedulerLockTest, OneHolderAtATime) {
  auto first = SchedulerLock::tryAcquire(spec_, dir_.path());
  ASSERT_NE(first, nullptr);
  EXPECT_TRUE(first->held());
  // Held by a session of this process: what a dropped session (its query
  // deadline passed) whose backend has not ended yet looks like, so it is
  // transient; another process is answered nullptr (postgres_farm_test).
  try {
    SchedulerLock::tryAcquire(spec_, dir_.path());
    ADD_FAILURE() << "taken twice";
  } catch (const SqlError& e) {
    EXPECT_TRUE(e.transient());
    EXPECT_THAT(e.what(), HasSubstr("a dropped session of this process"));
  }
  first.reset();
  EXPECT_NE(SchedulerLock::tryAcquire(spec_, dir_.path()), nullptr);
}

// The lock's session ending (pg_terminate_backend, as when only the lock's
// connection drops) is seen without a query, and for good: a session a
// query would open again does not hold the lock.
TEST_F(SchedulerLockTest, ItsSessionEndingIsSeenWithoutAQuery) {
  auto lock = SchedulerLock::tryAcquire(spec_, dir_.path());
  ASSERT_NE(lock, nullptr);
  EXPECT_FALSE(lock->sessionEnded());
  EXPECT_TRUE(lock->held());
  EXPECT_FALSE(lock->sessionEnded());
  terminateLockSessions();
  // The server's goodbye reaches the socket at once; only poll(2) and
  // reads of what arrived happen here.
  EXPECT_TRUE(test::pollUntil([&] { return lock->sessionEnded(); }, 10s));
  EXPECT_TRUE(lock->sessionEnded());
  EXPECT_FALSE(lock->held());
  // Nobody holds it now: another scheduler may take it.
  EXPECT_NE(SchedulerLock::tryAcquire(spec_, dir_.path()), nullptr);
}

TEST_F(SchedulerLockTest, ATakeOverWaitsForTheEarlierWritersSessions) {
  auto old = SchedulerLock::tryAcquire(spec_, dir_.path());
  ASSERT_NE(old, nullptr);
  auto oldWriter = spec_.connect(SqlAccess::kWrite);
  old->fence(*oldWriter);
  write(*oldWriter);
  // The old scheduler's lock session is gone, its writer's is not.
  terminateLockSessions();
  EXPECT_TRUE(test::pollUntil([&] { return !old->held(); }, 10s));
  auto next = SchedulerLock::tryAcquire(spec_, dir_.path());
  ASSERT_NE(next, nullptr);
  std::atomic<bool> waited{false};
  auto waiting = std::async(std::launch::async, [&] {
    next->waitForEarlierWriters();
    waited = true;
  });
  // Still waiting while the old writer's session lives (it may still
  // write: the new scheduler has read nothing yet).
  EXPECT_EQ(waiting.wait_for(300ms), std::future_status::timeout);
  write(*oldWriter);
  oldWriter.reset();  // the old scheduler exits
  ASSERT_EQ(waiting.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(waited);

  // The new scheduler's writer works; a session re-opened for the old one
  // is refused, and not as something to retry.
  auto newWriter = spec_.connect(SqlAccess::kWrite);
  next->fence(*newWriter);
  write(*newWriter);
  auto reopened = spec_.connect(SqlAccess::kWrite);
  try {
    old->fence(*reopened);
    ADD_FAILURE() << "an old scheduler's session was let write";
  } catch (const SqlError& e) {
    EXPECT_FALSE(e.transient());
    EXPECT_THAT(e.what(), HasSubstr("another scheduler holds the farm's lock"));
  }
}

TEST_F(SchedulerLockTest, NoHolderIsTransientAndAWaitingSchedulerIsNot) {
  auto lock = SchedulerLock::tryAcquire(spec_, dir_.path());
  ASSERT_NE(lock, nullptr);
  auto writer = spec_.connect(SqlAccess::kWrite);
  lock->fence(*writer);
  terminateLockSessions();
  EXPECT_TRUE(test::pollUntil([&] { return !lock->held(); }, 10s));
  // Nobody holds the farm (the database restarted): try again later.
  auto again = spec_.connect(SqlAccess::kWrite);
  try {
    lock->fence(*again);
    ADD_FAILURE() << "fenced without the farm's lock";
  } catch (const SqlError& e) {
    EXPECT_TRUE(e.transient()) << e.what();
  }
  // A scheduler waiting for the fence: new sessions are refused.
  auto next = SchedulerLock::tryAcquire(spec_, dir_.path());
  ASSERT_NE(next, nullptr);
  auto waiting =
      std::async(std::launch::async, [&] { next->waitForEarlierWriters(); });
  EXPECT_EQ(waiting.wait_for(300ms), std::future_status::timeout);
  auto late = spec_.connect(SqlAccess::kWrite);
  EXPECT_THROW(lock->fence(*late), SqlError);
  writer.reset();
  EXPECT_EQ(waiting.wait_for(30s), std::future_status::ready);
}

// A command applying one request itself (submitRequest) holds the farm's
// lock for a moment: a scheduler trying to take it again (its session
// ended) or opening a fenced writer's session meanwhile is told to retry,
// not that another scheduler took the farm over (it used to stop).
TEST_F(SchedulerLockTest, ACommandHoldingTheLockIsNotAnotherScheduler) {
  auto lock = SchedulerLock::tryAcquire(spec_, dir_.path());
  ASSERT_NE(lock, nullptr);
  auto writer = spec_.connect(SqlAccess::kWrite);
  lock->fence(*writer);
  terminateLockSessions();  // the database restarted, say
  EXPECT_TRUE(test::pollUntil([&] { return !lock->held(); }, 10s));
  auto command =
      SchedulerLock::tryAcquire(spec_, dir_.path(), LockUse::kCommand);
  ASSERT_NE(command, nullptr);
  try {
    SchedulerLock::tryAcquire(spec_, dir_.path());
    ADD_FAILURE() << "taken while a command holds it";
  } catch (const LockHeldByCommand& e) {
    EXPECT_TRUE(e.transient());
    EXPECT_THAT(e.what(), HasSubstr("a kiln command holds the farm's lock"));
  }
  auto reopened = spec_.connect(SqlAccess::kWrite);
  try {
    lock->fence(*reopened);
    ADD_FAILURE() << "fenced while a command holds the lock";
  } catch (const LockHeldByCommand& e) {
    EXPECT_TRUE(e.transient());
  }
  // Another command waits as well (it does not queue a request nobody
  // would answer).
  EXPECT_THROW(SchedulerLock::tryAcquire(spec_, dir_.path(), LockUse::kCommand),
               LockHeldByCommand);
  command.reset();
  auto again = SchedulerLock::tryAcquire(spec_, dir_.path());
  ASSERT_NE(again, nullptr);
  auto fresh = spec_.connect(SqlAccess::kWrite);
  again->fence(*fresh);
  write(*fresh);
  // And a scheduler holding it is not a command: a command is answered
  // nullptr (it queues its request).
  EXPECT_EQ(SchedulerLock::tryAcquire(spec_, dir_.path(), LockUse::kCommand),
            nullptr);
}

}  // namespace
}  // namespace kiln::scheduler
