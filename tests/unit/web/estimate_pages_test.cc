// Expected finish on the evaluation page and the overview (model_estimate.h,
// eval_estimate.h) through the router against the fixture database: the
// unfinished build's remaining steps and their package's past duration give
// the estimate (critical path, work, slots), and the newest finished
// evaluation with a recorded estimate says how far off it was.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kiln/common/clock.h"
#include "kiln/scheduler/eval_estimate.h"
#include "kiln/web/pages.h"
#include "web_fixture.h"

namespace kiln::web {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class EstimatePagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_.stateDir = fx_.stateDir();
    addPageRoutes(router_, ctx_);
    scheduler::StateDb d(fx_.stateDir() + "/scheduler.sqlite");
    // bash took 120 s before; it (unfinished) needs readline (unfinished,
    // never built: the default 60 s).
    int64_t old = step(d, "bash-old", "bash");
    d.startStep(old, "w", 1'000'000);
    d.finishStep(old, 0, 1'120'000, "");
    int64_t bash = step(d, "bash", "bash");
    int64_t readline = step(d, "readline", "readline");
    d.addStepDep(bash, readline);
  }

  static int64_t step(scheduler::StateDb& d, const std::string& name,
                      const std::string& pname) {
    scheduler::StepRow s;
    s.drvPath = testing::WebFixture::drv(name);
    s.system = "x86_64-linux";
    s.pname = pname;
    s.createdMs = 1;
    return d.upsertStep(s);
  }

  json api(const std::string& path) {
    Request r;
    r.method = "GET";
    r.path = "/api" + path;
    r.headers["host"] = "farm.example:8470";
    return json::parse(router_.handle(r).body);
  }
  std::string page(const std::string& path) {
    Request r;
    r.method = "GET";
    r.path = path;
    r.headers["host"] = "farm.example:8470";
    return router_.handle(r).body;
  }

  testing::WebFixture fx_;
  WebContext ctx_;
  Router router_;
};

TEST_F(EstimatePagesTest, AnUnfinishedEvaluationHasAnExpectedFinish) {
  int64_t before = RealClock::instance().nowMs();
  json m = api("/eval/" + std::to_string(fx_.eval));
  auto& x = m["estimate"]["expected"];
  ASSERT_TRUE(x.is_object()) << m["estimate"].dump(2);
  EXPECT_EQ(x["steps"], 2);
  EXPECT_DOUBLE_EQ(x["criticalPathSec"].get<double>(), 180);
  EXPECT_DOUBLE_EQ(x["totalWorkSec"].get<double>(), 180);
  EXPECT_EQ(x["slots"], 1) << "no scheduler: one slot";
  EXPECT_EQ(x["finishMs"].get<int64_t>() - x["madeMs"].get<int64_t>(), 180'000);
  EXPECT_GE(x["madeMs"].get<int64_t>(), before);
  EXPECT_TRUE(m["estimate"]["last"].is_null()) << "nothing recorded yet";
  EXPECT_THAT(page("/eval/" + std::to_string(fx_.eval)),
              HasSubstr("id=\"expected-finish\""));
  // The finished base evaluation has nothing left.
  EXPECT_TRUE(api("/eval/" + std::to_string(fx_.base))["estimate"]["expected"]
                  .is_null());
  // The overview's recent evaluations carry it for the unfinished one.
  json o = api("/overview");
  bool shown = false;
  for (auto& e : o["evaluations"])
    if (e["id"] == fx_.eval) shown = e["estimate"]["expected"]["steps"] == 2;
  EXPECT_TRUE(shown) << o["evaluations"].dump(2);
  EXPECT_THAT(page("/"), HasSubstr("class=\"muted expected-finish\""));
}

TEST_F(EstimatePagesTest, TheLastEstimateSaysHowFarOffItWas) {
  scheduler::StateDb d(fx_.stateDir() + "/scheduler.sqlite");
  // An evaluation estimated at t=1000 s to finish at t=1060 s, whose only
  // build ended at t=1090 s: 30 s late, half the minute it looked ahead.
  int64_t e = d.createEvaluation({0, fx_.jobset, "git:cccc", 1, 1, 1, ""}, {});
  scheduler::BuildRow row;
  row.eval = e;
  row.jobset = fx_.jobset;
  row.job = "late";
  row.drvPath = testing::WebFixture::drv("late");
  row.createdMs = 1;
  int64_t b = d.createBuild(row);
  d.finishBuild(b, 0, 1'090'000, "");
  scheduler::EvalEstimate est;
  est.madeMs = 1'000'000;
  est.finishMs = 1'060'000;
  EXPECT_TRUE(scheduler::recordEvalEstimate(d, e, est));
  est.finishMs = 1;
  EXPECT_FALSE(scheduler::recordEvalEstimate(d, e, est)) << "the first stays";

  json last = api("/eval/" + std::to_string(fx_.eval))["estimate"]["last"];
  ASSERT_TRUE(last.is_object());
  EXPECT_EQ(last["eval"], e);
  EXPECT_EQ(last["estimatedMs"], 1'060'000);
  EXPECT_EQ(last["actualMs"], 1'090'000);
  EXPECT_EQ(last["errorMs"], 30'000);
  EXPECT_DOUBLE_EQ(last["percent"].get<double>(), 50);
  EXPECT_THAT(page("/eval/" + std::to_string(e)),
              HasSubstr("id=\"estimate-error\""));
  EXPECT_EQ(api("/overview")["lastEstimate"]["eval"], e);
  EXPECT_THAT(page("/"), HasSubstr("30s later"));
}

}  // namespace
}  // namespace kiln::web
