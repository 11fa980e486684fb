#pragma once
/// Where a build's state changes go (docs/architecture.md, "Interfaces"):
/// the service takes the core's `BuildEvent`s after every turn and hands
/// each, in order, to every `BuildEventSink` of its list. The first sink is
/// always the state database (`StateDbSink`); notifiers and the web's live
/// feed are further sinks (`ServiceConfig::eventSinks`).

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/scheduler/state_db.h"
#include "kiln/scheduler/types.h"

namespace kiln::scheduler {

/// Receives build events on the service thread, in the order they happen.
/// A sink must return quickly (the service thread dispatches builds): a
/// notifier queues the event for a thread of its own. An exception is
/// caught and logged by the service; the other sinks still get the event.
class BuildEventSink {
 public:
  virtual ~BuildEventSink() = default;
  /// `event` happened at `timeMs` (Unix ms, the service's clock).
  virtual void onBuildEvent(const BuildEvent& event, int64_t timeMs) = 0;
};

/// The database sink: finishes, fails, reopens and cancels build rows.
/// For a success it records the build's outputs, which `outputsOf` gives
/// for a `.drv` path (name → store path). Borrows `db`.
class StateDbSink final : public BuildEventSink {
 public:
  using OutputsFn = std::function<std::vector<std::pair<std::string, std::string>>(
      const std::string& drvPath)>;
  StateDbSink(StateDb& db, OutputsFn outputsOf)
      : db_(db), outputsOf_(std::move(outputsOf)) {}
  void onBuildEvent(const BuildEvent& event, int64_t timeMs) override;
  /// Records build `id` of `drvPath` as succeeded with its outputs.
  void finishSucceeded(int64_t id, const std::string& drvPath, int64_t timeMs);

 private:
  StateDb& db_;
  OutputsFn outputsOf_;
};

/// A sink that keeps every event (tests, and a model for a live feed).
class RecordingSink final : public BuildEventSink {
 public:
  void onBuildEvent(const BuildEvent& event, int64_t timeMs) override {
    events.emplace_back(event, timeMs);
  }
  std::vector<std::pair<BuildEvent, int64_t>> events;
};

}  // namespace kiln::scheduler
