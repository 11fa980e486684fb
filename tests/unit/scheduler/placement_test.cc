// Placement by what workers report, through the whole service: a worker
// over its pressure threshold gets no step until it recovers (and the
// queue says why), and a step that ran out of memory is retried on a
// worker with more free memory.
#include <gtest/gtest.h>

#include "memory_service.h"

namespace kiln::scheduler {
namespace {

using namespace std::chrono_literals;
using testing::FakeWorker;

class PlacementTest : public testing::MemoryServiceTest {
 protected:
  // The queue's explanation of step `drv` in a fresh snapshot.
  std::string reasonOf(const std::string& drv) {
    svc_->snapshot();  // asks for one
    clock_.advance(SchedulerService::kSnapshotInterval);
    svc_->pollOnce(0ms);
    for (auto& q : svc_->snapshot()->queue)
      if (q.drvPath == drv) return q.reason;
    return "";
  }

  const WorkerEntry* workerEntry(const std::string& name) {
    auto snap = svc_->snapshot();
    for (auto& w : snap->workers)
      if (w.name == name) {
        entry_ = w;
        return &entry_;
      }
    return nullptr;
  }

  WorkerEntry entry_;
};

TEST_F(PlacementTest, AWorkerUnderPressureGetsNoStepUntilItRecovers) {
  auto w = std::make_unique<FakeWorker>(*net_, "peer-w1", "w1");
  w->silent = true;
  w->thresholds.maxMemoryPressure = 20;
  w->hello();
  ASSERT_TRUE(until({w.get()}, [&] { return w->welcomed; }));
  w->beat.memoryPressure = 42;
  w->beat.freeMemoryBytes = uint64_t{3} << 30;
  w->heartbeat();
  svc_->addBuild(jobset_, "a", a_);
  // Each snapshot moves the clock: the worker beats to stay connected.
  std::string reason;
  ASSERT_TRUE(until({w.get()}, [&] {
    w->heartbeat();
    reason = reasonOf(a_);
    return reason == "worker w1: memory pressure 42% > 20%";
  })) << reason;
  EXPECT_TRUE(w->steps.empty());
  const WorkerEntry* e = workerEntry("w1");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->pressure, "memory pressure 42% > 20%");
  EXPECT_EQ(e->health,
            "load 0.0, memory/CPU/IO pressure 42.0/?/?%, 3G free memory, 1G "
            "free disk");

  w->beat.memoryPressure = 5;
  w->heartbeat();
  ASSERT_TRUE(until({w.get()}, [&] { return w->steps.size() == 1; }));
  EXPECT_EQ(workerEntry("w1")->pressure, "");
}

TEST_F(PlacementTest, OutOfMemoryIsRetriedOnAWorkerWithMoreFreeMemory) {
  auto small = join("small");
  auto big = join("big");
  small->beat.freeMemoryBytes = uint64_t{1} << 30;
  small->heartbeat();
  big->beat.load = 0.5;  // busier: the first attempt goes to `small`
  big->beat.freeMemoryBytes = uint64_t{8} << 30;
  big->heartbeat();
  int64_t id = svc_->addBuild(jobset_, "a", a_);
  ASSERT_TRUE(until({small.get(), big.get()},
                    [&] { return small->steps.size() == 1; }));
  protocol::StepResult r;
  r.stepId = small->steps[0].stepId;
  r.status = StepStatus::kOutOfMemory;
  r.errorMsg = "out of memory";
  r.startTimeMs = 1;
  r.stopTimeMs = 2;
  r.peakMemoryBytes = uint64_t{900} << 20;
  small->send(r);
  ASSERT_TRUE(until({small.get(), big.get()}, [&] {
    clock_.advance(1ms);  // past the retry's backoff
    return big->steps.size() == 1;
  }));
  EXPECT_EQ(small->steps.size(), 1u);
  buildLast(*big, "a-out");
  ASSERT_TRUE(
      until({small.get(), big.get()}, [&] { return build(id).finished; }));
  EXPECT_EQ(build(id).status, 0);
}

}  // namespace
}  // namespace kiln::scheduler
