// The web's page models (model.h) against the fixture database: the same
// values the HTML pages render and the JSON API answers.
#include "kiln/web/model.h"

#include <gtest/gtest.h>

#include "web_fixture.h"

namespace kiln::web {
namespace {

using scheduler::Page;

class ModelTest : public ::testing::Test {
 protected:
  testing::WebFixture fx_;
  scheduler::StateView view_{fx_.stateDir()};
  Page page_ = Page::checked(0, 50);
};

TEST_F(ModelTest, StatusNamesAndLabelsAreHydras) {
  EXPECT_EQ(statusLabel(0), "Succeeded");
  EXPECT_EQ(statusLabel(2), "Dependency failed");
  EXPECT_EQ(statusLabel(9), "Unsupported system type");
  EXPECT_EQ(statusLabel(-1), "Queued");
  EXPECT_EQ(statusLabel(5), "Unknown");
  EXPECT_EQ(statusName(7), "timed-out");
  EXPECT_EQ(statusName(-1), "queued");
}

TEST_F(ModelTest, OverviewWithoutSchedulerShowsEvaluationsAndFailureRate) {
  int64_t now = 1'700'000'000'000 + 2 * 3'600'000;
  json m = overviewModel(view_, nullptr, nullptr, now);
  EXPECT_FALSE(m["scheduler"].get<bool>());
  ASSERT_EQ(m["evaluations"].size(), 2u);
  EXPECT_EQ(m["evaluations"][0]["id"], fx_.eval);
  EXPECT_EQ(m["evaluations"][0]["failed"], 2);
  EXPECT_EQ(m["evaluations"][0]["unfinished"], 1);
  ASSERT_EQ(m["failureRate"].size(), 24u);
  // Base builds stopped at T0 + 1 min (hour 22 of 24), the second's at
  // T0 + 61 min (hour 23).
  EXPECT_EQ(m["failureRate"][22]["finished"], 5);
  EXPECT_EQ(m["failureRate"][22]["failed"], 2);
  EXPECT_EQ(m["failureRate"][23]["finished"], 4);
  EXPECT_EQ(m["failureRate"][23]["failed"], 2);
}

TEST_F(ModelTest, OverviewWithSnapshotShowsQueueRunningAndWorkers) {
  scheduler::SchedulerSnapshot snap;
  snap.takenMs = 1'700'000'000'000 + 3'600'000 + 11'000;
  snap.queue = {{fx_.helloStep, fx_.drv("hello"), "x86_64-linux", "running",
                 "running on builder-1"}};
  snap.workers = {{"builder-1", {"x86_64-linux"}, 4, 1, {}, {}, 0, 0, 0}};
  snap.metrics.queuedBySystem = {{"aarch64-linux", 3}};
  snap.dispatches = 4;
  snap.dispatchLatencySum = 0.02;
  json m = overviewModel(view_, &snap, nullptr, snap.takenMs);
  ASSERT_EQ(m["running"].size(), 1u);
  EXPECT_EQ(m["running"][0]["worker"], "builder-1");
  EXPECT_EQ(m["running"][0]["elapsedMs"], 10'000);
  EXPECT_EQ(m["queue"][0]["system"], "aarch64-linux");
  EXPECT_EQ(m["queue"][0]["queued"], 3);
  EXPECT_EQ(m["workers"][0]["load"], 0.25);
  EXPECT_DOUBLE_EQ(m["metrics"]["meanDispatchLatencyMs"].get<double>(), 5.0);
}

TEST_F(ModelTest, MetricsHistoryGivesPerIntervalMeans) {
  MetricsHistory h(1000, 3);
  scheduler::SchedulerSnapshot s;
  auto at = [&](int64_t ms, uint64_t n, double sum, double idle) {
    s.takenMs = ms;
    s.dispatches = n;
    s.dispatchLatencySum = sum;
    s.metrics.idleSlotSeconds = idle;
    h.record(s);
  };
  at(1000, 0, 0, 0);
  at(1500, 9, 9, 9);  // too soon: dropped
  at(2000, 10, 0.1, 2);
  at(3000, 10, 0.1, 2.5);
  json series = h.series();
  ASSERT_EQ(series.size(), 2u);
  EXPECT_DOUBLE_EQ(series[0]["dispatchLatencyMs"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(series[0]["idleSlotSeconds"].get<double>(), 2.0);
  EXPECT_TRUE(series[1]["dispatchLatencyMs"].is_null());
  at(4000, 11, 0.2, 3);  // capacity 3: the first sample goes
  EXPECT_EQ(h.series().size(), 2u);
  EXPECT_EQ(h.series()[0]["atMs"], 3000);
}

TEST_F(ModelTest, JobsetHasEvaluationsAndAStatusMatrix) {
  json m = jobsetModel(view_, "nixpkgs", "trunk", page_, page_, 10);
  EXPECT_EQ(m["evaluations"]["rows"].size(), 2u);
  auto& jobs = m["matrix"]["jobs"]["rows"];
  ASSERT_EQ(jobs.size(), 5u);
  EXPECT_EQ(jobs[3]["job"], "hello");
  EXPECT_EQ(jobs[3]["cells"][0]["statusName"], "failed");
  EXPECT_EQ(jobs[3]["cells"][1]["statusName"], "success");
  EXPECT_EQ(jobs[0]["job"], "bash");
  EXPECT_EQ(jobs[0]["cells"][0]["statusName"], "queued");
  EXPECT_THROW(jobsetModel(view_, "nixpkgs", "nope", page_, page_, 10),
               NotFound);
}

TEST_F(ModelTest, EvaluationListsFilteredBuildsAndErrors) {
  scheduler::BuildFilter failed{scheduler::BuildState::kFailed, "", ""};
  json m = evaluationModel(view_, fx_.eval, failed, page_, page_);
  EXPECT_EQ(m["previous"], fx_.base);
  ASSERT_EQ(m["builds"]["rows"].size(), 2u);
  EXPECT_EQ(m["builds"]["rows"][0]["job"], "gcc");
  EXPECT_EQ(m["builds"]["rows"][1]["statusLabel"], "Failed");
  EXPECT_EQ(m["filter"]["state"], "failed");
  EXPECT_EQ(m["errors"]["rows"][0]["attr"], "broken.pkg");
  EXPECT_THROW(evaluationModel(view_, 999, {}, page_, page_), NotFound);
}

TEST_F(ModelTest, ComparisonWithThePreviousEvaluation) {
  json m = comparisonModel(view_, fx_.eval, 0,
                           scheduler::ChangeKind::kNewlyFailing, page_);
  EXPECT_EQ(m["base"]["id"], fx_.base);
  EXPECT_EQ(m["counts"]["newly-failing"], 1);
  EXPECT_EQ(m["counts"]["newly-succeeding"], 1);
  EXPECT_EQ(m["counts"]["still-failing"], 1);
  EXPECT_EQ(m["counts"]["new"], 1);
  EXPECT_EQ(m["counts"]["removed"], 1);
  EXPECT_EQ(m["counts"]["unfinished"], 1);
  // Every job in both evaluations has another .drv in the fixture's base.
  EXPECT_EQ(m["counts"]["changed"], 4);
  ASSERT_EQ(m["changes"]["rows"].size(), 1u);
  EXPECT_EQ(m["changes"]["rows"][0]["job"], "hello");
  EXPECT_EQ(m["changes"]["rows"][0]["before"]["statusName"], "success");
  EXPECT_THROW(comparisonModel(view_, fx_.base, 0,
                               scheduler::ChangeKind::kNewJob, page_),
               NotFound);
  EXPECT_EQ(changeKindFromName("removed"), scheduler::ChangeKind::kRemovedJob);
  EXPECT_FALSE(changeKindFromName("bogus"));
  json changed = comparisonModel(view_, fx_.eval, 0,
                                 scheduler::ChangeKind::kChanged, page_);
  std::vector<std::string> jobs;
  for (auto& r : changed["changes"]["rows"]) jobs.push_back(r["job"]);
  EXPECT_EQ(jobs, (std::vector<std::string>{"bash", "curl", "gcc", "hello"}));
}

TEST_F(ModelTest, BuildShowsStepsOutputsSizesAndLogAttempts) {
  PathSizeFn sizes = [](const std::string& path) -> std::optional<PathSize> {
    if (path == testing::WebFixture::out("hello-1.0")) return PathSize{100, 250};
    return std::nullopt;
  };
  json m = buildModel(view_, fx_.stateDir(), fx_.hello, sizes);
  EXPECT_EQ(m["project"], "nixpkgs");
  EXPECT_EQ(m["build"]["status"], 1);
  EXPECT_EQ(m["step"]["worker"], "builder-1");
  EXPECT_EQ(m["step"]["durationMs"], 42'000);
  ASSERT_EQ(m["logs"].size(), 2u);
  EXPECT_EQ(m["logs"][1]["attempt"], 2);
  json ok = buildModel(view_, fx_.stateDir(), fx_.helloBase, sizes);
  ASSERT_EQ(ok["outputs"].size(), 1u);
  EXPECT_EQ(ok["outputs"][0]["narSize"], 100);
  EXPECT_EQ(ok["outputs"][0]["closureSize"], 250);
  EXPECT_THROW(buildModel(view_, fx_.stateDir(), 999, sizes), NotFound);
}

TEST_F(ModelTest, JobHistoryAndLatest) {
  json m = jobModel(view_, "nixpkgs", "trunk", "hello", page_);
  ASSERT_EQ(m["builds"]["rows"].size(), 2u);
  EXPECT_EQ(m["builds"]["rows"][0]["id"], fx_.hello);
  EXPECT_EQ(m["builds"]["rows"][0]["durationMs"], 42'000);
  EXPECT_EQ(m["latest"], fx_.helloBase);
  EXPECT_EQ(m["latestFinished"], fx_.helloBase);
}

TEST_F(ModelTest, QueueIsPagedAndSaysWhyEachStepWaits) {
  scheduler::SchedulerSnapshot snap;
  snap.takenMs = 5;
  for (int i = 0; i < 3; ++i)
    snap.queue.push_back({i + 1, fx_.drv("x" + std::to_string(i)),
                          "x86_64-linux", "waiting",
                          "no worker for x86_64-linux"});
  json m = queueModel(&snap, Page::checked(1, 1));
  EXPECT_EQ(m["total"], 3);
  ASSERT_EQ(m["steps"]["rows"].size(), 1u);
  EXPECT_EQ(m["steps"]["rows"][0]["stepId"], 2);
  EXPECT_EQ(m["steps"]["rows"][0]["whyWaiting"], "no worker for x86_64-linux");
  EXPECT_TRUE(m["steps"]["more"].get<bool>());
  EXPECT_FALSE(queueModel(nullptr, page_)["scheduler"].get<bool>());
}

TEST_F(ModelTest, SearchByJobDrvAndOutput) {
  json m = searchModel(view_, "/nix/store", "hel");
  ASSERT_EQ(m["jobs"].size(), 1u);
  EXPECT_EQ(m["jobs"][0]["latestBuild"], fx_.hello);
  json d = searchModel(view_, "/nix/store", std::string(32, 'd') + "-hello.drv");
  ASSERT_EQ(d["builds"].size(), 1u);
  EXPECT_EQ(d["builds"][0]["id"], fx_.hello);
  json o = searchModel(view_, "/nix/store", std::string(32, 'o'));
  ASSERT_EQ(o["outputs"].size(), 1u);
  EXPECT_EQ(o["outputs"][0]["build"], fx_.helloBase);
}

}  // namespace
}  // namespace kiln::web
