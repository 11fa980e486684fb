// A farm whose state is in PostgreSQL (issue 31): the operator commands
// and `kiln scheduler --database URL` on a real server, a worker building
// the jobs, the farm's scheduler lock held in the database (a second
// scheduler is refused; a CLI command applies requests itself only while
// none runs), and a PostgreSQL restart the scheduler lives through.
// Schedulers here read the requests table only once an hour besides the
// LISTEN/NOTIFY wake-ups, so every request answered shows a wake-up
// carried it (after a restart too).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln_process.h"
#include "postgres_server.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

class PostgresFarm : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_SKIP_UNLESS_POSTGRES();
    pg_ = std::make_unique<test::PostgresServer>();
    setenv("PGPASSFILE", pg_->passFile().c_str(), 1);
    url_ = pg_->createDatabase("farm");
    coll_ = dir_.path() + "/coll";
    createDirs(coll_);
    writeFile(coll_ + "/default.nix", R"({
  a = derivation { name = "a"; system = "x86_64-linux"; builder = "/bin/sh";
                   args = [ "-c" "echo a > $out" ]; };
  b = derivation { name = "b"; system = "x86_64-linux"; builder = "/bin/sh";
                   args = [ "-c" "echo b > $out" ]; };
  broken = throw "this job is broken";
})");
  }

  // `kiln ARGS --database URL`.
  test::RunResult kiln(std::vector<std::string> args) {
    args.insert(args.begin(), test::kilnBinary());
    args.insert(args.end(), {"--database", url_});
    return test::run(args);
  }

  // `kiln scheduler` on the database, `extra` options after the rest.
  std::unique_ptr<test::KilnProcess> scheduler(
      const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {"scheduler",
                                     "--state-dir",
                                     dir_.path() + "/" + name,
                                     "--database",
                                     url_,
                                     "--listen",
                                     "tcp://127.0.0.1:*",
                                     "--insecure-plaintext",
                                     "--request-poll-ms",
                                     kHourMs};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<test::KilnProcess>(
        argv, dir_.path() + "/" + name + ".log");
  }

  // `kiln web` on the database; the process and its port.
  std::pair<std::unique_ptr<test::KilnProcess>, int> web(
      const std::string& name) {
    auto p = std::make_unique<test::KilnProcess>(
        std::vector<std::string>{"web", "--database", url_, "--listen",
                                 "127.0.0.1:0", "--state-dir",
                                 dir_.path() + "/s1"},
        dir_.path() + "/" + name + ".log");
    EXPECT_TRUE(p->waitForLog("web http://", 30s)) << p->log();
    std::string log = p->log();
    auto at = log.find("web http://127.0.0.1:") + 21;
    return std::pair(std::move(p), std::stoi(log.substr(at)));
  }

  static constexpr const char* kHourMs = "3600000";

  // The ZeroMQ endpoint a scheduler printed ("listening tcp://…").
  static std::string endpointOf(test::KilnProcess& sched) {
    std::string e = sched.log();
    e = e.substr(e.find("listening tcp://") + 10);
    return e.substr(0, e.find_first_of("\n "));
  }

  // A worker of the farm dialling `endpoint`.
  std::unique_ptr<test::KilnProcess> worker(const std::string& endpoint) {
    return std::make_unique<test::KilnProcess>(
        std::vector<std::string>{"worker", "--connect", endpoint,
                                 "--insecure-plaintext", "--state-dir",
                                 dir_.path() + "/w", "--private-store"},
        dir_.path() + "/w.log");
  }

  // Whether evaluation `id` has `n` finished builds within 60 s.
  bool evaluationFinishes(int64_t id, int n) {
    return test::pollUntil(
        [&] {
          auto e = evaluation(id);
          return e.is_object() && e.value("finished", 0) == n;
        },
        60s);
  }

  // Creates the jobset demo/main on the collection and asks for its
  // evaluation (a scheduler runs).
  void evaluateMain() {
    auto r = kiln({"jobset", "create", "--project", "demo", "main",
                   "--location", coll_, "--check-interval", "0"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
    r = kiln({"jobset", "eval", "--project", "demo", "main", "--json"});
    ASSERT_EQ(r.exitCode, 0) << r.err;
  }

  nlohmann::json evaluation(int64_t id) {
    auto r = kiln({"evaluation", "show", std::to_string(id), "--json"});
    if (r.exitCode != 0) return nullptr;
    return nlohmann::json::parse(r.out);
  }

  TempDir dir_{"kiln-pgfarm"};
  std::unique_ptr<test::PostgresServer> pg_;
  std::string url_, coll_;
};

TEST_F(PostgresFarm, BuildsAJobsetWithItsStateInPostgres) {
  auto r = kiln({"project", "create", "demo"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  r = kiln({"jobset", "create", "--project", "demo", "main", "--location",
            coll_, "--check-interval", "0"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  // No scheduler yet: the CLI holds the farm's lock and says so.
  r = kiln({"jobset", "eval", "--project", "demo", "main"});
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_THAT(r.err, HasSubstr("no scheduler is running"));

  auto sched = scheduler("s1");
  ASSERT_TRUE(sched->waitForLog("listening tcp://", 30s)) << sched->log();
  std::string endpoint = endpointOf(*sched);
  // A second scheduler on the same database is refused.
  auto second = scheduler("s2");
  ASSERT_TRUE(second->waitExit(30s)) << second->log();
  EXPECT_THAT(second->log(), HasSubstr("another scheduler is running on "
                                       "database"));

  r = kiln({"jobset", "eval", "--project", "demo", "main", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"eval\":1"));
  auto w = worker(endpoint);
  ASSERT_TRUE(evaluationFinishes(1, 2))
      << evaluation(1).dump() << sched->log() << w->log();
  auto e = evaluation(1);
  EXPECT_EQ(e.value("succeeded", 0), 2) << e.dump();
  r = kiln({"evaluation", "show", "1"});
  EXPECT_THAT(r.out, HasSubstr("this job is broken"));
  EXPECT_EQ(pg_->psql("SELECT count(*) FROM build_outputs", url_).out, "2\n");

  // Two web front ends of their own: the builds, and the scheduler's
  // workers from the snapshot it stores; one killed, the other answers.
  auto [web1, port1] = web("web1");
  auto [web2, port2] = web("web2");
  for (int port : {port1, port2}) {
    EXPECT_THAT(test::httpGet(port, "/api/eval/1"), HasSubstr("\"a\""));
    std::string workers;
    EXPECT_TRUE(test::pollUntil(
        [&] {
          workers = test::httpGet(port, "/api/workers");
          return workers.find("\"slots\"") != std::string::npos;
        },
        30s))
        << workers;
  }
  web1->kill();
  EXPECT_THAT(test::httpGet(port2, "/api/eval/1"), HasSubstr("\"a\""));
  EXPECT_EQ(web2->stop(), 0) << web2->log();

  // PostgreSQL goes away and comes back: the scheduler lives on, holds the
  // farm's lock again, and answers requests.
  pg_->stop();
  ASSERT_TRUE(sched->waitForLog("state database is unavailable", 30s))
      << sched->log();
  pg_->start();
  // "and is held again": the warning that dispatching pauses "until it is
  // held again" matched before, and the requests below then took the lock
  // offline while the scheduler was between sessions (it then saw another
  // holder and stopped; 1 run in 6).
  ASSERT_TRUE(sched->waitForLog(") and is held again", 30s)) << sched->log();
  EXPECT_TRUE(sched->running());
  r = kiln({"queue", "--json"});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  r = kiln({"cached-failure", "clear", "--json"});
  EXPECT_EQ(r.exitCode, 0) << r.err << sched->log();
  EXPECT_THAT(r.out, HasSubstr("\"cleared\":0"));
  EXPECT_EQ(w->stop(), 0);
  EXPECT_EQ(sched->stop(), 0) << sched->log();
}

// A standby scheduler on the same database waits while the active one
// holds the farm's lock and takes over within 10 s of its SIGKILL.
TEST_F(PostgresFarm, AStandbyTakesOverWhenTheActiveSchedulerDies) {
  auto r = kiln({"project", "create", "demo"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto active = scheduler("s1");
  ASSERT_TRUE(active->waitForLog("listening tcp://", 30s)) << active->log();
  auto standby = scheduler("s2", {"--standby"});
  ASSERT_TRUE(standby->waitForLog("waiting to take over", 30s))
      << standby->log();
  EXPECT_FALSE(standby->log().find("listening tcp://") != std::string::npos);
  active->kill();
  auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(standby->waitForLog("listening tcp://", 30s)) << standby->log();
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 10s);
  EXPECT_THAT(standby->log(), HasSubstr("taking over"));
  r = kiln({"jobset", "create", "--project", "demo", "main", "--location",
            coll_, "--check-interval", "0"});
  EXPECT_EQ(r.exitCode, 0) << r.err;
  r = kiln({"jobset", "eval", "--project", "demo", "main", "--json"});
  EXPECT_EQ(r.exitCode, 0) << r.err << standby->log();
  EXPECT_EQ(standby->stop(), 0) << standby->log();
}

// A worker that joins while PostgreSQL is away is welcomed from memory
// (nothing of a Hello waits for the database), and once the server is
// back the queued builds finish.
TEST_F(PostgresFarm, AWorkerJoiningWhileTheDatabaseIsAwayIsWelcomed) {
  ASSERT_EQ(kiln({"project", "create", "demo"}).exitCode, 0);
  auto sched = scheduler("s1");
  ASSERT_TRUE(sched->waitForLog("listening tcp://", 30s)) << sched->log();
  ASSERT_NO_FATAL_FAILURE(evaluateMain());
  pg_->stop();
  ASSERT_TRUE(sched->waitForLog("state database is unavailable", 30s))
      << sched->log();
  auto w = worker(endpointOf(*sched));
  EXPECT_TRUE(w->waitForLog("welcomed by scheduler", 30s))
      << w->log() << sched->log();
  EXPECT_THAT(sched->log(), HasSubstr("joined with"));
  EXPECT_FALSE(pg_->running());  // all of it while the server was down
  pg_->start();
  ASSERT_TRUE(evaluationFinishes(1, 2))
      << evaluation(1).dump() << sched->log() << w->log();
  EXPECT_EQ(evaluation(1).value("succeeded", 0), 2);
  EXPECT_EQ(w->stop(), 0);
  EXPECT_EQ(sched->stop(), 0) << sched->log();
}

// The server hangs without closing its connections (its processes are
// stopped: SIGSTOP) while builds wait in the scheduler's memory: the
// loop's statements fail at their deadline (--database-timeout-ms)
// instead of blocking it, so a worker joining meanwhile is welcomed; once
// the server resumes, the scheduler catches up and every build finishes.
TEST_F(PostgresFarm, AWorkerJoiningWhileTheDatabaseHangsIsWelcomed) {
  ASSERT_EQ(kiln({"project", "create", "demo"}).exitCode, 0);
  auto sched = scheduler("s1", {"--database-timeout-ms", "2000"});
  ASSERT_TRUE(sched->waitForLog("listening tcp://", 30s)) << sched->log();
  ASSERT_NO_FATAL_FAILURE(evaluateMain());
  // The evaluation's builds are recorded (and in the scheduler's memory).
  ASSERT_TRUE(test::pollUntil(
      [&] {
        auto e = evaluation(1);
        return e.is_object() && e.value("builds", 0) == 2;
      },
      60s))
      << evaluation(1).dump() << sched->log();
  std::unique_ptr<test::KilnProcess> w;
  {
    test::PostgresPause pause(*pg_);
    ASSERT_TRUE(sched->waitForLog("state database is unavailable", 30s))
        << sched->log();
    auto joining = std::chrono::steady_clock::now();
    w = worker(endpointOf(*sched));
    EXPECT_TRUE(w->waitForLog("welcomed by scheduler", 30s))
        << w->log() << sched->log();
    double welcomedMs = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - joining)
                            .count();
    EXPECT_THAT(sched->log(), HasSubstr("joined with"));
    EXPECT_TRUE(sched->running());
    std::cout << "a worker joining while the database hung was welcomed "
                 "within "
              << welcomedMs << " ms (its start and the polling included)\n";
    RecordProperty("hung_database_welcome_ms", std::to_string(welcomedMs));
  }  // the server resumes
  ASSERT_TRUE(evaluationFinishes(1, 2))
      << evaluation(1).dump() << sched->log() << w->log();
  EXPECT_EQ(evaluation(1).value("succeeded", 0), 2);
  EXPECT_EQ(w->stop(), 0);
  EXPECT_EQ(sched->stop(), 0) << sched->log();
}

// Only the lock's session ends (pg_terminate_backend; the server stays
// up) while a standby waits: the active notices before its next dispatch
// and either holds the lock again or stops, before the standby can
// schedule (the writers' fence makes the standby wait for the active's
// sessions). How long the active took to notice is reported.
TEST_F(PostgresFarm, TheActiveNoticesAtOnceThatItsLockSessionEnded) {
  ASSERT_EQ(kiln({"project", "create", "demo"}).exitCode, 0);
  auto active = scheduler("s1");
  ASSERT_TRUE(active->waitForLog("listening tcp://", 30s)) << active->log();
  auto standby = scheduler("s2", {"--standby"});
  ASSERT_TRUE(standby->waitForLog("waiting to take over", 30s))
      << standby->log();
  auto t = pg_->psql(
      "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype "
      "= 'advisory' AND objid = 7164351 AND granted",
      url_);
  ASSERT_EQ(t.exitCode, 0) << t.err;
  ASSERT_EQ(t.out, "1\n");
  auto terminated = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      active->waitForLog("session holding the farm's scheduler lock "
                         "ended",
                         30s))
      << active->log();
  double noticedMs = std::chrono::duration<double, std::milli>(
                         std::chrono::steady_clock::now() - terminated)
                         .count();
  // Either it holds the lock again, or the standby won it and the active
  // stopped (then the standby took over).
  ASSERT_TRUE(test::pollUntil(
      [&] {
        std::string log = active->log();
        return log.find(") and is held again") != std::string::npos ||
               log.find("this one stops scheduling") != std::string::npos;
      },
      30s))
      << active->log();
  if (active->log().find("this one stops scheduling") != std::string::npos) {
    EXPECT_TRUE(active->waitExit(30s));
    EXPECT_TRUE(standby->waitForLog("listening tcp://", 30s)) << standby->log();
  } else {
    EXPECT_TRUE(active->running());
  }
  std::cout << "the active noticed its lock session's end within " << noticedMs
            << " ms (the polling of its log included)\n";
  RecordProperty("lock_session_end_noticed_ms", std::to_string(noticedMs));
  for (auto* p : {active.get(), standby.get()})
    if (p->running()) p->stop();
}

// A change made through `kiln web` reaches the scheduler by NOTIFY: with
// the requests table read once an hour, each request is answered while
// the web waits for it (its 30 s limit), and the time each took is
// reported (not asserted: the machine may be loaded).
TEST_F(PostgresFarm, ARequestThroughTheWebWakesTheScheduler) {
  auto token = kiln({"token", "create", "--scope", "operate"});
  ASSERT_EQ(token.exitCode, 0) << token.err;
  std::string bearer = token.out.substr(0, token.out.find('\n'));
  auto sched = scheduler("s1");
  ASSERT_TRUE(sched->waitForLog("listening tcp://", 30s)) << sched->log();
  auto [webProc, port] = web("web");
  std::string url =
      "http://127.0.0.1:" + std::to_string(port) + "/api/cached-failures/clear";
  std::vector<double> ms;
  for (int i = 0; i < 10; i++) {
    auto start = std::chrono::steady_clock::now();
    auto r = test::run({"curl", "-s", "-m", "60", "-X", "POST", "-H",
                        "Authorization: Bearer " + bearer, url});
    ms.push_back(std::chrono::duration<double, std::milli>(
                     std::chrono::steady_clock::now() - start)
                     .count());
    ASSERT_EQ(r.exitCode, 0) << r.err;
    ASSERT_THAT(r.out, HasSubstr("\"cleared\":0")) << r.out << sched->log();
  }
  std::sort(ms.begin(), ms.end());
  std::string figures = "web request answered in ms: median " +
                        std::to_string(ms[ms.size() / 2]) + ", max " +
                        std::to_string(ms.back());
  RecordProperty("request_latency", figures);
  std::cout << figures << "\n";
  EXPECT_EQ(webProc->stop(), 0) << webProc->log();
  EXPECT_EQ(sched->stop(), 0) << sched->log();
}

TEST_F(PostgresFarm, RefusesAPasswordInTheUrlAndAForeignUrl) {
  auto r = test::run({test::kilnBinary(), "queue", "--database",
                      "postgresql://kiln:secret@127.0.0.1:1/kiln"});
  EXPECT_NE(r.exitCode, 0);
  EXPECT_THAT(r.err, HasSubstr("PGPASSFILE"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("secret@")));
  r = test::run(
      {test::kilnBinary(), "queue", "--database", "mysql://127.0.0.1/kiln"});
  EXPECT_NE(r.exitCode, 0);
  EXPECT_THAT(r.err, HasSubstr("not a PostgreSQL URL"));
  r = test::run({test::kilnBinary(), "scheduler", "--state-dir",
                 dir_.path() + "/s", "--listen", "tcp://127.0.0.1:*",
                 "--insecure-plaintext", "--database",
                 "postgresql://kiln:secret@127.0.0.1:1/kiln"});
  EXPECT_EQ(r.exitCode, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("PGPASSFILE"));
  // kiln web checks its options before it connects.
  r = test::run({test::kilnBinary(), "web", "--database", url_, "--listen",
                 "127.0.0.1:0", "--cache-compression", "lz4"});
  EXPECT_EQ(r.exitCode, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--cache-compression must be zstd, xz or none"));
  r = test::run({test::kilnBinary(), "web", "--listen", "127.0.0.1:0"});
  EXPECT_EQ(r.exitCode, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--database is required"));
}

}  // namespace
}  // namespace kiln
