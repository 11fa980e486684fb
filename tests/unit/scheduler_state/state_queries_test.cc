// StateView's read model (state_queries.h): pages, filters, the comparison
// of evaluations, the job matrix, job history, build steps, search and the
// failure rate, against a small database written through StateDb.
#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "kiln/scheduler/state_view.h"
#include "state_backends.h"

namespace kiln::scheduler {
namespace {

const std::string kStore = "/nix/store";

std::string drv(const std::string& name) {
  return kStore + "/" + std::string(32, name[0]) + "-" + name + ".drv";
}

class StateQueriesTest : public ::testing::TestWithParam<test::StateBackend> {
 protected:
  void SetUp() override {
    StateDb db(spec_);
    int64_t p = db.createProject({0, "nixpkgs", "packages", true});
    JobsetRow j;
    j.project = p;
    j.name = "trunk";
    j.location = "/src";
    jobset_ = db.createJobset(j);
    // Base evaluation: a ok, b failed, c failed, d ok (removed later),
    // e unfinished.
    base_ = db.createEvaluation({0, jobset_, "rev1", 1000, 5, 5, ""}, {});
    addBuild(db, base_, "a", 0);
    addBuild(db, base_, "b", 1);
    addBuild(db, base_, "c", 1);
    addBuild(db, base_, "d", 0);
    addBuild(db, base_, "e", -1);
    // Second: a failed (newly), b ok (newly), c failed (still), e
    // unfinished, f new; two per-job errors.
    eval_ = db.createEvaluation({0, jobset_, "rev2", 2000, 5, 5, ""},
                                {{"x.broken", "undefined variable"},
                                 {"y.broken", "infinite recursion"}});
    aBuild_ = addBuild(db, eval_, "a", 1);
    addBuild(db, eval_, "b", 0);
    addBuild(db, eval_, "c", 1);
    addBuild(db, eval_, "e", -1);
    addBuild(db, eval_, "f", 0);
    // The steps of a's newest build: top -> dep1 -> dep2; dep2 ran before
    // the build was created (another build's), dep1 for it.
    int64_t top = step(db, drv("a"), 2500, 2600);
    int64_t dep1 = step(db, drv("dep1"), 2100, 2400);
    int64_t dep2 = step(db, drv("dep2"), 500, 900);
    db.addStepDep(top, dep1);
    db.addStepDep(dep1, dep2);
    db.setBuildOutputs(
        aBuild_, {{"out", kStore + "/" + std::string(32, 'o') + "-a-1.0"}});
  }

  int64_t addBuild(StateDb& db, int64_t eval, const std::string& job,
                   int status) {
    BuildRow b;
    b.eval = eval;
    b.jobset = jobset_;
    b.job = job;
    b.system = job == "f" ? "aarch64-linux" : "x86_64-linux";
    b.drvPath = drv(job);
    b.createdMs = eval == base_ ? 100 : 2000;
    int64_t id = db.createBuild(b);
    if (status >= 0) db.finishBuild(id, status, b.createdMs + 50, "");
    return id;
  }

  int64_t step(StateDb& db, const std::string& path, int64_t start,
               int64_t stop) {
    StepRow s;
    s.drvPath = path;
    s.system = "x86_64-linux";
    s.createdMs = start;
    int64_t id = db.upsertStep(s);
    db.startStep(id, "w1", start);
    db.finishStep(id, 0, stop, "");
    return id;
  }

  std::vector<std::string> jobs(const Paged<BuildChange>& p) {
    std::vector<std::string> out;
    for (auto& c : p.rows) out.push_back(c.job);
    return out;
  }

