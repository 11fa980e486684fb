// Placement by what workers report, on a real farm (issue 33): `kiln
// worker` reads its pressure and free memory from a folder laid out like
// /proc (--debug-proc-root, the test's stand-in for /proc/pressure and
// /proc/meminfo).
// - A worker announcing --max-memory-pressure 20 under artificial memory
//   pressure gets no step, and `kiln queue` says why; once the pressure
//   falls, the step runs.
// - A build that ran out of memory on a worker reporting little free
//   memory is retried on the one reporting more; a job whose last build
//   peaked above a worker's free memory goes to the other.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "farm.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct FarmStepView {
  int status = -1;
  test::FarmStep step;
};

void setMemoryPressure(const std::string& proc, double avg10) {
  writeFile(proc + "/pressure/memory",
            "some avg10=" + std::to_string(avg10) +
                " avg60=0.00 avg300=0.00 total=1\n"
                "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
}

TEST(FarmPressure, AWorkerUnderMemoryPressureGetsNoStepUntilItRecovers) {
  std::string why;
  if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
  test::Farm farm;
  std::string proc = farm.dir() + "/proc";
  std::filesystem::create_directories(proc + "/pressure");
  writeFile(proc + "/meminfo", "MemAvailable:   4194304 kB\n");
  setMemoryPressure(proc, 42);
  auto one = farm.writeCollection(
      "one", "{ one = mk \"one\" \"echo one > $out\" []; }");
  farm.startScheduler();
  test::WorkerOptions w;
  w.extraArgs = {"--max-memory-pressure", "20", "--debug-proc-root", proc};
  farm.addWorker(w);
  ASSERT_TRUE(farm.waitForWorkers(1, 60s)) << farm.worker(0).log();
  farm.createJobset("p", "one", one);
  int64_t eval = farm.evaluate("p", "one");

  std::string expected =
      "worker " + farm.workerName(0) + ": memory pressure 42% > 20%";
  std::string queue;
  ASSERT_TRUE(test::pollUntil(
      [&] {
        queue = farm.kiln({"queue"}).out;
        return queue.find(expected) != std::string::npos;
      },
      60s))
      << queue << farm.scheduler().log();
  for (auto& s : farm.steps()) EXPECT_EQ(s.attempts, 0) << s.drvPath;

  setMemoryPressure(proc, 3.5);
  ASSERT_TRUE(farm.waitForBuilds(eval, 60s)) << farm.worker(0).log();
  for (auto& b : farm.builds(eval)) EXPECT_EQ(b.status, 0) << b.error;
  EXPECT_EQ(farm.stopWorker(0), 0);
  EXPECT_EQ(farm.stopScheduler(), 0);
}

// Evaluates collection folder `coll` as jobset `name` and waits for its
// builds; returns each job's status and its step's row.
std::map<std::string, FarmStepView> buildAll(test::Farm& farm,
                                             const std::string& name,
                                             const std::string& coll) {
  farm.createJobset("p", name, coll);
  int64_t eval = farm.evaluate("p", name);
  EXPECT_TRUE(farm.waitForBuilds(eval, 180s)) << farm.worker(0).log();
  std::map<std::string, FarmStepView> byJob;
  auto steps = farm.steps();
  for (auto& b : farm.builds(eval))
    for (auto& s : steps)
      if (s.drvPath == b.drvPath) byJob[b.job] = {b.status, s};
  return byJob;
}

TEST(FarmPressure, MemoryPlacesTheRetryAndTheNextBuildOfAJob) {
  std::string why;
  if (!test::Farm::canRun(&why)) GTEST_SKIP() << why;
  test::FarmOptions options;
  options.schedulerArgs = {"--retry-backoff-ms", "100"};
  test::Farm farm(options);
  auto meminfo = [&](const std::string& name, const std::string& kb) {
    std::string proc = farm.dir() + "/" + name;
    std::filesystem::create_directories(proc);
    writeFile(proc + "/meminfo", "MemAvailable: " + kb + " kB\n");
    return proc;
  };
  auto grow = [](const std::string& n) {
    return "{ grow = mk \"grow\" \"x=$(head -c 30000000 /dev/zero | tr "
           "'\\\\000' a); echo " +
           n + " > $out\" []; }";
  };
  auto bomb = farm.writeCollection(
      "bomb",
      "{ membomb = mk \"membomb\" \"x=$(head -c 400000000 /dev/zero | tr "
      "'\\\\000' a); echo survived > $out\" []; }");
  auto grow1 = farm.writeCollection("grow1", grow("1"));
  auto grow2 = farm.writeCollection("grow2", grow("2"));
  farm.startScheduler();
  // `small` says 16M are free, `big` 16G; `big` is slower and joins
  // second, so that a step goes to `small` when nothing else decides.
  test::WorkerOptions small;
  small.name = "small";
  small.extraArgs = {"--build-memory-max", "200M", "--debug-proc-root",
                     meminfo("small", "16384")};
  farm.addWorker(small);
  ASSERT_TRUE(farm.waitForWorkers(1, 60s)) << farm.worker(0).log();
  if (farm.worker(0).log().find("one control group per build") ==
      std::string::npos)
    GTEST_SKIP() << "no control groups here: " << farm.worker(0).log();
  test::WorkerOptions big;
  big.name = "big";
  big.extraArgs = {"--build-memory-max", "200M",
                   "--speed-factor",     "0.25",
                   "--debug-proc-root",  meminfo("big", "16777216")};
  farm.addWorker(big);
  ASSERT_TRUE(farm.waitForWorkers(2, 60s)) << farm.worker(1).log();

  // Out of memory on `small`, then tried on `big` (where the same limit
  // ends it again).
  auto r = buildAll(farm, "bomb", bomb);
  EXPECT_EQ(r["membomb"].status, 13);
  EXPECT_EQ(r["membomb"].step.attempts, 2);
  EXPECT_THAT(r["membomb"].step.worker, StartsWith("big"));
  // `grow` runs on `small` (no peak known yet) and leaves its peak.
  r = buildAll(farm, "grow1", grow1);
  EXPECT_EQ(r["grow"].status, 0);
  EXPECT_THAT(r["grow"].step.worker, StartsWith("small"));
  ASSERT_GT(r["grow"].step.peakMemoryBytes, 16 << 20);
  // The next build of `grow` needs its last peak free: `big`.
  r = buildAll(farm, "grow2", grow2);
  EXPECT_EQ(r["grow"].status, 0);
  EXPECT_THAT(r["grow"].step.worker, StartsWith("big"));
  EXPECT_EQ(farm.stopWorker(1), 0);
  EXPECT_EQ(farm.stopWorker(0), 0);
  EXPECT_EQ(farm.stopScheduler(), 0);
}

}  // namespace
}  // namespace kiln
