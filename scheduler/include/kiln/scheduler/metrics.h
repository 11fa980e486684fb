#pragma once
/// Prometheus metrics of the scheduler service (docs/scheduler.md,
/// "Metrics"), registered in a prometheus-cpp registry that the service
/// exposes on `/metrics` (and that the web module may serve later).

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kiln/scheduler/types.h"

namespace kiln::scheduler {

/// The service's metric families. Not thread-safe to update from several
/// threads at once (the service thread does); scraping is safe.
class ServiceMetrics {
 public:
  /// Registers the families in `registry`, which must outlive this object.
  explicit ServiceMetrics(prometheus::Registry& registry);

  /// Copies the core's gauges and the growth of its counters. Queued steps
  /// are labelled by system only for systems a worker announces or that
  /// are well known (x86_64-linux, aarch64-darwin, ...), at most
  /// kMaxSystemLabels of them; any other system (a jobset chooses its
  /// systems) counts under `system="other"`. A system with no queued step
  /// has no series.
  void update(const SchedulerMetrics& m);
  /// Systems that get a label of their own (the rest are "other").
  static constexpr size_t kMaxSystemLabels = 64;
  /// Time from the service event that made an assignment possible (a step
  /// result, an ingestion, a worker joining) to its BuildStep being sent.
  void observeDispatchLatency(double seconds);
  /// How many dispatch latencies were observed, and their sum (seconds).
  uint64_t dispatchCount() const { return dispatchCount_; }
  double dispatchLatencySum() const { return dispatchLatencySum_; }
  /// Wall time of a finished step attempt.
  void observeStepDuration(const std::string& system, double seconds);
  /// What a finished step attempt used, as its worker measured it
  /// (docs/worker.md, "Limits per build"); a 0 (not measured) is skipped.
  void observeStepUsage(const std::string& system, uint64_t peakMemoryBytes,
                        uint64_t cpuTimeUs, uint64_t buildDirBytes);
  /// Per-slot idle-with-work stretches that ended (SchedulerCore::
  /// takeIdleStretches): a histogram and their maximum.
  void observeIdleStretches(const std::vector<Duration>& stretches);
  /// The longest stretch observed so far, in seconds.
  double longestSlotIdleSeconds() const { return longestSlotIdle_; }
  /// One turn of the service loop (a message with its events and
  /// dispatch, the periodic work, a slice of an ingestion): as long as a
  /// message that just arrived may wait unread.
  void observeLoopTurn(double seconds);
  void addBytesSent(uint64_t n) { bytesSent_.Increment(double(n)); }
  void addBytesReceived(uint64_t n) { bytesReceived_.Increment(double(n)); }
  /// An upload whose reported references differ from the scanned ones.
  void countReferenceMismatch() { referenceMismatches_.Increment(); }
  /// A step a reconnecting worker still ran, taken over (not restarted).
  void countAdoptedStep() { adoptedSteps_.Increment(); }
  /// A step a worker's Hello claimed that the scheduler's records do not
  /// give to it (another worker, another .drv, settled, unknown).
  void countRefusedClaim() { refusedClaims_.Increment(); }

 private:
  /// The label of `system`: itself, or "other" (see update()).
  const std::string& systemLabel(const std::string& system);

  prometheus::Family<prometheus::Gauge>& queued_;
  std::map<std::string, prometheus::Gauge*> queuedBySystem_;  ///< by label
  std::set<std::string> ownLabels_;      ///< systems labelled as themselves
  std::set<std::string> workerSystems_;  ///< as of the last update
  prometheus::Gauge& running_;
  prometheus::Gauge& workers_;
  prometheus::Gauge& freeSlots_;
  prometheus::Counter& idleSeconds_;
  prometheus::Gauge& longestIdle_;
  prometheus::Counter& retries_;
  prometheus::Counter& dispatches_;
  prometheus::Histogram& dispatchLatency_;
  uint64_t dispatchCount_ = 0;
  double dispatchLatencySum_ = 0;
  prometheus::Histogram& slotIdle_;
  prometheus::Gauge& slotIdleMax_;
  double longestSlotIdle_ = 0;
  prometheus::Histogram& loopTurn_;
  prometheus::Gauge& loopTurnMax_;
  double longestLoopTurn_ = 0;
  prometheus::Family<prometheus::Histogram>& stepDuration_;
  prometheus::Family<prometheus::Histogram>& stepPeakMemory_;
  prometheus::Family<prometheus::Histogram>& stepCpu_;
  prometheus::Family<prometheus::Histogram>& stepBuildDir_;
  prometheus::Counter& bytesSent_;
  prometheus::Counter& bytesReceived_;
  prometheus::Counter& referenceMismatches_;
  prometheus::Counter& adoptedSteps_;
  prometheus::Counter& refusedClaims_;
  SchedulerMetrics last_;
};

}  // namespace kiln::scheduler
