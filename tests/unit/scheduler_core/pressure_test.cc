// Placement by what workers report: pressure thresholds keep new steps off
// a worker until it recovers; memory needs (a package's last peak, the
// retry after running out of memory) keep steps off workers with less
// free memory while a worker with enough exists.

#include "harness.h"

namespace kiln::scheduler::test {
namespace {

using Strings = std::vector<std::string>;
constexpr uint64_t kGiB = uint64_t{1} << 30;

WorkerId limitedWorker(Harness& h, const std::string& name,
                       PressureLimits limits, unsigned slots = 1) {
  WorkerSpec spec{name, {"x86_64-linux"}, {}, {}, slots, 1.0};
  spec.limits = limits;
  return h.core.registerWorker(spec);
}

WorkerHealth withMemoryPressure(double percent) {
  WorkerHealth health;
  health.memoryPressure = percent;
  return health;
}

WorkerHealth withFreeMemory(uint64_t bytes) {
  WorkerHealth health;
  health.freeMemory = bytes;
  return health;
}

TEST(Pressure, WorkerOverAThresholdGetsNoNewStepUntilItRecovers) {
  Harness h;
  PressureLimits limits;
  limits.maxMemoryPressure = 20;
  auto w1 = limitedWorker(h, "w1", limits, 2);
  auto s = h.step("s");
  h.core.heartbeat(w1, 0, withMemoryPressure(42));
  h.build(1, s);
  EXPECT_TRUE(h.dispatch().empty());
  WaitReason why = h.core.whyWaiting(s);
  EXPECT_EQ(why.kind, WaitReason::Kind::kWorkersUnderPressure);
  EXPECT_EQ(why.detail, "worker w1: memory pressure 42% > 20%");
  EXPECT_EQ(h.core.pressure(w1), "memory pressure 42% > 20%");
  // Its slots are not idle with work while it is over its threshold.
  h.clock.advance(10s);
  h.core.tick();
  EXPECT_EQ(h.core.metrics().idleSlotSeconds, 0);

  h.core.heartbeat(w1, 0, withMemoryPressure(12.5));
  EXPECT_EQ(h.core.pressure(w1), "");
  EXPECT_EQ(h.dispatch(), Strings{"s"});
}

TEST(Pressure, EachThresholdNamesItsValue) {
  Harness h;
  PressureLimits limits;
  limits.maxCpuPressure = 50;
  limits.maxIoPressure = 30;
  limits.maxLoadAverage = 8;
  limits.minFreeDisk = 10 * kGiB;
  auto w = limitedWorker(h, "w", limits);
  WorkerHealth health;
  health.cpuPressure = 50;  // at the threshold: not over it
  health.ioPressure = 30.5;
  h.core.heartbeat(w, 0, health);
  EXPECT_EQ(h.core.pressure(w), "IO pressure 30.5% > 30%");
  health.ioPressure = 1;
  health.loadAverage = 9.25;
  h.core.heartbeat(w, 0, health);
  EXPECT_EQ(h.core.pressure(w), "load average 9.2 > 8");
  health.loadAverage = 2;
  health.freeDisk = 2 * kGiB;
  h.core.heartbeat(w, 0, health);
  EXPECT_EQ(h.core.pressure(w), "free disk 2G < 10G");
  health.freeDisk = 20 * kGiB;
  health.cpuPressure = 77;
  h.core.heartbeat(w, 0, health);
  EXPECT_EQ(h.core.pressure(w), "CPU pressure 77% > 50%");
}

TEST(Pressure, WithoutThresholdsPressureChangesNothing) {
  Harness h;
  auto w = h.worker("w");
  h.core.heartbeat(w, 0, withMemoryPressure(99));
  h.build(1, h.step("s"));
  EXPECT_EQ(h.dispatch(), Strings{"s"});
}

TEST(Pressure, WorkBypassesTheWorkerUnderPressure) {
  Harness h;
  PressureLimits limits;
  limits.maxMemoryPressure = 20;
  auto hot = limitedWorker(h, "hot", limits);
  auto cool = limitedWorker(h, "cool", limits);
  h.core.heartbeat(hot, 0, withMemoryPressure(80));
  h.build(1, h.step("a"));
  h.build(2, h.step("b"));
  auto as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 1u);
  EXPECT_EQ(as[0].worker, cool);
  WaitReason why = h.core.whyWaiting(*h.core.findStep(drv("b")));
  EXPECT_EQ(why.kind, WaitReason::Kind::kWorkersUnderPressure);
  EXPECT_EQ(why.detail, "worker hot: memory pressure 80% > 20%");
  h.core.heartbeat(hot, 0, withMemoryPressure(0));
  EXPECT_EQ(h.dispatch(), Strings{"b"});
}

TEST(Pressure, SlotsFreedWhilePausedReturnWithTheWorker) {
  Harness h;
  PressureLimits limits;
  limits.maxIoPressure = 10;
  auto w = limitedWorker(h, "w", limits);
  auto a = h.step("a");
  h.build(1, a);
  h.build(2, h.step("b"));
  ASSERT_EQ(h.dispatch(), Strings{"a"});
  WorkerHealth io;
  io.ioPressure = 60;
  h.core.heartbeat(w, 1, io);
  h.core.finishStep(a, StepResult::success(1s));
  EXPECT_TRUE(h.dispatch().empty());
  h.core.heartbeat(w, 0, WorkerHealth{});  // unreadable: never breaches
  EXPECT_EQ(h.dispatch(), Strings{"b"});
  h.core.removeWorker(w);  // class counts stay consistent
  EXPECT_EQ(h.core.metrics().freeSlots, 0u);
}

TEST(Memory, NextBuildOfAJobAvoidsWorkersWithLessFreeMemoryThanItsPeak) {
  Harness h;
  auto small = h.worker("small");
  auto big = h.worker("big");
  h.core.heartbeat(small, 0, withFreeMemory(2 * kGiB));
  h.core.heartbeat(big, 0.5, withFreeMemory(16 * kGiB));
  auto first = h.step("chromium-1", {}, "x86_64-linux", {}, "chromium");
  h.build(1, first);
  auto as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 1u);
  EXPECT_EQ(as[0].worker, small);  // no peak known yet: lowest load
  h.core.finishStep(first,
                    StepResult::success(1s).withPeak(uint64_t{6} * kGiB));

