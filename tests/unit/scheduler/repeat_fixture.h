#pragma once
// Services whose jobsets repeat every step, for the reproducibility
// checks' tests (repeat_record_test.cc, repeat_adopt_test.cc).

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fake_worker.h"
#include "kiln/scheduler/diffoscope.h"
#include "kiln/scheduler/service.h"
#include "service_fixture.h"

namespace kiln::scheduler::testing {

// The jobs of `drvs` (attribute → .drv path) on x86_64-linux.
inline std::vector<Job> jobsOf(
    const std::vector<std::pair<std::string, std::string>>& drvs) {
  std::vector<Job> jobs;
  for (auto& [attr, drv] : drvs) {
    Job j;
    j.attr = attr;
    j.system = "x86_64-linux";
    j.drvPath = drv;
    jobs.push_back(j);
  }
  return jobs;
}

// Derivation `name` (no inputs) made in the store of `state`.
inline std::string drvIn(const std::string& state, const std::string& name) {
  store::LocalStore store(state);
  return makeDrv(store, name);
}

// A service in `state` whose jobset "j" of project "p" evaluates to
// `jobs` and repeats every step (`differ`: the reports' maker, may be
// null; a difference's NARs kept `keepRepeatNars`; a refused check with
// no other worker waits `refusedCheckWait`); the jobset's API answer goes
// to `jobset`.
inline std::unique_ptr<SchedulerService> repeatingService(
    const std::string& state, std::vector<Job> jobs,
    std::shared_ptr<Differ> differ, nlohmann::json& jobset,
    std::chrono::seconds keepRepeatNars = std::chrono::hours(24),
    std::chrono::milliseconds refusedCheckWait = std::chrono::seconds(60)) {
  auto cfg = testConfig(state);
  cfg.keepRepeatNars = keepRepeatNars;
  cfg.refusedCheckWait = refusedCheckWait;
  cfg.repeatPruneInterval = std::chrono::milliseconds(1);
  cfg.evalRunner = std::make_shared<FixedRunner>(std::move(jobs));
  cfg.inputFetcher = std::make_shared<FixedFetcher>();
  cfg.repeatDiffer = std::move(differ);
  auto svc = std::make_unique<SchedulerService>(cfg);
  jobset = createJobset(*svc, {{"repeatFraction", 1.0}});
  return svc;
}

/// The service of `repeatingService` started again on its state (the
/// jobset exists already).
inline std::unique_ptr<SchedulerService> restartedService(
    const std::string& state, std::vector<Job> jobs) {
  auto cfg = testConfig(state);
  cfg.evalRunner = std::make_shared<FixedRunner>(std::move(jobs));
  cfg.inputFetcher = std::make_shared<FixedFetcher>();
  return std::make_unique<SchedulerService>(cfg);
}

/// `first` says Hello, builds the one step it is sent (its output holding
/// `contents`) and reports its success, `svc` pumped with `pumped`;
/// returns the step's row id.
inline int64_t buildFirst(SchedulerService& svc, FakeWorker& first,
                          const std::vector<FakeWorker*>& pumped,
                          const std::string& contents) {
  auto until = [&](const std::function<bool()>& pred) {
    return pumpUntil(svc, pumped, pred);
  };
  first.hello();
  EXPECT_TRUE(until([&] { return first.steps.size() == 1; }));
  if (first.steps.empty()) return 0;
  first.uploadOutputs(first.steps[0], contents);
  EXPECT_TRUE(until([&] { return first.pendingUploads == 0; }));
  first.result(first.steps[0].stepId, protocol::StepStatus::kSuccess);
  return static_cast<int64_t>(first.steps[0].stepId);
}

/// `a` and `b` say Hello; once both are welcomed (a Hello not read yet is
/// no worker a check can go to) and one of them got the check build,
/// returns that one.
inline FakeWorker& checkGoesToOneOf(SchedulerService& svc,
                                    const std::vector<FakeWorker*>& pumped,
                                    FakeWorker& a, FakeWorker& b) {
  a.hello();
  b.hello();
  EXPECT_TRUE(pumpUntil(svc, pumped, [&] {
    return a.welcomed && b.welcomed && a.steps.size() + b.steps.size() == 1;
  }));
  return a.steps.empty() ? b : a;
}

}  // namespace kiln::scheduler::testing
