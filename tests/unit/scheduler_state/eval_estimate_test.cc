// Expected finish of evaluations (eval_estimate.h) on both backends: the
// remaining steps of an evaluation's unfinished builds with their
// dependencies, the packages' past durations, the estimate recorded once,
// and how far off it was when the evaluation finished.
#include "kiln/scheduler/eval_estimate.h"

#include <gtest/gtest.h>

#include "jobset_fixture.h"

namespace kiln::scheduler {
namespace {

std::string drv(const std::string& name) {
  return "/nix/store/" + std::string(32, 'e') + "-" + name + ".drv";
}

class EvalEstimateTest : public test::JobsetFixture {
 protected:
  int64_t step(const std::string& name, const std::string& pname) {
    return JobsetFixture::step(drv(name), pname);
  }
  int64_t build(int64_t eval, const std::string& job) {
    return JobsetFixture::build(eval, job, drv(job));
  }
  int64_t eval_ = eval("in");
};

INSTANTIATE_TEST_SUITE_P(Backends, EvalEstimateTest, test::allStateBackends(),
                         test::stateBackendName);

TEST_P(EvalEstimateTest, RemainingStepsPastDurationsAndTheCriticalPath) {
  // app needs lib (running for 10 s of its 40) and doc; doc is done.
  int64_t past = step("lib-old", "lib");
  db_.startStep(past, "w", 1000);
  db_.finishStep(past, 0, 41'000, "");
  int64_t app = step("app", "app"), lib = step("lib", "lib");
  int64_t doc = step("doc", "doc");
  db_.addStepDeps({{app, lib}, {app, doc}});
  db_.startStep(doc, "w", 500);
  db_.finishStep(doc, 0, 1000, "");
  db_.startStep(lib, "w", 90'000);
  build(eval_, "app");
  auto h = evalStepHistory(db_, eval_);
  EXPECT_EQ(h.size(), 1u) << "app was never built";
  ASSERT_TRUE(h.count("lib"));
  EXPECT_DOUBLE_EQ(h.at("lib"), 40);

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
