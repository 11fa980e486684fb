// `kiln worker --connect A,B` (issue 31, scheduler fail-over). First the
// worker's side alone: it follows scheduler A; when A is killed it moves on
// to B, which starts only then (a standby listens only once it holds the
// farm's lock), and joins it; each scheduler has a SQLite state directory
// of its own. Then a farm in PostgreSQL with a real standby (`kiln
// scheduler --standby`): a step building when the active scheduler is
// killed is adopted by the standby that takes over, and built once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "kiln/common/file.h"
#include "kiln_process.h"
#include "postgres_server.h"
#include "test_support.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;
using Args = std::vector<std::string>;

class WorkerFailover : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "--private-store needs root";
    int a = test::freeLoopbackPort();
    int b = test::freeLoopbackPort();
    while (b == a) b = test::freeLoopbackPort();
    endpointA_ = "tcp://127.0.0.1:" + std::to_string(a);
    endpointB_ = "tcp://127.0.0.1:" + std::to_string(b);
  }

  // `kiln scheduler` on `endpoint` (plus `extra`), its state directory
  // `state` (default: `name`); waits until it listens unless it is a
  // standby.
  std::unique_ptr<test::KilnProcess> scheduler(const std::string& name,
                                               const std::string& endpoint,
                                               const Args& extra = {},
                                               std::string state = "") {
    if (state.empty()) state = name;
    Args args = {"scheduler", "--state-dir", dir_.path() + "/" + state,
                 "--listen",  endpoint,      "--insecure-plaintext"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto p = std::make_unique<test::KilnProcess>(
        args, dir_.path() + "/" + name + ".log");
    bool standby =
        std::find(extra.begin(), extra.end(), "--standby") != extra.end();
    if (!standby) {
      EXPECT_TRUE(p->waitForLog("listening ", 30s)) << p->log();
    }
    return p;
  }

  // `kiln worker` "w1" following A, then B.
  std::unique_ptr<test::KilnProcess> worker() {
    return std::make_unique<test::KilnProcess>(
        Args{"worker", "--connect", endpointA_ + "," + endpointB_,
             "--insecure-plaintext", "--state-dir", dir_.path() + "/w",
             "--private-store", "--sandbox", "none", "--worker-id", "w1"},
        dir_.path() + "/w.log");
  }

  TempDir dir_{"kiln-failover"};
  std::string endpointA_, endpointB_;
};

TEST_F(WorkerFailover, TheWorkerFollowsTheNextSchedulerWhenItsOwnDies) {
  auto a = scheduler("a", endpointA_);
  auto w = worker();
  ASSERT_TRUE(w->waitForLog("worker: following scheduler " + endpointA_, 30s))
      << w->log();
  ASSERT_TRUE(a->waitForLog("worker w1 joined", 10s)) << a->log();

  a->kill();
  ASSERT_TRUE(w->waitForLog(
      "lost the connection to the scheduler at " + endpointA_, 10s))
      << w->log();
  auto b = scheduler("b", endpointB_);
  EXPECT_TRUE(w->waitForLog("worker: following scheduler " + endpointB_, 10s))
      << w->log();
  EXPECT_TRUE(b->waitForLog("worker w1 joined", 10s)) << b->log();
  EXPECT_TRUE(w->running()) << w->log();
  EXPECT_EQ(w->stop(), 0) << w->log();
  EXPECT_EQ(b->stop(), 0) << b->log();
}

TEST_F(WorkerFailover, AStepBuildingWhenTheActiveDiesIsAdoptedByTheStandby) {
  KILN_SKIP_UNLESS_POSTGRES();
  if (!test::haveProgram("nix-instantiate"))
    GTEST_SKIP() << "evaluations need nix-instantiate (Nix) on PATH";
  test::PostgresServer pg;
  setenv("PGPASSFILE", pg.passFile().c_str(), 1);
  std::string url = pg.createDatabase("farm");
  auto kiln = [&](Args args) {
    args.insert(args.begin(), test::kilnBinary());
    args.insert(args.end(), {"--database", url});
    return test::run(args);
  };
  // The build notes each run, then waits until the test lets it finish.
  std::string runs = dir_.path() + "/runs", go = dir_.path() + "/go";
  createDirs(dir_.path() + "/coll");
  writeFile(dir_.path() + "/coll/default.nix",
            "{ slow = derivation { name = \"slow\"; system = \"x86_64-linux\";"
            " builder = \"/bin/sh\"; PATH = \"/usr/bin:/bin\"; args = [ \"-c\""
            " \"echo run >> " +
                runs + "; while [ ! -e " + go +
                " ]; do sleep 0.1; done; echo done > $out\" ]; }; }\n");
  ASSERT_EQ(kiln({"project", "create", "demo"}).exitCode, 0);
  ASSERT_EQ(kiln({"jobset", "create", "--project", "demo", "main", "--location",
                  dir_.path() + "/coll", "--check-interval", "0"})
                .exitCode,
            0);
  // One state directory, as on storage both scheduler hosts mount: the
  // central store holds the .drv files the standby needs.
  auto active = scheduler("a", endpointA_, {"--database", url}, "s");
  auto standby =
      scheduler("b", endpointB_, {"--database", url, "--standby"}, "s");
  ASSERT_TRUE(standby->waitForLog("waiting to take over", 30s))
      << standby->log();
  auto w = worker();
  ASSERT_TRUE(w->waitForLog("worker: following scheduler " + endpointA_, 30s))
      << w->log();
  auto r = kiln({"jobset", "eval", "--project", "demo", "main"});
  ASSERT_EQ(r.exitCode, 0) << r.err;
  ASSERT_TRUE(test::pollUntil([&] { return pathExists(runs); }, 60s))
      << active->log() << w->log();

  active->kill();
  ASSERT_TRUE(standby->waitForLog("listening ", 30s)) << standby->log();
  ASSERT_TRUE(w->waitForLog("worker: following scheduler " + endpointB_, 30s))
      << w->log();
  ASSERT_TRUE(standby->waitForLog("adopted", 30s)) << standby->log();
  writeFile(go, "");
  auto finished = [&] {
    auto show = kiln({"evaluation", "show", "1", "--json"});
    if (show.exitCode != 0) return nlohmann::json::object();
    return nlohmann::json::parse(show.out);
  };
  ASSERT_TRUE(test::pollUntil(
      [&] { return finished().value("finished", 0) == 1; }, 60s))
      << finished().dump() << standby->log() << w->log();
  EXPECT_EQ(finished().value("succeeded", 0), 1) << finished().dump();
  EXPECT_EQ(readFile(runs), "run\n");  // built once, on the same worker
  EXPECT_EQ(w->stop(), 0) << w->log();
  EXPECT_EQ(standby->stop(), 0) << standby->log();
}

}  // namespace
}  // namespace kiln
