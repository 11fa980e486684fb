// Build log file naming and lookup (`kiln log`, the web).
#include "kiln/scheduler/logs.h"

#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "state_backends.h"

namespace kiln::scheduler {
namespace {

TEST(StepLogs, NamesOneFilePerAttempt) {
  EXPECT_EQ(stepLogPath("/s", "/nix/store/abc-x.drv", 2),
            "/s/logs/abc-x.drv.2.log");
  EXPECT_EQ(stepLogPath("/s", "abc-x.drv", 1), "/s/logs/abc-x.drv.1.log");
}

// With the step's attempt count: the same files up to that attempt, gaps
// (an attempt that wrote no log) skipped, found without reading the folder.
TEST(StepLogs, ProbesAttemptsUpToTheStepsCount) {
  TempDir dir("kiln-logs");
  EXPECT_TRUE(stepLogFiles(dir.path(), "abc-x.drv", 3).empty());
  createDirs(dir.path() + "/logs");
  for (int n : {1, 3, 10})
    writeFile(stepLogPath(dir.path(), "abc-x.drv", n), std::to_string(n));
  writeFile(dir.path() + "/logs/abc-xy.drv.2.log", "");
  auto files = stepLogFiles(dir.path(), "/nix/store/abc-x.drv", 10);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].first, 1);
  EXPECT_EQ(files[1].first, 3);
  EXPECT_EQ(files[2].first, 10);
  EXPECT_EQ(readFile(files[1].second), "3");
  EXPECT_EQ(stepLogFiles(dir.path(), "abc-x.drv", 3).size(), 2u);
  EXPECT_TRUE(stepLogFiles(dir.path(), "abc-x.drv", 0).empty());
  EXPECT_TRUE(stepLogFiles(dir.path(), "abc-x.drv", -5).empty());
}

// Through the state database: the step's recorded attempts bound the
// probe, by full path or base name; a step the database does not know, or
// a database without steps, has no logs, whatever the folder holds.
class StepLogsInState : public ::testing::TestWithParam<test::StateBackend> {};

TEST_P(StepLogsInState, FindsAStepsLogsThroughTheStateDatabase) {
  TempDir dir("kiln-logs");
  StateDb db(test::freshStateDatabase(GetParam(), dir.path()));
  const std::string drv = "/nix/store/abc-x.drv";
  EXPECT_TRUE(stepLogFiles(db, dir.path(), drv).empty());
  EXPECT_TRUE(stepLogFiles(db, dir.path(), "abc-x.drv").empty());
  StepRow row;
  row.drvPath = drv;
  int64_t id = db.upsertStep(row);
  createDirs(dir.path() + "/logs");
  for (int n : {1, 2, 3})
    writeFile(stepLogPath(dir.path(), drv, n), std::to_string(n));
  writeFile(dir.path() + "/logs/abc-xy.drv.1.log", "");
  EXPECT_TRUE(stepLogFiles(db, dir.path(), drv).empty());  // never started
  db.startStep(id, "w1", 10);
  db.startStep(id, "w1", 20);
  auto files = stepLogFiles(db, dir.path(), drv);
  ASSERT_EQ(files.size(), 2u);  // attempt 3's file is not the step's (yet)
  EXPECT_EQ(files[1].first, 2);
  EXPECT_EQ(readFile(files[1].second), "2");
  EXPECT_EQ(stepLogFiles(db, dir.path(), "abc-x.drv"), files);
  EXPECT_TRUE(stepLogFiles(db, dir.path(), "abc-xy.drv").empty());
  EXPECT_TRUE(stepLogFiles(db, dir.path(), "/other/store/abc-x.drv").empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, StepLogsInState, test::allStateBackends(),
                         test::stateBackendName);

}  // namespace
}  // namespace kiln::scheduler
