// Worker choice: systems, features, mandatory features, slots, load over
// speed, input locality; lost workers and heartbeat timeouts.

#include <map>

#include "harness.h"

namespace kiln::scheduler::test {
namespace {

using Strings = std::vector<std::string>;

std::map<std::string, std::string> byWorker(Harness& h,
                                            const std::vector<Assignment>& as,
                                            std::map<WorkerId, std::string> n) {
  std::map<std::string, std::string> out;
  for (const Assignment& a : as) out[h.name(a.step)] = n.at(a.worker);
  return out;
}

TEST(Workers, EachSystemHasItsOwnQueue) {
  Harness h;
  auto x86 = h.worker("x86", 1, {"x86_64-linux"});
  auto arm = h.worker("arm", 1, {"aarch64-linux"});
  for (int i = 0; i < 3; ++i) {
    h.build(i, h.step("x" + std::to_string(i)));
    h.build(10 + i, h.step("a" + std::to_string(i), {}, "aarch64-linux"));
  }
  auto got =
      byWorker(h, h.core.nextAssignments(), {{x86, "x86"}, {arm, "arm"}});
  EXPECT_EQ(got,
            (std::map<std::string, std::string>{{"x0", "x86"}, {"a0", "arm"}}));
  EXPECT_EQ(h.core.metrics().queuedBySystem.at("aarch64-linux"), 2u);
  EXPECT_EQ(h.core.metrics().queuedBySystem.at("x86_64-linux"), 2u);
}

TEST(Workers, BuiltinRunsAnywhere) {
  Harness h;
  h.worker("arm", 1, {"aarch64-linux"});
  h.build(1, h.step("fetch", {}, "builtin"));
  EXPECT_EQ(h.dispatch(), Strings{"fetch"});
}

TEST(Workers, RequiredFeaturesMustBeSupported) {
  Harness h;
  auto plain = h.worker("plain", 4);
  auto kvm = h.worker("kvm", 1, {"x86_64-linux"}, {"kvm", "big-parallel"});
  auto t1 = h.step("test1", {}, "x86_64-linux", {"kvm"});
  auto t2 = h.step("test2", {}, "x86_64-linux", {"kvm"});
  h.build(1, t1);
  h.build(2, t2);
  auto as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 1u);
  EXPECT_EQ(as[0].worker, kvm);
  EXPECT_EQ(h.core.whyWaiting(t2).kind, WaitReason::Kind::kAllSlotsBusy);
  h.core.removeWorker(kvm);
  WaitReason why = h.core.whyWaiting(t2);
  EXPECT_EQ(why.kind, WaitReason::Kind::kMissingFeature);
  EXPECT_NE(why.detail.find("plain lacks kvm"), std::string::npos)
      << why.detail;
  (void)plain;
}

TEST(Workers, MandatoryFeaturesMustBeRequired) {
  Harness h;
  auto bench = h.worker("bench", 2, {"x86_64-linux"}, {}, {"benchmark"});
  auto plainStep = h.step("plain");
  auto benchStep = h.step("perf", {}, "x86_64-linux", {"benchmark"});
  h.build(1, plainStep);
  h.build(2, benchStep);
  auto as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 1u);
  EXPECT_EQ(h.name(as[0].step), "perf");
  EXPECT_EQ(as[0].worker, bench);
  WaitReason why = h.core.whyWaiting(plainStep);
  EXPECT_EQ(why.kind, WaitReason::Kind::kMissingFeature);
  EXPECT_NE(why.detail.find("requires benchmark"), std::string::npos)
      << why.detail;
}

TEST(Workers, SlotsBoundConcurrentSteps) {
  Harness h;
  auto w = h.worker("w", 2);
  for (int i = 0; i < 5; ++i) h.build(i, h.step("s" + std::to_string(i)));
  auto as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 2u);
  EXPECT_TRUE(h.core.nextAssignments().empty());
  SchedulerMetrics m = h.core.metrics();
  EXPECT_EQ(m.freeSlots, 0u);
  EXPECT_EQ(m.runningSteps, 2u);
  EXPECT_EQ(m.dispatchDecisions, 2u);
  EXPECT_EQ(m.queuedBySystem.at("x86_64-linux"), 3u);
  h.core.finishStep(as[0].step, StepResult::success(1s));
  auto more = h.core.nextAssignments();
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(more[0].worker, w);
}

