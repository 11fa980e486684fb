// Ready-queue order: global priority, jobset fairness, critical path, local
// priority, age; bumps; incremental critical-path maintenance.

#include "harness.h"

namespace kiln::scheduler::test {
namespace {

using Strings = std::vector<std::string>;

TEST(Ordering, AgeOrdersOtherwiseEqualSteps) {
  Harness h;
  h.worker("w");
  auto a = h.step("a");
  h.clock.advance(1s);
  auto b = h.step("b");
  h.clock.advance(1s);
  auto c = h.step("c");
  h.build(3, c);
  h.build(2, b);
  h.build(1, a);
  EXPECT_EQ(h.drain(), (Strings{"a", "b", "c"}));
}

TEST(Ordering, LocalPriorityBeatsAge) {
  Harness h;
  h.worker("w");
  auto a = h.step("a");
  h.clock.advance(1s);
  auto b = h.step("b");
  h.build(1, a, 1, 0, 0);
  h.build(2, b, 1, 0, 5);
  EXPECT_EQ(h.drain(), (Strings{"b", "a"}));
}

TEST(Ordering, CriticalPathBeatsLocalPriority) {
  Harness h;
  h.worker("w");
  // chain: leaf -> mid -> top (3 units) against a lone step with priority.
  auto leaf = h.step("leaf");
  auto mid = h.step("mid", {leaf});
  auto top = h.step("top", {mid});
  auto lone = h.step("lone");
  h.build(1, top, 1, 0, 0);
  h.build(2, lone, 1, 0, 100);
  EXPECT_DOUBLE_EQ(h.core.step(leaf).criticalPath, 3);
  EXPECT_DOUBLE_EQ(h.core.step(top).criticalPath, 1);
  // mid (path 2) still outranks lone (path 1); top (path 1) does not.
  EXPECT_EQ(h.drain(), (Strings{"leaf", "mid", "lone", "top"}));
}

TEST(Ordering, CriticalPathUsesHistoricalDurations) {
  Harness h;
  h.worker("w");
  h.core.setHistoricalDuration("slow", 50);
  auto leaf = h.step("leaf");
  auto top = h.step("top", {leaf});
  auto big = h.step("big", {}, "x86_64-linux", {}, "slow");
  h.build(1, top);
  h.build(2, big);
  EXPECT_DOUBLE_EQ(h.core.step(big).criticalPath, 50);
  EXPECT_DOUBLE_EQ(h.core.step(leaf).criticalPath, 2);
  EXPECT_EQ(h.drain(), (Strings{"big", "leaf", "top"}));
}

TEST(Ordering, SuccessTeachesDurationOfThePackageName) {
  Harness h;
  h.worker("w");
  h.build(1, h.step("gcc-1", {}, "x86_64-linux", {}, "gcc"));
  h.drain(120s);
  auto again = h.step("gcc-2", {}, "x86_64-linux", {}, "gcc");
  EXPECT_DOUBLE_EQ(h.core.step(again).expectedDuration, 120);
}

TEST(Ordering, CriticalPathGrowsAndShrinksIncrementally) {
  Harness h;
  auto shared = h.step("shared");
  auto t1 = h.step("t1", {shared});
  h.build(1, t1);
  EXPECT_DOUBLE_EQ(h.core.step(shared).criticalPath, 2);
  // A longer chain above the shared step arrives with a second build.
  auto m1 = h.step("m1", {shared});
  auto m2 = h.step("m2", {m1});
  auto t2 = h.step("t2", {m2});
  h.build(2, t2);
  EXPECT_DOUBLE_EQ(h.core.step(shared).criticalPath, 4);
  EXPECT_EQ(h.core.step(shared).ownerBuild, 1);
  h.core.cancelBuild(2);
  EXPECT_DOUBLE_EQ(h.core.step(shared).criticalPath, 2);
  EXPECT_FALSE(h.core.findStep(drv("m1")));
}

TEST(Ordering, GlobalPriorityBeatsEverything) {
  Harness h;
  h.worker("w");
  auto leaf = h.step("leaf");
  auto top = h.step("top", {leaf});
  auto bumped = h.step("bumped");
  h.build(1, top, 1, 0, 50);
  h.build(2, bumped, 2, 1, 0);
  EXPECT_EQ(h.drain(), (Strings{"bumped", "leaf", "top"}));
}

TEST(Ordering, BumpReordersAClosureAndUnbumpRestores) {
  Harness h;
  h.worker("w");
  auto a = h.step("a");
  auto b1 = h.step("b1");
  auto b2 = h.step("b2", {b1});
  h.build(1, a);
  h.build(2, b2);
  h.core.bumpBuild(2, 10);
  EXPECT_EQ(h.core.step(b1).globalPriority, 10);
  EXPECT_EQ(h.dispatch(1), Strings{"b1"});
  h.core.bumpBuild(2, 0);
  EXPECT_EQ(h.core.step(b1).globalPriority, 0);
  EXPECT_EQ(h.core.step(b2).globalPriority, 0);
  EXPECT_THROW(h.core.bumpBuild(99, 1), SchedulerError);
}

TEST(Ordering, SharedStepTakesTheBestOfItsBuilds) {
  Harness h;
  auto s = h.step("s");
  auto t1 = h.step("t1", {s});
  auto t2 = h.step("t2", {s});
  h.build(5, t1, 7, 1, 3);
  h.build(4, t2, 8, 2, 1);
  StepView v = h.core.step(s);
  EXPECT_EQ(v.globalPriority, 2);
  EXPECT_EQ(v.localPriority, 3);
  EXPECT_EQ(v.ownerBuild, 4);
  EXPECT_EQ(v.jobset, 8);
  h.core.cancelBuild(4);
  v = h.core.step(s);
  EXPECT_EQ(v.globalPriority, 1);
  EXPECT_EQ(v.ownerBuild, 5);
  EXPECT_EQ(v.jobset, 7);
}

TEST(Fairness, JobsetWithLessRecentTimeGoesFirst) {
  Harness h;
  h.worker("w");
  h.build(1, h.step("heavy"), 1);
  h.drain(100s);  // jobset 1 used 100 s
  auto older = h.step("older");
  h.clock.advance(1s);
  auto newer = h.step("newer");
  h.build(2, older, 1);
  h.build(3, newer, 2);
  EXPECT_DOUBLE_EQ(h.core.jobsetFairness(1), 100);
  EXPECT_EQ(h.dispatch(1), Strings{"newer"});
}

TEST(Fairness, SharesDivideUsage) {
  Harness h;
  h.worker("w");
  h.build(1, h.step("x1"), 1);
  h.build(2, h.step("x2"), 2);
  h.drain(100s);  // both jobsets used 100 s
  h.core.setJobsetShares(1, 4);
  EXPECT_DOUBLE_EQ(h.core.jobsetFairness(1), 25);
  auto a = h.step("a");
  h.clock.advance(1s);
  auto b = h.step("b");
  h.build(3, a, 2);
  h.build(4, b, 1);
  EXPECT_EQ(h.dispatch(1), Strings{"b"});
  EXPECT_THROW(h.core.setJobsetShares(1, 0), SchedulerError);
}

TEST(Fairness, WindowSlidesAfter24Hours) {
  Harness h;
  h.worker("w");
  h.build(1, h.step("heavy"), 1);
  h.drain(100s);
  h.clock.advance(std::chrono::hours(24));
  auto older = h.step("older");
  h.clock.advance(1s);
  auto newer = h.step("newer");
  h.build(2, older, 1);
  h.build(3, newer, 2);
  EXPECT_EQ(h.dispatch(1), Strings{"older"});
  EXPECT_DOUBLE_EQ(h.core.jobsetFairness(1), 1);  // only the running estimate
}

TEST(Fairness, BusyJobsetsInterleave) {
  Harness h;
  h.worker("w");
  for (int i = 0; i < 10; ++i) {
    h.build(100 + i, h.step("a" + std::to_string(i)), 1);
    h.build(200 + i, h.step("b" + std::to_string(i)), 2);
  }
  Strings order = h.drain(10s);
  ASSERT_EQ(order.size(), 20u);
  for (size_t i = 0; i + 1 < order.size(); i += 2)
    EXPECT_NE(order[i][0], order[i + 1][0]) << "at " << i;
}

TEST(Fairness, RunningStepsCountWhileTheyRun) {
  Harness h;
  h.worker("w", 4);
  for (int i = 0; i < 4; ++i) {
    h.build(100 + i, h.step("a" + std::to_string(i)), 1);
    h.build(200 + i, h.step("b" + std::to_string(i)), 2);
  }
  Strings got = h.dispatch();
  ASSERT_EQ(got.size(), 4u);
  int fromA = 0;
  for (auto& s : got) fromA += s[0] == 'a';
  EXPECT_EQ(fromA, 2);
}

}  // namespace
}  // namespace kiln::scheduler::test
