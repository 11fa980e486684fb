// The request listener (sql_listener.h, listenForRequests): on a real
// PostgreSQL server a queued request wakes it, a rolled-back one does not,
// and it listens again after the server restarts, waking once for what it
// may have missed; SQLite has none. Waits are poll()s with a deadline.
#include "kiln/scheduler/sql_listener.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>

#include "kiln/common/file.h"
#include "kiln/scheduler/request_queue.h"
#include "postgres_server.h"
#include "state_backends.h"
#include "test_support.h"

namespace kiln::scheduler {
namespace {

using namespace std::chrono_literals;

// Whether `fd` becomes readable within `timeout`.
bool readableWithin(int fd, std::chrono::milliseconds timeout) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(timeout.count())) > 0 &&
         (p.revents & POLLIN);
}

class SqlListenerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_SKIP_UNLESS_POSTGRES();
    spec_ = test::freshStateDatabase(test::StateBackend::kPostgres,
                                     dir_.path());
    StateDb schema(spec_);  // creates the tables
  }

  // A listener for requests that is listening, its first wake-up (the
  // connection's) taken.
  std::unique_ptr<SqlListener> listening() {
    auto l = listenForRequests(spec_, {10ms, 200ms});
    EXPECT_TRUE(l);
    if (!l) return l;
    EXPECT_TRUE(test::pollUntil([&] { return l->listening(); }, 30s));
    EXPECT_TRUE(readableWithin(l->wakeFd(), 30s));
    EXPECT_TRUE(l->take());
    EXPECT_FALSE(l->take());
    return l;
  }

  TempDir dir_{"kiln-listener"};
  DatabaseSpec spec_;
};

TEST_F(SqlListenerTest, ARequestQueuedOnAnotherConnectionWakesIt) {
  auto l = listening();
  ASSERT_TRUE(l);
  StateDb db(spec_, StateDb::Existing{});
  queueRequest(db, "queue", nlohmann::json::object());
  ASSERT_TRUE(readableWithin(l->wakeFd(), 30s));
  EXPECT_TRUE(l->take());
  EXPECT_FALSE(l->take());
}

TEST_F(SqlListenerTest, ARolledBackRequestDoesNotWakeIt) {
  auto l = listening();
  ASSERT_TRUE(l);
  StateDb db(spec_, StateDb::Existing{});
  {
    StateDb::Transaction txn(db);
    db.addRequest("queue", "{}");
  }  // rolled back: its notification is dropped with it
  db.addRequest("queue", "{}");
  ASSERT_TRUE(readableWithin(l->wakeFd(), 30s));
  EXPECT_TRUE(l->take());
  // One wake-up, for the committed request; the server delivers
  // notifications in commit order, so the dropped one cannot follow.
  EXPECT_FALSE(l->take());
  EXPECT_EQ(db.pendingRequests().size(), 1u);
}

TEST_F(SqlListenerTest, ListensAgainAfterTheServerRestarts) {
  auto l = listening();
  ASSERT_TRUE(l);
  test::postgresServerForState().stop();
  ASSERT_TRUE(test::pollUntil([&] { return !l->listening(); }, 30s));
  test::postgresServerForState().start();
  ASSERT_TRUE(test::pollUntil([&] { return l->listening(); }, 30s));
  // Requests queued while it was away were not notified to it: the new
  // connection wakes it once to look.
  ASSERT_TRUE(readableWithin(l->wakeFd(), 30s));
  EXPECT_TRUE(l->take());
  StateDb db(spec_, StateDb::Existing{});
  queueRequest(db, "queue", nlohmann::json::object());
  ASSERT_TRUE(readableWithin(l->wakeFd(), 30s));
  EXPECT_TRUE(l->take());
}

TEST(SqlListenerSqlite, HasNoListenerAndQueuesWithoutNotifying) {
  TempDir dir("kiln-listener");
  auto spec = DatabaseSpec::inStateDir(dir.path());
  EXPECT_EQ(listenForRequests(spec), nullptr);
  StateDb db(spec);
  EXPECT_GT(queueRequest(db, "queue", nlohmann::json::object()), 0);
  EXPECT_EQ(db.pendingRequests().size(), 1u);
}

}  // namespace
}  // namespace kiln::scheduler