// A step whose result waits for its outputs to be registered gives its
// slot back at once: the next step runs meanwhile, the worker leaving no
// longer concerns it, and it finishes (or is cancelled) later.
TEST(Workers, AReleasedSlotIsFilledWhileTheStepStillFinishes) {
  Harness h;
  auto w = h.worker("w", 1);
  auto a = h.step("a");
  auto b = h.step("b");
  auto c = h.step("c");
  h.build(1, a);
  h.build(2, b);
  h.build(3, c);
  auto first = h.core.nextAssignments();
  ASSERT_EQ(first.size(), 1u);
  StepId done = first[0].step;
  h.core.releaseSlot(done);
  EXPECT_THROW(h.core.releaseSlot(done), SchedulerError);
  EXPECT_EQ(h.core.step(done).state, StepView::State::kRunning);
  EXPECT_EQ(h.core.whyWaiting(done).kind, WaitReason::Kind::kRunning);
  EXPECT_NE(h.core.whyWaiting(done).detail.find("being registered"),
            std::string::npos);
  auto second = h.core.nextAssignments();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].worker, w);
  EXPECT_EQ(h.core.metrics().runningSteps, 2u);
  // The worker leaves: only the step it still runs is retried.
  h.core.removeWorker(w);
  EXPECT_EQ(h.core.step(done).state, StepView::State::kRunning);
  EXPECT_EQ(h.core.step(second[0].step).attempts, 1u);
  h.core.finishStep(done, StepResult::success(1s));
  EXPECT_FALSE(h.core.hasBuild(1));  // its only step succeeded
  EXPECT_TRUE(h.core.takeAborts().empty());
}

TEST(Workers, CancellingAStepWhoseSlotWasReleasedSendsNoAbort) {
  Harness h;
  h.worker("w", 1);
  auto a = h.step("a");
  h.build(1, a);
  ASSERT_EQ(h.core.nextAssignments().size(), 1u);
  h.core.releaseSlot(a);
  h.core.cancelBuild(BuildId{1});
  EXPECT_TRUE(h.core.takeAborts().empty());
  EXPECT_THROW(h.core.finishStep(a, StepResult::success(1s)), SchedulerError);
}

TEST(Workers, LowestLoadOverSpeedWins) {
  Harness h;
  auto slow = h.worker("slow", 4, {"x86_64-linux"}, {}, {}, 1.0);
  auto fast = h.worker("fast", 4, {"x86_64-linux"}, {}, {}, 2.0);
  h.core.heartbeat(slow, 0.5);
  h.core.heartbeat(fast, 0.5);
  for (int i = 0; i < 3; ++i) h.build(i, h.step("s" + std::to_string(i)));
  auto as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 3u);
  // Scores (load / speed): fast 0.25 < slow 0.5; fast 0.375 < 0.5; then
  // fast 0.5 ties slow 0.5 and the lower index (slow) wins.
  EXPECT_EQ(as[0].worker, fast);
  EXPECT_EQ(as[1].worker, fast);
  EXPECT_EQ(as[2].worker, slow);
}

TEST(Workers, HeartbeatLoadSteersChoice) {
  Harness h;
  auto a = h.worker("a", 4);
  auto b = h.worker("b", 4);
  h.core.heartbeat(a, 0.9);
  h.core.heartbeat(b, 0.1);
  h.build(1, h.step("s"));
  auto as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 1u);
  EXPECT_EQ(as[0].worker, b);
  EXPECT_THROW(h.core.heartbeat(a, -1), SchedulerError);
}

class FakeLocality : public InputLocality {
 public:
  uint64_t bytesPresent(StepId, std::string_view drvPath,
                        WorkerId w) const override {
    auto it = bytes.find({std::string(drvPath), w});
    return it == bytes.end() ? 0 : it->second;
  }
  std::map<std::pair<std::string, WorkerId>, uint64_t> bytes;
};

