// Failures, revival by a retried success, transient retries with backoff,
// cancellation, whyWaiting and input validation.

#include <algorithm>

#include "harness.h"

namespace kiln::scheduler::test {
namespace {

using Strings = std::vector<std::string>;
using K = BuildEvent::Kind;

struct Ev {
  BuildId build;
  K kind;
  int status;
  friend bool operator==(const Ev&, const Ev&) = default;
  friend std::ostream& operator<<(std::ostream& o, const Ev& e) {
    return o << "{" << e.build << "," << static_cast<int>(e.kind) << ","
             << e.status << "}";
  }
};

std::vector<Ev> events(Harness& h) {
  std::vector<Ev> out;
  for (const BuildEvent& e : h.core.takeBuildEvents())
    out.push_back(Ev{e.build, e.kind, static_cast<int>(e.status)});
  std::sort(out.begin(), out.end(),
            [](const Ev& a, const Ev& b) { return a.build < b.build; });
  return out;
}

StepId runOne(Harness& h) {
  auto as = h.core.nextAssignments(1);
  EXPECT_EQ(as.size(), 1u);
  return as.empty() ? StepId{} : as[0].step;
}

// lib <- app1 (build 1), lib <- app2 <- bundle (build 2), lib (build 4),
// other (build 3).
struct Diamond {
  explicit Diamond(Harness& h) {
    lib = h.step("lib");
    app1 = h.step("app1", {lib});
    app2 = h.step("app2", {lib});
    bundle = h.step("bundle", {app2});
    other = h.step("other");
    h.build(1, app1);
    h.build(2, bundle);
    h.build(3, other);
    h.build(4, lib);
  }
  StepId lib, app1, app2, bundle, other;
};

TEST(Failure, PermanentFailureFailsEveryDependentBuild) {
  Harness h;
  h.worker("w");
  Diamond d(h);
  ASSERT_EQ(runOne(h), d.lib);
  h.core.finishStep(d.lib, StepResult::permanent(StepStatus::kFailed, 5s));
  EXPECT_EQ(events(h),
            (std::vector<Ev>{
                {1, K::kFailed, 2}, {2, K::kFailed, 2}, {4, K::kFailed, 1}}));
  EXPECT_EQ(h.core.whyWaiting(d.lib).kind, WaitReason::Kind::kFailed);
  WaitReason why = h.core.whyWaiting(d.bundle);
  EXPECT_EQ(why.kind, WaitReason::Kind::kDependencyFailed);
  EXPECT_NE(why.detail.find("lib.drv"), std::string::npos);
  // The unrelated build still runs; nothing else is runnable.
  EXPECT_EQ(h.drain(), Strings{"other"});
  EXPECT_EQ(events(h), (std::vector<Ev>{{3, K::kSucceeded, 0}}));
  EXPECT_EQ(h.core.metrics().stepsFailed, 1u);
}

TEST(Failure, RetriedSuccessRevivesFailedBuilds) {
  Harness h;
  h.worker("w");
  Diamond d(h);
  ASSERT_EQ(runOne(h), d.lib);
  h.core.finishStep(d.lib, StepResult::permanent(StepStatus::kFailed, 5s));
  events(h);
  EXPECT_THROW(h.core.restartStep(d.app1), SchedulerError);
  h.core.restartStep(d.lib);
  ASSERT_EQ(runOne(h), d.lib);
  h.core.finishStep(d.lib, StepResult::success(5s));
  EXPECT_EQ(events(h), (std::vector<Ev>{{1, K::kRevived, 0},
                                        {2, K::kRevived, 0},
                                        {4, K::kSucceeded, 0}}));
  Strings order = h.drain();
  EXPECT_EQ(order.size(), 4u);
  EXPECT_EQ(events(h), (std::vector<Ev>{{1, K::kSucceeded, 0},
                                        {2, K::kSucceeded, 0},
                                        {3, K::kSucceeded, 0}}));
  EXPECT_EQ(h.core.metrics().builds, 0u);
}

TEST(Failure, NewBuildOnAFailedStepFailsAtOnce) {
  Harness h;
  auto lib = h.step("lib");
  h.build(1, lib);
  h.core.failStep(lib, StepStatus::kCachedFailure);
  EXPECT_EQ(events(h), (std::vector<Ev>{{1, K::kFailed, 8}}));
  auto app = h.step("app", {lib});
  h.build(2, app);
  EXPECT_EQ(events(h), (std::vector<Ev>{{2, K::kFailed, 2}}));
  h.build(3, lib);
  EXPECT_EQ(events(h), (std::vector<Ev>{{3, K::kFailed, 8}}));
}

TEST(Retry, TransientFailuresBackOffExponentiallyThenFail) {
  SchedulerConfig cfg;
  cfg.maxRetries = 2;
  cfg.retryBackoffBase = 10s;
  Harness h(cfg);
  h.worker("w");
  auto s = h.step("flaky");
  h.build(1, s);
  ASSERT_EQ(runOne(h), s);
  h.core.finishStep(s, StepResult::transient(1s));
  WaitReason why = h.core.whyWaiting(s);
  EXPECT_EQ(why.kind, WaitReason::Kind::kBackoff);
  EXPECT_EQ(why.until, h.clock.wallNow() + 10s);
  h.clock.advance(9s);
  EXPECT_TRUE(h.core.nextAssignments().empty());
  h.clock.advance(1s);
  ASSERT_EQ(runOne(h), s);
  h.core.finishStep(s, StepResult::transient(1s));
  EXPECT_EQ(h.core.whyWaiting(s).until, h.clock.wallNow() + 20s);
  h.clock.advance(20s);
  ASSERT_EQ(runOne(h), s);
  h.core.finishStep(s, StepResult::transient(1s));
  EXPECT_EQ(h.core.whyWaiting(s).kind, WaitReason::Kind::kFailed);
  EXPECT_EQ(events(h), (std::vector<Ev>{{1, K::kFailed, 3}}));
  EXPECT_EQ(h.core.metrics().retries, 2u);
}

// A step the service could not send (its database away) is offered again
// after the base backoff however often that happens: no attempt counts.
TEST(Retry, AStepNeverSentIsOfferedAgainWithoutUsingItsRetries) {
  SchedulerConfig cfg;
  cfg.maxRetries = 1;
  cfg.retryBackoffBase = 10s;
  Harness h(cfg);
  h.worker("w");
  auto s = h.step("unsent");
  h.build(1, s);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(runOne(h), s);
    h.core.finishStep(s, StepResult::notStarted());
    EXPECT_EQ(h.core.whyWaiting(s).kind, WaitReason::Kind::kBackoff);
    EXPECT_EQ(h.core.whyWaiting(s).until, h.clock.wallNow() + 10s);
    EXPECT_TRUE(h.core.nextAssignments().empty());
    h.clock.advance(10s);
  }
  ASSERT_EQ(runOne(h), s);
  h.core.finishStep(s, StepResult::success(1s));
  EXPECT_EQ(events(h), (std::vector<Ev>{{1, K::kSucceeded, 0}}));
  EXPECT_EQ(h.core.metrics().retries, 0u);
}

TEST(Retry, BackoffIsCapped) {
  SchedulerConfig cfg;
  cfg.maxRetries = 10;
  cfg.retryBackoffBase = 10s;
  cfg.retryBackoffMax = 25s;
  Harness h(cfg);
  h.worker("w");
  auto s = h.step("flaky");
  h.build(1, s);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(runOne(h), s);
    h.core.finishStep(s, StepResult::transient(1s));
    h.clock.advance(std::chrono::hours(1));
  }
  ASSERT_EQ(runOne(h), s);
  h.core.finishStep(s, StepResult::transient(1s));
  EXPECT_EQ(h.core.whyWaiting(s).until, h.clock.wallNow() + 25s);
}

