// Processes of a real farm (tests/support/farm.h) killed or stopped in the
// middle of the work (issue 4): a worker SIGKILLed mid-build, the scheduler
// SIGKILLed mid-queue and restarted, a worker SIGSTOPped and declared lost.
// Builders that must be "in the middle" wait for a release file the test
// creates, so nothing depends on timing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "farm.h"
#include "kiln/common/file.h"
#include "kiln/store/local_store.h"
#include "test_support.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;


// A collection: `slow` touches `<dir>/started` and waits for
// `<dir>/release`; `after` depends on it.
std::string gatedCollection(const test::Farm& farm) {
  return farm.writeCollection("gated", R"(let
  slow = mk "slow" ''
    echo running; touch )" + farm.dir() + R"(/started
    while [ ! -e )" + farm.dir() + R"(/release ]; do sleep 0.05; done
    echo slow-output > $out'' [];
in { inherit slow; after = mk "after" "cat $deps > $out" [ slow ]; })");
}

test::FarmStep stepNamed(const test::Farm& farm, const std::string& suffix) {
  for (auto& s : farm.steps())
    if (s.drvPath.size() > suffix.size() &&
        s.drvPath.compare(s.drvPath.size() - suffix.size(), suffix.size(),
                          suffix) == 0)
      return s;
  throw Error("no step ending in " + suffix);
}

// Every output of every build is valid in the central store, the store
// verifies, and no temporary upload file was left behind.
void expectCleanCentralStore(const test::Farm& farm) {
  store::LocalStore central(farm.stateDir());
  for (auto& o : farm.view()->outputs())
    EXPECT_TRUE(central.isValid(central.parsePath(o.path))) << o.path;
  auto r = farm.kiln({"store", "verify"});
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(farm.stateDir() + "/tmp"));
}

test::FarmOptions fastFarm(std::chrono::milliseconds heartbeat) {
  test::FarmOptions o;
  o.heartbeat = heartbeat;
  o.schedulerArgs = {"--retry-backoff-ms", "100"};
  return o;
}

// Starts `slow` on worker 0 (the only one at first), then adds worker 1.
int64_t startSlowOnWorker0(test::Farm& farm) {
  std::string coll = gatedCollection(farm);
  farm.startScheduler();
  farm.addWorker();
  if (!farm.waitForWorkers(1, 60s)) throw Error("worker 0 did not join");
  farm.createJobset("p", "j", coll);
  int64_t eval = farm.evaluate("p", "j");
  if (!test::pollUntil([&] { return pathExists(farm.dir() + "/started"); },
                       60s))
    throw Error("slow did not start: " + farm.worker(0).log());
  deletePath(farm.dir() + "/started");
  farm.addWorker();
  if (!farm.waitForWorkers(2, 60s)) throw Error("worker 1 did not join");
  return eval;
}

TEST(FarmCrash, AWorkerKilledMidBuildHasItsStepFinishedElsewhere) {
  KILN_SKIP_UNLESS_FARM_CAN_RUN();
  test::Farm farm(fastFarm(300ms));
  int64_t eval = startSlowOnWorker0(farm);
  EXPECT_EQ(stepNamed(farm, "-slow.drv").worker, "worker-0");
  farm.killWorker(0);
  // Worker 1 gets the step once worker 0 is declared lost.
  ASSERT_TRUE(test::pollUntil(
      [&] { return pathExists(farm.dir() + "/started"); }, 60s))
      << farm.scheduler().log();
  writeFile(farm.dir() + "/release", "");
  ASSERT_TRUE(farm.waitForBuilds(eval, 120s))
      << farm.scheduler().log() << farm.worker(1).log();
  for (auto& b : farm.builds(eval)) EXPECT_EQ(b.status, 0) << b.job;
  auto slow = stepNamed(farm, "-slow.drv");
  EXPECT_EQ(slow.attempts, 2);
  EXPECT_EQ(slow.worker, "worker-1");
  EXPECT_EQ(stepNamed(farm, "-after.drv").attempts, 1);
  EXPECT_THAT(farm.scheduler().log(), HasSubstr("worker-0 lost"));
  expectCleanCentralStore(farm);
}