  auto next = h.step("chromium-2", {}, "x86_64-linux", {}, "chromium");
  h.build(2, next);
  EXPECT_EQ(h.core.step(next).memoryNeed, 6 * kGiB);
  as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 1u);
  EXPECT_EQ(as[0].worker, big);
}

TEST(Memory, AStepWaitsForTheWorkerWithEnoughMemoryAndOthersPass) {
  Harness h;
  auto small = h.worker("small");
  auto big = h.worker("big");
  h.core.heartbeat(small, 0, withFreeMemory(2 * kGiB));
  h.core.heartbeat(big, 0, withFreeMemory(16 * kGiB));
  h.core.setHistoricalPeak("heavy", 8 * kGiB);
  auto filler = h.step("filler");
  h.build(1, filler, 1, 10);                        // first in order
  ASSERT_EQ(h.core.nextAssignments(1).size(), 1u);  // lowest index: small
  auto filler2 = h.step("filler2");
  h.build(2, filler2, 1, 10);
  auto heavy = h.step("heavy-1", {}, "x86_64-linux", {}, "heavy");
  h.build(3, heavy, 1, 5);
  auto light = h.step("light");
  h.build(4, light);
  // filler2 takes the big worker; heavy cannot go to small, light can.
  EXPECT_EQ(h.dispatch(), (Strings{"filler2"}));
  h.core.finishStep(filler, StepResult::success(1s));
  EXPECT_EQ(h.dispatch(), Strings{"light"});
  WaitReason why = h.core.whyWaiting(heavy);
  EXPECT_EQ(why.kind, WaitReason::Kind::kAllSlotsBusy);
  h.core.finishStep(light, StepResult::success(1s));
  why = h.core.whyWaiting(heavy);
  EXPECT_EQ(why.kind, WaitReason::Kind::kNeedsMemory);
  EXPECT_EQ(why.detail,
            "needs 8G of free memory (small 2G free, big 16G free, busy)");
  h.core.finishStep(filler2, StepResult::success(1s));
  EXPECT_EQ(h.dispatch(), Strings{"heavy-1"});
}

TEST(Memory, ANeedNoWorkerMeetsDoesNotHoldTheStep) {
  Harness h;
  auto w = h.worker("w");
  h.core.heartbeat(w, 0, withFreeMemory(4 * kGiB));
  h.core.setHistoricalPeak("huge", 64 * kGiB);
  h.build(1, h.step("huge-1", {}, "x86_64-linux", {}, "huge"));
  EXPECT_EQ(h.dispatch(), Strings{"huge-1"});
}

TEST(Memory, StepsSentSinceAHeartbeatCountAgainstItsFreeMemory) {
  Harness h;
  auto w = h.worker("w", 4);
  h.core.heartbeat(w, 0, withFreeMemory(10 * kGiB));
  h.core.setHistoricalPeak("p", 4 * kGiB);
  for (int i = 0; i < 3; ++i)
    h.build(i + 1,
            h.step("p" + std::to_string(i), {}, "x86_64-linux", {}, "p"));
  EXPECT_EQ(h.dispatch().size(), 2u);  // 10G holds two 4G peaks
  h.core.heartbeat(w, 0.5, withFreeMemory(5 * kGiB));
  EXPECT_EQ(h.dispatch().size(), 1u);
}

TEST(Memory, OutOfMemoryRetryGoesToAWorkerWithMoreFreeMemory) {
  SchedulerConfig config;
  config.retryBackoffBase = 1s;
  Harness h(config);
  auto small = h.worker("small");
  auto big = h.worker("big");
  h.core.heartbeat(small, 0, withFreeMemory(3 * kGiB));
  h.core.heartbeat(big, 0.9, withFreeMemory(12 * kGiB));
  auto s = h.step("s");
  h.build(1, s);
  auto as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 1u);
  ASSERT_EQ(as[0].worker, small);
  h.core.finishStep(s, StepResult::outOfMemoryRetry(1s, 2 * kGiB));
  EXPECT_EQ(h.core.step(s).memoryNeed, 3 * kGiB + 1);
  h.clock.advance(2s);
  as = h.core.nextAssignments();
  ASSERT_EQ(as.size(), 1u);
  EXPECT_EQ(as[0].worker, big);
}

TEST(Memory, OutOfMemoryRetryWithoutABiggerWorkerGoesAnywhere) {
  SchedulerConfig config;
  config.retryBackoffBase = 1s;
  Harness h(config);
  auto w = h.worker("w");
  h.core.heartbeat(w, 0, withFreeMemory(3 * kGiB));
  auto s = h.step("s");
  h.build(1, s);
  ASSERT_EQ(h.dispatch(), Strings{"s"});
  h.core.finishStep(s, StepResult::outOfMemoryRetry(1s, 0));
  h.clock.advance(2s);
  EXPECT_EQ(h.dispatch(), Strings{"s"});
}

}  // namespace
}  // namespace kiln::scheduler::test
