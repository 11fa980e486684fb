// Reproducibility checks' rows (repeat_store.h) on both backends: a check
// goes from pending to its verdict, a step is checked once, and a jobset
// lists its non-deterministic jobs; the repeat share is kept per jobset,
// and the workers that refused a check (migration 18) with it.
#include "kiln/scheduler/repeat_store.h"

#include <gtest/gtest.h>

#include "jobset_fixture.h"

namespace kiln::scheduler {
namespace {

std::string drv(char c, const std::string& name) {
  return "/nix/store/" + std::string(32, c) + "-" + name + ".drv";
}

class RepeatStoreTest : public test::JobsetFixture {
 protected:
  RepeatStoreTest() : JobsetFixture(repeatFractionToPpm(0.05)) {}
  int64_t step(char c, const std::string& name) {
    return JobsetFixture::step(drv(c, name));
  }
  int64_t build(char c, const std::string& job) {
    return JobsetFixture::build(eval_, job, drv(c, job));
  }
  int64_t eval_ = eval("in");
};

INSTANTIATE_TEST_SUITE_P(Backends, RepeatStoreTest, test::allStateBackends(),
                         test::stateBackendName);

TEST_P(RepeatStoreTest, JobsetKeepsItsRepeatShare) {
  auto j = db_.jobset(jobset_);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->repeatPpm, 50000);
  j->repeatPpm = kRepeatPpmScale + 1;
  EXPECT_THROW(db_.updateJobset(*j), SchedulerStateError);
  j->repeatPpm = 0;
  db_.updateJobset(*j);
  EXPECT_EQ(db_.jobset(jobset_)->repeatPpm, 0);
}

// Kept across the check's states: a scheduler that starts again reads
// them with the pending check. Names may hold spaces, not line breaks.
TEST_P(RepeatStoreTest, TheWorkersThatRefusedACheckAreKept) {
  int64_t s = step('r', "refused");
  ASSERT_TRUE(addRepeatCheck(db_, s, jobset_, "w1", 100));
  EXPECT_TRUE(repeatCheck(db_, s)->refusedBy.empty());
  startRepeatCheck(db_, s, "w2");
  waitRepeatCheckAgain(db_, s);
  setRepeatCheckRefusedBy(db_, s, {"w2", "w3 (alice)"});
  auto pending = pendingRepeatChecks(db_, 10);
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].refusedBy,
            (std::vector<std::string>{"w2", "w3 (alice)"}));
  startRepeatCheck(db_, s, "w4");
  EXPECT_EQ(runningRepeatChecks(db_, 10).at(0).refusedBy.size(), 2u);
  EXPECT_EQ(requeueRunningRepeatChecks(db_), 1u);
  EXPECT_EQ(repeatCheck(db_, s)->refusedBy.size(), 2u) << "kept at a restart";
  EXPECT_THROW(setRepeatCheckRefusedBy(db_, s, {"a\nb"}), SchedulerStateError);
  EXPECT_THROW(setRepeatCheckRefusedBy(db_, s, {""}), SchedulerStateError);
  EXPECT_EQ(repeatCheck(db_, s)->refusedBy.size(), 2u);
}

TEST_P(RepeatStoreTest, CheckGoesFromPendingToItsVerdict) {
  int64_t s = step('a', "hello");
  EXPECT_TRUE(addRepeatCheck(db_, s, jobset_, "w1", 100));
  EXPECT_FALSE(addRepeatCheck(db_, s, jobset_, "w9", 200));
  auto pending = pendingRepeatChecks(db_, 10);
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].step, s);
  EXPECT_EQ(pending[0].firstWorker, "w1");
  EXPECT_EQ(pending[0].drvPath, drv('a', "hello"));
  EXPECT_EQ(pending[0].createdMs, 100);

  startRepeatCheck(db_, s, "w2");
  EXPECT_TRUE(pendingRepeatChecks(db_, 10).empty());
  EXPECT_EQ(repeatCheck(db_, s)->state, "running");
  EXPECT_EQ(repeatCheck(db_, s)->secondWorker, "w2");
  // A scheduler that stopped while it ran: pending again, sent anew.
  EXPECT_EQ(requeueRunningRepeatChecks(db_), 1u);
  EXPECT_EQ(pendingRepeatChecks(db_, 10).size(), 1u);
  EXPECT_EQ(repeatCheck(db_, s)->secondWorker, "");
  EXPECT_EQ(requeueRunningRepeatChecks(db_), 0u);
  startRepeatCheck(db_, s, "w2");

  finishRepeatCheck(db_, s, true, {false, {"dev", "out"}}, "/side/1", 300);
  auto c = repeatCheck(db_, s);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->state, "differs");
  EXPECT_EQ(c->differing, (std::vector<std::string>{"dev", "out"}));
  EXPECT_EQ(c->sideLocation, "/side/1");
  EXPECT_EQ(c->finishedMs, 300);

  setRepeatReport(db_, s, std::string(kMaxRepeatReport + 10, 'x'));
  EXPECT_EQ(repeatCheck(db_, s)->report.size(), kMaxRepeatReport);
}

