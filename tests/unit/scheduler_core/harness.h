#pragma once
// A small driver around SchedulerCore for the unit tests: a fake clock,
// steps named by short strings, and helpers to observe dispatch order.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kiln/scheduler/core.h"

namespace kiln::scheduler::test {

using namespace std::chrono_literals;

inline std::string drv(const std::string& name) {
  return "/nix/store/" + name + ".drv";
}

class Harness {
 public:
  explicit Harness(SchedulerConfig config = {},
                   const InputLocality* locality = nullptr)
      : clock(TimePoint{std::chrono::hours(24 * 365)}),
        core(clock, config, locality) {}

  StepId step(const std::string& name, std::vector<StepId> deps = {},
              const std::string& system = "x86_64-linux",
              std::vector<std::string> features = {},
              const std::string& pname = "") {
    StepSpec spec;
    spec.drvPath = drv(name);
    spec.system = system;
    spec.requiredFeatures = std::move(features);
    spec.pname = pname.empty() ? name : pname;
    return core.addStep(spec, deps);
  }

  void build(BuildId id, StepId top, JobsetId jobset = 1, int global = 0,
             int local = 0) {
    core.addBuild(BuildSpec{id, jobset, top, global, local});
  }

  WorkerId worker(const std::string& name, unsigned slots = 1,
                  std::vector<std::string> systems = {"x86_64-linux"},
                  std::vector<std::string> features = {},
                  std::vector<std::string> mandatory = {}, double speed = 1.0) {
    return core.registerWorker(WorkerSpec{name, std::move(systems),
                                          std::move(features),
                                          std::move(mandatory), slots, speed});
  }

  /// Name of a step (its drv path without the store prefix and suffix).
  std::string name(StepId id) const {
    std::string p = core.step(id).drvPath;
    return p.substr(11, p.size() - 11 - 4);
  }

  /// Dispatches one step at a time and finishes it at once with `took`,
  /// returning the names in dispatch order.
  std::vector<std::string> drain(Duration took = 0ms) {
    std::vector<std::string> order;
    for (;;) {
      auto a = core.nextAssignments(1);
      if (a.empty()) return order;
      order.push_back(name(a[0].step));
      core.finishStep(a[0].step, StepResult::success(took));
    }
  }

  /// Names of the steps `nextAssignments()` hands out now.
  std::vector<std::string> dispatch(size_t max = SIZE_MAX) {
    std::vector<std::string> out;
    for (const Assignment& a : core.nextAssignments(max))
      out.push_back(name(a.step));
    return out;
  }

  FakeClock clock;
  SchedulerCore core;
};

}  // namespace kiln::scheduler::test