TEST(Retry, TransientThenSuccessFinishesTheBuild) {
  Harness h;
  h.worker("w");
  auto s = h.step("s");
  h.build(1, s);
  ASSERT_EQ(runOne(h), s);
  h.core.finishStep(s, StepResult::transient(1s));
  h.clock.advance(std::chrono::hours(1));
  ASSERT_EQ(runOne(h), s);
  h.core.finishStep(s, StepResult::success(1s));
  EXPECT_EQ(events(h), (std::vector<Ev>{{1, K::kSucceeded, 0}}));
  EXPECT_THROW(h.core.step(s), SchedulerError);
}

TEST(Cancel, DropsOnlyStepsNoOtherBuildNeeds) {
  Harness h;
  h.worker("w", 4);
  auto shared = h.step("shared");
  auto own = h.step("own");
  auto t1 = h.step("t1", {shared, own});
  auto t2 = h.step("t2", {shared});
  h.build(1, t1);
  h.build(2, t2);
  auto as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 2u);  // shared and own run
  h.core.cancelBuild(1);
  EXPECT_EQ(events(h), (std::vector<Ev>{{1, K::kCancelled, 4}}));
  EXPECT_FALSE(h.core.findStep(drv("t1")));
  EXPECT_FALSE(h.core.findStep(drv("own")));
  EXPECT_TRUE(h.core.findStep(drv("shared")));
  auto aborts = h.core.takeAborts();
  ASSERT_EQ(aborts.size(), 1u);
  EXPECT_EQ(aborts[0].drvPath, drv("own"));
  EXPECT_EQ(aborts[0].step, own);
  // Every dropped step, running or waiting, for the service to settle.
  auto dropped = h.core.takeDropped();
  std::sort(dropped.begin(), dropped.end());
  std::vector<StepId> want{own, t1};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(dropped, want);
  EXPECT_EQ(h.core.metrics().runningSteps, 1u);
  EXPECT_EQ(h.core.metrics().freeSlots, 3u);
  EXPECT_THROW(h.core.cancelBuild(1), SchedulerError);
  h.core.finishStep(shared, StepResult::success(1s));
  EXPECT_EQ(h.drain(), Strings{"t2"});
  (void)t2;
}