TEST(Workers, InputLocalityBreaksLoadTies) {
  FakeLocality loc;
  Harness h({}, &loc);
  auto a = h.worker("a", 2);
  auto b = h.worker("b", 2);
  auto c = h.worker("c", 2, {"x86_64-linux"}, {}, {}, 0.5);
  loc.bytes[{drv("s"), b}] = 1000;
  loc.bytes[{drv("s"), c}] = 5000;  // more bytes, but a worse load / speed
  loc.bytes[{drv("s"), a}] = 10;
  h.core.heartbeat(c, 0.5);
  h.build(1, h.step("s"));
  auto as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 1u);
  EXPECT_EQ(as[0].worker, b);
}

TEST(Workers, LostWorkerStepsAreRetriedElsewhere) {
  SchedulerConfig cfg;
  cfg.retryBackoffBase = 10s;
  Harness h(cfg);
  auto w1 = h.worker("w1");
  auto s = h.step("s");
  h.build(1, s);
  ASSERT_EQ(h.core.nextAssignments().size(), 1u);
  h.clock.advance(5s);
  h.core.removeWorker(w1);
  EXPECT_EQ(h.core.whyWaiting(s).kind, WaitReason::Kind::kBackoff);
  EXPECT_EQ(h.core.step(s).attempts, 1u);
  auto w2 = h.worker("w2");
  EXPECT_TRUE(h.core.nextAssignments().empty());
  h.clock.advance(10s);
  auto as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 1u);
  EXPECT_EQ(as[0].worker, w2);
  EXPECT_EQ(h.core.metrics().retries, 1u);
  EXPECT_THROW(h.core.heartbeat(w1, 0), SchedulerError);
}

TEST(Workers, SilentWorkerIsLostOnTick) {
  SchedulerConfig cfg;
  cfg.heartbeatTimeout = 30s;
  Harness h(cfg);
  auto quiet = h.worker("quiet");
  auto chatty = h.worker("chatty");
  h.clock.advance(20s);
  h.core.heartbeat(chatty, 0);
  EXPECT_TRUE(h.core.tick().empty());
  h.clock.advance(20s);
  EXPECT_EQ(h.core.tick(), std::vector<WorkerId>{quiet});
  EXPECT_EQ(h.core.workers(), std::vector<WorkerId>{chatty});
}

TEST(Workers, InvalidWorkersAreRefused) {
  Harness h;
  EXPECT_THROW(h.worker("none", 0), SchedulerError);
  EXPECT_THROW(h.worker("nosys", 1, {}), SchedulerError);
  EXPECT_THROW(h.worker("stopped", 1, {"x86_64-linux"}, {}, {}, 0.0),
               SchedulerError);
  EXPECT_THROW(h.core.removeWorker(WorkerId{}), SchedulerError);
}

TEST(Workers, IdleSlotTimeIsMeasured) {
  Harness h;
  h.worker("w", 2);
  h.build(1, h.step("s"));
  h.clock.advance(3s);
  h.core.tick();  // 3 s with one usable idle slot (one step for two slots)
  SchedulerMetrics m = h.core.metrics();
  EXPECT_DOUBLE_EQ(m.idleSlotSeconds, 3);
  EXPECT_EQ(m.longestIdleWithWork, Duration(3s));
  h.core.nextAssignments();
  h.clock.advance(10s);
  h.core.tick();
  EXPECT_DOUBLE_EQ(h.core.metrics().idleSlotSeconds, 3);
}

