#pragma once
/// Value types of the scheduler's policy core: identifiers, what the caller
/// tells the core (steps, builds, workers, results) and what it gets back
/// (assignments, build events, wait reasons, metrics).

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kiln/common/clock.h"
#include "kiln/common/error.h"
#include "kiln/common/status.h"

namespace kiln::scheduler {

/// A misuse of the core's API (unknown or stale id, duplicate build, invalid
/// worker description). The message names the offending object.
class SchedulerError : public Error {
 public:
  using Error::Error;
};

/// A build (one job of one evaluation); the id is the caller's (database) id.
using BuildId = int64_t;
/// A jobset; the id is the caller's (database) id.
using JobsetId = int64_t;

/// An id handed out by the core for an object it stores in a slot (a step or
/// a worker). A slot is reused after its object leaves; the generation makes
/// a stale id detectable (the core throws SchedulerError on it). `Tag`
/// keeps step and worker ids apart.
template <class Tag>
struct SlotId {
  uint32_t index = std::numeric_limits<uint32_t>::max();
  uint32_t generation = 0;
  /// Whether this id was ever handed out (default-constructed ids are not).
  bool valid() const { return index != std::numeric_limits<uint32_t>::max(); }
  friend bool operator==(const SlotId&, const SlotId&) = default;
  friend auto operator<=>(const SlotId&, const SlotId&) = default;
};

/// A step (one derivation) held by the core.
using StepId = SlotId<struct StepTag>;
/// A connected worker, handed out by `registerWorker`.
using WorkerId = SlotId<struct WorkerTag>;

/// Build and step status codes: Hydra's numbers (kiln/common/status.h),
/// shared with the worker and the protocol (design decision 3).
using kiln::StepStatus;

/// Durations inside the core (millisecond resolution).
using Duration = std::chrono::milliseconds;
/// Instants inside the core: Unix time in milliseconds (`Clock::wallNow`),
/// so that the service can persist them in its database as integers.
using TimePoint = WallTime;
/// The core reads time only from an injected kiln::Clock (`wallNow`):
/// RealClock in the service, FakeClock in tests and simulations.
using kiln::Clock;
using kiln::FakeClock;

/// One derivation to build, as the caller describes it to `addStep`.
struct StepSpec {
  /// Full path of the `.drv`; unique key of the step in the core.
  std::string drvPath;
  /// Nix system type (`x86_64-linux`, or `builtin` which any worker runs).
  std::string system;
  /// `requiredSystemFeatures` of the derivation (order does not matter).
  std::vector<std::string> requiredFeatures;
  /// Output names (informational; the core does not interpret them).
  std::vector<std::string> outputs;
  /// Package name used to look up the historical duration (critical path).
  std::string pname;
  /// When the step was first created; the core uses its clock if absent
  /// (a restarted service passes the persisted time to keep age order).
  std::optional<TimePoint> created;
};

/// A step already built that is built a second time on another worker to
/// check that it is reproducible (docs/release.md, "Reproducibility
/// checks"): it belongs to no build and goes after all real work.
struct RepeatSpec {
  std::string drvPath;  ///< full path of the `.drv`
  std::string system;   ///< as StepSpec::system
  std::vector<std::string> requiredFeatures;
  /// The name (WorkerSpec::name) of the worker of the first build: the
  /// repeat never runs there.
  std::string avoidWorker;
  /// Workers that refused it already (they hold its outputs, so they
  /// cannot build it again): never used either.
  std::vector<std::string> refusedBy;
};

/// A top-level build as the caller describes it to `addBuild`.
struct BuildSpec {
  BuildId id = 0;
  JobsetId jobset = 0;
  /// The step of the build's own derivation; must be in the graph.
  StepId top;
  /// Global priority (the operator's bump); higher goes first.
  int globalPriority = 0;
  /// Local priority (`meta.schedulingPriority`); higher goes first.
  int localPriority = 0;
};

/// Thresholds above which a worker takes no new step (docs/scheduler.md,
/// "Pressure"). Each is off when absent.
struct PressureLimits {
  /// One-minute load average.
  std::optional<double> maxLoadAverage;
  /// Pressure stall information, "some" over 10 s, in percent.
  std::optional<double> maxMemoryPressure;
  std::optional<double> maxCpuPressure;
  std::optional<double> maxIoPressure;
  /// Free bytes on the worker's build disk.
  std::optional<uint64_t> minFreeDisk;
  friend bool operator==(const PressureLimits&,
                         const PressureLimits&) = default;
};

/// What a worker's heartbeat says about its machine besides its slot load.
/// A value the worker could not read is absent (and never breaches).
struct WorkerHealth {
  std::optional<double> loadAverage;
  /// Pressure stall information ("some" avg10, percent).
  std::optional<double> memoryPressure;
  std::optional<double> cpuPressure;
  std::optional<double> ioPressure;
  /// Free bytes on the build disk; available memory (MemAvailable).
  std::optional<uint64_t> freeDisk;
  std::optional<uint64_t> freeMemory;
};

/// A worker as it announces itself.
struct WorkerSpec {
  /// Human-readable name for explanations (`whyWaiting`) and metrics.
  std::string name;
  /// System types it builds (at least one).
  std::vector<std::string> systems;
  /// Features it supports.
  std::vector<std::string> supportedFeatures;
  /// Features a step must require to run here (e.g. `benchmark`); they count
  /// as supported too.
  std::vector<std::string> mandatoryFeatures;
  /// Concurrent steps it accepts (at least 1).
  unsigned slots = 1;
  /// Relative speed (> 0); load is divided by it when choosing a worker.
  double speedFactor = 1.0;
  /// Over any of these (as its heartbeats report), it gets no new step.
  PressureLimits limits{};
};

/// How an attempt of a step ended, as reported to `finishStep`.
struct StepResult {
  enum class Kind {
    kSuccess,    ///< outputs built and registered
    kPermanent,  ///< a real build failure: fails dependent builds
    kTransient,  ///< worker lost, transfer or hash error: retried
    /// Never reached the worker (the service could not send it, e.g. its
    /// state database was away): queued again after the base backoff,
    /// no attempt counted.
    kNotStarted,
  };
  Kind kind = Kind::kSuccess;
  /// Status recorded when the step fails for good (permanent failures, and
  /// transient ones whose retries are exhausted).
  StepStatus status = StepStatus::kSuccess;
  /// Time the attempt took; feeds fairness and, on success, the history.
  Duration duration{0};
  /// Peak memory of the attempt (0: unknown); becomes the last peak of the
  /// step's package, which places its next builds (docs/scheduler.md,
  /// "Memory").
  uint64_t peakMemoryBytes = 0;
  /// A transient end because the build ran out of memory: its retry goes
  /// to a worker with more free memory than this one had, if there is one.
  bool outOfMemory = false;