  TempDir dir_{"kiln-queries"};
  DatabaseSpec spec_ = test::freshStateDatabase(GetParam(), dir_.path());
  int64_t jobset_ = 0, base_ = 0, eval_ = 0, aBuild_ = 0;
};

INSTANTIATE_TEST_SUITE_P(Backends, StateQueriesTest, test::allStateBackends(),
                         test::stateBackendName);

TEST_P(StateQueriesTest, PagesAreBoundedWithAClearError) {
  EXPECT_THROW(Page::checked(0, 0), SchedulerStateError);
  EXPECT_THROW(Page::checked(0, Page::kMaxLimit + 1), SchedulerStateError);
  EXPECT_THROW(Page::checked(-1, 10), SchedulerStateError);
  try {
    Page::checked(0, 100000);
    FAIL();
  } catch (const SchedulerStateError& e) {
    EXPECT_NE(std::string(e.what()).find("1..500"), std::string::npos);
  }
  EXPECT_EQ(Page::checked(20, 10).offset, 20);
}

TEST_P(StateQueriesTest, EvaluationsAreListedNewestFirstWithCounts) {
  StateView v(spec_);
  auto page = v.evaluations(jobset_, Page::checked(0, 1));
  ASSERT_EQ(page.rows.size(), 1u);
  EXPECT_TRUE(page.more);
  EXPECT_EQ(page.rows[0].eval.id, eval_);
  EXPECT_EQ(page.rows[0].project, "nixpkgs");
  EXPECT_EQ(page.rows[0].jobset, "trunk");
  EXPECT_EQ(page.rows[0].counts.all, 5);
  EXPECT_EQ(page.rows[0].counts.finished, 4);
  EXPECT_EQ(page.rows[0].counts.succeeded, 2);
  auto second = v.evaluations(0, Page::checked(1, 5));
  ASSERT_EQ(second.rows.size(), 1u);
  EXPECT_FALSE(second.more);
  EXPECT_EQ(second.rows[0].eval.id, base_);
  EXPECT_EQ(v.previousEvaluation(eval_), base_);
  EXPECT_EQ(v.previousEvaluation(base_), 0);
  EXPECT_EQ(v.latestEvaluation(), eval_);
  EXPECT_EQ(v.projects().at(0).name, "nixpkgs");
  EXPECT_EQ(v.jobsetsOf(v.projects().at(0).id).at(0).name, "trunk");
}

TEST_P(StateQueriesTest, EvaluationErrorsArePaged) {
  StateView v(spec_);
  auto first = v.evaluationErrors(eval_, Page::checked(0, 1));
  ASSERT_EQ(first.rows.size(), 1u);
  EXPECT_EQ(first.rows[0].attr, "x.broken");
  EXPECT_TRUE(first.more);
  auto second = v.evaluationErrors(eval_, Page::checked(1, 1));
  ASSERT_EQ(second.rows.size(), 1u);
  EXPECT_EQ(second.rows[0].error, "infinite recursion");
  EXPECT_FALSE(second.more);
}

TEST_P(StateQueriesTest, EvaluationBuildsAreFiltered) {
  StateView v(spec_);
  auto names = [&](BuildFilter f) {
    std::vector<std::string> out;
    for (auto& b : v.evaluationBuilds(eval_, f, Page::checked(0, 50)).rows)
      out.push_back(b.job);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names({}), (V{"a", "b", "c", "e", "f"}));
  EXPECT_EQ(names({BuildState::kFailed, "", ""}), (V{"a", "c"}));
  EXPECT_EQ(names({BuildState::kSucceeded, "", ""}), (V{"b", "f"}));
  EXPECT_EQ(names({BuildState::kUnfinished, "", ""}), (V{"e"}));
  EXPECT_EQ(names({BuildState::kAll, "", "aarch64-linux"}), (V{"f"}));
  EXPECT_EQ(names({BuildState::kAll, "c", ""}), (V{"c"}));
  auto page = v.evaluationBuilds(eval_, {}, Page::checked(2, 2));
  ASSERT_EQ(page.rows.size(), 2u);
  EXPECT_EQ(page.rows[0].job, "c");
  EXPECT_TRUE(page.more);
}

TEST_P(StateQueriesTest, ComparesTwoEvaluationsByJob) {
  StateView v(spec_);
  auto counts = v.compareCounts(eval_, base_);
  using K = ChangeKind;
  EXPECT_EQ(counts[size_t(K::kNewlyFailing)], 1);
  EXPECT_EQ(counts[size_t(K::kNewlySucceeding)], 1);
  EXPECT_EQ(counts[size_t(K::kStillFailing)], 1);
  EXPECT_EQ(counts[size_t(K::kNewJob)], 1);
  EXPECT_EQ(counts[size_t(K::kRemovedJob)], 1);
  EXPECT_EQ(counts[size_t(K::kUnfinished)], 1);
  auto page = Page::checked(0, 10);
  using V = std::vector<std::string>;
  auto failing = v.compare(eval_, base_, K::kNewlyFailing, page);
  EXPECT_EQ(jobs(failing), V{"a"});
  ASSERT_TRUE(failing.rows[0].before && failing.rows[0].after);
  EXPECT_EQ(failing.rows[0].before->status, 0);
  EXPECT_EQ(failing.rows[0].after->id, aBuild_);
  EXPECT_EQ(jobs(v.compare(eval_, base_, K::kNewlySucceeding, page)), V{"b"});
  EXPECT_EQ(jobs(v.compare(eval_, base_, K::kStillFailing, page)), V{"c"});
  auto added = v.compare(eval_, base_, K::kNewJob, page);
  EXPECT_EQ(jobs(added), V{"f"});
  EXPECT_FALSE(added.rows[0].before);
  auto removed = v.compare(eval_, base_, K::kRemovedJob, page);
  EXPECT_EQ(jobs(removed), V{"d"});
  EXPECT_FALSE(removed.rows[0].after);
  EXPECT_EQ(jobs(v.compare(eval_, base_, K::kUnfinished, page)), V{"e"});
}

TEST_P(StateQueriesTest, JobMatrixHasOneColumnPerEvaluation) {
  StateView v(spec_);
  auto m = v.jobMatrix(jobset_, 5, Page::checked(0, 3));
  ASSERT_EQ(m.evals.size(), 2u);
  EXPECT_EQ(m.evals[0].id, eval_);
  EXPECT_EQ(m.jobs, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(m.moreJobs);
  EXPECT_EQ(m.cells[0][0].build, aBuild_);
  EXPECT_EQ(m.cells[0][0].status, 1);
  EXPECT_EQ(m.cells[0][1].status, 0);
  auto rest = v.jobMatrix(jobset_, 5, Page::checked(3, 3));
  EXPECT_EQ(rest.jobs, (std::vector<std::string>{"e", "f"}));
  EXPECT_FALSE(rest.cells[0][0].finished);
  EXPECT_EQ(rest.cells[1][1].build, 0);  // f did not exist before
}

TEST_P(StateQueriesTest, JobHistoryAndLatestRedirects) {
  StateView v(spec_);
  auto h = v.jobHistory(jobset_, "a", Page::checked(0, 10));
  ASSERT_EQ(h.rows.size(), 2u);
  EXPECT_EQ(h.rows[0].build.id, aBuild_);
  EXPECT_EQ(h.rows[0].startMs, 2500);
  EXPECT_EQ(h.rows[0].stopMs, 2600);
  // a's newest build failed: latest is the base's success, but the base
  // has an unfinished build (e), so no finished evaluation has one.
  EXPECT_EQ(v.latestBuild(jobset_, "a", false), h.rows[1].build.id);
  EXPECT_EQ(v.latestBuild(jobset_, "a", true), 0);
  EXPECT_EQ(v.latestBuild(jobset_, "nope", false), 0);
}

TEST_P(StateQueriesTest, BuildStepsAreWhatRanForItAndDirectDependencies) {
  StateView v(spec_);
  auto steps = v.buildSteps(*v.rows().build(aBuild_));
  ASSERT_TRUE(steps.top);
  EXPECT_EQ(steps.top->drvPath, drv("a"));
  ASSERT_EQ(steps.ran.size(), 2u);
  EXPECT_EQ(steps.ran[0].drvPath, drv("dep1"));
  EXPECT_EQ(steps.ran[0].worker, "w1");
  EXPECT_EQ(steps.ran[1].drvPath, drv("a"));
  ASSERT_EQ(steps.dependencies.size(), 1u);
  EXPECT_EQ(steps.dependencies[0].drvPath, drv("dep1"));
  EXPECT_FALSE(steps.truncated);
  auto capped = v.buildSteps(*v.rows().build(aBuild_), 1);
  EXPECT_EQ(capped.ran.size(), 1u);
  EXPECT_TRUE(capped.truncated);
}

TEST_P(StateQueriesTest, SearchFindsJobsDerivationsAndOutputs) {
  StateView v(spec_);
  auto byJob = v.search("a", kStore);
  ASSERT_EQ(byJob.jobs.size(), 1u);
  EXPECT_EQ(byJob.jobs[0].latestBuild, aBuild_);
  EXPECT_EQ(byJob.jobs[0].project, "nixpkgs");
  auto byHash = v.search(std::string(32, 'b'), kStore);
  ASSERT_EQ(byHash.builds.size(), 2u);
  EXPECT_EQ(byHash.builds[0].job, "b");
  auto byOutput = v.search(kStore + "/" + std::string(10, 'o'), kStore);
  ASSERT_EQ(byOutput.outputs.size(), 1u);
  EXPECT_EQ(byOutput.outputs[0].build, aBuild_);
  EXPECT_TRUE(v.search("", kStore).jobs.empty());
  EXPECT_TRUE(v.search("zzz", kStore).jobs.empty());
}

TEST_P(StateQueriesTest, FailureRateCountsPerBucket) {
  StateView v(spec_);
  // Builds stopped at 150 (base) and 2050 (second): buckets of 1000 ms.
  auto rate = v.failureRate(3000, 1000, 3);
  ASSERT_EQ(rate.size(), 3u);
  EXPECT_EQ(rate[0].startMs, 0);
  EXPECT_EQ(rate[0].finished, 4);
  EXPECT_EQ(rate[0].failed, 2);
  EXPECT_EQ(rate[1].finished, 0);
  EXPECT_EQ(rate[2].finished, 4);
  EXPECT_EQ(rate[2].failed, 2);
  EXPECT_THROW(v.failureRate(3000, 0, 3), SchedulerStateError);
}

}  // namespace
}  // namespace kiln::scheduler
