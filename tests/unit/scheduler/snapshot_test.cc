// The published snapshot is never older than the last change it shows: a
// worker is in it as soon as it is welcomed, a dispatch and a cancellation
// as soon as the turn that made them ended, without a reader asking and
// without the clock moving. A cancelled build's unfinished steps are
// recorded as cancelled (status 4), leave the queue, and come back when a
// later build needs them.
#include <gtest/gtest.h>

#include "memory_service.h"

namespace kiln::scheduler {
namespace {

using namespace std::chrono_literals;

class SnapshotTest : public testing::MemoryServiceTest {
 protected:
  std::vector<std::string> workerNames() {
    std::vector<std::string> names;
    for (auto& w : svc_->snapshot()->workers) names.push_back(w.name);
    return names;
  }
  StepRow step(const std::string& drvPath) {
    return *svc_->db().stepByDrv(drvPath);
  }
};

TEST_F(SnapshotTest, AWorkerIsInTheFirstSnapshotReadAfterItsWelcome) {
  svc_->pollOnce(0ms);
  auto w1 = join("w1");  // returns once w1 holds its Welcome
  EXPECT_EQ(workerNames(), std::vector<std::string>{"w1"});
  auto w2 = join("w2");
  EXPECT_EQ(workerNames(), (std::vector<std::string>{"w1", "w2"}));
  EXPECT_EQ(svc_->snapshot()->metrics.workers, 2u);
}

TEST_F(SnapshotTest, ATurnThatDispatchesRepublishesWithoutAReader) {
  auto w = join("w1");
  int64_t id = svc_->addBuild(jobset_, "a", a_);
  ASSERT_TRUE(until({w.get()}, [&] { return w->steps.size() == 1; }));
  auto snap = svc_->snapshot();  // the first read since the join
  ASSERT_EQ(snap->queue.size(), 1u);
  EXPECT_EQ(snap->queue[0].state, "running");
  ASSERT_EQ(snap->workers.size(), 1u);
  EXPECT_EQ(snap->workers[0].steps, std::vector<std::string>{a_});
  buildLast(*w, "a-out");
  ASSERT_TRUE(until({w.get()}, [&] { return build(id).finished; }));
  snap = svc_->snapshot();
  EXPECT_TRUE(snap->queue.empty());
  EXPECT_TRUE(snap->workers[0].steps.empty());
  EXPECT_EQ(snap->workers[0].succeededSteps, 1u);
}

TEST_F(SnapshotTest, ACancelledBuildsQueuedStepsAreRecordedCancelled) {
  int64_t id = svc_->addBuild(jobset_, "b", b_);  // a queued, b waits
  svc_->pollOnce(0ms);
  EXPECT_EQ(svc_->snapshot()->queue.size(), 2u);
  EXPECT_FALSE(step(a_).finished);
  auto r = svc_->applyRequest("build-cancel", {{"build", id}});
  EXPECT_EQ(r["status"], "cancelled");
  svc_->pollOnce(0ms);
  EXPECT_EQ(build(id).status, 4);
  for (auto& drv : {a_, b_}) {
    EXPECT_TRUE(step(drv).finished) << drv;
    EXPECT_EQ(step(drv).status, 4) << drv;
    EXPECT_EQ(step(drv).stopMs, clock_.nowMs()) << drv;
  }
  EXPECT_TRUE(svc_->snapshot()->queue.empty());
  EXPECT_EQ(svc_->queue().size(), 0u);
  // A later build of the same derivation reopens the records and builds.
  int64_t again = svc_->addBuild(jobset_, "b", b_);
  EXPECT_FALSE(step(a_).finished);
  auto w = join("w1");
  ASSERT_TRUE(until({w.get()}, [&] { return w->steps.size() == 1; }));
  buildLast(*w, "a-out");
  ASSERT_TRUE(until({w.get()}, [&] { return w->steps.size() == 2; }));
  buildLast(*w, "b-out");
  ASSERT_TRUE(until({w.get()}, [&] { return build(again).finished; }));
  EXPECT_EQ(build(again).status, 0);
  EXPECT_EQ(step(a_).status, 0);
  EXPECT_EQ(build(id).status, 4);  // the cancelled build stays cancelled
}

TEST_F(SnapshotTest, ACancelledBuildsRunningStepIsRecordedCancelled) {
  int64_t id = svc_->addBuild(jobset_, "a", a_);
  auto w = join("w1");
  ASSERT_TRUE(until({w.get()}, [&] { return w->steps.size() == 1; }));
  svc_->applyRequest("build-cancel", {{"build", id}});
  ASSERT_TRUE(until({w.get()}, [&] { return w->cancels.size() == 1; }));
  EXPECT_EQ(step(a_).status, 4);
  EXPECT_TRUE(step(a_).finished);
  auto snap = svc_->snapshot();
  EXPECT_TRUE(snap->queue.empty());
  EXPECT_TRUE(snap->workers[0].steps.empty());
}

}  // namespace
}  // namespace kiln::scheduler
