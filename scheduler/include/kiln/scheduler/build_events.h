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

/// What the service itself reports besides the core's build events: the
/// life of evaluations, builds entering the queue or starting, and steps
/// ending (the notifiers' events, docs/operations.md "Notifications").
/// Only ids: a sink reads the rows it needs from the database.
struct LifecycleEvent {
  enum class Kind {
    kEvalStarted,    ///< an evaluation of `jobset` starts
    kEvalFinished,   ///< evaluation `eval` of `jobset` was recorded; eval 0:
                     ///< it ended without one (inputs unchanged)
    kEvalFailed,     ///< evaluation `eval` of `jobset` failed as a whole
    kBuildQueued,    ///< build `build` was created (or revived) unfinished
    kBuildStarted,   ///< the first step of build `build` went to a worker
    kBuildFinished,  ///< build `build` was created finished (a reused result)
    kStepFinished,   ///< step `step` ended (any status; a retry follows)
    /// the channel of `jobset` advanced to evaluation `eval`, whose build
    /// `build` of the channel job succeeded (docs/release.md)
    kChannelAdvanced,
    kEvalQueued,     ///< every build of evaluation `eval` was recorded
    kEvalDone,       ///< every build of evaluation `eval` has finished
  };
  Kind kind = Kind::kEvalStarted;
  int64_t jobset = 0;
  int64_t eval = 0;
  int64_t build = 0;
  int64_t step = 0;
};

/// Receives build events on the service thread, in the order they happen.
/// A sink must return quickly (the service thread dispatches builds): a
/// notifier queues the event for a thread of its own. An exception is
/// caught and logged by the service; the other sinks still get the event.
/// The service calls each sink inside one database transaction with the
/// state change the event reports (StateDbSink first), so a sink writing
/// through `attach`'s database commits, or not, with it.
class BuildEventSink {
 public:
  virtual ~BuildEventSink() = default;
  /// `event` happened at `timeMs` (Unix ms, the service's clock).
  virtual void onBuildEvent(const BuildEvent& event, int64_t timeMs) = 0;
  /// A service-level event at `timeMs`; ignored unless overridden.
  virtual void onLifecycleEvent(const LifecycleEvent& event, int64_t timeMs) {
    (void)event;
    (void)timeMs;
  }
  /// Called once by the service before any event, with its database
  /// (borrowed; used on the service thread only). Ignored by default.
  virtual void attach(StateDb& db) { (void)db; }
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