TEST(Cancel, QueuedStepsLeaveTheQueue) {
  Harness h;
  auto a = h.step("a");
  auto b = h.step("b", {a});
  h.build(1, b);
  EXPECT_EQ(h.core.metrics().queuedBySystem.at("x86_64-linux"), 1u);
  h.core.cancelBuild(1);
  EXPECT_EQ(h.core.metrics().queuedBySystem.at("x86_64-linux"), 0u);
  EXPECT_TRUE(h.core.takeAborts().empty());  // nothing ran
  auto dropped = h.core.takeDropped();
  std::sort(dropped.begin(), dropped.end());
  std::vector<StepId> want{a, b};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(dropped, want);  // queued a, waiting b
  EXPECT_TRUE(h.core.takeDropped().empty());
  h.worker("w");
  EXPECT_TRUE(h.core.nextAssignments().empty());
}

TEST(WhyWaiting, ExplainsEachCase) {
  Harness h;
  using W = WaitReason::Kind;
  auto dormant = h.step("dormant");
  EXPECT_EQ(h.core.whyWaiting(dormant).kind, W::kNotNeeded);
  auto arm = h.step("arm", {}, "aarch64-linux");
  h.build(1, arm);
  EXPECT_EQ(h.core.whyWaiting(arm).kind, W::kNoWorkerForSystem);
  auto a = h.step("a");
  auto b = h.step("b", {a});
  h.build(2, b);
  WaitReason deps = h.core.whyWaiting(b);
  EXPECT_EQ(deps.kind, W::kWaitingForDependencies);
  EXPECT_EQ(deps.count, 1u);
  h.worker("w");
  EXPECT_EQ(h.core.whyWaiting(a).kind, W::kReady);
  h.core.nextAssignments();
  WaitReason running = h.core.whyWaiting(a);
  EXPECT_EQ(running.kind, W::kRunning);
  EXPECT_EQ(running.detail, "running on w");
  EXPECT_EQ(h.core.step(a).state, StepView::State::kRunning);
}

TEST(Graph, AddStepIsIdempotentAndValidates) {
  Harness h;
  auto a = h.step("a");
  EXPECT_EQ(h.step("a"), a);
  EXPECT_EQ(h.core.findStep(drv("a")), a);
  EXPECT_THROW(h.core.addStep(StepSpec{}, {}), SchedulerError);
  EXPECT_THROW(h.step("b", {StepId{77, 0}}), SchedulerError);
  h.build(1, a);
  EXPECT_THROW(h.build(1, a), SchedulerError);
  EXPECT_THROW(h.core.finishStep(a, StepResult::success(1s)), SchedulerError);
  EXPECT_THROW(h.core.setHistoricalDuration("x", 0), SchedulerError);
}

TEST(Graph, StaleIdsAreDetectedAfterSlotReuse) {
  Harness h;
  h.worker("w");
  auto a = h.step("a");
  h.build(1, a);
  h.drain();
  auto b = h.step("b");
  EXPECT_EQ(b.index, a.index);
  EXPECT_NE(b.generation, a.generation);
  EXPECT_THROW(h.core.whyWaiting(a), SchedulerError);
}

}  // namespace
}  // namespace kiln::scheduler::test
