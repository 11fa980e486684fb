#pragma once
/// What only the running scheduler knows, as plain values its thread
/// publishes for readers on others (docs/scheduler.md, "State"): the queue
/// with each step's wait reason, the connected workers, the core's
/// metrics. `SchedulerService::snapshot()` makes them; the web and a live
/// `kiln queue` read them without linking the service.

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/scheduler/types.h"

namespace kiln::scheduler {

/// One waiting or running step, as `kiln queue` shows it.
struct QueueEntry {
  int64_t stepId = 0;
  std::string drvPath;
  std::string system;
  /// "running", "queued", "waiting", "backoff", "publishing"; a
  /// reproducibility check's repeat: "check-waiting", "check-running"
  /// (stepId is then the step row it checks).
  std::string state;
  std::string reason;  ///< the core's explanation
};

/// A connected worker, as the running scheduler sees it.
struct WorkerEntry {
  std::string name;  ///< workerId (and key name)
  std::vector<std::string> systems;
  unsigned slots = 0;
  size_t runningSteps = 0;
  std::vector<std::string> features;  ///< supportedFeatures from its Hello
  std::vector<std::string> steps;     ///< .drv paths it is building now
  int64_t lastSeenMs = 0;             ///< last message from it (Unix ms)
  /// Its steps settled since it connected: succeeded, and failed
  /// (transient failures and rejected uploads included).
  uint64_t succeededSteps = 0;
  uint64_t failedSteps = 0;
  /// Why it takes no new step ("memory pressure 42% > 20%"), or empty.
  std::string pressure{};
  /// Its last heartbeat's figures ("load 1.5, memory pressure 3%, ...").
  std::string health{};
};

/// What only the running scheduler knows, as one immutable value published
/// from its thread for readers on others (web pages, a live `kiln queue`).
struct SchedulerSnapshot {
  int64_t takenMs = 0;            ///< Unix ms (the service's clock)
  std::vector<QueueEntry> queue;  ///< unfinished steps and why they wait
  std::vector<WorkerEntry> workers;
  SchedulerMetrics metrics;  ///< the core's gauges and counters
  /// Steps dispatched since the service started, and the sum of their
  /// dispatch latencies (seconds; see ServiceMetrics).
  uint64_t dispatches = 0;
  double dispatchLatencySum = 0;
};

}  // namespace kiln::scheduler
