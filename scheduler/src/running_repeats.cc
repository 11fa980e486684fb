// Reproducibility checks' second builds among the running steps
// (running_steps.h, repeat_runs.h; docs/release.md): sent as check builds
// (BuildStep::check), their inputs served and their logs written like any
// step's, their outputs kept aside instead of registered, their end
// settled by RepeatRuns and never by a build's step row.
#include "kiln/common/logging.h"
#include "kiln/common/trace.h"
#include "repeat_runs.h"
#include "running_steps.h"

namespace kiln::scheduler {

namespace proto = protocol;

bool RunningSteps::isRepeat(int64_t id) const {
  auto it = running_.find(id);
  return it != running_.end() && it->second.repeat;
}

void RunningSteps::dispatchRepeat(const Assignment& a) {
  auto check = repeats_ ? repeats_->checkOf(a.step) : std::nullopt;
  if (!check) {  // not one of ours (cannot happen): forgotten
    core_.dropRepeat(a.step);
    return;
  }
  WorkerConn* c = link_.find(a.worker);
  std::optional<StepRow> row;
  proto::BuildStep m;
  RunningStep run;
  bool described = false;
  try {
    row = db_.step(*check);
    described = c && row && describe(*row, a.step, *c, m, run);
  } catch (const std::exception& e) {  // the database is away: later
    logError("cannot dispatch the reproducibility check of step " +
             std::to_string(*check) + ": " + e.what());
    repeats_->notSent(a.step);
    return;
  }
  if (!c) return repeats_->notSent(a.step);  // its worker just left
  if (!described) {  // logged by describe: its .drv or inputs are gone
    RepeatOutcome o;
    o.error =
        "the check build could not be sent (its derivation or "
        "inputs are not available)";
    repeats_->finished(a.step, *check, o);
    return;
  }
  StepRow tracked = *row;
  tracked.id = kRepeatIdBase + *check;
  m.stepId = static_cast<uint64_t>(tracked.id);
  m.check = true;
  if (!link_.send(c->peer, m)) {
    repeats_->notSent(a.step);
    return;
  }
  traceEvent("scheduler", "check-dispatched", m.stepId, c->name);
  repeats_->started(a.step, *check, c->name);
  run.repeat = true;
  run.check = *check;
  track(tracked, a.step, *c, m.timeoutSec, std::move(run));
}

bool RunningSteps::adoptRepeat(const WorkerConn& c,
                               const proto::HeldStep& held) {
  auto id = static_cast<int64_t>(held.stepId);
  int64_t check = id - kRepeatIdBase;
  auto refuse = [&](const std::string& why) {
    logWarn("worker " + c.name + " claims the check build of step " +
            std::to_string(check) + ", refused: " + why);
    metrics_.countRefusedClaim();
    return false;
  };
  if (auto it = running_.find(id); it != running_.end()) {
    if (it->second.peer == c.peer) return true;  // the same Hello again
    if (!movable(it->second, c, held))
      return refuse("it runs on another connection");
    moveTo(it->second, c);
    return true;
  }
  auto sid = repeats_ ? repeats_->adoptable(check, c.name) : std::nullopt;
  if (!sid) return refuse("no check waits for it from this worker");
  std::optional<StepRow> row;
  try {
    row = db_.step(check);
  } catch (const std::exception& e) {
    return refuse(std::string("its step cannot be read: ") + e.what());
  }
  if (!row || row->drvPath != store_.printPath(held.drvPath))
    return refuse("it is not the check of that derivation");
  if (!core_.adoptRepeat(*sid, c.wid))
    return refuse("no free slot for it");
  proto::BuildStep m;
  RunningStep run;
  if (!describe(*row, *sid, c, m, run)) {  // logged; sent again later
    repeats_->notSent(*sid);
    return false;
  }
  StepRow tracked = *row;
  tracked.id = id;
  run.repeat = true;
  run.check = check;
  run.adopted = true;
  repeats_->started(*sid, check, c.name);
  track(tracked, *sid, c, m.timeoutSec, std::move(run));
  // A ready result keeps its slot for the moment until it arrives: a
  // refusal among them needs the worker the slot names.
  logInfo("worker " + c.name +
          (held.resultReady ? " holds the result of " : " still runs ") +
          "the check build of " + row->drvPath + ": adopted");
  metrics_.countAdoptedStep();
  return true;
}

void RunningSteps::keepRepeatOutput(int64_t id, const std::string& output,
                                    const std::string& narHash,
                                    AutoCloseFD nar) {
  auto it = running_.find(id);
  if (it == running_.end() || !repeats_) return;
  RunningStep& run = it->second;
  try {
    repeats_->keep(run.check, output, nar.get());
    run.uploaded.insert(output);
    run.repeatHashes[output] = narHash;
  } catch (const std::exception& e) {
    logError("keeping output " + output + " of the check of step " +
             std::to_string(run.check) + ": " + e.what());
    run.rejected = std::string("keeping the output: ") + e.what();
  }
}

void RunningSteps::completeRepeat(RunningStep& run,
                                  const proto::StepResult& m) {
  // Nothing of a step row is written: the worker may forget it at once.
  if (!run.resultFrom.empty())
    link_.sendOrWarn(run.resultFrom, proto::Ack{proto::MessageType::kStepResult,
                                                m.stepId, true, ""});
  if (m.status == StepStatus::kAborted &&
      m.errorMsg.starts_with(proto::kCheckRefusedPrefix)) {
    repeats_->refused(run.sid, run.check, run.worker, m.errorMsg,
                      !run.slotReleased);
    markPending();
    return;
  }
  RepeatOutcome o;
  o.outputs = run.expected;
  o.narHashes = run.repeatHashes;
  o.built = m.status == StepStatus::kSuccess && run.rejected.empty();
  for (auto& [name, path] : run.expected)
    if (o.built && !run.uploaded.count(name)) {
      o.built = false;
      o.error = "output " + name + " was not uploaded";
    }
  if (m.status != StepStatus::kSuccess)
    o.error = std::string(stepStatusName(m.status)) +
              (m.errorMsg.empty() ? "" : ": " + m.errorMsg);
  else if (!run.rejected.empty())
    o.error = run.rejected;
  repeats_->finished(run.sid, run.check, o);
  markPending();
}

}  // namespace kiln::scheduler
