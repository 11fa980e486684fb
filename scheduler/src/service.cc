// SchedulerService: construction and wiring of its parts, restart
// recovery, the loop, build events, the public API (docs/scheduler.md,
// docs/architecture.md). Its snapshot is in service_snapshot.cc, the
// farm's lock in service_lock.cc, evaluations in service_evaluations.cc.
#include "kiln/scheduler/service.h"

#include <unistd.h>

#include "kiln/common/logging.h"
#include "kiln/scheduler/request_queue.h"
#include "kiln/scheduler/snapshot_store.h"
#include "service_impl.h"

namespace kiln::scheduler {

using nlohmann::json;

namespace {

std::shared_ptr<SchedulerLock> takeLock(const ServiceConfig& c) {
  createDirs(c.stateDir);
  if (c.heldLock) return c.heldLock;
  // A command applying one request itself holds the lock for a moment.
  auto deadline = RealClock::instance().now() + std::chrono::seconds(10);
  std::unique_ptr<SchedulerLock> l;
  for (;;) {
    try {
      l = SchedulerLock::tryAcquire(c.loopDatabase(), c.stateDir);
      break;
    } catch (const LockHeldByCommand&) {
      if (RealClock::instance().now() > deadline) throw;
      RealClock::instance().sleepFor(std::chrono::milliseconds(100));
    }
  }
  if (!l)
    throw Error(c.database().isPostgres()
                    ? "another scheduler is running on database " +
                          c.databaseUrl + " (it holds the farm's lock)"
                    : "another scheduler is running on state directory " +
                          c.stateDir + " (" + c.stateDir +
                          "/scheduler.lock is locked)");
  return l;
}

SchedulerConfig coreConfig(const ServiceConfig& c) {
  SchedulerConfig s = c.core;
  s.heartbeatTimeout =
      3 * std::chrono::duration_cast<Duration>(c.heartbeatInterval);
  return s;
}

// `c` with the builtin evaluator's executable and the input fetcher
// filled in.
ServiceConfig withDefaults(ServiceConfig c) {
  c.evaluatorConfig =
      withBuiltinKiln(std::move(c.evaluatorConfig), c.kilnBinary);
  if (!c.inputFetcher) c.inputFetcher = makeInputFetcher();
  return c;
}

// The configured transport, or a ZeroMQ server bound to `listen`.
std::shared_ptr<protocol::ServerTransport> transportOf(const ServiceConfig& c) {
  if (c.transport) return c.transport;
  protocol::ServerOptions so;
  so.bind = c.listen;
  so.insecurePlaintext = c.insecurePlaintext;
  so.keys = c.keys;
  so.allowed = c.allowed;
  so.maxMessageBytes = c.maxMessageBytes;
  return std::make_shared<protocol::Server>(so);
}

WorkerLink::Options linkOptions(const ServiceConfig& c) {
  WorkerLink::Options o;
  o.storeDir = store::StoreDir(c.storeDir).dir();
  o.heartbeatInterval = c.heartbeatInterval;
  o.chunkSize = c.chunkSize;
  o.maxConcurrentUploads = c.maxConcurrentUploads;
  o.maxQueuedUploads = c.maxQueuedUploads;
  o.maxConnectionsPerKey = c.maxConnectionsPerKey;
  o.maxSlotsPerKey = c.maxSlotsPerKey;
  o.schedulerId = "kiln-scheduler-" + std::to_string(getpid());
  return o;
}

}  // namespace

SchedulerService::Impl::Impl(ServiceConfig c)
    : cfg(withDefaults(std::move(c))),
      clock(cfg.clock ? *cfg.clock : RealClock::instance()),
      lock(takeLock(cfg)),
      db(cfg.database()),
      store(cfg.stateDir, store::StoreDir(cfg.storeDir)),
      dbSink(std::make_shared<StateDbSink>(
          db, [this](const std::string& d) { return outputsOf(d); })),
      core(clock, coreConfig(cfg)),
      ingestor(db, store, core, clock),
      registry(cfg.metricsRegistry ? cfg.metricsRegistry
                                   : std::make_shared<prometheus::Registry>()),
      metrics(*registry),
      link(transportOf(cfg), linkOptions(cfg), core, clock, *this),
      inputs(store, link, metrics, cfg.stateDir + "/tmp"),
      steps(cfg, db, deferred, store, ingestor, core, link, inputs, metrics,
            clock),
      uploads(cfg, steps, metrics),
      repeats(cfg, db, deferred, store, core, clock, cfg.repeatDiffer),
      evaluations({cfg.stateDir, cfg.storeDir, cfg.evalRunners, cfg.evalRunner,
                   std::make_shared<PluginEvaluators>(
                       cfg.plugins ? *cfg.plugins : plugins::processPlugins(),
                       cfg.evaluatorConfig),
                   cfg.inputFetcher,
                   [this](const JobsetRow& js) { evaluationStarted(js.id); },
                   cfg.database(), true, cfg.maxSourceBytes},
                  clock) {
  // Nothing an earlier scheduler writes may land after this one has read
  // the state, and none of this one's once it has lost the farm.
  auto fenceStart = clock.now();
  lock->waitForEarlierWriters();
  if (clock.now() - fenceStart > std::chrono::seconds(1))
    logInfo("waited for the previous scheduler's database sessions to end");
  lock->fence(db.db());
  if (db.dialect() == SqlDialect::kSqlite) {
    db.db().exec("PRAGMA wal_autocheckpoint = 0");  // the checkpointer's job
    checkpointer = std::make_unique<Checkpointer>(
        cfg.database().sqlitePath, std::chrono::milliseconds(500));
  }
  // Transfer temporaries are unlinked right after creation; a scheduler
  // killed in between leaves one behind. We hold the lock: none is live.
  if (pathExists(cfg.stateDir + "/tmp")) deletePath(cfg.stateDir + "/tmp");
  for (auto d : {"/logs", "/tmp", "/eval"}) createDirs(cfg.stateDir + d);
  sinks.push_back(dbSink);  // the database first, then the configured ones
  for (auto& s : cfg.eventSinks) {
    if (!s) continue;
    s->attach(db);
    sinks.push_back(s);
  }
  // Only notifiers read the rows a step's events name: without one the
  // dispatch path reads nothing for them.
  if (sinks.size() > 1)
    steps.notifyWith([this](const LifecycleEvent& ev) { notify(ev); });
  loopWake.add(uploads.wakeFd());
  steps.checkRepeatsWith(&repeats);
  loopWake.add(repeats.wakeFd());
  if (cfg.directUploads) {
    direct = std::make_unique<DirectUploads>(cfg, steps, uploads, link, clock,
                                             *registry);
    loopWake.add(direct->wakeFd());
    steps.onAttemptEnded([this](int64_t step, int64_t attempt) {
      direct->attemptEnded(step, attempt);
    });
  }
  if (!cfg.cacheUri.empty()) {
    CachePublisherConfig pc;
    pc.stateDir = cfg.stateDir;
    pc.storeDir = cfg.storeDir;
    pc.compression = cfg.cacheCompression;
    pc.signingKey = cfg.cacheSigningKey;
    publisher = std::make_unique<CachePublisher>(
        std::move(pc), store::openCacheStorage(cfg.cacheUri), registry.get());
  }
  requestWakeups = listenForRequests(cfg.database());
  if (requestWakeups) loopWake.add(requestWakeups->wakeFd());
  if (db.dialect() == SqlDialect::kPostgres) {
    LogMirror::Options o;
    o.stateDir = cfg.stateDir;
    // The log limit, plus room for the notes kiln adds to a log.
    if (cfg.logLimitBytes) o.maxLogBytes = cfg.logLimitBytes + (64 << 10);
    o.retention = cfg.logRetention;
    o.pruneInterval = cfg.logPruneInterval;
    logMirror = std::make_unique<LogMirror>(cfg.database(), o, clock);
    steps.mirrorLogsTo(logMirror.get());
  }
  setUpRequests();
  restoreFromDb();
  // From now on a hung server costs the loop databaseTimeout per wait.
  db.db().setQueryTimeout(cfg.databaseTimeout);
  logInfo("scheduler listening on " + link.endpoint());
}

// ------------------------------------------------------ WorkerLink::Handler

namespace {

// The step a direct-upload message is about.
uint64_t stepIdOf(const protocol::Message& m) {
  if (auto* q = std::get_if<protocol::StageRequest>(&m)) return q->stepId;
  if (auto* o = std::get_if<protocol::OutputStaged>(&m)) return o->stepId;
  return 0;
}

}  // namespace

void SchedulerService::Impl::onStepMessage(WorkerConn& from,
                                           const protocol::Message& m) {
  if (auto* n = std::get_if<protocol::NeedPaths>(&m))
    steps.onNeedPaths(from, *n);
  else if (auto* l = std::get_if<protocol::LogChunk>(&m))
    steps.onLog(from, *l);
  else if (auto* r = std::get_if<protocol::StepResult>(&m))
    steps.onResult(from, *r);
  else if (!direct)  // StageRequest or OutputStaged: upload over ZeroMQ
    link.sendOrWarn(
        from.peer,
        protocol::Ack{protocol::typeOf(m), stepIdOf(m), false,
                      "direct uploads are not enabled on this scheduler"});
  else if (auto* q = std::get_if<protocol::StageRequest>(&m))
    direct->onStageRequest(from, *q);
  else if (auto* o = std::get_if<protocol::OutputStaged>(&m))
    direct->onOutputStaged(from, *o);
}

std::unique_ptr<protocol::TransferTarget> SchedulerService::Impl::acceptUpload(
    const WorkerConn& from, const protocol::TransferHeader& h) {
  return uploads.accept(from, h);
}

std::vector<uint64_t> SchedulerService::Impl::adoptHeldSteps(
    const WorkerConn& w) {
  return steps.adopt(w);
}

// Published at once (a join is rare): a reader that learns of the worker
// anywhere (its log, /metrics) finds it in the snapshot too.
void SchedulerService::Impl::onWorkerJoined(const WorkerConn&) {
  steps.markPending();
  publishSnapshot(core.metrics());
}

void SchedulerService::Impl::onWorkerLeft(const WorkerConn& w) {
  steps.workerLeft(w);
}

// ------------------------------------------------------------------ builds

// Rebuilds the DAG: every unfinished build is ingested again from its .drv
// in the central store. Outputs that are valid (everything that finished)
// are skipped, so nothing finished is rebuilt; step rows keep their ids.
void SchedulerService::Impl::restoreFromDb() {
  for (auto& js : db.jobsets()) {
    core.setJobsetShares(js.id, static_cast<unsigned>(js.shares));
    steps.setRepeatShare(js.id, static_cast<uint32_t>(js.repeatPpm));
  }
  for (auto& [pname, secs] : db.historicalDurations())
    core.setHistoricalDuration(pname, secs);
  for (auto& [pname, peak] : db.lastPeaks())
    core.setHistoricalPeak(pname, peak);
  auto builds = db.unfinishedBuilds();
  for (size_t at = 0; at < builds.size(); at += Ingestor::kBatch)
    startBuilds(
        {builds.begin() + at,
         builds.begin() + std::min(builds.size(), at + Ingestor::kBatch)});
  processEvents();
  if (!builds.empty())
    logInfo("restored " + std::to_string(builds.size()) +
            " unfinished builds (" + std::to_string(ingestor.index().size()) +
            " steps)");
  holdDispatchedSteps();
  repeats.restore();
}

// A step dispatched and not settled may still run on its worker, which
// reports it when it says Hello to this scheduler: it is not dispatched
// again before the workers had time to come back (three heartbeat
// intervals, as long as a silent worker is kept), then queued as usual.
void SchedulerService::Impl::holdDispatchedSteps() {
  auto grace =
      cfg.adoptionGrace.count() ? cfg.adoptionGrace : 3 * cfg.heartbeatInterval;
  auto until = clock.wallNow() + grace;
  size_t held = 0;
  std::set<std::pair<int64_t, int64_t>> adoptable;  // (step, attempt)
  for (auto& row : db.unfinishedSteps()) {
    auto sid = ingestor.index().coreId(row.id);
    if (row.attempts > 0 && !row.worker.empty() && sid &&
        core.holdStep(*sid, until)) {
      ++held;
      adoptable.emplace(row.id, row.attempts);
    }
  }
  // Their workers may re-announce what they staged.
  if (direct) direct->start(std::move(adoptable), until);
  if (held)
    logInfo("holding " + std::to_string(held) +
            " steps that were dispatched before the restart for " +
            std::to_string(grace.count()) +
            " ms: their workers may still run them");
}

// The output paths of a derivation (name → path), for StateDbSink.
std::vector<std::pair<std::string, std::string>>
SchedulerService::Impl::outputsOf(const std::string& drvPath) {
  auto drv = ingestor.loadDrv(drvPath);
  std::vector<std::pair<std::string, std::string>> outs;
  for (auto& [n, o] : drv->outputs)
    if (o.path) outs.emplace_back(n, store.printPath(*o.path));
  return outs;
}

// Every sink in one transaction: the database's change and the rows a
// notifier's sink writes (its outbox) commit together.
void SchedulerService::Impl::announce(const BuildEvent& ev) {
  // While the database is away the whole event waits (deferred.h): a
  // transient failure of a sink's write ends the transaction, to be run
  // again, in order, when the database is back.
  deferred.run([this, ev, now = clock.nowMs()] {
    StateDb::Transaction txn(db);
    for (auto& sink : sinks) {
      try {
        sink->onBuildEvent(ev, now);
      } catch (const SqlError& e) {
        if (e.transient()) throw;
        logError("build " + std::to_string(ev.build) +
                 ": a build event sink failed: " + e.what());
      } catch (const std::exception& e) {
        logError("build " + std::to_string(ev.build) +
                 ": a build event sink failed: " + e.what());
      }
    }
    if (ev.kind == BuildEvent::Kind::kSucceeded)
      maybeAdvanceChannel(ev.build, now);
    txn.commit();
  });
}

void SchedulerService::Impl::notify(const LifecycleEvent& ev,
                                    std::optional<int64_t> timeMs) {
  int64_t at = timeMs ? *timeMs : clock.nowMs();
  for (auto& sink : sinks) {
    try {
      sink->onLifecycleEvent(ev, at);
    } catch (const std::exception& e) {
      logError("a build event sink failed on a service event: " +
               std::string(e.what()));
    }
  }
}

void SchedulerService::Impl::processEvents() {
  for (auto& ev : core.takeBuildEvents()) {
    // A failed build stays in the core (a retried step may revive it).
    if (ev.kind == BuildEvent::Kind::kSucceeded ||
        ev.kind == BuildEvent::Kind::kCancelled)
      steps.buildEnded(ev.build);
    announce(ev);
  }
  steps.abort(core.takeAborts());
  settleDropped(core.takeDropped());
}

// Steps no build needs any more (their builds were cancelled) leave the
// index (their core ids are stale); an unfinished one's record says
// Cancelled, as Hydra shows such a step, so no page shows it queued.
void SchedulerService::Impl::settleDropped(const std::vector<StepId>& gone) {
  if (gone.empty()) return;
  std::vector<int64_t> ids;
  for (StepId sid : gone) {
    if (auto id = ingestor.index().dbId(sid)) ids.push_back(*id);
    ingestor.forget(sid);
  }
  deferred.run([this, ids, now = clock.nowMs()] {
    StateDb::Transaction txn(db);
    for (int64_t id : ids)
      if (auto row = db.step(id); row && !row->finished)
        db.finishStep(id, static_cast<int>(StepStatus::kCancelled), now,
                      "cancelled: no unfinished build needs it");
    txn.commit();
  });
}

// -------------------------------------------------------------------- loop

// How often deferred writes are tried again while they wait.
constexpr auto kFlushPause = std::chrono::milliseconds(200);

void SchedulerService::Impl::periodic() {
  link.dropLost(core.tick());
  link.expireTransfers();
  steps.takeBackOverdue();
  if (direct) direct->tick(clock.wallNow());
  auto now = clock.now();
  if (lockCheckIsDue(now)) {
    lastLockCheck = now;
    checkLock();
  }
  // The lock's probe found the database unreachable: nothing else here
  // waits on it (a try may take a connect timeout), so the loop goes back
  // to the workers at once, and serves them from memory.
  if (databaseUnreachableAt) return;
  readRequestsAndJobsets(now);
  if (!logMirror) pruneLogsWhenDue(now);
  repeats.pruneWhenDue(now);
  repeats.expireRefused(now);
  if (now - lastSnapshotStore >= std::chrono::seconds(1)) {
    lastSnapshotStore = now;
    storeSnapshotForFrontEnds();
  }
  // Writes kept while the database was away, once this process is known
  // to schedule the farm still (another may have taken over meanwhile).
  if (deferred.pending() > 0 && now - lastDeferredFlush >= kFlushPause) {
    lastDeferredFlush = now;
    if (lock->held()) deferred.flush();
  }
}

// Reading requests and jobsets needs the database; while it is away the
// turn goes on (workers are served and steps dispatched from memory).
void SchedulerService::Impl::readRequestsAndJobsets(Clock::TimePoint now) {
  try {
    bool woken = pollRequestsWhenDue(now);
    // An evaluator host's result notifies the requests' channel too.
    if ((woken && cfg.remoteEvaluations) ||
        now - lastJobsetCheck >= std::chrono::seconds(1)) {
      lastJobsetCheck = now;
      checkJobsets();
    }
  } catch (const SqlError& e) {
    if (!e.transient()) throw;
    if (now - lastDatabaseWarning >= std::chrono::seconds(10)) {
      lastDatabaseWarning = now;
      logWarn(std::string("the state database is unavailable (retrying): ") +
              e.what());
    }
  }
}

// SQLite: its log tables hold rows only when copied from PostgreSQL, so a
// batch per interval in the loop is short (PostgreSQL: the log mirror).
void SchedulerService::Impl::pruneLogsWhenDue(Clock::TimePoint now) {
  auto every = cfg.logPruneInterval;
  if (every.count() <= 0 || (lastLogPrune && now - *lastLogPrune < every))
    return;
  lastLogPrune = now;
  try {
    auto n = pruneStepLogs(db, clock.nowMs(), cfg.logRetention, 500);
    if (n.pieceAttempts > 0 || n.storedLogs > 0)
      logInfo("build logs in the database: " + std::to_string(n.pieceAttempts) +
              " ended attempts' pieces, " + std::to_string(n.storedLogs) +
              " finished logs removed");
  } catch (const SqlError& e) {
    logWarn(std::string("pruning build logs: ") + e.what());
  }
}

// How many messages in a row, each followed by its dispatch, may hold
// their state writes while further messages wait.
constexpr int kHeldMessages = 16;

void SchedulerService::Impl::serveMessages(std::chrono::milliseconds timeout,
                                           int max) {
  // The registrar's eventfd ends the wait too (a registered output may
  // complete a held result, which frees a slot), and so does a request
  // notified on PostgreSQL.
  auto r = link.receive(timeout, loopWake.fd());
  turnStart = clock.now();
  // The state writes the messages cause (a step's end, its builds', the
  // next step's start) are made after their dispatch, in order: while no
  // further message waits, or after kHeldMessages of them.
  std::optional<DeferredWrites::Hold> hold;
  for (int n = 0; n < max; n++) {
    if (!hold) hold.emplace(deferred);
    if (r) link.handle(*r);
    if (direct) direct->takeDone();
    if (uploads.takeRegistrations() > 0 && publisher) publisher->wake();
    repeats.takeReports();
    processEvents();
    // A result frees a slot: fill it now, not after the rest of the batch
    // (serving inputs, receiving uploads) is handled. When nothing can be
    // assigned this costs one O(classes) check.
    if (mayDispatch()) steps.dispatch();
    bool more = r.has_value();
    if (more) r = link.receive(std::chrono::milliseconds(0), loopWake.fd());
    bool last = (n + 1) % kHeldMessages == 0 || n + 1 == max;
    // Nothing waits: the held writes are made one at a time, and a message
    // that arrives meanwhile is handled (and its slots filled) before the
    // rest, which stay held, in order, with its own.
    while (more && !r && !last && deferred.flushOne())
      r = link.receive(std::chrono::milliseconds(0), loopWake.fd());
    if (!more || !r || last) hold.reset();
    endTurn();
    if (!more) return;
  }
}

void SchedulerService::Impl::endTurn() {
  auto now = clock.now();
  metrics.observeLoopTurn(
      std::chrono::duration<double>(now - turnStart).count());
  turnStart = now;
}

// ------------------------------------------------------------------ public

SchedulerService::SchedulerService(ServiceConfig config)
    : impl_(std::make_unique<Impl>(std::move(config))) {}

SchedulerService::~SchedulerService() {
  // Commands apply requests themselves from now on (request_queue.h), and
  // front ends show that no scheduler runs, without waiting for the
  // snapshot to age. A scheduler that lost the farm leaves the new one's.
  if (!impl_ || impl_->lockLost || impl_->db.dialect() != SqlDialect::kPostgres)
    return;
  try {
    withdrawSnapshot(impl_->db);
  } catch (const std::exception& e) {
    logWarn(std::string("withdrawing the scheduler's snapshot: ") + e.what());
  }
}

std::string SchedulerService::endpoint() const {
  return impl_->link.endpoint();
}

std::shared_ptr<prometheus::Registry> SchedulerService::metricsRegistry()
    const {
  return impl_->registry;
}

void SchedulerService::run(const std::atomic<bool>& stop) {
  while (!stop.load() && !impl_->lockLost)
    pollOnce(std::chrono::milliseconds(50));
  if (impl_->lockLost)
    throw Error("another scheduler took over the farm (" +
                impl_->lock->describe() + ")");
}

void SchedulerService::pollOnce(std::chrono::milliseconds timeout) {
  auto& s = *impl_;
  try {
    s.serveMessages(timeout, 1000);
    s.periodic();
    s.processEvents();
    if (s.mayDispatch()) s.steps.dispatch();
    s.processEvents();
    s.endTurn();
    s.metrics.observeIdleStretches(s.core.takeIdleStretches());
    auto m = s.core.metrics();
    s.maybePublishSnapshot(m);  // first: /metrics is never ahead of it
    s.metrics.update(m);
  } catch (const std::exception& e) {
    logError(std::string("scheduler loop: ") + e.what());
  }
}

int64_t SchedulerService::addBuild(int64_t jobset, const std::string& job,
                                   const std::string& drvPath,
                                   int localPriority) {
  auto& s = *impl_;
  BuildRow b =
      createManualBuild(s.db, jobset, job, drvPath, localPriority, s.clock);
  s.notify({LifecycleEvent::Kind::kBuildQueued, b.jobset, b.eval, b.id});
  s.startBuild(b);
  s.processEvents();
  return b.id;
}

int64_t SchedulerService::evaluateJobset(int64_t jobset, bool force) {
  auto js = impl_->db.jobset(jobset);
  if (!js)
    throw SchedulerStateError("no jobset with id " + std::to_string(jobset));
  impl_->evaluationStarted(js->id);
  return impl_->recordEvaluation(impl_->evaluations.run(*js, force));
}

json SchedulerService::applyRequest(const std::string& kind, const json& args) {
  impl_->snapshotDirty = true;
  return impl_->requests.apply(kind, args);
}

const RequestTable& SchedulerService::requests() const {
  return impl_->requests;
}

StateDb& SchedulerService::db() { return impl_->db; }

SchedulerMetrics SchedulerService::coreMetrics() const {
  return impl_->core.metrics();
}

}  // namespace kiln::scheduler
