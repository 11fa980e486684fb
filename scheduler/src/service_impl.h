#pragma once
// Private state of SchedulerService (docs/architecture.md, "Threads"): the
// parts the service wires together. Everything here is used by the
// service thread only, except the evaluation thread (Evaluations, with
// its own LocalStore) and the registrar thread (Uploads, with its own).

#include <prometheus/registry.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "deferred_writes.h"
#include "direct_uploads.h"
#include "estimate_recorder.h"
#include "evaluations.h"
#include "input_server.h"
#include "kiln/common/file_lock.h"
#include "kiln/common/sync.h"
#include "kiln/scheduler/build_events.h"
#include "kiln/scheduler/cache_publisher.h"
#include "kiln/scheduler/checkpointer.h"
#include "kiln/scheduler/ingest.h"
#include "kiln/scheduler/metrics.h"
#include "kiln/scheduler/release_store.h"
#include "kiln/scheduler/requests.h"
#include "kiln/scheduler/scheduler_lock.h"
#include "kiln/scheduler/service.h"
#include "kiln/scheduler/sql_listener.h"
#include "log_mirror.h"
#include "repeat_runs.h"
#include "running_steps.h"
#include "uploads.h"
#include "wake_fds.h"
#include "worker_link.h"

namespace kiln::scheduler {

/// The service: builds (ingestion, events), the loop, requests and
/// evaluations here; workers, steps and transfers in the parts below.
struct SchedulerService::Impl final : WorkerLink::Handler {
  explicit Impl(ServiceConfig c);