// Per slot: from "free while a step it could run is queued" to the end of
// that (its dispatch, the step going elsewhere, the worker leaving).
TEST(Workers, PerSlotIdleStretchesEndAtDispatch) {
  Harness h;
  h.worker("w", 2);
  auto s1 = h.step("s1");
  auto s2 = h.step("s2", {s1});
  auto s3 = h.step("s3", {s1});
  auto top = h.step("top", {s2, s3});
  h.build(1, top);  // s1 ready now: one of the two slots could take it
  h.clock.advance(40ms);
  ASSERT_EQ(h.dispatch(), (std::vector<std::string>{"s1"}));
  h.clock.advance(5ms);
  h.core.tick();
  EXPECT_EQ(h.core.takeIdleStretches(), (std::vector<Duration>{40ms}));
  EXPECT_TRUE(h.core.takeIdleStretches().empty());
  h.clock.advance(55ms);
  h.core.finishStep(s1, StepResult::success(60ms));  // s2, s3 ready
  h.clock.advance(7ms);
  EXPECT_EQ(h.dispatch().size(), 2u);
  h.clock.advance(1ms);
  h.core.tick();
  EXPECT_EQ(h.core.takeIdleStretches(), (std::vector<Duration>{7ms, 7ms}));
  SchedulerMetrics m = h.core.metrics();
  EXPECT_EQ(m.slotIdleStretches, 3u);
  EXPECT_EQ(m.longestSlotIdle, Duration(40ms));
}

TEST(Workers, IdleStretchesEndWhenTheWorkGoesElsewhereOrTheWorkerLeaves) {
  Harness h;
  h.worker("a", 1);
  auto b = h.worker("b", 1);
  auto c = h.worker("c", 1, {"aarch64-linux"});  // cannot run it: never idle
  h.build(1, h.step("s"));
  h.build(2, h.step("t", {}, "aarch64-linux"));
  h.clock.advance(20ms);
  h.core.tick();  // a, b idle with "s" since the builds; c with "t"
  h.clock.advance(10ms);
  h.core.removeWorker(c);  // c's stretch: 30 ms
  h.clock.advance(5ms);
  EXPECT_EQ(h.dispatch(), (std::vector<std::string>{"s"}));  // to a
  h.clock.advance(1ms);
  h.core.tick();  // a's and b's stretches ended at the dispatch (35 ms)
  EXPECT_EQ(h.core.takeIdleStretches(),
            (std::vector<Duration>{30ms, 35ms, 35ms}));
  h.clock.advance(1s);
  h.core.tick();  // b stays free, but nothing is queued for it
  EXPECT_TRUE(h.core.takeIdleStretches().empty());
  EXPECT_EQ(h.core.metrics().longestSlotIdle, Duration(35ms));
  (void)b;
}

// After a restart, a step that may still run on a worker is held back
// until its worker reports it (adopted: it runs there, no attempt counted)
// or the hold ends (queued as usual); a step no one can take is refused.
TEST(Workers, AHeldStepIsAdoptedByItsWorkerOrQueuedWhenTheHoldEnds) {
  Harness h;
  auto a = h.step("a");
  auto b = h.step("b");
  auto arm = h.step("arm", {}, "aarch64-linux");
  h.build(1, a);
  h.build(2, b);
  h.build(3, arm);
  auto w = h.worker("w", 1);
  auto until = h.clock.wallNow() + 10s;
  EXPECT_TRUE(h.core.holdStep(a, until));
  EXPECT_TRUE(h.core.holdStep(b, until));
  EXPECT_TRUE(h.dispatch().empty());  // both held, `arm` has no worker
  EXPECT_FALSE(h.core.adoptStep(arm, w));  // not a system of `w`
  ASSERT_TRUE(h.core.adoptStep(a, w));
  EXPECT_EQ(h.core.step(a).state, StepView::State::kRunning);
  EXPECT_EQ(h.core.step(a).attempts, 0u);
  EXPECT_FALSE(h.core.adoptStep(a, w));  // running already
  auto w2 = h.worker("w2", 1);
  EXPECT_FALSE(h.core.holdStep(a, until));  // running: not held
  h.clock.advance(9s);
  EXPECT_TRUE(h.dispatch().empty());
  h.clock.advance(1s);  // the hold of b ends: it goes to the free worker
  auto next = h.core.nextAssignments();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].step, b);
  EXPECT_EQ(next[0].worker, w2);
  EXPECT_FALSE(h.core.adoptStep(b, w));  // running on w2; w is full anyway
  h.core.finishStep(a, StepResult::success(1s));
  EXPECT_FALSE(h.core.hasBuild(1));
}

}  // namespace
}  // namespace kiln::scheduler::test
