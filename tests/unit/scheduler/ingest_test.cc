// Ingestion: closures expand into steps, valid outputs are skipped, cached
// failures fail fast with 8 and dependents with 2 (also when the failed
// step is still in the core).
#include "kiln/scheduler/ingest.h"

#include <gtest/gtest.h>

#include "service_fixture.h"

namespace kiln::scheduler {
namespace {

using testing::makeDrv;
using testing::makeOutputValid;

class IngestTest : public ::testing::Test {
 protected:
  TempDir dir_{"kiln-ingest"};
  StateDb db_{dir_.path() + "/scheduler.sqlite"};
  store::LocalStore store_{dir_.path()};
  FakeClock clock_{TimePoint(Duration(1000000))};
  SchedulerCore core_{clock_};
  Ingestor ingestor_{db_, store_, core_, clock_};

  // a <- b <- c (c needs b needs a)
  std::string a_ = makeDrv(store_, "a");
  std::string b_ = makeDrv(store_, "b", {a_});
  std::string c_ = makeDrv(store_, "c", {b_});

  void addBuild(BuildId id, StepId top) { core_.addBuild({id, 1, top, 0, 0}); }
};

TEST_F(IngestTest, ExpandsTheWholeClosureDependenciesFirst) {
  auto r = ingestor_.ingest(c_);
  ASSERT_TRUE(r.top);
  EXPECT_EQ(r.newSteps, 3u);
  EXPECT_EQ(ingestor_.index().size(), 3u);
  addBuild(1, *r.top);
  EXPECT_EQ(core_.step(*core_.findStep(a_)).state, StepView::State::kQueued);
  EXPECT_EQ(core_.whyWaiting(*r.top).kind,
            WaitReason::Kind::kWaitingForDependencies);
  // Rows exist with their dependency edges; a second ingestion shares them.
  auto row = db_.stepByDrv(b_);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->system, "x86_64-linux");
  EXPECT_EQ(row->pname, "b");
  auto again = ingestor_.ingest(c_);
  EXPECT_EQ(again.newSteps, 0u);
  EXPECT_EQ(*again.top, *r.top);
}

TEST_F(IngestTest, ValidOutputsAreNotBuilt) {
  makeOutputValid(store_, a_);
  auto r = ingestor_.ingest(c_);
  EXPECT_EQ(r.newSteps, 2u);
  EXPECT_EQ(r.validDerivations, 1u);
  EXPECT_FALSE(core_.findStep(a_));
  makeOutputValid(store_, b_);
  makeOutputValid(store_, c_);
  TempDir d2{"kiln-ingest2"};
  StateDb db2(d2.path() + "/s.sqlite");
  SchedulerCore core2(clock_);
  Ingestor ing2(db2, store_, core2, clock_);
  auto done = ing2.ingest(c_);
  EXPECT_FALSE(done.top);  // everything valid: nothing to build
  EXPECT_EQ(done.newSteps, 0u);
}

TEST_F(IngestTest, CachedFailureFailsFastAndDependentsGetStatus2) {
  db_.addCachedFailure({b_, 1, 0, 0});
  auto r = ingestor_.ingest(c_);
  ASSERT_TRUE(r.top);
  EXPECT_FALSE(core_.findStep(a_));  // a cached failure's inputs are not needed
  auto bStep = core_.findStep(b_);
  ASSERT_TRUE(bStep);
  EXPECT_EQ(core_.step(*bStep).state, StepView::State::kFailed);
  EXPECT_EQ(db_.stepByDrv(b_)->status, 8);
  addBuild(7, *r.top);
  auto events = core_.takeBuildEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, BuildEvent::Kind::kFailed);
  EXPECT_EQ(events[0].status, StepStatus::kDepFailed);
}

TEST_F(IngestTest, CachedFailureOfTheTopGivesStatus8) {
  db_.addCachedFailure({c_, 1, 0, 0});
  auto r = ingestor_.ingest(c_);
  addBuild(3, *r.top);
  auto events = core_.takeBuildEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].status, StepStatus::kCachedFailure);
}

TEST_F(IngestTest, ExpiredCachedFailuresAreIgnored) {
  db_.addCachedFailure({b_, 1, 0, 5});  // expired long ago
  auto r = ingestor_.ingest(c_);
  EXPECT_EQ(r.newSteps, 3u);
}

