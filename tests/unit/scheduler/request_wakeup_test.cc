// The service's request wake-ups on PostgreSQL (docs/scheduler.md,
// "Operations"): with its clock standing still (a FakeClock), neither the
// safety-net poll nor the 100 ms fallback ever comes due, so a request
// queued by another connection is applied only because its notification
// woke the service.
#include <gtest/gtest.h>

#include "kiln/scheduler/request_queue.h"
#include "memory_service.h"
#include "postgres_server.h"
#include "state_backends.h"

namespace kiln::scheduler::testing {
namespace {

using nlohmann::json;

class RequestWakeupTest : public MemoryServiceTest {
 protected:
  void SetUp() override {
    KILN_SKIP_UNLESS_POSTGRES();
    database_ = test::freshStateDatabase(test::StateBackend::kPostgres,
                                         dir_.path() + "/pg");
    configure_ = [this](ServiceConfig& c) {
      c.databaseUrl = database_.url;
      c.requestSafetyPoll = std::chrono::hours(1);
    };
    MemoryServiceTest::SetUp();
  }

  // Whether the service's listener has run LISTEN on the database.
  bool listenerConnected(StateDb& db) {
    auto s = db.db().prepare(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = "
        "current_database() AND query LIKE 'LISTEN%'");
    return s.step() && s.getInt(0) > 0;
  }

  DatabaseSpec database_;
};

TEST_F(RequestWakeupTest, ARequestQueuedElsewhereIsAppliedOnItsNotification) {
  StateDb client(database_, StateDb::Existing{});
  // The listener's first wake-up (its connection's) is taken first, so
  // the request below can only be seen through its own notification.
  ASSERT_TRUE(test::pollUntil(
      [&] {
        svc_->pollOnce(0ms);
        return listenerConnected(client);
      },
      30s));
  svc_->pollOnce(0ms);
  for (int round = 0; round < 2; round++) {
    int64_t id = queueRequest(client, "cached-failure-clear", json::object());
    std::optional<json> answer;
    ASSERT_TRUE(test::pollUntil(
        [&] {
          svc_->pollOnce(0ms);
          answer = requestAnswer(client, id);
          return answer.has_value();
        },
        30s))
        << "request " << id << " was not applied";
    EXPECT_EQ((*answer)["cleared"], 0);
  }
}

}  // namespace
}  // namespace kiln::scheduler::testing
