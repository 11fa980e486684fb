// Running steps and dispatch (running_steps.h): BuildStep out, adoption,
// inputs and logs (docs/protocol.md, docs/scheduler.md); their results in
// running_steps_results.cc.
#include "running_steps.h"
#include "repeat_runs.h"

#include <fcntl.h>
#include <unistd.h>

#include <unordered_set>

#include "kiln/common/fail_point.h"
#include "kiln/common/logging.h"
#include "kiln/common/trace.h"
#include "kiln/scheduler/logs.h"
#include "kiln/store/content_check.h"
#include "repeat_runs.h"

namespace kiln::scheduler {

namespace proto = protocol;

namespace {

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
    if (a.repeat) {
      dispatchRepeat(a);
      continue;
    }
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
    return it->second.peer == c.peer || movable(it->second, c, held)
               ? ""
               : "it runs on another connection";
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
  // Steps whose build ended first: each takes a slot for a moment only,
  // so the worker's slots still hold every build it runs (its result
  // waiting for an Ack since the last scheduler gave that slot away).
  std::vector<uint64_t> adopted;
  for (bool ready : {true, false})
    for (auto& held : c.hello.heldSteps)
      if (held.resultReady == ready && adoptOne(c, held))
        adopted.push_back(held.stepId);
  // The same connection saying Hello again: a step sent to it after that
  // Hello left is not in it, yet reaches the worker before this Welcome
  // (one ordered connection). It stays the worker's, or both sides would
  // lose it: the worker dropping it, the scheduler waiting for it.
  std::set<uint64_t> listed(adopted.begin(), adopted.end());
  for (auto& [id, run] : running_)
    if (run.peer == c.peer && !listed.count(static_cast<uint64_t>(id)))
      adopted.push_back(static_cast<uint64_t>(id));
  return adopted;
}

bool RunningSteps::adoptOne(const WorkerConn& c, const proto::HeldStep& held) {
  auto id = static_cast<int64_t>(held.stepId);
  if (id >= kRepeatIdBase) return adoptRepeat(c, held);
  if (adoptUnacknowledged(c, id)) return true;
  bool again = running_.count(id) > 0;  // the same connection's Hello
  auto row = again ? std::optional<StepRow>() : db_.step(id);
  if (auto why = claimRefusal(c, held, row); !why.empty()) {
    logWarn("worker " + c.name + " claims step " + std::to_string(id) +
            ", refused: " + why);
    metrics_.countRefusedClaim();
    return false;
  }
  if (again) {
    RunningStep& run = running_.at(id);
    if (run.peer != c.peer) moveTo(run, c);
    return true;
  }
  auto sid = *ingestor_.index().coreId(id);
  if (!core_.adoptStep(sid, c.wid)) {
    logWarn("worker " + c.name + " claims step " + std::to_string(id) +
            ", not adopted: no free slot, or it was queued again");
    return false;
  }
  proto::BuildStep m;
  RunningStep run;
  if (!describe(*row, sid, c, m, run)) {
    core_.finishStep(sid, StepResult::transient(Duration(0)));
    return false;
  }
  run.attempt = std::max<int64_t>(row->attempts, 1);
  run.adopted = true;
  track(*row, sid, c, m.timeoutSec, std::move(run));
  if (held.resultReady) {
    core_.releaseSlot(sid);
    running_.at(id).slotReleased = true;
  }
  logInfo("worker " + c.name +
          (held.resultReady ? " holds the result of " : " still runs ") +
          row->drvPath + ": adopted (attempt " + std::to_string(row->attempts) +
          ")");
  metrics_.countAdoptedStep();
  return true;
}

bool RunningSteps::movable(const RunningStep& run, const WorkerConn& c,
                           const proto::HeldStep& held) {
  return run.worker == c.name && held.resultReady && run.resultFrom.empty();
}

// The worker restarted (its process, keeping its state directory) before
// its old connection was declared lost: the step, whose build is over,
// goes on on the new connection; the old one has nothing of it left.
void RunningSteps::moveTo(RunningStep& run, const WorkerConn& c) {
  logInfo("worker " + c.name +
          " came back on another connection with the "
          "result of " +
          run.drvPath + ": adopted (attempt " + std::to_string(run.attempt) +
          ")");
  if (!run.slotReleased) {
    core_.releaseSlot(run.sid);
    run.slotReleased = true;
  }
  run.peer = c.peer;
  run.adopted = true;
  metrics_.countAdoptedStep();
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

const RunningStep* RunningSteps::find(int64_t id) const {
  auto it = running_.find(id);
  return it == running_.end() ? nullptr : &it->second;
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
    std::string path =
        r.repeat ? repeatSideLocation(config_.stateDir, r.check) + "/build.log"
                 : stepLogPath(config_.stateDir, r.drvPath, r.attempt);
    // An adopted step's attempt goes on: its log is continued.
    int mode = r.adopted ? O_APPEND : O_TRUNC;
    r.log = AutoCloseFD(
        open(path.c_str(), O_WRONLY | O_CREAT | mode | O_CLOEXEC, 0644));
    if (!r.log) throwSysError("opening log " + path);
    if (off_t end = lseek(r.log.get(), 0, SEEK_END); r.adopted && end > 0)
      r.logBytes = static_cast<uint64_t>(end);
    if (mirror_ && !r.repeat) mirror_->begin(r.id, r.attempt, path, r.adopted);
  }
  return r.log.get();
}

void RunningSteps::ended(const RunningStep& r) {
  if (r.repeat) return;  // no attempt of a step row, no staging
  if (attemptEnded_) attemptEnded_(r.id, r.attempt);
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

void RunningSteps::workerLeft(const WorkerConn& w) {
  settledByPeer_.erase(w.peer);
  // A step with a held result no longer needs the worker.
  for (auto r = running_.begin(); r != running_.end();) {
    if (r->second.peer != w.peer || r->second.deferred) {
      ++r;
      continue;
    }
    // One adopted with its result ready gave its slot back: the core,
    // which no longer ties it to the worker, offers it again (the worker
    // may claim it when it is back).
    if (r->second.slotReleased)
      core_.finishStep(r->second.sid, StepResult::notStarted());
    ended(r->second);
    r = running_.erase(r);
  }
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

}  // namespace kiln::scheduler
