// Build log file naming and lookup (`kiln log`, the web).
#include "kiln/scheduler/logs.h"

#include <gtest/gtest.h>

#include "kiln/common/file.h"

namespace kiln::scheduler {
namespace {

TEST(StepLogs, NamesOneFilePerAttempt) {
  EXPECT_EQ(stepLogPath("/s", "/nix/store/abc-x.drv", 2),
            "/s/logs/abc-x.drv.2.log");
  EXPECT_EQ(stepLogPath("/s", "abc-x.drv", 1), "/s/logs/abc-x.drv.1.log");
}

TEST(StepLogs, ListsAttemptsInOrderAndIgnoresOtherFiles) {
  TempDir dir("kiln-logs");
  EXPECT_TRUE(stepLogFiles(dir.path(), "abc-x.drv").empty());  // no folder
  createDirs(dir.path() + "/logs");
  for (int n : {10, 2, 1})
    writeFile(stepLogPath(dir.path(), "abc-x.drv", n), std::to_string(n));
  writeFile(dir.path() + "/logs/abc-x.drv.x.log", "");
  writeFile(dir.path() + "/logs/abc-x.drv.0.log", "");
  writeFile(dir.path() + "/logs/abc-xy.drv.1.log", "");
  auto files = stepLogFiles(dir.path(), "/nix/store/abc-x.drv");
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].first, 1);
  EXPECT_EQ(files[1].first, 2);
  EXPECT_EQ(files[2].first, 10);
  EXPECT_EQ(readFile(files[2].second), "10");
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

}  // namespace
}  // namespace kiln::scheduler
