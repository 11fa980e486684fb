// Reproducibility checks' second builds in the core (core.h, repeats.cc):
// never on the first build's worker, after the graph's work, back to
// waiting when their worker goes, and why they wait.
#include <gtest/gtest.h>

#include "harness.h"

namespace kiln::scheduler::test {
namespace {

RepeatSpec repeatOf(const std::string& name, const std::string& avoid) {
  return RepeatSpec{drv(name), "x86_64-linux", {}, avoid, {}};
}

TEST(Repeats, GoToAnotherWorkerOnly) {
  Harness h;
  WorkerId a = h.worker("a");
  StepId r = h.core.addRepeat(repeatOf("r", "a"));
  EXPECT_TRUE(h.core.isRepeat(r));
  EXPECT_TRUE(h.core.nextAssignments().empty());
  WaitReason why = h.core.whyWaiting(r);
  EXPECT_EQ(why.kind, WaitReason::Kind::kNoWorkerForSystem);
  EXPECT_NE(why.detail.find("other than a"), std::string::npos) << why.detail;
  WorkerId b = h.worker("b");
  auto as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 1u);
  EXPECT_TRUE(as[0].repeat);
  EXPECT_EQ(as[0].step, r);
  EXPECT_EQ(as[0].worker, b);
  EXPECT_NE(as[0].worker, a);
  EXPECT_EQ(h.core.whyWaiting(r).kind, WaitReason::Kind::kRunning);
  h.core.finishRepeat(r);
  EXPECT_THROW(h.core.isRepeat(r), SchedulerError);
}

TEST(Repeats, AfterTheGraphsWork) {
  Harness h;
  h.worker("a");
  h.worker("b");
  StepId r = h.core.addRepeat(repeatOf("r", "a"));
  StepId s = h.step("s");
  h.build(1, s);
  auto as = h.core.nextAssignments(1);
  ASSERT_EQ(as.size(), 1u);
  EXPECT_EQ(as[0].step, s);
  EXPECT_FALSE(as[0].repeat);
  // b is the only worker the repeat may use; s took the least loaded one.
  auto next = h.core.nextAssignments();
  if (as[0].worker == WorkerId{1, 0}) {  // s went to b: the repeat waits
    EXPECT_TRUE(next.empty());
    EXPECT_EQ(h.core.whyWaiting(r).kind, WaitReason::Kind::kAllSlotsBusy);
    h.core.finishStep(s, StepResult::success(0ms));
    next = h.core.nextAssignments();
  }
  ASSERT_EQ(next.size(), 1u);
  EXPECT_TRUE(next[0].repeat);
  EXPECT_EQ(h.name(next[0].step), "r");
}

TEST(Repeats, WaitWhileTheGraphHasQueuedWork) {
  Harness h;
  h.worker("a", 1);
  h.worker("b", 2);
  StepId s1 = h.step("s1");
  StepId s2 = h.step("s2");
  StepId s3 = h.step("s3");
  h.build(1, s1);
  h.build(2, s2);
  h.build(3, s3);
  h.core.addRepeat(repeatOf("r", "a"));
  auto as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 3u);
  for (auto& x : as) EXPECT_FALSE(x.repeat);
}

TEST(Repeats, WaitAgainWhenTheirWorkerGoes) {
  Harness h;
  h.worker("a");
  WorkerId b = h.worker("b");
  StepId r = h.core.addRepeat(repeatOf("r", "a"));
  ASSERT_EQ(h.core.nextAssignments().size(), 1u);
  h.core.removeWorker(b);
  EXPECT_EQ(h.core.whyWaiting(r).kind, WaitReason::Kind::kNoWorkerForSystem);
  EXPECT_EQ(h.core.step(r).state, StepView::State::kWaiting);
  WorkerId c = h.worker("c");
  auto as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 1u);
  EXPECT_EQ(as[0].worker, c);
  EXPECT_THROW(h.core.finishStep(r, StepResult::success(0ms)), SchedulerError)
      << "finishStep is for the graph's steps";
}

TEST(Repeats, RefusedGoElsewhereUntilNoWorkerIsLeft) {
  Harness h;
  h.worker("a");
  WorkerId b = h.worker("b");
  WorkerId c = h.worker("c");
  StepId r = h.core.addRepeat(repeatOf("r", "a"));
  auto as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 1u);
  WorkerId first = as[0].worker;
  WorkerId other = first == b ? c : b;
  EXPECT_TRUE(h.core.refuseRepeat(r)) << "another worker may take it";
  EXPECT_EQ(h.core.step(r).state, StepView::State::kWaiting);
  as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 1u);
  EXPECT_EQ(as[0].step, r) << "same id";
  EXPECT_EQ(as[0].worker, other) << "never back to the refusing worker";
  EXPECT_FALSE(h.core.refuseRepeat(r)) << "a, b and c are all excluded";
  EXPECT_THROW(h.core.isRepeat(r), SchedulerError) << "forgotten";
  EXPECT_TRUE(h.core.nextAssignments().empty());
}

TEST(Repeats, RefusedWaitForAWorkerOtherThanAllAvoided) {
  Harness h;
  h.worker("a");
  h.worker("b");
  RepeatSpec spec = repeatOf("r", "a");
  spec.refusedBy = {"b"};
  StepId r = h.core.addRepeat(spec);
  EXPECT_TRUE(h.core.nextAssignments().empty());
  WaitReason why = h.core.whyWaiting(r);
  EXPECT_EQ(why.kind, WaitReason::Kind::kNoWorkerForSystem);
  EXPECT_NE(why.detail.find("other than a, b"), std::string::npos)
      << why.detail;
  WorkerId c = h.worker("c");
  auto as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 1u);
  EXPECT_EQ(as[0].worker, c);
  EXPECT_THROW(h.core.refuseRepeat(h.step("s")), SchedulerError);
}

// A worker back after a restart says it runs a waiting repeat: it runs
// there from now on, in one of its slots; not when the repeat is no longer
// waiting or the worker has no free slot.
TEST(Repeats, AWaitingRepeatIsAdoptedByTheWorkerThatRunsIt) {
  Harness h;
  WorkerId b = h.worker("b");
  StepId r = h.core.addRepeat(repeatOf("r", "a"));
  StepId q = h.core.addRepeat(repeatOf("q", "a"));
  EXPECT_TRUE(h.core.adoptRepeat(r, b));
  EXPECT_EQ(h.core.step(r).state, StepView::State::kRunning);
  EXPECT_FALSE(h.core.adoptRepeat(r, b)) << "no longer waiting";
  EXPECT_FALSE(h.core.adoptRepeat(q, b)) << "b's one slot is taken";
  EXPECT_TRUE(h.core.nextAssignments().empty());
  h.core.finishRepeat(r);
  auto as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 1u);
  EXPECT_EQ(as[0].step, q);
  EXPECT_THROW(h.core.adoptRepeat(h.step("s"), b), SchedulerError);
}

TEST(Repeats, SharePathWithALiveStepAndDrop) {
  Harness h;
  StepId s = h.step("same");
  StepId r = h.core.addRepeat(repeatOf("same", "a"));
  EXPECT_EQ(h.core.findStep(drv("same")), s);
  h.core.dropRepeat(r);
  EXPECT_EQ(h.core.findStep(drv("same")), s) << "the graph's step stays";
  EXPECT_THROW(h.core.dropRepeat(s), SchedulerError);
  EXPECT_THROW(h.core.addRepeat(RepeatSpec{}), SchedulerError);
}

}  // namespace
}  // namespace kiln::scheduler::test
