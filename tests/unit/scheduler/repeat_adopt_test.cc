// Reproducibility checks across a scheduler restart: a check build that
// its worker still runs, or has finished, when it comes back is adopted
// like a real step (docs/release.md, "Reproducibility checks"), not sent
// again, and its result settles the check; the workers that refused a
// check are still avoided after the restart.
#include <gtest/gtest.h>

#include "fake_worker.h"
#include "kiln/scheduler/repeat_store.h"
#include "repeat_fixture.h"

namespace kiln::scheduler {
namespace {

using testing::FakeWorker;
using testing::pumpUntil;

class RepeatAdopt : public ::testing::TestWithParam<bool> {
 protected:
  /// A service whose one job `a` is evaluated and every step checked;
  /// whether the evaluation was made.
  bool startService() {
    a_ = testing::drvIn(state_, "a");
    nlohmann::json js;
    svc_ = testing::repeatingService(state_, testing::jobsOf({{"a", a_}}),
                                     nullptr, js);
    return svc_->evaluateJobset(js["id"].get<int64_t>(), true) > 0;
  }

  /// Builds `a` on w1, sends its check to w2, and restarts the service
  /// while w2 runs it; returns the check build.
  protocol::BuildStep checkRunningAtRestart() {
    EXPECT_TRUE(startService());
    FakeWorker w1(svc_->endpoint(), "w1"), w2(svc_->endpoint(), "w2");
    auto until = [&](const std::function<bool()>& pred) {
      return pumpUntil(*svc_, {&w1, &w2}, pred);
    };
    step_ = testing::buildFirst(*svc_, w1, {&w1, &w2}, "a\n");
    w2.hello();
    EXPECT_TRUE(until([&] {
      auto c = repeatCheck(svc_->db(), step_);
      return w2.steps.size() == 1 && c && c->state == "running";
    }));
    auto check = w2.steps.at(0);
    EXPECT_TRUE(check.check);
    svc_.reset();
    svc_ = testing::restartedService(state_, testing::jobsOf({{"a", a_}}));
    return check;
  }

