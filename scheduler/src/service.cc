// SchedulerService: construction, restart recovery, the loop, persistence of
// core events, dispatch, evaluations (docs/scheduler.md).
#include "kiln/scheduler/service.h"

#include <unistd.h>

#include "kiln/common/fail_point.h"
#include "kiln/common/logging.h"
#include "service_impl.h"

namespace kiln::scheduler {

using nlohmann::json;

namespace {

FileLock takeLock(const std::string& stateDir) {
  createDirs(stateDir);
  auto l = FileLock::tryAcquire(stateDir + "/scheduler.lock",
                                LockMode::kExclusive);
  if (!l)
    throw Error("another scheduler is running on state directory " +
                stateDir + " (" + stateDir + "/scheduler.lock is locked)");
  return std::move(*l);
}

SchedulerConfig coreConfig(const ServiceConfig& c) {
  SchedulerConfig s = c.core;
  s.heartbeatTimeout = 3 * std::chrono::duration_cast<Duration>(
                               c.heartbeatInterval);
  return s;
}

}  // namespace

SchedulerService::Impl::Impl(ServiceConfig c)
    : cfg(std::move(c)),
      clock(cfg.clock ? *cfg.clock : RealClock::instance()),
      lock(takeLock(cfg.stateDir)),
      db(cfg.stateDir + "/scheduler.sqlite"),
      checkpointer(cfg.stateDir + "/scheduler.sqlite",
                   std::chrono::milliseconds(500)),
      store(cfg.stateDir, store::StoreDir(cfg.storeDir)),
      registrarStore(cfg.stateDir, store::StoreDir(cfg.storeDir)),
      registrar([this](const Registration& r, Source& nar) {
        registerUpload(registrarStore, r, nar);
      }),
      dbSink(std::make_shared<StateDbSink>(
          db, [this](const std::string& d) { return outputsOf(d); })),
      core(clock, coreConfig(cfg)),
      ingestor(db, store, core, index, clock),
      registry(std::make_shared<prometheus::Registry>()),
      metrics(*registry) {
  db.db().exec("PRAGMA wal_autocheckpoint = 0");  // the checkpointer's job
  // Transfer temporaries are unlinked right after creation; a scheduler
  // killed in between leaves one behind. We hold the lock: none is live.
  if (pathExists(cfg.stateDir + "/tmp")) deletePath(cfg.stateDir + "/tmp");
  for (auto d : {"/logs", "/tmp", "/eval"}) createDirs(cfg.stateDir + d);
  if (!cfg.evalRunner) {
    if (cfg.evaluator == "nix-instantiate")
      cfg.evalRunner = makeNixInstantiateRunner(cfg.stateDir + "/eval");
    else if (cfg.evaluator == "kiln")
      cfg.evalRunner = makeKilnEvalRunner(
          cfg.kilnBinary.empty() ? "kiln" : cfg.kilnBinary);
    else
      throw Error("unknown evaluator '" + cfg.evaluator +
                  "' (expected kiln or nix-instantiate)");
  }
  if (!cfg.inputFetcher) cfg.inputFetcher = makeInputFetcher();
  evaluations = std::make_unique<Evaluations>(
      Evaluations::Config{cfg.stateDir, cfg.storeDir, cfg.evalRunner,
                          cfg.inputFetcher},
      clock);
  sinks.push_back(dbSink);  // the database first, then the configured ones
  for (auto& s : cfg.eventSinks)
    if (s) sinks.push_back(s);
  schedulerId = "kiln-scheduler-" + std::to_string(getpid());
  setUpRequests();
  restoreFromDb();
  server = cfg.transport;
  if (!server) {
    protocol::ServerOptions so;
    so.bind = cfg.listen;
    so.insecurePlaintext = cfg.insecurePlaintext;
    so.keys = cfg.keys;
    so.allowed = cfg.allowed;
    server = std::make_shared<protocol::Server>(so);
  }
  if (cfg.metricsPort >= 0) {
    exposer = std::make_unique<prometheus::Exposer>(
        "127.0.0.1:" + std::to_string(cfg.metricsPort));
    exposer->RegisterCollectable(registry);
  }
  logInfo("scheduler listening on " + server->endpoint());
}

std::string SchedulerService::Impl::tmpPath() {
  return cfg.stateDir + "/tmp/" + std::to_string(getpid()) + "-" +
         std::to_string(++tmpCounter);
}

// Rebuilds the DAG: every unfinished build is ingested again from its .drv
// in the central store. Outputs that are valid (everything that finished)
// are skipped, so nothing finished is rebuilt; step rows keep their ids.
void SchedulerService::Impl::restoreFromDb() {
  for (auto& js : db.jobsets())
    core.setJobsetShares(js.id, static_cast<unsigned>(js.shares));
  for (auto& [pname, secs] : db.historicalDurations())
    core.setHistoricalDuration(pname, secs);
  auto builds = db.unfinishedBuilds();
  for (auto& b : builds) startBuild(b);
  processEvents();
  if (!builds.empty())
    logInfo("restored " + std::to_string(builds.size()) +
            " unfinished builds (" + std::to_string(index.size()) +
            " steps)");
}

void SchedulerService::Impl::startBuild(const BuildRow& b) {
  IngestResult r;
  try {
    r = ingestor.ingest(b.drvPath);
  } catch (const Error& e) {
    logError("build " + std::to_string(b.id) + ": " + e.what());
    db.finishBuild(b.id, static_cast<int>(StepStatus::kAborted), clock.nowMs(),
                   e.what());
    return;
  }
  if (!r.top) {  // every output valid: built already
    announce({b.id, BuildEvent::Kind::kSucceeded, StepStatus::kSuccess,
              b.drvPath});
    return;
  }
  BuildSpec spec;
  spec.id = b.id;
  spec.jobset = b.jobset;
  spec.top = *r.top;
  spec.globalPriority = b.globalPriority;
  spec.localPriority = b.localPriority;
  core.addBuild(spec);
  if (!pendingSince) pendingSince = clock.now();
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

void SchedulerService::Impl::announce(const BuildEvent& ev) {
  int64_t now = clock.nowMs();
  for (auto& sink : sinks) {
    try {
      sink->onBuildEvent(ev, now);
    } catch (const std::exception& e) {
      logError("build " + std::to_string(ev.build) + ": a build event sink "
               "failed: " + e.what());
    }
  }
}

void SchedulerService::Impl::processEvents() {
  for (auto& ev : core.takeBuildEvents()) announce(ev);
  for (auto& a : core.takeAborts()) {
    auto id = index.dbId(a.step);
    index.erase(a.step);
    if (!id) continue;
    auto it = running.find(*id);
    if (it == running.end()) continue;
    sendTo(it->second.peer,
           protocol::CancelStep{static_cast<uint64_t>(*id), "build cancelled"});
    running.erase(it);
  }
}

void SchedulerService::Impl::dispatch() {
  auto assignments = core.nextAssignments();
  for (auto& a : assignments) {
    auto id = index.dbId(a.step);
    auto peer = peerOf.find(a.worker);
    if (!id || peer == peerOf.end()) {
      core.finishStep(a.step, StepResult::transient(Duration(0)));
      continue;
    }
    if (!sendBuildStep(*id, a.step, conns.at(peer->second)))
      core.finishStep(a.step, StepResult::transient(Duration(0)));
    else if (pendingSince)
      metrics.observeDispatchLatency(
          std::chrono::duration<double>(clock.now() - *pendingSince)
              .count());
  }
  pendingSince.reset();
}

void SchedulerService::Impl::periodic() {
  for (auto lost : core.tick()) {
    auto it = peerOf.find(lost);
    if (it == peerOf.end()) continue;
    logWarn("worker " + conns.at(it->second).name +
            " lost: no heartbeat for 3 intervals; its steps are retried");
    dropWorker(it->second, "no heartbeat", false);
  }
  for (auto& [peer, c] : conns) c.xfer->expireIdle();
  auto now = clock.now();
  if (now - lastRequestPoll >= std::chrono::milliseconds(100)) {
    lastRequestPoll = now;
    pollRequests();
  }
  if (now - lastJobsetCheck >= std::chrono::seconds(1)) {
    lastJobsetCheck = now;
    checkJobsets();
  }
}

void SchedulerService::Impl::pollRequests() {
  for (auto& req : db.pendingRequests()) {
    if (req.kind == "jobset-eval") {
      if (evaluations->take(req.id)) queueEvalRequest(req);
      continue;
    }
    try {
      json args = json::parse(req.args);
      db.completeRequest(req.id, true, apply(req.kind, args).dump());
    } catch (const std::exception& e) {
      failRequest(req.id, e);
    }
  }
}

void SchedulerService::Impl::failRequest(int64_t id, const std::exception& e) {
  json answer{{"error", e.what()}};
  // The caller's mistake (no such jobset...), not the scheduler's.
  if (dynamic_cast<const SchedulerStateError*>(&e)) answer["caller"] = true;
  db.completeRequest(id, false, answer.dump());
}

// One transaction records the jobset's inputs hash, the evaluation and
// every build row: a scheduler killed before the commit left nothing (the
// next check evaluates again), one killed after it finds the unfinished
// builds at restart (restoreFromDb). Ingestion, which takes seconds for
// thousands of builds, comes after the commit.
int64_t SchedulerService::Impl::recordEvaluation(const EvalOutcome& o) {
  SqliteTxn txn(db.db());
  db.setJobsetChecked(o.jobset, o.timeMs,
                      o.skipped || !o.error.empty()
                          ? std::nullopt
                          : std::optional<std::string>(o.inputsHash));
  if (o.skipped) {
    txn.commit();
    return 0;
  }
  EvaluationRow e;
  e.jobset = o.jobset;
  e.inputsHash = o.inputsHash;
  e.timeMs = o.timeMs;
  e.durationMs = o.durationMs;
  e.error = o.error;
  std::vector<EvalErrorRow> errors;
  for (auto& j : o.jobs) {
    if (!j.error.empty()) errors.push_back({j.attr, j.error});
    else e.jobs++;
  }
  int64_t evalId = db.createEvaluation(e, errors);
  std::vector<BuildRow> toStart = createBuilds(o, evalId);
  KILN_FAIL_POINT("scheduler.eval.before-commit");
  txn.commit();
  KILN_FAIL_POINT("scheduler.eval.after-commit");
  if (o.drvs) ingestor.useDrvs(o.drvs);
  // Serve the workers every couple of milliseconds meanwhile (results,
  // uploads, dispatch), so none idles.
  auto lastServe = clock.now();
  for (auto& b : toStart) {
    if (clock.now() - lastServe >= std::chrono::milliseconds(2)) {
      endTurn();
      serveMessages(std::chrono::milliseconds(0), 100);
      lastServe = clock.now();
    }
    startBuild(b);
  }
  processEvents();
  return evalId;
}

// The build rows of evaluation `evalId`: a job whose derivation succeeded
// before (or has a cached failure) gets a finished build reusing that
// result; the others are returned, unfinished, to be ingested.
std::vector<BuildRow> SchedulerService::Impl::createBuilds(
    const EvalOutcome& o, int64_t evalId) {
  std::vector<BuildRow> toStart;
  for (auto& j : o.jobs) {
    if (!j.error.empty()) continue;
    BuildRow b;
    b.eval = evalId;
    b.jobset = o.jobset;
    b.job = j.attr;
    b.nixName = j.name;
    b.system = j.system;
    b.drvPath = j.drvPath;
    b.localPriority = j.schedulingPriority;
    b.maxSilentSec = j.maxSilentSec;
    b.timeoutSec = j.timeoutSec;
    b.createdMs = clock.nowMs();
    auto prev = db.finishedBuildOfDrv(j.drvPath);
    if (prev && (prev->status == 0 ||
                 db.cachedFailure(j.drvPath, clock.nowMs()))) {
      b.finished = true;
      b.status = prev->status;
      b.stopMs = b.createdMs;
      b.reusedFrom = prev->id;
      b.id = db.createBuild(b);
      db.setBuildOutputs(b.id, db.buildOutputs(prev->id));
      continue;
    }
    b.id = db.createBuild(b);
    toStart.push_back(std::move(b));
  }
  return toStart;
}

void SchedulerService::Impl::finishEvaluation(Evaluations::Finished& done) {
  const EvalOutcome& o = done.outcome;
  try {
    int64_t id = recordEvaluation(o);
    if (done.request)
      db.completeRequest(*done.request, true, json{{"eval", id}}.dump());
  } catch (const std::exception& e) {
    logError("recording the evaluation of jobset " +
             std::to_string(o.jobset) + " failed: " + e.what());
    if (done.request) failRequest(*done.request, e);
  }
}

// One evaluation at a time, off the service thread: on-demand ones first,
// then jobsets whose check interval passed.
void SchedulerService::Impl::checkJobsets() {
  if (auto done = evaluations->takeFinished()) finishEvaluation(*done);
  if (evaluations->busy() || evaluations->startQueued()) return;
  int64_t now = clock.nowMs();
  for (auto& js : db.jobsets()) {
    if (!js.enabled || js.checkIntervalSec <= 0) continue;
    if (now - js.lastCheckedMs < js.checkIntervalSec * 1000) continue;
    db.setJobsetChecked(js.id, now, std::nullopt);
    evaluations->startScheduled(js);
    return;
  }
}

// ---------------------------------------------------------------- public

SchedulerService::SchedulerService(ServiceConfig config)
    : impl_(std::make_unique<Impl>(std::move(config))) {}

SchedulerService::~SchedulerService() = default;

std::string SchedulerService::endpoint() const {
  return impl_->server->endpoint();
}

int SchedulerService::metricsPort() const {
  if (!impl_->exposer) return -1;
  auto ports = impl_->exposer->GetListeningPorts();
  return ports.empty() ? -1 : ports.front();
}

void SchedulerService::run(const std::atomic<bool>& stop) {
  while (!stop.load()) pollOnce(std::chrono::milliseconds(50));
}

void SchedulerService::Impl::serveMessages(std::chrono::milliseconds timeout,
                                           int max) {
  // The registrar's eventfd ends the wait too: a registered output may
  // complete a held result, which frees a slot.
  auto r = server->receive(timeout, registrar.wakeFd());
  turnStart = clock.now();
  for (int n = 0; n < max; n++) {
    if (r) handle(*r);
    takeRegistrations();
    processEvents();
    // A result frees a slot: fill it now, not after the rest of the batch
    // (serving inputs, receiving uploads) is handled. When nothing can be
    // assigned this costs one O(classes) check.
    dispatch();
    endTurn();
    if (!r) return;
    r = server->receive(std::chrono::milliseconds(0), registrar.wakeFd());
  }
}

void SchedulerService::Impl::endTurn() {
  auto now = clock.now();
  metrics.observeLoopTurn(
      std::chrono::duration<double>(now - turnStart).count());
  turnStart = now;
}

void SchedulerService::pollOnce(std::chrono::milliseconds timeout) {
  auto& s = *impl_;
  try {
    s.serveMessages(timeout, 1000);
    s.periodic();
    s.processEvents();
    s.dispatch();
    s.processEvents();
    s.endTurn();
    s.metrics.observeIdleStretches(s.core.takeIdleStretches());
    s.metrics.update(s.core.metrics());
    s.maybePublishSnapshot();
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
  s.startBuild(b);
  s.processEvents();
  return b.id;
}

int64_t SchedulerService::evaluateJobset(int64_t jobset, bool force) {
  auto js = impl_->db.jobset(jobset);
  if (!js)
    throw SchedulerStateError("no jobset with id " + std::to_string(jobset));
  return impl_->recordEvaluation(impl_->evaluations->run(*js, force));
}

json SchedulerService::applyRequest(const std::string& kind,
                                    const json& args) {
  return impl_->apply(kind, args);
}

void SchedulerService::Impl::maybePublishSnapshot() {
  if (!snapshotWanted.load() ||
      clock.now() - lastSnapshot < SchedulerService::kSnapshotInterval)
    return;
  snapshotWanted = false;
  lastSnapshot = clock.now();
  auto snap = std::make_shared<SchedulerSnapshot>();
  snap->takenMs = clock.nowMs();
  snap->queue = queueEntries();
  std::map<std::string, size_t> runningOn;
  for (auto& [id, r] : running) runningOn[r.peer]++;
  for (auto& [peer, c] : conns)
    snap->workers.push_back(
        {c.name, c.hello.systems, c.hello.slots, runningOn[peer]});
  snap->metrics = core.metrics();
  *published.lock() = std::move(snap);
}

std::shared_ptr<const SchedulerSnapshot> SchedulerService::snapshot() const {
  impl_->snapshotWanted = true;
  return *impl_->published.lock();
}

const RequestTable& SchedulerService::requests() const {
  return impl_->requests;
}

StateDb& SchedulerService::db() { return impl_->db; }

SchedulerMetrics SchedulerService::coreMetrics() const {
  return impl_->core.metrics();
}

}  // namespace kiln::scheduler
