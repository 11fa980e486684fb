#pragma once
// Running steps and dispatch (docs/scheduler.md, "Dispatch"): sends the
// core's assignments to workers as BuildStep (with the inputs' metadata),
// keeps each running step until its result, writes its log, settles its
// result in the database and the core, and cancels what the core aborts.
// A running step is known by its database id (the protocol's stepId);
// the core's id travels with it. Service thread only. running_steps.cc
// sends and adopts steps, serves their inputs and writes their logs;
// running_steps_results.cc settles their ends.

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "deferred_writes.h"
#include "input_server.h"
#include "kiln/common/clock.h"
#include "kiln/common/file.h"
#include "kiln/protocol/messages.h"
#include "kiln/scheduler/build_events.h"
#include "kiln/scheduler/core.h"
#include "kiln/scheduler/ingest.h"
#include "kiln/scheduler/metrics.h"
#include "kiln/scheduler/service.h"
#include "kiln/scheduler/state_db.h"
#include "log_mirror.h"
#include "worker_link.h"

namespace kiln::scheduler {

/// A step running on a worker.
struct RunningStep {
  int64_t id = 0;  ///< database id (the protocol's stepId)
  StepId sid;      ///< the core's id
  std::string peer;
  std::string worker;  ///< its name (WorkerConn::name)
  std::string drvPath;
  std::string system;
  std::map<std::string, store::StorePath> expected;  ///< output name → path
  /// Output name → the CA field of a fixed output ("fixed:r:sha256:…"):
  /// its upload must have that content, and is registered with it.
  std::map<std::string, std::string> fixedCa;
  /// Why an upload was rejected (its content is not what the derivation
  /// declares): the step fails with this, whatever the worker reports.
  std::string rejected;
  std::set<std::string> uploaded;     ///< output names
  std::set<std::string> registering;  ///< verified, being added to the store
  std::vector<store::StorePath> sentInputs;  ///< BuildStep's `inputs`
  std::vector<store::StorePath> roots;       ///< BuildStep's `roots`
  /// The input closure (`roots` and all they reference), walked at the
  /// first NeedPaths or upload: only those paths are served, and only
  /// those and `expected` are references an upload may have.
  std::optional<store::StorePathSet> inputClosure;
  /// The worker's result, held while outputs are still being registered.
  std::optional<protocol::StepResult> deferred;
  /// The connection whose StepResult was taken (empty until then): it is
  /// acknowledged once the result is durable.
  std::string resultFrom;
  /// The worker's slot was given back to the core (SchedulerCore::
  /// releaseSlot): its result is held, or was ready when it was adopted.
  bool slotReleased = false;
  Clock::TimePoint started;
  /// When the scheduler takes the step back (its timeout plus
  /// ServiceConfig::stepDeadlineMargin); none without a timeout.
  std::optional<Clock::TimePoint> deadline;
  int64_t attempt = 1;
  /// Taken over from a worker that reported it still ran it (after a
  /// restart): no BuildStep was sent, its log is continued.
  bool adopted = false;
  AutoCloseFD log;
  uint64_t logBytes = 0;
  bool logTruncated = false;
  /// A reproducibility check's second build (running_repeats.cc): `id`
  /// is kRepeatIdBase + `check`, the step row it checks; its outputs are
  /// kept aside with these NAR hashes (output name → "sha256:…").
  bool repeat = false;
  int64_t check = 0;
  std::map<std::string, std::string> repeatHashes;
};

class RepeatRuns;

/// The steps running on workers. Borrows everything it is given; all must
/// outlive it.
class RunningSteps {
 public:
  RunningSteps(const ServiceConfig& config, StateDb& db,
               DeferredWrites& deferred, store::LocalStore& store,
               Ingestor& ingestor, SchedulerCore& core, WorkerLink& link,
               InputServer& inputs, ServiceMetrics& metrics,
               const Clock& clock);

  /// Something may be assignable from now on (a new build, a free slot, a
  /// new worker): the next dispatch's latency is measured from here.
  void markPending();
  /// Sends the core's assignments to their workers (a step that cannot be
  /// sent goes back to the core as a transient failure).
  void dispatch();
  /// The steps `c`'s Hello says it still holds that were dispatched to
  /// it (same name) and are not settled: they run there from now on,
  /// without a BuildStep; those whose result is ready first, each giving
  /// its slot back at once. Steps already running on `c`'s very
  /// connection stay too (a repeated Hello may predate them). Returns
  /// their ids, for the Welcome.
  std::vector<uint64_t> adopt(const WorkerConn& c);
  /// Tells the workers to cancel the running steps the core aborted (the
  /// service settles their records: SchedulerService::Impl::settleDropped).
  void abort(const std::vector<StepAbort>& aborts);

