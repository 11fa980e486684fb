// Running steps and dispatch (running_steps.h): BuildStep out, logs and
// results in (docs/protocol.md, docs/scheduler.md).
#include "running_steps.h"

#include <fcntl.h>
#include <unistd.h>

#include <unordered_set>

#include "kiln/common/fail_point.h"
#include "kiln/common/logging.h"
#include "kiln/common/trace.h"
#include "kiln/scheduler/logs.h"
#include "kiln/store/content_check.h"

namespace kiln::scheduler {

namespace proto = protocol;

namespace {

bool isTransient(StepStatus s) {
  return s == StepStatus::kAborted || s == StepStatus::kCancelled;
}

// Finishes step row `id` (with its cached failure, if any) in one
// transaction, between the step-finish fail points.
void finishStepRow(StateDb& db, int64_t id, int status, int64_t nowMs,
                   const std::string& error,
                   const std::optional<CachedFailureRow>& cached) {
  StateDb::Transaction txn(db);
  db.finishStep(id, status, nowMs, error);
  if (cached) db.addCachedFailure(*cached);
  KILN_FAIL_POINT("scheduler.step-finish.before-commit");
  txn.commit();
  KILN_FAIL_POINT("scheduler.step-finish.after-commit");
}

// A step's critical path (seconds) as BuildStep.rankMs: whole ms, within
// the protocol's bound.
uint64_t rankMs(double criticalPathSec) {
  double ms = criticalPathSec * 1000;
  if (!(ms > 0)) return 0;
  return ms >= static_cast<double>(proto::kMaxRankMs)
             ? proto::kMaxRankMs
             : static_cast<uint64_t>(ms);
}

}  // namespace

RunningSteps::RunningSteps(const ServiceConfig& config, StateDb& db,
                           DeferredWrites& deferred, store::LocalStore& store,
                           Ingestor& ingestor, SchedulerCore& core,
                           WorkerLink& link, InputServer& inputs,
                           ServiceMetrics& metrics, const Clock& clock)
    : config_(config),
      db_(db),
      deferred_(deferred),
      store_(store),
      ingestor_(ingestor),
      core_(core),
      link_(link),
      inputs_(inputs),
      metrics_(metrics),
      clock_(clock) {}

void RunningSteps::markPending() {
  if (!pendingSince_) pendingSince_ = clock_.now();
}

void RunningSteps::dispatch() {
  for (auto& a : core_.nextAssignments()) {
    auto id = ingestor_.index().dbId(a.step);
    WorkerConn* c = link_.find(a.worker);
    bool sent = false;
    try {
      sent = id && c && sendBuildStep(*id, a.step, *c);
    } catch (const std::exception& e) {
      // Not sent (the state database is away): the core offers it again
      // after a pause, without counting an attempt; the rest of the batch
      // is still dispatched.
      logError("cannot dispatch step " + std::to_string(id.value_or(0)) + ": " +
               e.what());
      core_.finishStep(a.step, StepResult::notStarted());
      continue;
    }
    if (!sent)
      core_.finishStep(a.step, StepResult::transient(Duration(0)));
    else if (pendingSince_)
      metrics_.observeDispatchLatency(
          std::chrono::duration<double>(clock_.now() - *pendingSince_).count());
  }
  pendingSince_.reset();
}

void RunningSteps::abort(const std::vector<StepAbort>& aborts) {
  for (auto& a : aborts) {
    auto id = ingestor_.index().dbId(a.step);
    if (!id) continue;
    auto it = running_.find(*id);
    if (it == running_.end()) continue;
    link_.sendOrWarn(
        it->second.peer,
        proto::CancelStep{static_cast<uint64_t>(*id), "build cancelled"});
    ended(it->second);
    running_.erase(it);
  }
}

void RunningSteps::planInputs(const store::Derivation& drv, const WorkerConn& c,
                              proto::BuildStep& m) {
  store::StorePathSet roots = drv.inputSrcs;
  for (auto& [inDrv, outs] : drv.inputDrvs) {
    auto d = ingestor_.loadDrv(store_.printPath(inDrv));
    for (auto& o : outs) {
      auto it = d->outputs.find(o);
      if (it == d->outputs.end() || !it->second.path)
        throw Error("input " + store_.printPath(inDrv) + " has no output " + o);
      roots.insert(*it->second.path);
    }
  }
  // A path the worker holds brings its whole closure (its store only
  // registers a path after its references), so the walk stops there: late
  // steps of deep package sets send a few paths, not thousands.
  std::unordered_set<const proto::PathInfo*> seen;
  std::vector<const store::StorePath*> todo;
  for (auto& r : roots) todo.push_back(&r);
  while (!todo.empty()) {
    const store::StorePath& p = *todo.back();
    todo.pop_back();
    if (c.present.count(p.baseName())) continue;
    const proto::PathInfo& info = inputs_.pathInfo(p);  // stable reference
    if (!seen.insert(&info).second) continue;
    m.inputs.push_back(info);
    for (auto& r : info.references) todo.push_back(&r);
  }
  m.roots.assign(roots.begin(), roots.end());
}

const store::StorePathSet& RunningSteps::inputClosure(RunningStep& run) {
  if (run.inputClosure) return *run.inputClosure;
  auto& closure = run.inputClosure.emplace();
  std::vector<const store::StorePath*> todo;
  for (auto& r : run.roots) todo.push_back(&r);
  while (!todo.empty()) {
    const store::StorePath& p = *todo.back();
    todo.pop_back();
    if (!closure.insert(p).second) continue;
    try {
      for (auto& r : inputs_.pathInfo(p).references) todo.push_back(&r);
    } catch (const store::InvalidPathError&) {
      // Gone from the central store: serving it is refused anyway.
    }
  }
  return closure;
}

bool RunningSteps::describe(const StepRow& row, StepId sid, const WorkerConn& c,
                            proto::BuildStep& m, RunningStep& run) {
  m.stepId = static_cast<uint64_t>(row.id);
  try {
    auto path = store_.parsePath(row.drvPath);
    m.drvPath = path;
    m.drv = readFile(store_.physicalPath(path));
    auto drv = ingestor_.loadDrv(row.drvPath);
    planInputs(*drv, c, m);
    for (auto& i : m.inputs) run.sentInputs.push_back(i.path);
    run.roots = m.roots;
    for (auto& [n, o] : drv->outputs) {
      if (o.path) run.expected.emplace(n, *o.path);
      if (!o.hash.empty())
        run.fixedCa.emplace(n, store::fixedOutputCa(o).render());
    }
    // Limits of the owner build (the lowest build id needing the step),
    // from its job's meta.maxSilent / meta.timeout.
    auto view = core_.step(sid);
    m.rankMs = rankMs(view.criticalPath);
    if (auto limits = buildLimits(view.ownerBuild)) {
      m.maxSilentSec = static_cast<uint64_t>(limits->first);
      m.timeoutSec = static_cast<uint64_t>(limits->second);
    }
  } catch (const SqlError& e) {
    if (e.transient()) throw;  // offered again without counting an attempt
    logError("cannot dispatch " + row.drvPath + ": " + e.what());
    return false;
  } catch (const std::exception& e) {
    logError("cannot dispatch " + row.drvPath + ": " + e.what());
    return false;
  }
  m.logLimitBytes = config_.logLimitBytes;
  m.outputLimitBytes = config_.outputLimitBytes;
  return true;
}

void RunningSteps::track(const StepRow& row, StepId sid, const WorkerConn& c,
                         uint64_t timeoutSec, RunningStep run) {
  run.id = row.id;
  run.sid = sid;
  run.peer = c.peer;
  run.worker = c.name;
  run.drvPath = row.drvPath;
  run.system = row.system;
  run.started = clock_.now();
  if (timeoutSec)
    run.deadline = run.started + std::chrono::seconds(timeoutSec) +
                   config_.stepDeadlineMargin;
  running_[row.id] = std::move(run);
}

std::optional<std::pair<int64_t, int64_t>> RunningSteps::buildLimits(
    int64_t build) {
  if (auto it = limits_.find(build); it != limits_.end()) return it->second;
  if (auto b = db_.build(build))
    return std::pair(b->maxSilentSec, b->timeoutSec);
  return std::nullopt;
}

void RunningSteps::notifyBuildsStarted(int64_t id, const std::string& drvPath) {
  if (!notify_) return;
  deferred_.run([this, id, drvPath] {
    try {
      for (auto& b : db_.unfinishedBuildsOfDrv(drvPath))  // its top step
        notify_({LifecycleEvent::Kind::kBuildStarted, b.jobset, b.eval, b.id});
    } catch (const SqlError& e) {
      if (!e.transient()) throw;
      logWarn("step " + std::to_string(id) + ": no start notification (" +
              e.what() + ")");
    }
  });
}

bool RunningSteps::sendBuildStep(int64_t id, StepId sid, WorkerConn& c) {
  // From memory (the core and the index): a dispatch reads no row.
  StepView view = core_.step(sid);
  StepRow row;
  row.id = id;
  row.drvPath = std::move(view.drvPath);
  row.system = std::move(view.system);
  row.attempts = ingestor_.index().attempts(id);
  proto::BuildStep m;
  RunningStep run;
  if (!describe(row, sid, c, m, run) || !link_.send(c.peer, m)) return false;
  traceEvent("scheduler", "dispatched", m.stepId, c.name);
  // The worker has the step: it is tracked whatever the database says, so
  // its result is taken; the start is recorded after the turn's dispatch
  // or, the database being away, before anything recorded after it.
  deferred_.run([&db = db_, id, worker = c.name, now = clock_.nowMs()] {
    KILN_FAIL_POINT("scheduler.step-start.before-commit");
    db.startStep(id, worker, now);
    KILN_FAIL_POINT("scheduler.step-start.after-commit");
  });
  ingestor_.countAttempt(id);
  notifyBuildsStarted(id, row.drvPath);
  run.attempt = row.attempts + 1;
  track(row, sid, c, m.timeoutSec, std::move(run));
  return true;
}

// Why the scheduler's records do not give held step `held` to `c`, or ""
// if they do: dispatched to this very worker (by name, which carries its
// key's name), unfinished, for the same derivation.
std::string RunningSteps::claimRefusal(const WorkerConn& c,
                                       const proto::HeldStep& held,
                                       const std::optional<StepRow>& row) {
  auto id = static_cast<int64_t>(held.stepId);
  if (auto it = running_.find(id); it != running_.end())
    return it->second.peer == c.peer ? "" : "it runs on another connection";
  if (!row || !ingestor_.index().coreId(id)) return "no such unfinished step";
  if (row->finished) return "it is finished";
  if (row->worker != c.name)
    return "it was dispatched to " +
           (row->worker.empty() ? std::string("no worker") : row->worker);
  if (row->drvPath != store_.printPath(held.drvPath))
    return "it builds " + row->drvPath + ", not " +
           store_.printPath(held.drvPath);
  return "";
}

std::vector<uint64_t> RunningSteps::adopt(const WorkerConn& c) {
  std::vector<uint64_t> adopted;
  for (auto& held : c.hello.heldSteps) {
    auto id = static_cast<int64_t>(held.stepId);
    if (adoptUnacknowledged(c, id)) {
      adopted.push_back(held.stepId);
      continue;
    }
    bool again = running_.count(id) > 0;  // the same connection's Hello
    auto row = again ? std::optional<StepRow>() : db_.step(id);
    if (auto why = claimRefusal(c, held, row); !why.empty()) {
      logWarn("worker " + c.name + " claims step " + std::to_string(id) +
              ", refused: " + why);
      metrics_.countRefusedClaim();
      continue;
    }
    if (again) {
      adopted.push_back(held.stepId);
      continue;
    }
    auto sid = *ingestor_.index().coreId(id);
    if (!core_.adoptStep(sid, c.wid)) {
      logWarn("worker " + c.name + " claims step " + std::to_string(id) +
              ", not adopted: no free slot, or it was queued again");
      continue;
    }
    proto::BuildStep m;
    RunningStep run;
    if (!describe(*row, sid, c, m, run)) {
      core_.finishStep(sid, StepResult::transient(Duration(0)));
      continue;
    }
    run.attempt = std::max<int64_t>(row->attempts, 1);
    run.adopted = true;
    track(*row, sid, c, m.timeoutSec, std::move(run));
    logInfo("worker " + c.name + " still runs " + row->drvPath +
            ": adopted (attempt " + std::to_string(row->attempts) + ")");
    metrics_.countAdoptedStep();
    adopted.push_back(held.stepId);
  }
  return adopted;
}

RunningStep* RunningSteps::findOn(int64_t id, const std::string& peer) {
  auto it = running_.find(id);
  return it == running_.end() || it->second.peer != peer ? nullptr
                                                         : &it->second;
}

const RunningStep* RunningSteps::find(int64_t id,
                                      const std::string& peer) const {
  auto it = running_.find(id);
  return it == running_.end() || it->second.peer != peer ? nullptr
                                                         : &it->second;
}

void RunningSteps::onNeedPaths(WorkerConn& from, const proto::NeedPaths& m) {
  auto refuse = [&](const std::string& why) {
    link_.sendOrWarn(from.peer, proto::Ack{proto::MessageType::kNeedPaths,
                                           m.stepId, false, why});
  };
  RunningStep* run = findOn(static_cast<int64_t>(m.stepId), from.peer);
  if (!run) {
    refuse("step " + std::to_string(m.stepId) +
           " is not running on this worker");
    return;
  }
  // A worker is served its step's inputs, not whatever the store holds.
  const auto& closure = inputClosure(*run);
  for (auto& p : m.paths)
    if (!closure.count(p)) {
      std::string why = "path " + store_.printPath(p) +
                        " is not in the input closure of " + run->drvPath;
      logWarn("worker " + from.name + " refused: " + why);
      refuse(why);
      return;
    }
  inputs_.serve(from, m);
}

int RunningSteps::openLog(RunningStep& r) {
  if (!r.log) {
    std::string path = stepLogPath(config_.stateDir, r.drvPath, r.attempt);
    // An adopted step's attempt goes on: its log is continued.
    int mode = r.adopted ? O_APPEND : O_TRUNC;
    r.log = AutoCloseFD(
        open(path.c_str(), O_WRONLY | O_CREAT | mode | O_CLOEXEC, 0644));
    if (!r.log) throwSysError("opening log " + path);
    if (off_t end = lseek(r.log.get(), 0, SEEK_END); r.adopted && end > 0)
      r.logBytes = static_cast<uint64_t>(end);
    if (mirror_) mirror_->begin(r.id, r.attempt, path, r.adopted);
  }
  return r.log.get();
}

void RunningSteps::ended(const RunningStep& r) {
  if (!mirror_) return;
  // An adopted attempt that wrote nothing since still has its pieces.
  if (!r.log && !r.adopted) return;
  if (!r.log)
    mirror_->begin(r.id, r.attempt,
                   stepLogPath(config_.stateDir, r.drvPath, r.attempt), true);
  mirror_->finish(r.id, r.attempt);
}

void RunningSteps::onLog(const WorkerConn& from, const proto::LogChunk& l) {
  RunningStep* r = findOn(static_cast<int64_t>(l.stepId), from.peer);
  if (!r || r->logTruncated) return;
  openLog(*r);
  std::string_view data = l.data;
  uint64_t limit = config_.logLimitBytes;
  if (limit && r->logBytes + data.size() > limit) {
    data = data.substr(0, limit - r->logBytes);
    r->logTruncated = true;
  }
  writeAll(r->log.get(), data);
  r->logBytes += data.size();
  if (r->logTruncated)
    writeAll(r->log.get(), "\n[kiln: log truncated at the size limit]\n");
}

void RunningSteps::onResult(const WorkerConn& from,
                            const proto::StepResult& m) {
  auto id = static_cast<int64_t>(m.stepId);
  RunningStep* r = findOn(id, from.peer);
  if (!r) {
    // Sent again (after a reconnection) while the first one's record has
    // not committed: acknowledged with it, recorded once.
    auto u = unacked_.find(id);
    if (u != unacked_.end() && u->second.worker == from.name) {
      u->second.peer = from.peer;
      return;
    }
    link_.sendOrWarn(
        from.peer, proto::Ack{proto::MessageType::kStepResult, m.stepId, false,
                              "step not running on this worker"});
    return;
  }
  // Its Ack waits until the result is durable (complete → acknowledge):
  // a worker forgets a result once acknowledged, and a result this
  // scheduler cannot record any more (another one took the farm over)
  // must reach the next one.
  if (!r->resultFrom.empty()) return;  // sent again: the first one counts
  r->resultFrom = from.peer;
  traceEvent("scheduler", "result", m.stepId,
             r->registering.empty() ? "" : "outputs still registering");
  // Its outputs arrived before the result; their registration may not
  // have finished yet. The worker's slot is free either way: fill it
  // while they finish.
  if (!r->registering.empty()) {
    r->deferred = m;
    core_.releaseSlot(r->sid);
    markPending();  // the slot's next dispatch is measured from here
    return;
  }
  complete(r->id, m);
}

void RunningSteps::takeBackOverdue() {
  auto now = clock_.now();
  std::vector<int64_t> overdue;
  for (auto& [id, r] : running_)
    if (r.deadline && now > *r.deadline && !r.deferred && r.registering.empty())
      overdue.push_back(id);
  for (int64_t id : overdue) {
    RunningStep& r = running_.at(id);
    std::string why =
        "no result within the step's timeout plus the scheduler's margin of " +
        std::to_string(config_.stepDeadlineMargin.count()) +
        " s: taken back from worker " + r.peer;
    logWarn(r.drvPath + ": " + why);
    link_.sendOrWarn(r.peer, proto::CancelStep{static_cast<uint64_t>(id), why});
    writeAll(openLog(r), "\n[kiln: " + why + "]\n");
    proto::StepResult res;
    res.stepId = static_cast<uint64_t>(id);
    res.status = StepStatus::kTimedOut;
    res.errorMsg = why;
    complete(id, res);
  }
}

void RunningSteps::workerLeft(const WorkerConn& w) {
  settledByPeer_.erase(w.peer);
  // A step with a held result no longer needs the worker.
  for (auto r = running_.begin(); r != running_.end();) {
    if (r->second.peer != w.peer || r->second.deferred) {
      ++r;
      continue;
    }
    ended(r->second);
    r = running_.erase(r);
  }
}

void RunningSteps::outputRegistering(int64_t id, const std::string& output) {
  auto it = running_.find(id);
  if (it != running_.end()) it->second.registering.insert(output);
}

void RunningSteps::outputRegistered(int64_t id, const std::string& output,
                                    bool ok) {
  auto it = running_.find(id);
  if (it == running_.end()) return;
  RunningStep& run = it->second;
  run.registering.erase(output);
  if (ok) run.uploaded.insert(output);
  traceEvent("scheduler", "registered", static_cast<uint64_t>(id), output);
  if (run.registering.empty() && run.deferred) {
    auto result = std::move(*run.deferred);
    complete(id, result);
  }
}

void RunningSteps::outputRejected(int64_t id, const std::string& output,
                                  const std::string& why) {
  auto it = running_.find(id);
  if (it == running_.end()) return;
  if (!it->second.rejected.empty()) it->second.rejected += "; ";
  it->second.rejected += why;
  outputRegistered(id, output, false);
}

store::StorePathSet RunningSteps::referenceCandidates(int64_t id) {
  auto it = running_.find(id);
  if (it == running_.end()) return {};
  store::StorePathSet c = inputClosure(it->second);
  for (auto& [name, path] : it->second.expected) c.insert(path);
  return c;
}

std::map<std::string, RunningSteps::PeerActivity> RunningSteps::activityByPeer()
    const {
  std::map<std::string, PeerActivity> out;
  for (auto& [id, r] : running_) out[r.peer].running.push_back(r.drvPath);
  for (auto& [peer, n] : settledByPeer_) {
    out[peer].succeeded = n.first;
    out[peer].failed = n.second;
  }
  return out;
}

DeferredWrites::Done RunningSteps::ackWhenRecorded(const RunningStep& run) {
  if (run.resultFrom.empty()) return nullptr;
  unacked_[run.id] = Unacked{run.worker, run.resultFrom};
  return [this, id = run.id](bool committed) { acknowledge(id, committed); };
}

void RunningSteps::acknowledge(int64_t id, bool recorded) {
  auto it = unacked_.find(id);
  if (it == unacked_.end()) return;
  if (recorded) {
    link_.sendOrWarn(it->second.peer,
                     proto::Ack{proto::MessageType::kStepResult,
                                static_cast<uint64_t>(id), true, ""});
    traceEvent("scheduler", "acknowledged", static_cast<uint64_t>(id));
  } else {
    logWarn("the result of step " + std::to_string(id) +
            " was not recorded: not acknowledged, worker " +
            it->second.worker + " keeps it");
  }
  unacked_.erase(it);
}

bool RunningSteps::adoptUnacknowledged(const WorkerConn& c, int64_t id) {
  auto it = unacked_.find(id);
  if (it == unacked_.end() || it->second.worker != c.name) return false;
  it->second.peer = c.peer;
  logInfo("worker " + c.name + " holds step " + std::to_string(id) +
          ", whose result is being recorded: acknowledged once it is");
  return true;
}

void RunningSteps::complete(int64_t id, const proto::StepResult& m) {
  auto it = running_.find(id);
  RunningStep run = std::move(it->second);
  running_.erase(it);
  // Acknowledges the worker's result once its row committed; where no row
  // is written (the step is retried, or was cancelled), at once.
  DeferredWrites::Done ack = ackWhenRecorded(run);
  auto ackNow = [&] {
    if (ack) ack(true);
  };
  try {
    core_.step(run.sid);
  } catch (const SchedulerError&) {
    ingestor_.forget(run.sid);
    ended(run);
    ackNow();
    return;  // cancelled while its outputs were being registered
  }
  auto took = std::chrono::duration_cast<Duration>(clock_.now() - run.started);
  metrics_.observeStepDuration(run.system,
                               std::chrono::duration<double>(took).count());
  // Counted for the workers page while the worker is connected (a held
  // result may complete after it left: no entry is made for it again).
  auto count = [&](bool ok) {
    if (!link_.find(run.peer)) return;
    auto& n = settledByPeer_[run.peer];
    ++(ok ? n.first : n.second);
  };
  bool finished = true;  // the step's row says it ended
  if (!run.rejected.empty()) {
    // The worker's own report does not matter: what it sent is wrong.
    proto::StepResult r = m;
    r.status = StepStatus::kFailed;
    r.errorMsg = run.rejected;
    writeAll(openLog(run), "\n[kiln: " + run.rejected + "]\n");
    finished = fail(run, r, took, ack);
    count(false);
  } else if (m.status == StepStatus::kSuccess) {
    if (!succeed(run, took, ack)) {
      count(false);
      ended(run);
      ackNow();
      return;
    }
    count(true);
  } else {
    finished = fail(run, m, took, ack);
    count(false);
  }
  if (!finished) ackNow();  // retried: nothing to record
  ended(run);  // after the notes written to its log above
  // After the row's write (the notifier reads it), in order with it.
  if (notify_ && finished)
    deferred_.run([this, id] {
      notify_({LifecycleEvent::Kind::kStepFinished, 0, 0, 0, id});
    });
  markPending();
}

bool RunningSteps::succeed(const RunningStep& run, Duration took,
                           const DeferredWrites::Done& ack) {
  // Each output and its DerivationOutputs row were registered by the
  // registrar; an output missing here was not uploaded or not registered.
  for (auto& [name, path] : run.expected) {
    if (!run.uploaded.count(name) && !store_.isValid(path)) {
      logWarn(run.drvPath + ": success reported but output " + name +
              " was not uploaded; retrying");
      core_.finishStep(run.sid, StepResult::transient(took));
      return false;
    }
  }
  // The worker held every input to build, and holds the outputs now.
  if (WorkerConn* c = link_.find(run.peer)) {
    for (auto& p : run.sentInputs) c->present.insert(p.baseName());
    for (auto& [name, path] : run.expected) c->present.insert(path.baseName());
  }
  deferred_.run(
      [&db = db_, id = run.id, now = clock_.nowMs()] {
        finishStepRow(db, id, 0, now, "", std::nullopt);
      },
      ack);
  core_.finishStep(run.sid, StepResult::success(took));
  traceEvent("scheduler", "succeeded", static_cast<uint64_t>(run.id));
  ingestor_.forget(run.sid);
  return true;
}

bool RunningSteps::fail(const RunningStep& run, const proto::StepResult& m,
                        Duration took, const DeferredWrites::Done& ack) {
  if (isTransient(m.status)) {
    core_.finishStep(run.sid, StepResult::transient(took));
    if (core_.step(run.sid).state != StepView::State::kFailed) return false;
    deferred_.run(
        [&db = db_, id = run.id, status = static_cast<int>(m.status),
         now = clock_.nowMs(), error = m.errorMsg] {
          finishStepRow(db, id, status, now, error, std::nullopt);
        },
        ack);
    return true;
  }
  std::optional<CachedFailureRow> cached;
  if (m.status != StepStatus::kDepFailed) {
    int64_t ttl = config_.cachedFailureTtlSec;
    cached =
        CachedFailureRow{run.drvPath, static_cast<int>(m.status),
                         clock_.nowMs(), ttl ? clock_.nowMs() + ttl * 1000 : 0};
  }
  deferred_.run(
      [&db = db_, id = run.id, status = static_cast<int>(m.status),
       now = clock_.nowMs(), error = m.errorMsg, cached] {
        finishStepRow(db, id, status, now, error, cached);
      },
      ack);
  core_.finishStep(run.sid, StepResult::permanent(m.status, took));
  return true;
}

}  // namespace kiln::scheduler
