#pragma once
/// The scheduler's pure policy core: the graph of unfinished steps, one
/// ready queue per system type, worker choice, fairness, retries. It does no
/// I/O and starts no threads; time comes from the injected `Clock`. The
/// service around it (database, ZeroMQ, evaluations) calls these methods
/// from one thread and persists what `takeBuildEvents` / `takeAborts` report.
/// See docs/scheduler.md for the policy and its complexity.
///
/// Typical driving loop of the service:
///   ingest: addStep(...) for each derivation of a closure, dependencies
///           first, then addBuild(...) for the job;
///   workers: registerWorker / heartbeat / removeWorker;
///   loop:   tick(); for (a : nextAssignments()) send a.step to a.worker;
///           on a worker's report: finishStep(step, result);
///           persist takeBuildEvents(), kill takeAborts(), settle
///           takeDropped().

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "kiln/scheduler/types.h"

namespace kiln::scheduler {

/// Answers "how many bytes of this step's input closure does worker W already
/// hold?" for the locality tie-break. The service implements it from what
/// workers report; tests fake it. Must not call back into the core.
class InputLocality {
 public:
  virtual ~InputLocality() = default;
  /// Bytes of `drvPath`'s inputs present on `worker` (0 when unknown).
  virtual uint64_t bytesPresent(StepId step, std::string_view drvPath,
                                WorkerId worker) const = 0;
};

/// Read-only view of a step, for the service's queue pages and for tests.
struct StepView {
  enum class State { kWaiting, kQueued, kRunning, kBackoff, kFailed };
  StepId id;
  std::string drvPath;
  std::string system;
  State state = State::kWaiting;
  /// Effective attributes inherited from the builds that need the step.
  int globalPriority = 0;
  int localPriority = 0;
  JobsetId jobset = 0;
  /// Lowest id among the builds needing it (its owner for fairness).
  BuildId ownerBuild = 0;
  /// Longest chain of expected durations from here to a top-level build,
  /// this step included (seconds).
  double criticalPath = 0;
  /// Expected duration of this step alone (seconds).
  double expectedDuration = 0;
  /// Free memory a worker must have to get it (bytes, 0: none): its
  /// package's last peak, or more than where it last ran out of memory.
  uint64_t memoryNeed = 0;
  /// Unfinished dependencies; transient failures so far.
  size_t unfinishedDeps = 0;
  unsigned attempts = 0;
  /// Where it runs (state kRunning).
  WorkerId worker;
};

/// The policy core. Not thread-safe: one owner drives it. Holds no
/// references to caller data except the clock and the locality oracle,
/// which must outlive it.
class SchedulerCore {
 public:
  /// `locality` may be null (the locality tie-break then sees 0 bytes).
  explicit SchedulerCore(const Clock& clock, SchedulerConfig config = {},
                         const InputLocality* locality = nullptr);
  ~SchedulerCore();
  SchedulerCore(const SchedulerCore&) = delete;
  SchedulerCore& operator=(const SchedulerCore&) = delete;

  // ---- graph ---------------------------------------------------------------

  /// Adds the step for `spec.drvPath` depending on `deps` (unfinished steps
  /// already in the graph; finished ones are simply not listed), or returns
  /// the existing step of that path unchanged. A step is dormant until a
  /// build needs it (directly or through another step). Throws
  /// SchedulerError on a stale dependency id or an empty path or system.
  /// Cost: O(deps).
  StepId addStep(const StepSpec& spec, std::span<const StepId> deps);
  /// The step of a `.drv` path, if in the graph.
  std::optional<StepId> findStep(std::string_view drvPath) const;
  /// Adds a top-level build over `spec.top`. Its priorities, jobset and the
  /// critical path flow down its closure (only where they change). If the
  /// top step or a dependency has already failed, the build fails at once
  /// (a kFailed event). Throws SchedulerError on a duplicate build id or a
  /// stale step id.
  void addBuild(const BuildSpec& spec);
  /// Cancels a build: emits kCancelled (if it was not failed), forgets it,
  /// and drops every step no build needs any more (`takeDropped`); dropped
  /// running steps are also reported by `takeAborts`. Throws SchedulerError if
  /// unknown.
  void cancelBuild(BuildId build);
  /// Sets a build's global priority and re-keys the steps it reaches.
  /// Throws SchedulerError if unknown.
  void bumpBuild(BuildId build, int globalPriority);
  /// Operator restart of a failed step: it is queued again with its retry
  /// count reset; the builds it failed are revived if it then succeeds.
  /// Throws SchedulerError unless the step is in the failed state.
  void restartStep(StepId step);
  /// Whether the core knows this build (active or failed).
  bool hasBuild(BuildId build) const;