  ServiceConfig cfg;  ///< with the default runner and fetcher filled in
  /// The injected clock (ServiceConfig::clock).
  const Clock& clock;
  std::shared_ptr<SchedulerLock> lock;  ///< this process schedules the farm
  StateDb db;
  /// State writes waiting for the database (it was away); flushed each
  /// turn, in order.
  DeferredWrites deferred{clock};
  /// WAL checkpoints of `db` on a thread of their own (the service's
  /// connection never checkpoints).
  std::unique_ptr<Checkpointer> checkpointer;  ///< SQLite only
  store::LocalStore store;
  /// Build events go to `sinks`: the database first, then
  /// ServiceConfig::eventSinks.
  std::shared_ptr<StateDbSink> dbSink;
  std::vector<std::shared_ptr<BuildEventSink>> sinks;
  SchedulerCore core;
  /// Makes steps (core + database) and owns the pairing of their ids.
  Ingestor ingestor;
  std::shared_ptr<prometheus::Registry> registry;
  ServiceMetrics metrics;
  /// The worker connections (ServiceConfig::transport, or ZeroMQ).
  WorkerLink link;
  InputServer inputs;
  /// Build logs into the database for front ends on other hosts
  /// (PostgreSQL only; made in the constructor).
  std::unique_ptr<LogMirror> logMirror;
  /// Records new evaluations' expected finish off the loop.
  EstimateRecorder estimates{cfg.database()};
  RunningSteps steps;
  Uploads uploads;
  /// Reproducibility checks' second builds and their reports.
  RepeatRuns repeats;
  /// Outputs workers stage in the farm's bucket (ServiceConfig::
  /// directUploads; null without).
  std::unique_ptr<DirectUploads> direct;
  /// Publishes registered outputs to ServiceConfig::cacheUri (null
  /// without one), on a thread of its own.
  std::unique_ptr<CachePublisher> publisher;
  Evaluations evaluations;
  /// Start of the loop's current turn (ServiceMetrics::observeLoopTurn).
  Clock::TimePoint turnStart = clock.now();
  Clock::TimePoint lastRequestPoll{};
  /// Wakes the loop when a request is queued (PostgreSQL; null on
  /// SQLite), and whether one may wait unread (a wake-up whose read of
  /// the table failed).
  std::unique_ptr<SqlListener> requestWakeups;
  bool requestsWanted = false;
  /// The loop's wait ends when any of these is readable: the registrar's
  /// reports, the request listener.
  WakeFds loopWake;
  Clock::TimePoint lastJobsetCheck{};
  Clock::TimePoint lastLockCheck{};
  Clock::TimePoint lastSnapshotStore{};
  Clock::TimePoint lastDatabaseWarning{};
  Clock::TimePoint lastDeferredFlush{};
  /// SQLite: when the build logs in the database were last pruned
  /// (PostgreSQL: the log mirror prunes).
  std::optional<Clock::TimePoint> lastLogPrune;
  void pruneLogsWhenDue(Clock::TimePoint now);
  /// Reads the requests and the jobsets when due; a database away is
  /// warned about (each 10 s), not thrown.
  void readRequestsAndJobsets(Clock::TimePoint now);
  /// When the farm's lock was last known held. New steps are dispatched
  /// only while that is recent (kLockGrace): a scheduler cut off from the
  /// database stops before a standby can take the lock over.
  Clock::TimePoint lockConfirmed = clock.now();
  /// The lock's session is known ended (SchedulerLock::sessionEnded, or
  /// held() said no): nothing is dispatched until the lock is held again,
  /// except while the database cannot be reached (databaseUnreachableAt
  /// recent): then nobody can take the lock.
  bool lockSessionEnded = false;
  /// When the last try to take the lock again could not reach the
  /// database; unset once one could.
  std::optional<Clock::TimePoint> databaseUnreachableAt;
  /// checkLock() runs at the next periodic(), whatever the time.
  bool lockCheckDue = false;
  /// Whether new steps may be dispatched now (service_lock.cc).
  bool mayDispatch();
  /// Whether checkLock() is due at `now`: each second, every 200 ms while
  /// the lock's session is known ended.
  bool lockCheckIsDue(Clock::TimePoint now) const;
  /// Set when the farm's lock was lost to another scheduler: run() ends.
  bool lockLost = false;
  /// Checks that this process still holds the farm's scheduler lock
  /// (PostgreSQL drops it with the lock's connection), taking it again if
  /// nobody else has; sets lockLost if another scheduler took it.
  void checkLock();
  /// Fences `db`'s sessions with `lock` (SchedulerLock::fence); a
  /// transient failure is logged (the fence runs on its next session).
  void fenceWriter();
  /// Writes the newest published snapshot to the state database for web
  /// front ends on other hosts (PostgreSQL only; failures are logged).
  void storeSnapshotForFrontEnds();
  std::shared_ptr<const SchedulerSnapshot> storedSnapshot;
  /// Operator requests (operations.cc: the offline table, with the
  /// handlers that concern the core wrapped).
  RequestTable requests;
  /// The published snapshot (any thread reads it), whether a reader asked
  /// for a fresh one; on the service thread: whether something it shows
  /// changed without showing in the core's counts (a request applied), the
  /// counts it was made from, when it was made and what that took.
  mutable Sync<std::shared_ptr<const SchedulerSnapshot>> published{
      std::make_shared<const SchedulerSnapshot>()};
  mutable std::atomic<bool> snapshotWanted{false};
  bool snapshotDirty = true;
  std::vector<uint64_t> publishedKey;
  Clock::TimePoint lastSnapshot{};
  Clock::Duration snapshotCost{0};

  // WorkerLink::Handler: what workers say about steps goes to the parts.
  void onStepMessage(WorkerConn& from, const protocol::Message& m) override;
  std::unique_ptr<protocol::TransferTarget> acceptUpload(
      const WorkerConn& from, const protocol::TransferHeader& h) override;
  std::vector<uint64_t> adoptHeldSteps(const WorkerConn& w) override;
  void onWorkerJoined(const WorkerConn& w) override;
  void onWorkerLeft(const WorkerConn& w) override;