TEST(FarmCrash, AWorkerThatStopsAnsweringIsLostWithinThreeHeartbeats) {
  KILN_SKIP_UNLESS_FARM_CAN_RUN();
  const auto heartbeat = 500ms;
  test::Farm farm(fastFarm(heartbeat));
  int64_t eval = startSlowOnWorker0(farm);
  auto paused = std::chrono::steady_clock::now();
  farm.pauseWorker(0);
  ASSERT_TRUE(farm.waitForWorkers(1, 60s));
  auto lostAfter = std::chrono::steady_clock::now() - paused;
  // Three intervals of silence, plus the scheduler's loop (50 ms) and the
  // metrics poll; a generous margin for a loaded machine.
  EXPECT_LT(lostAfter, 3 * heartbeat + 1000ms);
  RecordProperty(
      "lost_after_ms",
      std::to_string(
          std::chrono::duration_cast<std::chrono::milliseconds>(lostAfter)
              .count()));
  EXPECT_THAT(farm.scheduler().log(),
              HasSubstr("worker-0 lost: no heartbeat for 3 intervals"));
  // Its step moves to worker 1.
  ASSERT_TRUE(test::pollUntil(
      [&] { return pathExists(farm.dir() + "/started"); }, 60s))
      << farm.scheduler().log();
  writeFile(farm.dir() + "/release", "");
  ASSERT_TRUE(farm.waitForBuilds(eval, 120s)) << farm.scheduler().log();
  for (auto& b : farm.builds(eval)) EXPECT_EQ(b.status, 0) << b.job;
  auto slow = stepNamed(farm, "-slow.drv");
  EXPECT_EQ(slow.attempts, 2);
  EXPECT_EQ(slow.worker, "worker-1");
  // Woken up, worker 0 is told it is unknown, says Hello again and rejoins;
  // the result of its stale build is refused.
  farm.resumeWorker(0);
  EXPECT_TRUE(farm.waitForWorkers(2, 60s)) << farm.worker(0).log();
  EXPECT_TRUE(farm.worker(0).running());
  expectCleanCentralStore(farm);
  EXPECT_EQ(farm.stopWorker(0), 0);
  EXPECT_EQ(farm.stopWorker(1), 0);
}

TEST(FarmCrash, ASchedulerKilledMidQueueResumesWithoutRebuilding) {
  KILN_SKIP_UNLESS_FARM_CAN_RUN();
  test::Farm farm(fastFarm(300ms));
  // 12 independent steps of 0.3 s and one that needs them all.
  std::string dir =
      farm.writeCollection("queue", test::partsCollection(12, false));
  farm.startScheduler();
  farm.addWorker();
  farm.addWorker();
  ASSERT_TRUE(farm.waitForWorkers(2, 60s));
  farm.createJobset("p", "j", dir);
  int64_t eval = farm.evaluate("p", "j");
  auto finished = [&] {
    std::map<std::string, test::FarmStep> done;
    for (auto& s : farm.steps())
      if (s.finished) done.emplace(s.drvPath, s);
    return done;
  };
  ASSERT_TRUE(test::pollUntil([&] { return finished().size() >= 3; }, 120s))
      << farm.scheduler().log();
  farm.killScheduler();
  // The database as the killed scheduler left it.
  std::map<std::string, test::FarmStep> atKill;
  for (auto& s : farm.steps()) atKill.emplace(s.drvPath, s);
  size_t done = 0;
  for (auto& [d, s] : atKill) done += s.finished;
  std::map<std::string, std::string> stopTimesAtKill;
  for (auto& s : farm.steps())
    if (s.finished) stopTimesAtKill[s.drvPath] = std::to_string(s.stopMs);
  ASSERT_LT(done, 13u) << "the queue ran out before the kill";

  farm.startScheduler();
  ASSERT_TRUE(farm.waitForBuilds(eval, 120s))
      << farm.scheduler().log() << farm.worker(0).log();
  for (auto& b : farm.builds(eval)) EXPECT_EQ(b.status, 0) << b.error;
  auto after = farm.steps();
  ASSERT_EQ(after.size(), 13u);
  for (auto& s : after) {
    EXPECT_TRUE(s.finished) << s.drvPath;
    EXPECT_EQ(s.status, 0) << s.drvPath << ": " << s.error;
    auto was = atKill.find(s.drvPath);
    if (was == atKill.end() || was->second.attempts == 0) {
      // Never dispatched before the kill: dispatched once after it.
      EXPECT_EQ(s.attempts, 1) << s.drvPath;
    } else if (was->second.finished) {
      // Finished before the kill: never run again.
      EXPECT_EQ(s.attempts, was->second.attempts) << s.drvPath;
    } else {
      // Running at the kill: retried, within the retry limit (3).
      EXPECT_LE(s.attempts, 1 + 3) << s.drvPath;
    }
  }
  // Nor were their rows touched.
  std::map<std::string, std::string> stopTimes;
  for (auto& s : farm.steps())
    if (s.finished) stopTimes[s.drvPath] = std::to_string(s.stopMs);
  for (auto& [drv, stop] : stopTimesAtKill)
    EXPECT_EQ(stopTimes[drv], stop) << drv;
  EXPECT_THAT(farm.scheduler().log(), HasSubstr("restored 1 unfinished"));
  expectCleanCentralStore(farm);
}

// A collection whose `slow` appends a line to `<dir>/runs` each time its
// builder runs, touches `<dir>/started` and waits for `<dir>/release`;
// `after` depends on it.
std::string countedCollection(const test::Farm& farm) {
  return farm.writeCollection("counted", R"(let
  slow = mk "slow" ''
    echo run >> )" + farm.dir() + R"(/runs; touch )" + farm.dir() + R"(/started
    while [ ! -e )" + farm.dir() + R"(/release ]; do sleep 0.05; done
    echo slow-output > $out'' [];
in { inherit slow; after = mk "after" "cat $deps > $out" [ slow ]; })");
}

