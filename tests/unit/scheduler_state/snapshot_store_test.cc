// The scheduler's snapshot in the state database (snapshot_store.h): what
// a web front end on another host reads back, on both backends.
#include "kiln/scheduler/snapshot_store.h"

#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "state_backends.h"

namespace kiln::scheduler {
namespace {

SchedulerSnapshot sample(size_t queued) {
  SchedulerSnapshot s;
  s.takenMs = 1000;
  for (size_t i = 0; i < queued; ++i)
    s.queue.push_back({int64_t(i + 1), "/nix/store/x-" + std::to_string(i),
                       "x86_64-linux", "ready", "no free slot"});
  s.workers.push_back({"w1",
                       {"x86_64-linux"},
                       4,
                       1,
                       {"kvm"},
                       {"/nix/store/a.drv"},
                       900,
                       7,
                       1,
                       "IO pressure 60% > 50%",
                       "load 2.0, 1G free disk"});
  s.metrics.runningSteps = 1;
  s.metrics.queuedBySystem["x86_64-linux"] = queued;
  s.metrics.workerSystems = {"x86_64-linux"};
  s.dispatches = 12;
  s.dispatchLatencySum = 0.25;
  return s;
}

class SnapshotStoreTest : public ::testing::TestWithParam<test::StateBackend> {
 protected:
  TempDir dir_{"kiln-snapshot"};
  StateDb db_{test::freshStateDatabase(GetParam(), dir_.path())};
};

TEST_P(SnapshotStoreTest, AFrontEndReadsWhatTheSchedulerStoredWhileFresh) {
  EXPECT_EQ(loadSnapshot(db_, 5000, 10000), nullptr);  // none stored yet
  auto s = sample(3);
  storeSnapshot(db_, &s, 2000);
  auto got = loadSnapshot(db_, 5000, 10000);
  ASSERT_NE(got, nullptr);
  ASSERT_EQ(got->queue.size(), 3u);
  EXPECT_EQ(got->queue[2].drvPath, "/nix/store/x-2");
  ASSERT_EQ(got->workers.size(), 1u);
  EXPECT_EQ(got->workers[0].steps, s.workers[0].steps);
  EXPECT_EQ(got->workers[0].succeededSteps, 7u);
  EXPECT_EQ(got->workers[0].pressure, "IO pressure 60% > 50%");
  EXPECT_EQ(got->workers[0].health, "load 2.0, 1G free disk");
  EXPECT_EQ(got->metrics.queuedBySystem.at("x86_64-linux"), 3u);
  EXPECT_EQ(got->dispatches, 12u);
  // Too old: the scheduler stopped vouching for it.
  EXPECT_EQ(loadSnapshot(db_, 20000, 10000), nullptr);
  // Vouched for again without a new body.
  storeSnapshot(db_, nullptr, 19000);
  EXPECT_NE(loadSnapshot(db_, 20000, 10000), nullptr);
}

TEST_P(SnapshotStoreTest, TheQueueIsCutAndMalformedBodiesAreRefused) {
  auto s = sample(kMaxStoredQueue + 10);
  storeSnapshot(db_, &s, 1);
  auto got = loadSnapshot(db_, 1, 10);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->queue.size(), kMaxStoredQueue);
  EXPECT_THROW(decodeSnapshot("{}"), FormatError);
  EXPECT_THROW(decodeSnapshot("not json"), FormatError);
  EXPECT_THROW(decodeSnapshot(R"({"version": 2})"), FormatError);
  db_.db().exec("UPDATE scheduler_snapshot SET body = '[1,2]'");
  EXPECT_EQ(loadSnapshot(db_, 1, 10), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Backends, SnapshotStoreTest, test::allStateBackends(),
                         test::stateBackendName);

}  // namespace
}  // namespace kiln::scheduler
