// A new evaluation's expected finish is recorded off the loop
// (estimate_recorder.h): evaluateJobset returns before it is made, and it
// appears in eval_estimates soon after.
#include <gtest/gtest.h>

#include "fake_worker.h"
#include "kiln/common/file.h"
#include "kiln/scheduler/service.h"
#include "service_fixture.h"

namespace kiln::scheduler {
namespace {

using namespace std::chrono_literals;

TEST(EstimateRecord, ANewEvaluationGetsItsEstimateOffTheLoop) {
  TempDir dir("kiln-estimate");
  std::string state = dir.path() + "/state";
  Job j;
  j.attr = "a";
  j.system = "x86_64-linux";
  {
    store::LocalStore store(state);
    j.drvPath = testing::makeDrv(store, "a");
  }
  auto cfg = testing::testConfig(state);
  cfg.evalRunner = std::make_shared<testing::FixedRunner>(std::vector<Job>{j});
  cfg.inputFetcher = std::make_shared<testing::FixedFetcher>();
  SchedulerService svc(cfg);
  auto js = testing::createJobset(svc);
  int64_t eval = svc.evaluateJobset(js["id"].get<int64_t>(), true);
  ASSERT_GT(eval, 0);
  auto estimated = [&]() -> int64_t {
    auto s = svc.db().db().prepare(
        "SELECT estimated FROM eval_estimates WHERE eval = ?");
    s.bind(eval);
    return s.step() ? s.getInt(0) : 0;
  };
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (estimated() == 0 && std::chrono::steady_clock::now() < deadline)
    svc.pollOnce(5ms);
  EXPECT_GT(estimated(), 0) << "one step of 60 s by default: a finish ahead";
}

}  // namespace
}  // namespace kiln::scheduler
