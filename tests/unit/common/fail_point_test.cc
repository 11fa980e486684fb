// Fail points (kiln/common/fail_point.h): parsing KILN_FAIL_POINT, counting
// hits, and the kill itself.
#include "kiln/common/fail_point.h"

#include <gtest/gtest.h>
#include <signal.h>

#include "kiln/common/error.h"

namespace kiln {
namespace {

TEST(FailPoint, AnEmptySpecArmsNothing) {
  FailPointSpec s("");
  EXPECT_FALSE(s.armed());
  EXPECT_FALSE(s.hit("store.add.before-commit"));
}

TEST(FailPoint, ANameFailsAtItsFirstHitOnly) {
  FailPointSpec s("store.add.before-commit");
  EXPECT_TRUE(s.armed());
  EXPECT_FALSE(s.hit("store.add.after-commit"));
  EXPECT_TRUE(s.hit("store.add.before-commit"));
  EXPECT_FALSE(s.hit("store.add.before-commit"));
}

TEST(FailPoint, ACountFailsAtThatHit) {
  FailPointSpec s("scheduler.step-finish.after-commit:3");
  EXPECT_EQ(s.name(), "scheduler.step-finish.after-commit");
  EXPECT_FALSE(s.hit("scheduler.step-finish.after-commit"));
  EXPECT_FALSE(s.hit("scheduler.step-start.after-commit"));
  EXPECT_FALSE(s.hit("scheduler.step-finish.after-commit"));
  EXPECT_TRUE(s.hit("scheduler.step-finish.after-commit"));
  EXPECT_FALSE(s.hit("scheduler.step-finish.after-commit"));
}

TEST(FailPoint, MalformedSpecsAreRefused) {
  EXPECT_THROW(FailPointSpec(":2"), FormatError);
  EXPECT_THROW(FailPointSpec("a:0"), FormatError);
  EXPECT_THROW(FailPointSpec("a:x"), FormatError);
  EXPECT_THROW(FailPointSpec("a:2x"), FormatError);
}

TEST(FailPointDeathTest, TheArmedPointKillsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process
  EXPECT_EXIT(
      {
        setenv("KILN_FAIL_POINT", "test.point:2", 1);
        KILN_FAIL_POINT("test.other");
        KILN_FAIL_POINT("test.point");
        KILN_FAIL_POINT("test.point");
        _exit(0);
      },
      ::testing::KilledBySignal(SIGKILL), "fail point test.point reached");
}

TEST(FailPointDeathTest, UnarmedPointsDoNothing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        unsetenv("KILN_FAIL_POINT");
        KILN_FAIL_POINT("test.point");
        _exit(3);
      },
      ::testing::ExitedWithCode(3), "");
}

}  // namespace
}  // namespace kiln
