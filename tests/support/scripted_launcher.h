#pragma once
// A fake of the process seam (kiln/common/process.h) for code that
// supervises builders: a ScriptedLauncher starts ScriptedChild processes
// that play a script of events (output, exit) against a FakeClock, with no
// real process and no real waiting. Used by the build runner's supervision
// tests; any test of a ProcessLauncher user can take it.

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/common/clock.h"
#include "kiln/common/file.h"
#include "kiln/common/process.h"

namespace kiln::testing {

using std::chrono::milliseconds;

/// One scripted event at an offset from the start.
struct ScriptedStep {
  Clock::Duration at;
  ProcessEvent event;
  std::function<void()> action = {};  ///< run instead when set (event kIdle)
};

inline ScriptedStep output(Clock::Duration at, std::string data) {
  return {at, {ProcessEvent::Kind::kOutput, std::move(data), 0}};
}
inline ScriptedStep exitWith(Clock::Duration at, int code) {
  return {at, {ProcessEvent::Kind::kExited, "", code << 8}};
}

/// Plays a script against a fake clock; killTree() ends it with SIGKILL.
class ScriptedChild : public ChildProcess {
 public:
  ScriptedChild(FakeClock& clock, std::deque<ScriptedStep> script, int* kills)
      : clock_(clock),
        start_(clock.now()),
        script_(std::move(script)),
        kills_(kills) {}
  pid_t pid() const override { return 4242; }
  void killTree() override {
    ++*kills_;
    killedAt_ = clock_.now();
  }
  ProcessEvent next(milliseconds timeout) override {
    if (killedAt_) return {ProcessEvent::Kind::kExited, "", 9};
    auto now = clock_.now();
    if (!script_.empty() && start_ + script_.front().at <= now + timeout) {
      clock_.advance(start_ + script_.front().at - now);
      auto step = script_.front();
      script_.pop_front();
      if (step.action) step.action();
      return step.event;
    }
    clock_.advance(timeout);
    return {};
  }
  std::optional<Clock::TimePoint> killedAt_;

 private:
  FakeClock& clock_;
  Clock::TimePoint start_;
  std::deque<ScriptedStep> script_;
  int* kills_;
};

class ScriptedLauncher : public ProcessLauncher {
 public:
  explicit ScriptedLauncher(FakeClock& clock) : clock_(clock) {}
  std::unique_ptr<ChildProcess> start(const ProcessSpec& spec) override {
    specs.push_back(spec);
    for (auto& f : filesToCreate) writeFile(f, "built");
    return std::make_unique<ScriptedChild>(clock_, script, &kills);
  }
  std::deque<ScriptedStep> script;
  std::vector<std::string> filesToCreate;
  std::vector<ProcessSpec> specs;
  int kills = 0;

 private:
  FakeClock& clock_;
};

}  // namespace kiln::testing
