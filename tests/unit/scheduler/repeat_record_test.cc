// Reproducibility checks in the service: a step that its jobset's repeat
// share selects gets a pending check when it succeeds, naming the worker
// of its first build; a jobset without a share gets none, and a changed
// share takes effect without a restart.
#include <gtest/gtest.h>

#include <algorithm>

#include "fake_worker.h"
#include "kiln/scheduler/repeat_store.h"
#include "kiln/scheduler/service.h"
#include "service_fixture.h"

namespace kiln::scheduler {
namespace {

using namespace std::chrono_literals;
using testing::FakeWorker;
using testing::makeDrv;

TEST(RepeatRecord, SelectedStepsGetAPendingCheckWhenTheySucceed) {
  TempDir dir("kiln-repeat");
  std::string state = dir.path() + "/state";
  std::string a, c;
  {
    store::LocalStore store(state);
    a = makeDrv(store, "a");
    c = makeDrv(store, "c", {a});
  }
  Job ja, jc;
  ja.attr = "a";
  jc.attr = "c";
  ja.system = jc.system = "x86_64-linux";
  ja.drvPath = a;
  jc.drvPath = c;
  auto cfg = testing::testConfig(state);
  cfg.evalRunner =
      std::make_shared<testing::FixedRunner>(std::vector<Job>{ja, jc});
  cfg.inputFetcher = std::make_shared<testing::FixedFetcher>();
  SchedulerService svc(cfg);
  svc.applyRequest("project-create", {{"name", "p"}});
  auto js = svc.applyRequest("jobset-create", {{"project", "p"},
                                               {"name", "j"},
                                               {"location", "/nowhere"},
                                               {"checkInterval", 0},
                                               {"repeatFraction", 1.0}});
  EXPECT_DOUBLE_EQ(js["repeatFraction"].get<double>(), 1.0);
  int64_t jobset = js["id"].get<int64_t>();
  int64_t eval = svc.evaluateJobset(jobset, true);
  ASSERT_GT(eval, 0);

  FakeWorker w(svc.endpoint(), "first-worker");
  w.hello();
  auto until = [&](const std::function<bool()>& pred) {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!pred() && std::chrono::steady_clock::now() < deadline) {
      svc.pollOnce(2ms);
      w.pump(2ms);
    }
    return pred();
  };
  ASSERT_TRUE(until([&] { return w.steps.size() == 1; }));
  w.uploadOutputs(w.steps[0], "a\n");
  ASSERT_TRUE(until([&] { return w.pendingUploads == 0; }));
  w.result(w.steps[0].stepId, protocol::StepStatus::kSuccess);
  ASSERT_TRUE(until([&] { return w.steps.size() == 2; }));
  auto check = repeatCheck(svc.db(), int64_t(w.steps[0].stepId));
  ASSERT_TRUE(check);
  EXPECT_EQ(check->state, "pending");
  EXPECT_EQ(check->firstWorker, "first-worker");
  EXPECT_EQ(check->jobset, jobset);
  EXPECT_EQ(check->drvPath, a);

  // Turned off: c's success records nothing.
  svc.applyRequest("jobset-update",
                   {{"project", "p"}, {"jobset", "j"}, {"repeatFraction", 0}});
  EXPECT_EQ(svc.db().jobset(jobset)->repeatPpm, 0);
  w.uploadOutputs(w.steps[1], "c\n");
  ASSERT_TRUE(until([&] { return w.pendingUploads == 0; }));
  w.result(w.steps[1].stepId, protocol::StepStatus::kSuccess);
  ASSERT_TRUE(until([&] {
    auto b = svc.db().buildsOfEval(eval);
    return std::all_of(b.begin(), b.end(),
                       [](const BuildRow& r) { return r.finished; });
  }));
  EXPECT_FALSE(repeatCheck(svc.db(), int64_t(w.steps[1].stepId)));
  EXPECT_EQ(pendingRepeatChecks(svc.db(), 10).size(), 1u);
}

TEST(RepeatRecord, RepeatFractionOutsideZeroToOneIsRefused) {
  TempDir dir("kiln-repeat");
  auto cfg = testing::testConfig(dir.path() + "/state");
  SchedulerService svc(cfg);
  svc.applyRequest("project-create", {{"name", "p"}});
  for (auto bad :
       {nlohmann::json(1.5), nlohmann::json(-0.1), nlohmann::json("0.1")})
    EXPECT_ANY_THROW(
        svc.applyRequest("jobset-create", {{"project", "p"},
                                           {"name", "j"},
                                           {"location", "/nowhere"},
                                           {"repeatFraction", bad}}))
        << bad;
}

}  // namespace
}  // namespace kiln::scheduler