  static StepResult success(Duration d) {
    return {Kind::kSuccess, StepStatus::kSuccess, d};
  }
  static StepResult permanent(StepStatus s, Duration d) {
    return {Kind::kPermanent, s, d};
  }
  static StepResult transient(Duration d) {
    return {Kind::kTransient, StepStatus::kAborted, d};
  }
  static StepResult notStarted() {
    return {Kind::kNotStarted, StepStatus::kAborted, Duration{0}};
  }
  /// Killed at its memory limit, to be retried once (a transient end).
  static StepResult outOfMemoryRetry(Duration d, uint64_t peak) {
    return {Kind::kTransient, StepStatus::kOutOfMemory, d, peak, true};
  }
  /// The same result with the attempt's peak memory.
  StepResult withPeak(uint64_t peak) const {
    StepResult r = *this;
    r.peakMemoryBytes = peak;
    return r;
  }
};

/// A dispatch decision: run `step` on `worker`. The step is now running
/// there until `finishStep` or the worker's removal.
struct Assignment {
  StepId step;
  WorkerId worker;
  /// A reproducibility check's second build (addRepeat), not a build's
  /// step: the worker builds it again without replacing the output.
  bool repeat = false;
  friend bool operator==(const Assignment&, const Assignment&) = default;
};

/// A running step the core no longer needs (its builds were cancelled): the
/// service should tell the worker to kill it. The step is already gone.
struct StepAbort {
  StepId step;
  WorkerId worker;
  std::string drvPath;
};

/// A change of a build's state, for the service to persist and announce.
struct BuildEvent {
  enum class Kind {
    kSucceeded,  ///< top step built; the build left the core
    kFailed,     ///< a step in its closure failed; the build stays (revivable)
    kRevived,    ///< the failed step was retried with success: queued again
    kCancelled,  ///< cancelled by the operator; the build left the core
  };
  BuildId build = 0;
  Kind kind = Kind::kSucceeded;
  /// Hydra status: 0, the failed step's status (when it is the build's own
  /// step), 2 (a dependency failed), 4 (cancelled); for kRevived, 0.
  StepStatus status = StepStatus::kSuccess;
  /// The step whose outcome caused the event.
  std::string causeDrvPath;
};

/// Why a step is not running (see `SchedulerCore::whyWaiting`).
struct WaitReason {
  enum class Kind {
    kRunning,                 ///< not waiting: running on `detail`
    kReady,                   ///< a worker has a free slot: next dispatch
    kWaitingForDependencies,  ///< `count` dependencies unfinished
    kDependencyFailed,        ///< a dependency failed (`detail`)
    kFailed,                  ///< the step itself failed; restart to retry
    kBackoff,                 ///< transient failure: runnable again at `until`
    kNoWorkerForSystem,       ///< no registered worker has the system
    kMissingFeature,          ///< workers with the system lack `detail`
    kAllSlotsBusy,            ///< every suitable worker is full
    /// Every suitable worker with a free slot is over a pressure threshold
    /// (`detail` names each, its value and its threshold).
    kWorkersUnderPressure,
    /// Its memory need (last peak, or more than where it ran out of
    /// memory) fits only suitable workers that are busy or under pressure.
    kNeedsMemory,
    kNotNeeded,  ///< no build references it (yet)
  };
  Kind kind = Kind::kReady;
  /// Human-readable explanation, always set.
  std::string detail;
  /// For kWaitingForDependencies: unfinished dependencies.
  size_t count = 0;
  /// For kBackoff: when the step becomes runnable again.
  TimePoint until{};
};

/// Plain counters and gauges the service exports (e.g. to Prometheus).
struct SchedulerMetrics {
  /// Queued (runnable, not running) steps per system type.
  std::map<std::string, size_t> queuedBySystem;
  /// The systems the registered workers announce.
  std::set<std::string> workerSystems;
  /// Steps running on workers.
  size_t runningSteps = 0;
  /// Steps of the builds waiting for dependencies (or dormant: no build
  /// needs them yet); reproducibility checks' repeats are not counted.
  size_t waitingSteps = 0;
  /// Reproducibility checks' repeats waiting for a worker (addRepeat).
  size_t waitingRepeats = 0;
  /// Repeats running (also counted in runningSteps: they hold a slot).
  size_t runningRepeats = 0;
  /// Steps in backoff after a transient failure.
  size_t backoffSteps = 0;
  /// Steps failed for good (until restarted).
  size_t failedSteps = 0;
  /// Builds known to the core (active or failed-but-revivable).
  size_t builds = 0;
  /// Workers registered, their slots, and slots free now.
  size_t workers = 0;
  size_t totalSlots = 0;
  size_t freeSlots = 0;
  /// Counters since construction.
  uint64_t dispatchDecisions = 0;
  uint64_t retries = 0;
  uint64_t stepsSucceeded = 0;
  uint64_t stepsFailed = 0;
  /// Workers removed (left, lost, or timed out by `tick`).
  uint64_t workersRemoved = 0;
  /// Worker-slot time spent idle while a step that slot could run was
  /// queued (accrued between calls into the core), in seconds.
  double idleSlotSeconds = 0;
  /// Longest stretch any one worker had a free slot while a step it could
  /// run was queued.
  Duration longestIdleWithWork{0};
  /// Per slot: a stretch runs from the moment the slot is free while a
  /// step it could run is queued until that ends (a step is dispatched to
  /// it, the work went elsewhere, the worker left). Ended stretches so far
  /// and the longest of them (each is also reported by takeIdleStretches).
  uint64_t slotIdleStretches = 0;
  Duration longestSlotIdle{0};
};

/// Tunables of the policy. Defaults suit production; tests shrink them.
struct SchedulerConfig {
  /// Transient failures retried this many times; one more fails the step
  /// with the result's status (kAborted).
  unsigned maxRetries = 3;
  /// Backoff after the n-th transient failure: base * 2^(n-1), capped.
  Duration retryBackoffBase = std::chrono::seconds(30);
  Duration retryBackoffMax = std::chrono::hours(1);
  /// Sliding window of build time used for jobset fairness.
  Duration fairnessWindow = std::chrono::hours(24);
  /// Expected duration (seconds) of a package never built before.
  double defaultDurationSeconds = 1.0;
  /// A worker silent for longer is declared lost by `tick()`; 0 disables.
  Duration heartbeatTimeout{0};
};

}  // namespace kiln::scheduler