// b failed for a build of c (the core keeps it, failed); later builds
// need it again: 8 for b while its failure is cached, 2 for c; once the
// cached failure is cleared, b is queued again.
TEST_F(IngestTest, AFailedStepStillInTheCoreIsACachedFailureForNewBuilds) {
  auto r = ingestor_.ingest(c_);
  addBuild(1, *r.top);
  StepId a = *core_.findStep(a_), b = *core_.findStep(b_);
  ASSERT_EQ(core_.nextAssignments().size(), 0u);  // no worker yet
  WorkerSpec w;
  w.name = "w";
  w.systems = {"x86_64-linux"};
  core_.registerWorker(w);
  ASSERT_EQ(core_.nextAssignments().size(), 1u);
  core_.finishStep(a, StepResult::success(Duration(1)));
  ASSERT_EQ(core_.nextAssignments().size(), 1u);
  core_.finishStep(b, StepResult::permanent(StepStatus::kFailed, Duration(1)));
  db_.finishStep(*ingestor_.index().dbId(b), 1, 0, "exit 1");
  db_.addCachedFailure({b_, 1, 0, 0});
  core_.takeBuildEvents();

  auto rb = ingestor_.ingest(b_);
  EXPECT_EQ(*rb.top, b);
  addBuild(2, *rb.top);
  auto rc = ingestor_.ingest(c_);
  addBuild(3, *rc.top);
  auto events = core_.takeBuildEvents();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].build, 2);
  EXPECT_EQ(events[0].status, StepStatus::kCachedFailure);
  EXPECT_EQ(events[1].build, 3);
  EXPECT_EQ(events[1].status, StepStatus::kDepFailed);
  EXPECT_EQ(db_.stepByDrv(b_)->status, 1) << "the real failure is kept";

  db_.clearCachedFailures(b_);
  ingestor_.ingest(b_);
  EXPECT_EQ(core_.step(b).state, StepView::State::kQueued);
  EXPECT_FALSE(db_.stepByDrv(b_)->finished);
}

// The scheduler died after registering a's output but before its result:
// the next ingestion finishes the row instead of leaving it open forever.
TEST_F(IngestTest, AnOpenRowWhoseOutputsAreValidIsFinished) {
  auto r = ingestor_.ingest(a_);
  addBuild(1, *r.top);
  ASSERT_FALSE(db_.stepByDrv(a_)->finished);
  makeOutputValid(store_, a_);
  SchedulerCore core2(clock_);  // a restarted scheduler
  Ingestor ing2(db_, store_, core2, clock_);
  auto again = ing2.ingest(c_);
  EXPECT_EQ(again.validDerivations, 1u);
  auto row = db_.stepByDrv(a_);
  EXPECT_TRUE(row->finished);
  EXPECT_EQ(row->status, 0);
}

TEST_F(IngestTest, AMissingDerivationIsNamed) {
  std::string missing =
      "/nix/store/00000000000000000000000000000000-nothere.drv";
  try {
    ingestor_.ingest(missing);
    FAIL() << "no error";
  } catch (const store::InvalidPathError& e) {
    EXPECT_NE(std::string(e.what()).find("nothere.drv"), std::string::npos);
  }
}

// A batch (Ingestor::ingestAll) gives each build what ingesting them one
// after the other would: shared steps made once, by the first build that
// needs them, and a bad build aborted alone.
TEST_F(IngestTest, ABatchIsIngestedAsOneBuildAfterTheOther) {
  std::string d = makeDrv(store_, "d", {b_});
  makeOutputValid(store_, a_);
  std::string missing =
      "/nix/store/00000000000000000000000000000000-nothere.drv";
  auto out = ingestor_.ingestAll({c_, missing, d, b_, c_});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_FALSE(out[0].error);
  EXPECT_EQ(out[0].result.newSteps, 2u);  // c and b; a is valid
  EXPECT_EQ(out[0].result.validDerivations, 1u);
  ASSERT_TRUE(out[1].error);
  EXPECT_THROW(std::rethrow_exception(out[1].error), store::InvalidPathError);
  EXPECT_EQ(out[2].result.newSteps, 1u);  // d alone: b is c's
  EXPECT_EQ(out[3].result.newSteps, 0u);
  EXPECT_EQ(out[4].result.newSteps, 0u);
  EXPECT_EQ(out[4].result.top, out[0].result.top);
  EXPECT_EQ(ingestor_.index().size(), 3u);
  StepId b = *core_.findStep(b_), dStep = *out[2].result.top;
  EXPECT_EQ(*out[3].result.top, b);
  int64_t bRow = db_.stepByDrv(b_)->id, dRow = db_.stepByDrv(d)->id;
  EXPECT_EQ(*ingestor_.index().dbId(dStep), dRow);
  EXPECT_EQ(db_.stepDeps(dRow), std::vector<int64_t>{bRow});
  EXPECT_TRUE(db_.stepDeps(bRow).empty());  // a is valid: no edge
  addBuild(1, dStep);
  EXPECT_EQ(core_.whyWaiting(dStep).kind,
            WaitReason::Kind::kWaitingForDependencies);
}

}  // namespace
}  // namespace kiln::scheduler
