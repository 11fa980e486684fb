// Expected finish of evaluations (eval_estimate.h) on both backends: the
// remaining steps of an evaluation's unfinished builds with their
// dependencies, the packages' past durations, the estimate recorded once,
// and how far off it was when the evaluation finished.
#include "kiln/scheduler/eval_estimate.h"

#include <gtest/gtest.h>

#include "kiln/common/file.h"
#include "kiln/scheduler/state_db.h"
#include "state_backends.h"

namespace kiln::scheduler {
namespace {

std::string drv(const std::string& name) {
  return "/nix/store/" + std::string(32, 'e') + "-" + name + ".drv";
}

class EvalEstimateTest : public ::testing::TestWithParam<test::StateBackend> {
 protected:
  void SetUp() override {
    int64_t project = db_.createProject({0, "p", "", true});
    JobsetRow j;
    j.project = project;
    j.name = "trunk";
    j.location = "/src";
    jobset_ = db_.createJobset(j);
    eval_ = db_.createEvaluation({0, jobset_, "in", 1, 1, 1, ""}, {});
  }
  int64_t step(const std::string& name, const std::string& pname) {
    StepRow s;
    s.drvPath = drv(name);
    s.system = "x86_64-linux";
    s.pname = pname;
    s.createdMs = 1;
    return db_.upsertStep(s);
  }
  int64_t build(int64_t eval, const std::string& job) {
    BuildRow b;
    b.eval = eval;
    b.jobset = jobset_;
    b.job = job;
    b.drvPath = drv(job);
    b.createdMs = 1;
    return db_.createBuild(b);
  }

  TempDir dir_{"kiln-eval-estimate"};
  DatabaseSpec spec_ = test::freshStateDatabase(GetParam(), dir_.path());
  StateDb db_{spec_};
  int64_t jobset_ = 0;
  int64_t eval_ = 0;
};

INSTANTIATE_TEST_SUITE_P(Backends, EvalEstimateTest, test::allStateBackends(),
                         test::stateBackendName);

TEST_P(EvalEstimateTest, RemainingStepsPastDurationsAndTheCriticalPath) {
  // app needs lib (running for 10 s of its 40) and doc; doc is done.
  int64_t past = step("lib-old", "lib");
  db_.startStep(past, "w", 0);
  db_.finishStep(past, 0, 40'000, "");
  int64_t app = step("app", "app"), lib = step("lib", "lib");
  int64_t doc = step("doc", "doc");
  db_.addStepDeps({{app, lib}, {app, doc}});
  db_.startStep(doc, "w", 0);
  db_.finishStep(doc, 0, 1000, "");
  db_.startStep(lib, "w", 90'000);
  build(eval_, "app");
  auto h = evalStepHistory(db_, eval_);
  EXPECT_EQ(h.size(), 1u) << "app was never built";
  EXPECT_DOUBLE_EQ(h["lib"], 40);

  auto e = estimateEvaluation(db_, eval_, 2, 100'000, h);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->steps, 2u);
  EXPECT_FALSE(e->truncated);
  // lib has 30 s left, then app the default 60 s.
  EXPECT_DOUBLE_EQ(e->parts.criticalPathSec, 90);
  EXPECT_DOUBLE_EQ(e->parts.totalWorkSec, 90);
  EXPECT_EQ(e->madeMs, 100'000);
  EXPECT_EQ(e->finishMs, 190'000);

  // Nothing left once the build finished.
  int64_t done = db_.createEvaluation({0, jobset_, "in2", 2, 1, 1, ""}, {});
  int64_t b = build(done, "doc");
  db_.finishBuild(b, 0, 5000, "");
  EXPECT_FALSE(estimateEvaluation(db_, done, 1, 6000, {}));
}

TEST_P(EvalEstimateTest, TheFirstRecordedEstimateIsComparedWithTheFinish) {
  EXPECT_FALSE(lastEstimate(db_, jobset_));
  int64_t b = build(eval_, "hello");
  EvalEstimate e;
  e.madeMs = 1000;
  e.finishMs = 11'000;
  EXPECT_TRUE(recordEvalEstimate(db_, eval_, e));
  e.finishMs = 2;
  EXPECT_FALSE(recordEvalEstimate(db_, eval_, e));
  EXPECT_FALSE(lastEstimate(db_, jobset_)) << "not finished yet";
  db_.finishBuild(b, 0, 6000, "");
  auto p = lastEstimate(db_, jobset_);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->eval, eval_);
  EXPECT_EQ(p->estimatedMs, 11'000);
  EXPECT_EQ(p->actualMs, 6000);
  EXPECT_EQ(p->error.errorMs, -5000);
  EXPECT_DOUBLE_EQ(p->error.percent, 50);
  EXPECT_TRUE(lastEstimate(db_, 0));
  EXPECT_FALSE(lastEstimate(db_, jobset_ + 1));
}

}  // namespace
}  // namespace kiln::scheduler
