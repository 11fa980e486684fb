// Query deadlines of the PostgreSQL backend (sql.h, setQueryTimeout): a
// server that hangs without closing its connections (its processes
// stopped, a lock wait that never ends) costs a statement its timeout and
// a transient SqlError, as a lost connection does; the connection is
// re-opened by the next statement once the server answers again.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "kiln/scheduler/sql.h"
#include "postgres_server.h"
#include "state_backends.h"
#include "test_support.h"

namespace kiln::scheduler {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

constexpr auto kTimeout = 1000ms;
// Past the timeout: the cancel request is sent off the caller's thread
// and the connection closed at once, so the caller waits little longer.
// (The TCP user timeout, 10 s, never fires: the server's kernel still
// acknowledges what it is sent.)
constexpr auto kSlack = 4s;

class SqlQueryTimeoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_SKIP_UNLESS_POSTGRES();
    spec_ =
        test::freshStateDatabase(test::StateBackend::kPostgres, dir_.path());
    c_ = openPostgresConnection(spec_.url, spec_.passwordFile, kTimeout);
    c_->exec("CREATE TABLE t (v BIGINT NOT NULL)");
  }

  int64_t count(SqlConnection& c) {
    auto s = c.prepare("SELECT count(*) FROM t");
    return s.step() ? s.getInt(0) : -1;
  }

  // Runs `f`, which must fail with the query timeout's transient error;
  // how long it took.
  template <class F>
  Steady::duration expectTimeout(F f) {
    auto start = Steady::now();
    try {
      f();
      ADD_FAILURE() << "no error";
    } catch (const SqlError& e) {
      EXPECT_TRUE(e.transient()) << e.what();
      EXPECT_THAT(e.what(), HasSubstr("no answer within 1000 ms"));
    }
    return Steady::now() - start;
  }

  TempDir dir_{"kiln-sql-timeout"};
  DatabaseSpec spec_;
  std::unique_ptr<SqlConnection> c_;
};

TEST_F(SqlQueryTimeoutTest, AStoppedServerFailsAQueryWithinTheTimeout) {
  EXPECT_EQ(count(*c_), 0);  // the statement is prepared, the server answers
  {
    test::PostgresPause pause(test::postgresServerForState());
    EXPECT_GE(pause.stopped(), 2u);  // the postmaster and the backends
    auto took = expectTimeout([&] { count(*c_); });
    EXPECT_GE(took, kTimeout);
    EXPECT_LT(took, kTimeout + kSlack);
  }  // resumed
  // The next statement opens a new session (its statements prepared again).
  EXPECT_EQ(count(*c_), 0);
  c_->exec("INSERT INTO t VALUES (1)");
  EXPECT_EQ(count(*c_), 1);
}

// Lost inside a transaction: the rest of it fails too (no statement of it
// runs on a new session), nothing of it is committed, and the next
// transaction runs once the server answers.
TEST_F(SqlQueryTimeoutTest, ATransactionCutByTheTimeoutIsNotCommitted) {
  {
    SqlConnection::Txn txn(*c_);
    c_->exec("INSERT INTO t VALUES (1)");  // queued in the pipeline
    test::PostgresPause pause(test::postgresServerForState());
    auto took = expectTimeout([&] { count(*c_); });
    EXPECT_LT(took, kTimeout + kSlack);
    pause.resume();
    EXPECT_THROW(count(*c_), SqlError);
  }  // rolled back
  EXPECT_EQ(count(*c_), 0);
  SqlConnection::Txn txn(*c_);
  c_->exec("INSERT INTO t VALUES (2)");
  txn.commit();
  EXPECT_EQ(count(*c_), 1);
}

// A lock wait that would never end: the statement fails at its timeout,
// and its cancel reaches the server, so the backend stops waiting (and
// ends, its client gone) while the other session still holds the lock.
TEST_F(SqlQueryTimeoutTest, AnEndlessLockWaitIsCancelled) {
  auto holder = openPostgresConnection(spec_.url, spec_.passwordFile);
  SqlConnection::Txn hold(*holder);
  holder->exec("LOCK TABLE t IN ACCESS EXCLUSIVE MODE");  // waits for it
  auto took = expectTimeout([&] { c_->exec("INSERT INTO t VALUES (1)"); });
  EXPECT_LT(took, kTimeout + kSlack);
  auto waiting = [&] {
    auto r = test::postgresServerForState().psql(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
        "'Lock'",
        spec_.url);
    return r.exitCode == 0 ? r.out : "psql failed: " + r.err;
  };
  EXPECT_TRUE(test::pollUntil([&] { return waiting() == "0\n"; }, 20s))
      << waiting();
  hold.commit();
  EXPECT_EQ(count(*c_), 0);  // the cancelled insert never happened
}

// Bulk work on a connection with a short timeout raises it for a while.
TEST_F(SqlQueryTimeoutTest, AScopeRaisesTheTimeoutAndRestoresIt) {
  EXPECT_EQ(c_->queryTimeout(), kTimeout);
  {
    QueryTimeoutAtLeast longer(*c_, 60s);
    EXPECT_EQ(c_->queryTimeout(), 60s);
    auto s = c_->prepare("SELECT pg_sleep(1.5)");
    EXPECT_TRUE(s.step());  // longer than the connection's usual limit
  }
  EXPECT_EQ(c_->queryTimeout(), kTimeout);
  {
    QueryTimeoutAtLeast unlimited(*c_, 0ms);
    EXPECT_EQ(c_->queryTimeout(), 0ms);
  }
  EXPECT_EQ(c_->queryTimeout(), kTimeout);
}

}  // namespace
}  // namespace kiln::scheduler
