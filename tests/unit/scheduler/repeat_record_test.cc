// Reproducibility checks in the service: a step that its jobset's repeat
// share selects gets a pending check when it succeeds, naming the worker
// of its first build; a jobset without a share gets none, and a changed
// share takes effect without a restart.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "fake_worker.h"
#include "kiln/common/file.h"
#include "kiln/scheduler/diffoscope.h"
#include "kiln/scheduler/repeat_store.h"
#include "kiln/scheduler/service.h"
#include "repeat_fixture.h"
#include "service_fixture.h"

namespace kiln::scheduler {
namespace {

using namespace std::chrono_literals;
using testing::buildFirst;
using testing::checkGoesToOneOf;
using testing::drvIn;
using testing::FakeWorker;
using testing::jobsOf;
using testing::makeDrv;
using testing::pumpUntil;
using testing::repeatingService;

TEST(RepeatRecord, SelectedStepsGetAPendingCheckWhenTheySucceed) {
  TempDir dir("kiln-repeat");
  std::string state = dir.path() + "/state";
  std::string a, c;
  {
    store::LocalStore store(state);
    a = makeDrv(store, "a");
    c = makeDrv(store, "c", {a});
  }
  nlohmann::json js;
  auto svcOwned =
      repeatingService(state, jobsOf({{"a", a}, {"c", c}}), nullptr, js);
  SchedulerService& svc = *svcOwned;
  EXPECT_DOUBLE_EQ(js["repeatFraction"].get<double>(), 1.0);
  int64_t jobset = js["id"].get<int64_t>();
  int64_t eval = svc.evaluateJobset(jobset, true);
  ASSERT_GT(eval, 0);

  FakeWorker w(svc.endpoint(), "first-worker");
  w.hello();
  auto until = [&](const std::function<bool()>& pred) {
    return pumpUntil(svc, {&w}, pred);
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

// Records what it is asked to compare and answers with a fixed report.
class FakeDiffer : public Differ {
 public:
  DiffReport diff(const std::string& first,
                  const std::string& second) override {
    std::lock_guard lock(mu);
    compared.emplace_back(readFile(first), readFile(second));
    return {DiffReport::Outcome::kDiffers, "fake report", false};
  }
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> compared;
};

// The second build of a selected step goes to the other worker as a check
// build; what it uploads is kept aside, compared with the registered
// output, and a difference gets the Differ's report (made off the loop).
TEST(RepeatRecord, TheSecondBuildGoesToAnotherWorkerAndIsCompared) {
  TempDir dir("kiln-repeat");
  std::string state = dir.path() + "/state";
  std::string a, b;
  {
    store::LocalStore store(state);
    a = makeDrv(store, "a");
    b = makeDrv(store, "b");
  }
  auto differ = std::make_shared<FakeDiffer>();
  nlohmann::json js;
  auto svcOwned =
      repeatingService(state, jobsOf({{"a", a}, {"b", b}}), differ, js);
  SchedulerService& svc = *svcOwned;
  ASSERT_GT(svc.evaluateJobset(js["id"].get<int64_t>(), true), 0);
  FakeWorker w1(svc.endpoint(), "first-worker");
  w1.hello();
  auto until = [&](const std::function<bool()>& pred, FakeWorker* w2) {
    return w2 ? pumpUntil(svc, {&w1, w2}, pred) : pumpUntil(svc, {&w1}, pred);
  };
  // Both built on the only worker; their checks wait for another.
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(until([&] { return w1.steps.size() == i + 1; }, nullptr));
    EXPECT_FALSE(w1.steps[i].check);
    w1.uploadOutputs(w1.steps[i], i ? "b\n" : "a\n");
    ASSERT_TRUE(until([&] { return w1.pendingUploads == 0; }, nullptr));
    w1.result(w1.steps[i].stepId, protocol::StepStatus::kSuccess);
  }
  ASSERT_TRUE(until(
      [&] { return pendingRepeatChecks(svc.db(), 10).size() == 2; }, nullptr));
  EXPECT_EQ(w1.steps.size(), 2u) << "never a check on the first worker";

  FakeWorker w2(svc.endpoint(), "second-worker");
  w2.hello(/*slots=*/2);
  ASSERT_TRUE(until([&] { return w2.steps.size() == 2; }, &w2));
  auto base = [](const std::string& p) { return p.substr(p.rfind('/') + 1); };
  a = base(a);
  b = base(b);
  std::map<std::string, int64_t> stepOf;  // .drv base name → step row
  for (auto& s : w1.steps) stepOf[s.drvPath.baseName()] = s.stepId;
  for (auto& s : w2.steps) {
    EXPECT_TRUE(s.check);
    std::string drv = s.drvPath.baseName();
    EXPECT_EQ(s.stepId, uint64_t(stepOf[drv]) + (uint64_t(1) << 48));
    // a is rebuilt the same, b differently.
    w2.uploadOutputs(s, drv == a ? "a\n" : "B\n");
  }
  ASSERT_TRUE(until([&] { return w2.pendingUploads == 0; }, &w2));
  for (auto& s : w2.steps) w2.result(s.stepId, protocol::StepStatus::kSuccess);
  auto stateOf = [&](const std::string& drv) {
    auto c = repeatCheck(svc.db(), stepOf[drv]);
    return c ? c->state : "";
  };
  ASSERT_TRUE(until(
      [&] {
        auto c = repeatCheck(svc.db(), stepOf[b]);
        return stateOf(a) == "same" && c && !c->report.empty();
      },
      &w2));
  auto odd = *repeatCheck(svc.db(), stepOf[b]);
  EXPECT_EQ(odd.state, "differs");
  EXPECT_EQ(odd.secondWorker, "second-worker");
  EXPECT_EQ(odd.differing, std::vector<std::string>{"out"});
  EXPECT_EQ(odd.report,
            "=== output out: diffoscope differs ===\nfake report\n");
  EXPECT_TRUE(pathExists(odd.sideLocation + "/out.nar")) << "kept a day";
  // The same NARs: nothing kept.
  EXPECT_EQ(repeatCheck(svc.db(), stepOf[a])->sideLocation, "");
  std::string sameSide = state + "/repeat-checks/" + std::to_string(stepOf[a]);
  EXPECT_TRUE(until([&] { return !pathExists(sameSide); }, &w2));
  std::lock_guard lock(differ->mu);
  ASSERT_EQ(differ->compared.size(), 1u);
  EXPECT_EQ(differ->compared[0],
            std::pair(std::string("b\n"), std::string("B\n")))
      << "the registered output against the second build's, unpacked";
}

// A worker that holds the outputs refuses a check build: the check goes
// to another worker, never back to it, and ends `failed` only when no
// worker without the outputs is left (and none came within the wait).
TEST(RepeatRecord, ARefusedCheckTriesAnotherWorkerThenFails) {
  TempDir dir("kiln-repeat");
  std::string state = dir.path() + "/state";
  std::string a = drvIn(state, "a");
  nlohmann::json js;
  auto svcOwned = repeatingService(state, jobsOf({{"a", a}}), nullptr, js,
                                   std::chrono::hours(24), 1ms);
  SchedulerService& svc = *svcOwned;
  ASSERT_GT(svc.evaluateJobset(js["id"].get<int64_t>(), true), 0);
  FakeWorker w1(svc.endpoint(), "first-worker");
  std::vector<FakeWorker*> all{&w1};
  auto until = [&](const std::function<bool()>& pred) {
    return pumpUntil(svc, all, pred);
  };
  int64_t step = buildFirst(svc, w1, all, "a\n");
  ASSERT_TRUE(until([&] { return repeatCheck(svc.db(), step).has_value(); }));
  // The waiting check is in the queue's own section, not among the steps.
  auto queued = svc.queue();
  ASSERT_EQ(queued.size(), 1u);
  EXPECT_EQ(queued[0].stepId, step);
  EXPECT_EQ(queued[0].state, "check-waiting");
  EXPECT_NE(queued[0].reason.find("other than first-worker"), std::string::npos)
      << queued[0].reason;
  ASSERT_TRUE(until([&] {
    auto snap = svc.snapshot();
    return snap && snap->metrics.waitingRepeats == 1;
  }));
  EXPECT_EQ(svc.snapshot()->metrics.waitingSteps, 0u) << "only real steps";

  FakeWorker w2(svc.endpoint(), "w2"), w3(svc.endpoint(), "w3");
  all = {&w1, &w2, &w3};
  // Both welcomed before the refusal (the race without: the next test).
  FakeWorker& x = checkGoesToOneOf(svc, all, w2, w3);
  ASSERT_EQ(x.steps.size(), 1u);
  FakeWorker& y = &x == &w2 ? w3 : w2;
  std::string yName = &y == &w2 ? "w2" : "w3";
  std::string refusal =
      std::string(protocol::kCheckRefusedPrefix) + "output is valid here";
  x.result(x.steps[0].stepId, protocol::StepStatus::kAborted, refusal);
  ASSERT_TRUE(until([&] { return y.steps.size() == 1; }));
  EXPECT_TRUE(y.steps[0].check);
  EXPECT_EQ(y.steps[0].stepId, x.steps[0].stepId);
  ASSERT_EQ(svc.queue().size(), 1u);
  EXPECT_EQ(svc.queue()[0].state, "check-running");
  ASSERT_TRUE(until([&] {
    auto c = repeatCheck(svc.db(), step);
    return c && c->state == "running" && c->secondWorker == yName;
  }));
  y.result(y.steps[0].stepId, protocol::StepStatus::kAborted, refusal);
  ASSERT_TRUE(
      until([&] { return repeatCheck(svc.db(), step)->state == "failed"; }));
  auto c = *repeatCheck(svc.db(), step);
  EXPECT_NE(c.report.find("no worker without its outputs"), std::string::npos)
      << c.report;
  EXPECT_EQ(x.steps.size(), 1u) << "never sent back to a refusing worker";
  EXPECT_EQ(w1.steps.size(), 1u);
}

// The race the test above avoids by waiting for both Welcomes: the only
// other worker refuses while the next worker's Hello is not read yet. The
// check waits for a worker other than the first and the refusing one
// (refusedCheckWait), and the late worker builds it.
TEST(RepeatRecord, ARefusedCheckWaitsForAWorkerWhoseHelloIsNotReadYet) {
  TempDir dir("kiln-repeat");
  std::string state = dir.path() + "/state";
  std::string a = drvIn(state, "a");
  nlohmann::json js;
  auto svcOwned = repeatingService(state, jobsOf({{"a", a}}), nullptr, js);
  SchedulerService& svc = *svcOwned;
  ASSERT_GT(svc.evaluateJobset(js["id"].get<int64_t>(), true), 0);
  FakeWorker w1(svc.endpoint(), "w1"), w2(svc.endpoint(), "w2"),
      late(svc.endpoint(), "late");
  std::vector<FakeWorker*> all{&w1, &w2};
  auto until = [&](const std::function<bool()>& pred) {
    return pumpUntil(svc, all, pred);
  };
  int64_t step = buildFirst(svc, w1, all, "a\n");
  w2.hello();
  ASSERT_TRUE(until([&] { return w2.steps.size() == 1; }));
  w2.result(w2.steps[0].stepId, protocol::StepStatus::kAborted,
            std::string(protocol::kCheckRefusedPrefix) + "output is valid");
  // The refusal is settled before the late worker's Hello is read.
  ASSERT_TRUE(until([&] {
    auto c = repeatCheck(svc.db(), step);
    return c && c->refusedBy == std::vector<std::string>{"w2"};
  }));
  EXPECT_EQ(repeatCheck(svc.db(), step)->state, "pending");
  ASSERT_EQ(svc.queue().size(), 1u);
  EXPECT_EQ(svc.queue()[0].state, "check-waiting");
  EXPECT_NE(svc.queue()[0].reason.find("other than w1, w2"), std::string::npos)
      << svc.queue()[0].reason;
  all.push_back(&late);
  late.hello();
  ASSERT_TRUE(until([&] { return late.steps.size() == 1; }));
  EXPECT_TRUE(late.steps[0].check);
  late.uploadOutputs(late.steps[0], "a\n");
  ASSERT_TRUE(until([&] { return late.pendingUploads == 0; }));
  late.result(late.steps[0].stepId, protocol::StepStatus::kSuccess);
  ASSERT_TRUE(
      until([&] { return repeatCheck(svc.db(), step)->state == "same"; }));
  EXPECT_EQ(w2.steps.size(), 1u) << "never sent back to the refusing worker";
}

// Without a retention a difference's NARs go once its report is stored.
TEST(RepeatRecord, KeptNarsGoAfterTheirRetention) {
  TempDir dir("kiln-repeat");
  std::string state = dir.path() + "/state";
  std::string b = drvIn(state, "b");
  nlohmann::json js;
  auto svcOwned = repeatingService(state, jobsOf({{"b", b}}),
                                   std::make_shared<FakeDiffer>(), js,
                                   std::chrono::seconds(0));
  SchedulerService& svc = *svcOwned;
  ASSERT_GT(svc.evaluateJobset(js["id"].get<int64_t>(), true), 0);
  FakeWorker w1(svc.endpoint(), "w1"), w2(svc.endpoint(), "w2");
  auto until = [&](const std::function<bool()>& pred) {
    return pumpUntil(svc, {&w1, &w2}, pred);
  };
  int64_t step = buildFirst(svc, w1, {&w1, &w2}, "b\n");
  w2.hello();
  ASSERT_TRUE(until([&] { return w2.steps.size() == 1; }));
  w2.uploadOutputs(w2.steps[0], "B\n");
  ASSERT_TRUE(until([&] { return w2.pendingUploads == 0; }));
  w2.result(w2.steps[0].stepId, protocol::StepStatus::kSuccess);
  std::string side = state + "/repeat-checks/" + std::to_string(step);
  ASSERT_TRUE(until([&] {
    auto c = repeatCheck(svc.db(), step);
    return c && c->state == "differs" && !c->report.empty() &&
           c->sideLocation.empty() && !pathExists(side);
  })) << "the report stored, the NARs removed";
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