  // ---- history and fairness ----------------------------------------------

  /// Seeds the expected duration of package `pname` (seconds, > 0), e.g.
  /// from the database at start. Successful steps update it themselves.
  /// Affects steps added afterwards.
  void setHistoricalDuration(const std::string& pname, double seconds);
  /// Seeds the last recorded peak memory of package `pname` (bytes), e.g.
  /// from the database at start; finished steps that report a peak update
  /// it themselves. A step of that package goes only to a worker with at
  /// least that much free memory while some suitable worker reports as
  /// much (docs/scheduler.md, "Memory").
  void setHistoricalPeak(const std::string& pname, uint64_t bytes);
  /// Sets a jobset's scheduling shares (>= 1; default 1).
  void setJobsetShares(JobsetId jobset, unsigned shares);
  /// The jobset's recent build seconds (window + running estimates) divided
  /// by its shares: lower is served first among equal global priorities.
  double jobsetFairness(JobsetId jobset) const;

  // ---- workers -------------------------------------------------------------

  /// Registers a worker. Throws SchedulerError if it has no system, no slot,
  /// or a speed factor <= 0. Cost: O(ready-queue classes).
  WorkerId registerWorker(const WorkerSpec& spec);
  /// Records a heartbeat with the worker's reported load (>= 0, in
  /// "busy slots' worth" divided by slots, i.e. 1.0 = fully loaded).
  void heartbeat(WorkerId worker, double load);
  /// The same with what the worker reports about its machine: over one of
  /// its `WorkerSpec::limits` it takes no new step until a heartbeat is
  /// under all of them again; its free memory places memory-hungry steps.
  void heartbeat(WorkerId worker, double load, const WorkerHealth& health);
  /// Why the worker takes no new step ("memory pressure 42% > 20%"), or
  /// empty when it is under its thresholds. Throws on a stale id.
  std::string pressure(WorkerId worker) const;
  /// Removes a worker (it left or was lost). Each step running there ends
  /// as a transient failure and is retried after its backoff.
  void removeWorker(WorkerId worker);
  /// The ids of registered workers.
  std::vector<WorkerId> workers() const;

  // ---- dispatch ------------------------------------------------------------

  /// Housekeeping due at the clock's time: steps whose backoff ended are
  /// queued, the fairness window slides, workers silent for longer than
  /// `heartbeatTimeout` are removed as lost. Returns the lost workers.
  std::vector<WorkerId> tick();
  /// Decides what to run now: repeatedly takes the best queued step that
  /// some worker with a free slot can run and gives it to the best such
  /// worker, until no more pairs exist or `max` were made. Each decision
  /// costs O(classes + workers-of-the-class + log queue).
  std::vector<Assignment> nextAssignments(size_t max = SIZE_MAX);
  /// Reports the end of a running step's attempt. Success removes the step,
  /// finishes builds whose top it was and may make dependents runnable;
  /// a permanent failure fails (status 2 or its own status) every build
  /// that depends on it; a transient one retries with backoff or, retries
  /// exhausted, fails as permanent. Throws SchedulerError if the step is
  /// not running.
  void finishStep(StepId step, const StepResult& result);
  /// The worker is done with a running step whose result waits for its
  /// outputs to be registered: its slot is free for the next dispatch,
  /// and the step stays running (no worker; a lost worker no longer
  /// concerns it) until finishStep. Throws SchedulerError if the step is
  /// not running or already released its slot.
  void releaseSlot(StepId step);
  /// Fails a step that is not running (e.g. a cached failure found at
  /// ingestion, status 8): same propagation as a permanent failure.
  void failStep(StepId step, StepStatus status);
  /// Holds back a step that may still be running on a worker the service
  /// lost track of (it restarted): it is not dispatched before `until`,
  /// unless adopted, and then queues as after a backoff. Returns false
  /// (nothing changes) unless the step is queued, waiting or in backoff.
  /// Throws SchedulerError on a stale id.
  bool holdStep(StepId step, TimePoint until);
  /// `worker` reports that it is still running `step` (after a restart):
  /// the step runs there from now on, in one of its slots, as if
  /// dispatched (no attempt is counted). Returns false (nothing changes)
  /// if the step is not queued or held, or the worker cannot run its
  /// class or has no free slot. Throws SchedulerError on stale ids.
  bool adoptStep(StepId step, WorkerId worker);