  /// NeedPaths: the inputs of a step running on `from` are served.
  void onNeedPaths(WorkerConn& from, const protocol::NeedPaths& m);
  /// A piece of a running step's log (bounded by the log limit).
  void onLog(const WorkerConn& from, const protocol::LogChunk& m);
  /// The worker's result, settled now or held until the step's outputs are
  /// registered; acknowledged once its record is durable (a result sent
  /// again meanwhile is acknowledged with the first, recorded once).
  void onResult(const WorkerConn& from, const protocol::StepResult& m);
  /// How many results were taken and wait for their record to commit
  /// before their Ack goes out.
  size_t unacknowledged() const { return unacked_.size(); }
  /// Takes back every step past its deadline whose result is not held:
  /// CancelStep to its worker, and the step fails as timed out (status 7)
  /// with the reason in its log.
  void takeBackOverdue();
  /// `w` left: its steps are forgotten, except those whose result is held
  /// (their outputs are being registered).
  void workerLeft(const WorkerConn& w);

  /// The step `id` if it runs on `peer`, else nullptr.
  const RunningStep* find(int64_t id, const std::string& peer) const;
  /// The step `id` on whichever worker runs it, else nullptr.
  const RunningStep* find(int64_t id) const;
  /// Output `output` of step `id` was verified and goes to the registrar.
  void outputRegistering(int64_t id, const std::string& output);
  /// The registrar added output `output` of step `id` (or failed: `ok`
  /// false); settles a held result whose last output this was.
  void outputRegistered(int64_t id, const std::string& output, bool ok);
  /// Output `output` of step `id` is not what its derivation declares
  /// (`why` says how, with both hashes): the step fails with `why` in its
  /// log; settles a held result whose last output this was.
  void outputRejected(int64_t id, const std::string& output,
                      const std::string& why);
  /// The paths an output of step `id` may refer to (Nix's reference
  /// scanner's candidates): its input closure (walked once per step) and
  /// its own outputs. Empty if `id` is not running.
  store::StorePathSet referenceCandidates(int64_t id);
  /// What each peer is doing and has done since it connected (the
  /// workers page): the .drv paths it runs, its steps that succeeded and
  /// those that failed (transient failures included).
  struct PeerActivity {
    std::vector<std::string> running;
    uint64_t succeeded = 0;
    uint64_t failed = 0;
  };
  std::map<std::string, PeerActivity> activityByPeer() const;
  /// Where build.started (a build's own step went out) and step.finished
  /// (a step settled) go; nothing is reported until it is set.
  void notifyWith(std::function<void(const LifecycleEvent&)> fn) {
    notify_ = std::move(fn);
  }
  /// Where each attempt's start and end go, for its log to reach the
  /// state database (borrowed; null: the files only).
  void mirrorLogsTo(LogMirror* mirror) { mirror_ = mirror; }
  /// Where the end of each attempt goes (step id, attempt): settled,
  /// aborted or its worker lost (direct uploads clean its staging).
  void onAttemptEnded(std::function<void(int64_t, int64_t)> fn) {
    attemptEnded_ = std::move(fn);
  }
  /// Keeps build `b`'s limits for its steps' dispatch (no row read then).
  void setBuildLimits(const BuildRow& b) {
    limits_[b.id] = {b.maxSilentSec, b.timeoutSec};
  }
  /// Build `build` ended: its limits are forgotten.
  void buildEnded(int64_t build) { limits_.erase(build); }
  /// Where reproducibility checks' second builds are settled (borrowed;
  /// null: no check gets a second build).
  void checkRepeatsWith(RepeatRuns* repeats) { repeats_ = repeats; }
  /// Whether running step `id` is a check's second build.
  bool isRepeat(int64_t id) const;
  /// Output `output` of the check build `id` arrived verified (NAR hash
  /// `narHash`, its NAR in `nar`): kept aside, never registered.
  void keepRepeatOutput(int64_t id, const std::string& output,
                        const std::string& narHash, AutoCloseFD nar);
  /// Jobset `jobset` repeats `ppm` parts per million of its successful
  /// steps (docs/release.md, "Reproducibility checks"; 0: none): a step
  /// that repeat_check.h selects gets a pending check when it succeeds.
  void setRepeatShare(int64_t jobset, uint32_t ppm) {
    if (ppm)
      repeatPpm_[jobset] = ppm;
    else
      repeatPpm_.erase(jobset);
  }