  TempDir dir_{"kiln-repeat-adopt"};
  std::string state_ = dir_.path() + "/state";
  std::string a_;
  int64_t step_ = 0;
  std::unique_ptr<SchedulerService> svc_;
};

// Still running (false) or finished with its result unsent (true): either
// way w2 keeps it, nothing is sent again, even to a worker that could
// take it, and its result settles the check.
TEST_P(RepeatAdopt, ACheckBuildInFlightAtARestartIsAdopted) {
  bool resultReady = GetParam();
  auto check = checkRunningAtRestart();
  FakeWorker back(svc_->endpoint(), "w2"), w3(svc_->endpoint(), "w3");
  auto until = [&](const std::function<bool()>& pred) {
    return pumpUntil(*svc_, {&back, &w3}, pred);
  };
  back.held = {{check.stepId, check.drvPath, resultReady}};
  back.hello();
  ASSERT_TRUE(until([&] { return back.welcomed; }));
  EXPECT_EQ(back.adopted, std::vector<uint64_t>{check.stepId});
  w3.hello();
  ASSERT_TRUE(until([&] {
    auto c = repeatCheck(svc_->db(), step_);
    return w3.welcomed && c && c->state == "running" &&
           c->secondWorker == "w2";
  }));
  ASSERT_EQ(svc_->queue().size(), 1u);
  EXPECT_EQ(svc_->queue()[0].state, "check-running");
  back.steps = {check};
  back.uploadOutputs(check, "a\n");
  ASSERT_TRUE(until([&] { return back.pendingUploads == 0; }));
  back.result(check.stepId, protocol::StepStatus::kSuccess);
  ASSERT_TRUE(
      until([&] { return repeatCheck(svc_->db(), step_)->state == "same"; }));
  EXPECT_EQ(back.steps.size(), 1u) << "not sent again";
  EXPECT_TRUE(w3.steps.empty()) << "not sent elsewhere";
}

INSTANTIATE_TEST_SUITE_P(Held, RepeatAdopt, ::testing::Bool(),
                         [](const auto& info) {
                           return info.param ? "ResultReady" : "Running";
                         });

// Another worker claiming the check build is refused: it is sent again,
// to a worker other than the first build's.
TEST_F(RepeatAdopt, AnotherWorkersClaimIsRefused) {
  auto check = checkRunningAtRestart();
  FakeWorker liar(svc_->endpoint(), "w3");
  liar.held = {{check.stepId, check.drvPath, false}};
  liar.hello();
  ASSERT_TRUE(pumpUntil(*svc_, {&liar}, [&] {
    return liar.welcomed && liar.steps.size() == 1;
  }));
  EXPECT_TRUE(liar.adopted.empty());
  EXPECT_TRUE(liar.steps[0].check) << "sent anew, as a check build";
}

// The check's worker restarts (a new connection, the same name) while the
// scheduler runs and claims its finished check build: it moves there, its
// slot given back; a refusal then makes it wait for another worker.
TEST_F(RepeatAdopt, ARefusalOnTheWorkersNewConnectionWaitsForAnother) {
  ASSERT_TRUE(startService());
  FakeWorker w1(svc_->endpoint(), "w1"), w2(svc_->endpoint(), "w2");
  step_ = testing::buildFirst(*svc_, w1, {&w1, &w2}, "a\n");
  w2.hello();
  ASSERT_TRUE(
      pumpUntil(*svc_, {&w1, &w2}, [&] { return w2.steps.size() == 1; }));
  auto check = w2.steps[0];
  FakeWorker back(svc_->endpoint(), "w2"), w3(svc_->endpoint(), "w3");
  back.held = {{check.stepId, check.drvPath, true}};
  back.hello();
  ASSERT_TRUE(pumpUntil(*svc_, {&w1, &back}, [&] { return back.welcomed; }));
  EXPECT_EQ(back.adopted, std::vector<uint64_t>{check.stepId});
  back.result(check.stepId, protocol::StepStatus::kAborted,
              std::string(protocol::kCheckRefusedPrefix) + "output is valid");
  ASSERT_TRUE(pumpUntil(*svc_, {&w1, &back}, [&] {
    auto c = repeatCheck(svc_->db(), step_);
    return c && c->state == "pending" &&
           c->refusedBy == std::vector<std::string>{"w2"};
  }));
  w3.hello();
  ASSERT_TRUE(pumpUntil(*svc_, {&w1, &back, &w3},
                        [&] { return w3.steps.size() == 1; }));
  EXPECT_TRUE(w3.steps[0].check);
  EXPECT_TRUE(back.steps.empty());
}

// x refuses the check (it holds the outputs), y takes it; the scheduler
// restarts while y builds. x comes back first: the check is not sent to
// it, it waits for a worker other than w1 and x; a new worker gets it.
TEST_F(RepeatAdopt, ARestartedCheckStillAvoidsTheWorkersThatRefusedIt) {
  ASSERT_TRUE(startService());
  FakeWorker w1(svc_->endpoint(), "w1"), w2(svc_->endpoint(), "w2"),
      w3(svc_->endpoint(), "w3");
  auto until = [&](const std::function<bool()>& pred) {
    return pumpUntil(*svc_, {&w1, &w2, &w3}, pred);
  };
  step_ = testing::buildFirst(*svc_, w1, {&w1, &w2, &w3}, "a\n");
  FakeWorker& x = testing::checkGoesToOneOf(*svc_, {&w1, &w2, &w3}, w2, w3);
  ASSERT_EQ(x.steps.size(), 1u);
  FakeWorker& y = &x == &w2 ? w3 : w2;
  std::string xName = &x == &w2 ? "w2" : "w3";
  x.result(x.steps[0].stepId, protocol::StepStatus::kAborted,
           std::string(protocol::kCheckRefusedPrefix) + "output is valid");
  ASSERT_TRUE(until([&] {
    auto c = repeatCheck(svc_->db(), step_);
    return y.steps.size() == 1 && c && c->state == "running" &&
           c->refusedBy == std::vector<std::string>{xName};
  }));
  svc_.reset();
  svc_ = testing::restartedService(state_, testing::jobsOf({{"a", a_}}));
  FakeWorker back(svc_->endpoint(), xName);
  back.hello();
  ASSERT_TRUE(pumpUntil(*svc_, {&back}, [&] { return back.welcomed; }));
  ASSERT_TRUE(pumpUntil(*svc_, {&back}, [&] {
    auto q = svc_->queue();
    return q.size() == 1 && q[0].state == "check-waiting" &&
           q[0].reason.find("other than w1, " + xName) != std::string::npos;
  })) << (svc_->queue().empty() ? "" : svc_->queue()[0].reason);
  FakeWorker fresh(svc_->endpoint(), "w4");
  fresh.hello();
  ASSERT_TRUE(pumpUntil(*svc_, {&back, &fresh},
                        [&] { return fresh.steps.size() == 1; }));
  EXPECT_TRUE(fresh.steps[0].check);
  EXPECT_TRUE(back.steps.empty()) << "never sent to the worker that refused";
}

}  // namespace
}  // namespace kiln::scheduler
