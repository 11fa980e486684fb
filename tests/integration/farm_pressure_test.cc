// Pressure-aware dispatch on a real farm (issue 33): `kiln worker` reads
// its pressure from a folder laid out like /proc (--debug-proc-root, the
// test's stand-in for /proc/pressure) and announces
// --max-memory-pressure 20. Under artificial memory pressure it gets no
// step, and `kiln queue` says why; once the pressure falls, the step runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "farm.h"
#include "kiln/common/file.h"
#include "test_support.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

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

}  // namespace
}  // namespace kiln