// Starts a scheduler and one worker, evaluates the counted collection and
// sets `eval` to that evaluation once `slow` runs.
void startSlowOnOneWorker(test::Farm& farm, int64_t& eval) {
  std::string coll = countedCollection(farm);
  farm.startScheduler();
  farm.addWorker();
  ASSERT_TRUE(farm.waitForWorkers(1, 60s));
  farm.createJobset("p", "j", coll);
  eval = farm.evaluate("p", "j");
  ASSERT_TRUE(test::pollUntil(
      [&] { return pathExists(farm.dir() + "/started"); }, 60s))
      << farm.worker(0).log();
}

// Kills the scheduler while `slow` runs on the only worker; `finishFirst`
// lets the build end (and its outputs wait on the worker) before the
// scheduler comes back. Either way the restarted scheduler adopts the
// step: its builder ran once, its attempt count is unchanged.
void expectAdoptedAcrossASchedulerKill(bool finishFirst) {
  test::Farm farm(fastFarm(300ms));
  int64_t eval = 0;
  ASSERT_NO_FATAL_FAILURE(startSlowOnOneWorker(farm, eval));
  farm.killScheduler();
  EXPECT_EQ(stepNamed(farm, "-slow.drv").attempts, 1);
  if (finishFirst) {
    ASSERT_TRUE(test::pollUntil(
        [&] {
          return farm.worker(0).log().find("lost the connection") !=
                 std::string::npos;
        },
        60s))
        << farm.worker(0).log();
    writeFile(farm.dir() + "/release", "");
    ASSERT_TRUE(test::pollUntil(
        [&] {
          return farm.worker(0).log().find("built while disconnected") !=
                 std::string::npos;
        },
        60s))
        << farm.worker(0).log();
  }
  farm.startScheduler();
  ASSERT_TRUE(test::pollUntil(
      [&] {
        return farm.scheduler().log().find(": adopted (attempt 1)") !=
               std::string::npos;
      },
      60s))
      << farm.scheduler().log() << farm.worker(0).log();
  if (!finishFirst) writeFile(farm.dir() + "/release", "");
  ASSERT_TRUE(farm.waitForBuilds(eval, 120s))
      << farm.scheduler().log() << farm.worker(0).log();
  for (auto& b : farm.builds(eval)) EXPECT_EQ(b.status, 0) << b.error;
  EXPECT_EQ(stepNamed(farm, "-slow.drv").attempts, 1);
  EXPECT_EQ(stepNamed(farm, "-after.drv").attempts, 1);
  EXPECT_EQ(readFile(farm.dir() + "/runs"), "run\n");
  EXPECT_THAT(farm.scheduler().log(), HasSubstr("holding 1 steps"));
  expectCleanCentralStore(farm);
}

TEST(FarmCrash, AStepRunningWhenTheSchedulerIsKilledIsAdoptedNotRebuilt) {
  KILN_SKIP_UNLESS_FARM_CAN_RUN();
  expectAdoptedAcrossASchedulerKill(false);
}

TEST(FarmCrash, AStepBuiltWhileTheSchedulerIsDownIsUploadedWhenItReturns) {
  KILN_SKIP_UNLESS_FARM_CAN_RUN();
  expectAdoptedAcrossASchedulerKill(true);
}

// The worker running `slow` is SIGKILLed and started again (same name and
// state) while the scheduler stays up: the new process holds no step, so
// the scheduler retries it (on the same worker, the only one) and the
// collection finishes; `slow` ran twice, its second attempt succeeded.
TEST(FarmCrash, AWorkerRestartedWhileTheSchedulerRunsGetsItsStepAgain) {
  KILN_SKIP_UNLESS_FARM_CAN_RUN();
  test::Farm farm(fastFarm(300ms));
  int64_t eval = 0;
  ASSERT_NO_FATAL_FAILURE(startSlowOnOneWorker(farm, eval));
  farm.killWorker(0);
  deletePath(farm.dir() + "/started");
  farm.startWorker(0);
  ASSERT_TRUE(test::pollUntil(
      [&] { return pathExists(farm.dir() + "/started"); }, 60s))
      << farm.scheduler().log() << farm.worker(0).log();
  writeFile(farm.dir() + "/release", "");
  ASSERT_TRUE(farm.waitForBuilds(eval, 120s))
      << farm.scheduler().log() << farm.worker(0).log();
  for (auto& b : farm.builds(eval)) EXPECT_EQ(b.status, 0) << b.error;
  EXPECT_EQ(stepNamed(farm, "-slow.drv").attempts, 2);
  EXPECT_EQ(stepNamed(farm, "-after.drv").attempts, 1);
  EXPECT_EQ(readFile(farm.dir() + "/runs"), "run\nrun\n");
  EXPECT_EQ(farm.metric("kiln_steps_adopted_total"), 0.0);
  expectCleanCentralStore(farm);
}

}  // namespace
}  // namespace kiln
