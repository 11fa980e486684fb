// Running steps' ends (running_steps.h): a worker's result, settled in
// the core and recorded in the database, acknowledged once the record
// commits (docs/protocol.md, "Results"); outputs registered before it; a
// step taken back past its deadline.
#include "kiln/common/fail_point.h"
#include "kiln/common/logging.h"
#include "kiln/common/trace.h"
#include "kiln/scheduler/repeat_check.h"
#include "kiln/scheduler/repeat_store.h"
#include "repeat_runs.h"
#include "running_steps.h"

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

}  // namespace

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
    if (!r->slotReleased) core_.releaseSlot(r->sid);
    r->slotReleased = true;
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
            " was not recorded: not acknowledged, worker " + it->second.worker +
            " keeps it");
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
  if (run.repeat) return completeRepeat(run, m);
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
  recordUsage(run.system, id, m);
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
    if (!succeed(run, took, m.peakMemoryBytes, ack)) {
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
  ended(run);               // after the notes written to its log above
  // After the row's write (the notifier reads it), in order with it.
  if (notify_ && finished)
    deferred_.run([this, id] {
      notify_({LifecycleEvent::Kind::kStepFinished, 0, 0, 0, id});
    });
  markPending();
}

bool RunningSteps::succeed(const RunningStep& run, Duration took, uint64_t peak,
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
  // A reproducibility check, when the owning jobset's share selects it:
  // recorded with the step's success, in the same ordered writes.
  JobsetId jobset = core_.step(run.sid).jobset;
  auto share = repeatPpm_.find(jobset);
  if (share != repeatPpm_.end() &&
      selectedForRepeat(run.drvPath, share->second)) {
    deferred_.run([&db = db_, id = run.id, jobset, worker = run.worker,
                   now = clock_.nowMs()] {
      addRepeatCheck(db, id, jobset, worker, now);
    });
    if (repeats_) repeats_->add(run.id, run.worker);
  }
  deferred_.run(
      [&db = db_, id = run.id, now = clock_.nowMs()] {
        finishStepRow(db, id, 0, now, "", std::nullopt);
      },
      ack);
  core_.finishStep(run.sid, StepResult::success(took).withPeak(peak));
  traceEvent("scheduler", "succeeded", static_cast<uint64_t>(run.id));
  ingestor_.forget(run.sid);
  return true;
}

void RunningSteps::recordUsage(const std::string& system, int64_t id,
                               const proto::StepResult& m) {
  if (!m.peakMemoryBytes && !m.cpuTimeUs && !m.buildDirBytes) return;
  metrics_.observeStepUsage(system, m.peakMemoryBytes, m.cpuTimeUs,
                            m.buildDirBytes);
  // Before the row's finish (queued after this), in order with it.
  deferred_.run([&db = db_, id, peak = int64_t(m.peakMemoryBytes),
                 cpu = int64_t(m.cpuTimeUs), dir = int64_t(m.buildDirBytes)] {
    db.setStepUsage(id, peak, cpu, dir);
  });
}

bool RunningSteps::fail(const RunningStep& run, const proto::StepResult& m,
                        Duration took, const DeferredWrites::Done& ack) {
  // Out of memory: tried once more, on a worker with more free memory if
  // there is one, before it counts (docs/worker.md, "Limits per build");
  // a second time it fails for good.
  bool oomRetry =
      m.status == StepStatus::kOutOfMemory && oomRetried_.insert(run.id).second;
  if (isTransient(m.status) || oomRetry) {
    core_.finishStep(
        run.sid, oomRetry
                     ? StepResult::outOfMemoryRetry(took, m.peakMemoryBytes)
                     : StepResult::transient(took).withPeak(m.peakMemoryBytes));
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
  deferred_.run([&db = db_, id = run.id, status = static_cast<int>(m.status),
                 now = clock_.nowMs(), error = m.errorMsg,
                 cached] { finishStepRow(db, id, status, now, error, cached); },
                ack);
  core_.finishStep(
      run.sid,
      StepResult::permanent(m.status, took).withPeak(m.peakMemoryBytes));
  return true;
}

}  // namespace kiln::scheduler