  // service.cc
  void restoreFromDb();
  /// Holds back the restored steps that were dispatched and not settled
  /// before the restart, for their workers to report them (adoption).
  void holdDispatchedSteps();
  void startBuild(const BuildRow& b);
  /// Records the expected finish of new evaluation `evalId`.
  void recordEstimate(int64_t evalId);
  /// Ingests `builds` in one batch and adds them to the core (a build
  /// whose closure cannot be ingested is aborted).
  void startBuilds(const std::vector<BuildRow>& builds);
  void startIngested(const BuildRow& b, const IngestOutcome& o);
  std::vector<std::pair<std::string, std::string>> outputsOf(
      const std::string& drvPath);
  /// Hands `ev` to every sink (exceptions logged).
  void announce(const BuildEvent& ev);
  /// Advances the channel of build `build`'s jobset if it is the channel
  /// job's and succeeded (release_store.h), then tells the sinks
  /// (channel.advanced). In the transaction that finished the build.
  void maybeAdvanceChannel(int64_t build, int64_t nowMs);
  /// Whether regressions against the channel's evaluation hold candidate
  /// `c` back (recorded when they do).
  bool heldByRegressions(const ChannelCandidate& c);
  /// Hands a service event to every sink (at `timeMs`, default now).
  void notify(const LifecycleEvent& ev,
              std::optional<int64_t> timeMs = std::nullopt);
  /// The core's build events to the sinks, its aborts to the workers, its
  /// dropped steps to settleDropped.
  void processEvents();
  /// Forgets the steps the core dropped and records the unfinished ones as
  /// cancelled.
  void settleDropped(const std::vector<StepId>& gone);
  void periodic();
  /// One turn of the loop: handles up to `max` waiting messages (each
  /// followed by events and dispatch), waiting up to `timeout` for the first.
  void serveMessages(std::chrono::milliseconds timeout, int max);
  /// Records the turn that ends now and starts the next.
  void endTurn();
  /// Publishes a snapshot if what it shows changed (`m`: the core's
  /// metrics now), or a reader asked and the last is old (service.cc).
  void maybePublishSnapshot(const SchedulerMetrics& m);
  /// Makes and publishes a snapshot now.
  void publishSnapshot(const SchedulerMetrics& m);
  /// The unfinished steps the core holds and why each waits.
  std::vector<QueueEntry> queueEntries();

  // service_evaluations.cc
  /// Reports (eval.started) that an evaluation of `jobset` starts now.
  void evaluationStarted(int64_t jobset);
  /// Records `o` (deleting remote result `result` and answering request
  /// `request` in the same transaction), then ingests its builds.
  int64_t recordEvaluation(const EvalOutcome& o,
                           std::optional<int64_t> result = std::nullopt,
                           std::optional<int64_t> request = std::nullopt);
  /// The build rows of evaluation `evalId`; returns those to ingest.
  std::vector<BuildRow> createBuilds(const EvalOutcome& o, int64_t evalId);
  /// Records which builds of `rows` (ids `ids`) are aggregates' constituents.
  void recordConstituents(const EvalOutcome& o,
                          const std::vector<BuildRow>& rows,
                          const std::vector<int64_t>& ids);
  void checkJobsets();
  /// Cancels builds `ids`: in the core when it holds them, else in the
  /// database (with `why`).
  void cancelBuilds(const std::vector<int64_t>& ids, const std::string& why);
  void finishEvaluation(Evaluations::Finished& done);
  void finishFailed(const Evaluations::Finished& done, const std::exception& e);
  void checkRemoteEvaluations();
  /// Claims of evaluator hosts seen at the last look (jobset, claimed).
  std::set<std::pair<int64_t, int64_t>> remoteClaimsSeen;

  // operations.cc
  /// Reads the requests table when a wake-up came or a poll is due.
  /// Returns whether a notification woke it.
  bool pollRequestsWhenDue(Clock::TimePoint now);
  void pollRequests();
  void setUpRequests();
  /// Answers request `id` with `e`'s message (marked as the caller's
  /// mistake for a SchedulerStateError).
  void failRequest(int64_t id, const std::exception& e);
  void queueEvalRequest(const RequestRow& req);
  void restartBuild(int64_t id);
};

}  // namespace kiln::scheduler