TEST_P(RepeatStoreTest, FailedAndSameAreNotListedAsNonDeterministic) {
  int64_t same = step('a', "same"), failed = step('b', "failed");
  int64_t odd = step('c', "odd"), dep = step('d', "dep");
  int64_t oddBuild = build('c', "odd");
  for (int64_t s : {same, failed, odd, dep})
    addRepeatCheck(db_, s, jobset_, "w1", 1);
  finishRepeatCheck(db_, same, true, {true, {}}, "", 2);
  finishRepeatCheck(db_, failed, false, {}, "", 3);
  finishRepeatCheck(db_, odd, true, {false, {"out"}}, "/side/odd", 4);
  finishRepeatCheck(db_, dep, true, {false, {"out"}}, "/side/dep", 5);
  EXPECT_EQ(repeatCheck(db_, same)->state, "same");
  EXPECT_EQ(repeatCheck(db_, failed)->state, "failed");

  auto jobs = nonDeterministicJobs(db_, jobset_);
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0].check.step, dep);  // newest first
  EXPECT_EQ(jobs[0].job, "");
  EXPECT_EQ(jobs[0].build, 0);
  EXPECT_EQ(jobs[1].check.step, odd);
  EXPECT_EQ(jobs[1].job, "odd");
  EXPECT_EQ(jobs[1].build, oddBuild);
}

// Which checks' NARs may go: same ones at once, differing and failed ones
// once their report is stored and their retention passed; never a check
// still running or one whose NARs are already gone.
TEST_P(RepeatStoreTest, NarsToPruneHonourTheRetentionOfDifferences) {
  int64_t same = step('a', "same"), failed = step('b', "failed");
  int64_t odd = step('c', "odd"), fresh = step('d', "fresh");
  int64_t running = step('e', "running");
  for (int64_t s : {same, failed, odd, fresh, running})
    addRepeatCheck(db_, s, jobset_, "w1", 1);
  finishRepeatCheck(db_, same, true, {true, {}}, "/side/same", 10);
  finishRepeatCheck(db_, failed, false, {}, "/side/failed", 20);
  finishRepeatCheck(db_, odd, true, {false, {"out"}}, "/side/odd", 30);
  finishRepeatCheck(db_, fresh, true, {false, {"out"}}, "/side/fresh", 900);
  startRepeatCheck(db_, running, "w2");
  auto steps = [&](int64_t now, int64_t keep) {
    std::vector<int64_t> out;
    for (auto& c : repeatNarsToPrune(db_, now, keep, 10)) out.push_back(c.step);
    return out;
  };
  EXPECT_EQ(steps(1000, 500), (std::vector<int64_t>{same}))
      << "reports not stored yet";
  setRepeatReport(db_, failed, "the second build failed");
  setRepeatReport(db_, odd, "report");
  setRepeatReport(db_, fresh, "report");
  EXPECT_EQ(steps(1000, 500), (std::vector<int64_t>{same, failed, odd}));
  EXPECT_EQ(steps(1000, 0), (std::vector<int64_t>{same, failed, odd, fresh}));
  forgetRepeatNars(db_, same);
  EXPECT_EQ(repeatCheck(db_, same)->sideLocation, "");
  EXPECT_EQ(steps(1000, 500), (std::vector<int64_t>{failed, odd}));
  EXPECT_EQ(repeatNarsToPrune(db_, 1000, 0, 1).size(), 1u) << "bounded";
}

}  // namespace
}  // namespace kiln::scheduler