 private:
  bool sendBuildStep(int64_t id, StepId sid, WorkerConn& c);
  /// Sends the core's repeat `a` to its worker as a check build.
  void dispatchRepeat(const Assignment& a);
  /// Settles check build `run` with the worker's result `m`.
  void completeRepeat(RunningStep& run, const protocol::StepResult& m);
  /// Adopts the check build `held` that `c` claims (adoptOne's part for
  /// ids from kRepeatIdBase): one this scheduler runs on `c` already, or
  /// one the earlier scheduler had sent to `c`'s worker
  /// (RepeatRuns::adoptable); false, logged, otherwise.
  bool adoptRepeat(const WorkerConn& c, const protocol::HeldStep& held);
  /// Adopts held step `held` of `c` if the records give it to `c` (see
  /// adopt); false, logged, if not.
  bool adoptOne(const WorkerConn& c, const protocol::HeldStep& held);
  /// Why `row` (step `held.stepId`, read from the database) is not `c`'s
  /// to claim, or "" if it is (or already runs on `c`).
  /// Whether `run`, on another connection, may move to `c`: the same
  /// worker (by name) holding its finished build, no result taken yet.
  static bool movable(const RunningStep& run, const WorkerConn& c,
                      const protocol::HeldStep& held);
  /// Moves `run` to connection `c` (movable()): its slot goes back to the
  /// core, it counts as adopted.
  void moveTo(RunningStep& run, const WorkerConn& c);
  std::string claimRefusal(const WorkerConn& c, const protocol::HeldStep& held,
                           const std::optional<StepRow>& row);
  /// The BuildStep of step `row` for `c`, and what `run` keeps of it
  /// (inputs, outputs); false (logged) if its .drv cannot be read.
  bool describe(const StepRow& row, StepId sid, const WorkerConn& c,
                protocol::BuildStep& m, RunningStep& run);
  /// `run` of step `row` runs on `c` from now on (deadline after
  /// `timeoutSec` plus the margin).
  void track(const StepRow& row, StepId sid, const WorkerConn& c,
             uint64_t timeoutSec, RunningStep run);
  /// Fills `m.roots` with the direct inputs of `drv` and `m.inputs` with
  /// the metadata of their closure minus what `c` is known to hold.
  void planInputs(const store::Derivation& drv, const WorkerConn& c,
                  protocol::BuildStep& m);
  /// Settles running step `id` with the worker's result `r` (its uploads
  /// registered, or failed).
  void complete(int64_t id, const protocol::StepResult& r);
  /// Records what the attempt used (StepResult's usage fields): metrics
  /// and the step's row.
  void recordUsage(const std::string& system, int64_t id,
                   const protocol::StepResult& m);
  /// What acknowledges `run`'s result once its record committed (null if
  /// no worker sent one: taken back); the result waits in `unacked_`.
  DeferredWrites::Done ackWhenRecorded(const RunningStep& run);
  /// Step `id`'s result was recorded (`recorded`), or nothing needed
  /// recording: Ack to the connection that sent it last; else its worker
  /// keeps it (a scheduler that may no longer hold the farm).
  void acknowledge(int64_t id, bool recorded);
  /// A held step that `c` claims whose result this scheduler took and has
  /// not recorded yet: its Ack goes to `c` from now on. False if `id` is
  /// no such step.
  bool adoptUnacknowledged(const WorkerConn& c, int64_t id);
  /// False if an output is missing (the step is retried instead). `ack`
  /// goes with the row's write (see ackWhenRecorded).
  /// `peak`: the attempt's peak memory (0: unknown), for the core's
  /// placement of the package's next steps.
  bool succeed(const RunningStep& run, Duration took, uint64_t peak,
               const DeferredWrites::Done& ack);
  /// Whether the step's row is recorded as ended (not when it is retried).
  bool fail(const RunningStep& run, const protocol::StepResult& r,
            Duration took, const DeferredWrites::Done& ack);
  /// Build `build`'s limits (max silent, timeout; seconds): from memory
  /// (setBuildLimits), else its row.
  std::optional<std::pair<int64_t, int64_t>> buildLimits(int64_t build);
  /// Reports build.started for the builds whose own step `id` (of
  /// `drvPath`) went out, after the turn's dispatch.
  void notifyBuildsStarted(int64_t id, const std::string& drvPath);
  RunningStep* findOn(int64_t id, const std::string& peer);
  /// `run`'s log file, opened (truncated) at the first call.
  int openLog(RunningStep& run);
  /// `run`'s attempt ended (settled, aborted or its worker lost): its log
  /// is complete.
  void ended(const RunningStep& run);
  /// `run`'s input closure (walked once, then kept).
  const store::StorePathSet& inputClosure(RunningStep& run);

  const ServiceConfig& config_;
  StateDb& db_;
  /// Where a step's start and end go while the database is away.
  DeferredWrites& deferred_;
  store::LocalStore& store_;
  Ingestor& ingestor_;
  SchedulerCore& core_;
  WorkerLink& link_;
  InputServer& inputs_;
  ServiceMetrics& metrics_;
  const Clock& clock_;
  std::map<int64_t, RunningStep> running_;  // by database id
  /// A result taken whose record has not committed yet: its worker's name
  /// and the connection its Ack goes to.
  struct Unacked {
    std::string worker;
    std::string peer;
  };
  std::map<int64_t, Unacked> unacked_;  // by database id
  /// Settled steps per peer: succeeded, failed (see activityByPeer).
  std::map<std::string, std::pair<uint64_t, uint64_t>> settledByPeer_;
  /// Steps (row ids) already retried once after running out of memory.
  std::set<int64_t> oomRetried_;
  std::optional<Clock::TimePoint> pendingSince_;
  std::function<void(const LifecycleEvent&)> notify_;
  LogMirror* mirror_ = nullptr;
  std::function<void(int64_t, int64_t)> attemptEnded_;
  /// Limits of the unfinished builds (setBuildLimits), by build id.
  std::unordered_map<int64_t, std::pair<int64_t, int64_t>> limits_;
  /// Repeat shares of the jobsets that have one (setRepeatShare).
  std::unordered_map<int64_t, uint32_t> repeatPpm_;
  RepeatRuns* repeats_ = nullptr;
};

}  // namespace kiln::scheduler
