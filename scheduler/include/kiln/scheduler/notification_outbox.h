#pragma once
/// The build-event sink that feeds notifiers (docs/operations.md,
/// "Notifications"): for every event it writes one outbox row per
/// configured notifier (notification_store.h), with the event as JSON,
/// in the service's transaction; `NotificationDelivery` sends them.

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kiln/scheduler/build_events.h"
#include "kiln/scheduler/notification_store.h"

namespace kiln::scheduler {

/// Writes notifications to the outbox of the database the service attaches.
/// Events before `attach` are dropped with a warning.
class NotificationOutbox final : public BuildEventSink {
 public:
  /// One row per event for each of `targets` (notifier names); `queued`,
  /// if set, is called after rows were written (to wake the delivery).
  explicit NotificationOutbox(std::vector<std::string> targets,
                              std::function<void()> queued = {});

  void attach(StateDb& db) override;
  void onBuildEvent(const BuildEvent& event, int64_t timeMs) override;
  void onLifecycleEvent(const LifecycleEvent& event, int64_t timeMs) override;

  /// The JSON of `event` at `timeMs` as notifiers receive it (with a fresh
  /// "id"), or null if its rows are gone. Needs `attach` first.
  nlohmann::json payload(const LifecycleEvent& event, int64_t timeMs);

 private:
  nlohmann::json jobsetJson(int64_t jobset);
  nlohmann::json buildJson(int64_t build, bool finished);
  nlohmann::json stepJson(int64_t step);
  /// {id, inputsHash, revision (a git commit)} of evaluation `eval`, or
  /// null; the last one is kept (a build event's evaluation repeats).
  nlohmann::json evalRefJson(int64_t eval);
  nlohmann::json evalBuildsJson(nlohmann::json body,
                                const LifecycleEvent& event);
  void checkEvalDone(int64_t eval, int64_t timeMs);
  std::string newId();
  void write(const std::string& key, const nlohmann::json& body,
             int64_t timeMs);

  std::vector<std::string> targets_;
  std::function<void()> queued_;
  StateDb* db_ = nullptr;
  std::optional<NotificationStore> store_;
  std::mt19937_64 random_;
  std::pair<int64_t, nlohmann::json> lastEval_{0, nullptr};
};

/// The event kind of `event` as payloads name it ("eval.started",
/// "build.finished", "step.finished", ...).
std::string lifecycleEventName(LifecycleEvent::Kind kind);

}  // namespace kiln::scheduler
