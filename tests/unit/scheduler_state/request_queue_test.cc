// Submitting a request while a scheduler holds the farm's lock: the wait
// for its answer is timed on the clock given to submitRequest, so a
// FakeClock times it out at once, and an answer written meanwhile ends it.
#include "kiln/scheduler/request_queue.h"

#include <gtest/gtest.h>

#include "kiln/common/clock.h"
#include "kiln/common/file.h"
#include "kiln/scheduler/scheduler_lock.h"
#include "kiln/scheduler/snapshot_store.h"
#include "postgres_server.h"
#include "state_backends.h"
#include "test_support.h"

namespace kiln::scheduler {
namespace {

using namespace std::chrono_literals;

class RequestQueueTest : public ::testing::Test {
 protected:
  RequestQueueTest() { StateDb create(spec_); }

  TempDir dir_{"kiln-request-queue"};
  DatabaseSpec spec_ = DatabaseSpec::inStateDir(dir_.path());
  FakeClock clock_;
};

TEST_F(RequestQueueTest, AnUnansweredRequestTimesOutOnTheGivenClock) {
  auto lock = SchedulerLock::tryAcquire(spec_, dir_.path());
  ASSERT_NE(lock, nullptr);  // "a scheduler runs": the request is queued
  auto t0 = clock_.now();
  try {
    submitRequest(spec_, dir_.path(), "queue", nlohmann::json::object(), 30s,
                  {}, clock_);
    FAIL() << "no timeout";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("within 30000 ms"), std::string::npos)
        << e.what();
  }
  // The looks at the answer backed off from 5 ms to 200 ms: the fake clock
  // moved through the whole timeout and not much past it.
  EXPECT_GE(clock_.now() - t0, 30s);
  EXPECT_LT(clock_.now() - t0, 30s + 200ms);
  StateDb db(spec_, StateDb::Existing{});
  auto row = db.request(1);
  ASSERT_TRUE(row.has_value());
  EXPECT_FALSE(row->done);
}

// On PostgreSQL, nobody holding the farm's lock does not mean no scheduler
// runs: after the database restarted, the scheduler takes the lock again
// within moments. While it vouched for its snapshot lately, a request is
// queued for it rather than applied behind its back (its memory would miss
// the change, and the scheduler took the command for another scheduler and
// stopped); once it stopped (withdrew its snapshot) or went silent for
// kSchedulerVouchWindow, requests are applied at once again.
class RequestQueuePostgresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_SKIP_UNLESS_POSTGRES();
    spec_ =
        test::freshStateDatabase(test::StateBackend::kPostgres, dir_.path());
    StateDb create(spec_);
  }
  // Whether a `queue` request was applied at once (true) or queued and
  // left unanswered (false: no scheduler answers here).
  bool appliedAtOnce() {
    try {
      auto r = submitRequest(spec_, "", "queue", nlohmann::json::object(), 1s,
                             {}, clock_);
      EXPECT_TRUE(r.is_array());
      return true;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("within 1000 ms"), std::string::npos)
          << e.what();
      return false;
    }
  }

  TempDir dir_{"kiln-request-queue-pg"};
  DatabaseSpec spec_;
  FakeClock clock_{WallTime(std::chrono::hours(24 * 365 * 56))};
};

TEST_F(RequestQueuePostgresTest, ASchedulerBetweenLockSessionsIsStillAsked) {
  StateDb db(spec_, StateDb::Existing{});
  EXPECT_TRUE(appliedAtOnce());  // no scheduler ever ran
  SchedulerSnapshot snap;
  storeSnapshot(db, &snap, clock_.nowMs());
  clock_.advance(20s);
  EXPECT_FALSE(appliedAtOnce());
  auto row = db.request(1);
  ASSERT_TRUE(row.has_value());
  EXPECT_FALSE(row->done);
  // Silent for longer than the window: gone.
  clock_.advance(kSchedulerVouchWindow);
  EXPECT_TRUE(appliedAtOnce());
  // Vouched again, then stopped.
  storeSnapshot(db, nullptr, clock_.nowMs());
  EXPECT_FALSE(appliedAtOnce());
  withdrawSnapshot(db);
  EXPECT_TRUE(appliedAtOnce());
  EXPECT_FALSE(db.request(3).has_value());  // two queued, the rest applied
  EXPECT_TRUE(db.request(2).has_value());
}

}  // namespace
}  // namespace kiln::scheduler
