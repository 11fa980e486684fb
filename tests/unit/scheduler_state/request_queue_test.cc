// Submitting a request while a scheduler holds the farm's lock: the wait
// for its answer is timed on the clock given to submitRequest, so a
// FakeClock times it out at once, and an answer written meanwhile ends it.
#include "kiln/scheduler/request_queue.h"

#include <gtest/gtest.h>

#include "kiln/common/clock.h"
#include "kiln/common/file.h"
#include "kiln/scheduler/scheduler_lock.h"

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

}  // namespace
}  // namespace kiln::scheduler