  // ---- reproducibility checks (repeats.cc) --------------------------------

  /// Adds a repeat: a second build of an already built `.drv` that
  /// belongs to no build. It is dispatched (an Assignment with `repeat`)
  /// only to a worker other than `spec.avoidWorker` that can run it, and
  /// only with slots left after every queued step of the graph. Repeats
  /// go in the order they were added. Throws SchedulerError on an empty
  /// path or system. Cost: O(1).
  StepId addRepeat(const RepeatSpec& spec);
  /// The running repeat `step` ended (whatever its outcome): its slot is
  /// freed and the step forgotten (its id is stale). A repeat whose
  /// worker is removed waits again. Throws SchedulerError unless `step`
  /// is a running repeat.
  void finishRepeat(StepId step);
  /// The worker of the running repeat `step` refused it (it holds the
  /// outputs already, so it cannot build them again): its slot is freed
  /// and that worker avoided too. If another connected worker may take
  /// it, the repeat waits again under the same id and this returns true;
  /// otherwise it is forgotten (as finishRepeat) and this returns false.
  /// Throws unless `step` is a running repeat.
  bool refuseRepeat(StepId step);
  /// Forgets the repeat `step` in any state (a running one's slot is
  /// freed; the service tells its worker). Throws SchedulerError unless
  /// `step` is a repeat.
  void dropRepeat(StepId step);
  /// Whether `step` is a repeat (addRepeat). Throws on a stale id.
  bool isRepeat(StepId step) const;
  /// `worker` reports that it still runs (or has finished) the waiting
  /// repeat `step` (after a restart): it runs there from now on, in one of
  /// its slots, as if dispatched. Returns false (nothing changes) unless
  /// the repeat waits and the worker can run its class with a free slot.
  /// Throws SchedulerError unless `step` is a repeat (or on stale ids).
  bool adoptRepeat(StepId step, WorkerId worker);

  // ---- outputs for the service -------------------------------------------

  /// Build state changes since the last call, in order.
  std::vector<BuildEvent> takeBuildEvents();
  /// Running steps dropped by cancellation since the last call.
  std::vector<StepAbort> takeAborts();
  /// Every step dropped by cancellation since the last call, in any state
  /// (waiting, queued, in backoff, running: also in takeAborts, failed):
  /// the service settles the unfinished ones' records. Their ids are stale.
  std::vector<StepId> takeDropped();
  /// Per-slot idle-with-work stretches (see SchedulerMetrics::
  /// longestSlotIdle) that ended since the last call, for a histogram.
  /// A stretch is recorded at the first call into the core after it ended.
  std::vector<Duration> takeIdleStretches();

  // ---- introspection -------------------------------------------------------

  /// Why a step is not running (or that it is). Throws on a stale id.
  WaitReason whyWaiting(StepId step) const;
  /// A snapshot of one step. Throws on a stale id.
  StepView step(StepId step) const;
  /// Counters and gauges (queue sizes are O(systems); the rest O(1)).
  SchedulerMetrics metrics() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::scheduler
