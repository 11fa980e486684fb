// SchedulerService: jobset evaluations — when they start (one at a time,
// off the service thread: Evaluations) and how what they produced is
// recorded and ingested on the service thread (docs/scheduler.md,
// "Evaluations"); builds' ingestion (startBuilds), which restarts and
// added builds use too.
#include "kiln/common/fail_point.h"
#include "kiln/common/logging.h"
#include "kiln/scheduler/forge_requests.h"
#include "service_impl.h"

namespace kiln::scheduler {

using nlohmann::json;

namespace {

// The build row of job `j` of evaluation `evalId`.
BuildRow buildRowOf(const Job& j, int64_t evalId, int64_t jobset,
                    int64_t nowMs) {
  BuildRow b;
  b.eval = evalId;
  b.jobset = jobset;
  b.job = j.attr;
  b.nixName = j.name;
  b.system = j.system;
  b.drvPath = j.drvPath;
  b.localPriority = j.schedulingPriority;
  b.maxSilentSec = j.maxSilentSec;
  b.timeoutSec = j.timeoutSec;
  b.createdMs = nowMs;
  return b;
}

}  // namespace

// One transaction records the jobset's inputs hash, the evaluation and
// every build row: a scheduler killed before the commit left nothing (the
// next check evaluates again), one killed after it finds the unfinished
// builds at restart (restoreFromDb). Ingestion, which takes seconds for
// thousands of builds, comes after the commit.
int64_t SchedulerService::Impl::recordEvaluation(
    const EvalOutcome& o, std::optional<int64_t> result,
    std::optional<int64_t> request) {
  StateDb::Transaction txn(db);
  if (result) deleteEvalResult(db, *result);  // recorded exactly once
  // The request is answered in the same transaction: an evaluator host
  // must never see it unanswered once its result is gone.
  auto answer = [&](int64_t evalId) {
    if (request)
      db.completeRequest(*request, true, json{{"eval", evalId}}.dump());
  };
  db.setJobsetChecked(o.jobset, o.timeMs,
                      o.skipped || !o.error.empty()
                          ? std::nullopt
                          : std::optional<std::string>(o.inputsHash));
  if (o.skipped) {
    // Its eval.started was sent: say that it ended without a new one.
    notify({LifecycleEvent::Kind::kEvalFinished, o.jobset},
           o.timeMs + o.durationMs);
    answer(0);
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
    if (!j.error.empty())
      errors.push_back({j.attr, j.error});
    else
      e.jobs++;
  }
  int64_t evalId = db.createEvaluation(e, errors);
  // Reported once recorded, at the time it ended (eval.started was sent
  // when it started: evaluationStarted).
  notify({o.error.empty() ? LifecycleEvent::Kind::kEvalFinished
                          : LifecycleEvent::Kind::kEvalFailed,
          o.jobset, evalId},
         o.timeMs + o.durationMs);
  std::vector<BuildRow> toStart = createBuilds(o, evalId);
  if (o.error.empty())
    notify({LifecycleEvent::Kind::kEvalQueued, o.jobset, evalId});
  answer(evalId);
  KILN_FAIL_POINT("scheduler.eval.before-commit");
  txn.commit();
  KILN_FAIL_POINT("scheduler.eval.after-commit");
  if (o.drvs) ingestor.useDrvs(o.drvs);
  // A batch of builds at a time (a few statements, a couple of
  // milliseconds each); the workers are served after each (results,
  // uploads, and the dispatch of what the batch made ready), so none idles.
  for (size_t at = 0; at < toStart.size(); at += Ingestor::kBatch) {
    size_t end = std::min(toStart.size(), at + Ingestor::kBatch);
    startBuilds({toStart.begin() + at, toStart.begin() + end});
    endTurn();
    serveMessages(std::chrono::milliseconds(0), 100);
  }
  processEvents();
  return evalId;
}

// The build rows of evaluation `evalId`: a job whose derivation succeeded
// before (or has a cached failure) gets a finished build reusing that
// result; the others are returned, unfinished, to be ingested. The
// earlier builds are looked up and the rows inserted a few hundred per
// statement: one statement per job cost a round trip each on PostgreSQL.
std::vector<BuildRow> SchedulerService::Impl::createBuilds(const EvalOutcome& o,
                                                           int64_t evalId) {
  std::vector<std::string> drvs;
  for (auto& j : o.jobs)
    if (j.error.empty()) drvs.push_back(j.drvPath);
  auto previous = db.finishedBuildsOfDrvs(drvs);
  std::vector<BuildRow> rows;
  for (auto& j : o.jobs) {
    if (!j.error.empty()) continue;
    BuildRow b = buildRowOf(j, evalId, o.jobset, clock.nowMs());
    auto prev = previous.find(j.drvPath);
    if (prev != previous.end() &&
        (prev->second.status == 0 ||
         db.cachedFailure(j.drvPath, clock.nowMs()))) {
      b.finished = true;
      b.status = prev->second.status;
      b.stopMs = b.createdMs;
      b.reusedFrom = prev->second.id;
    }
    rows.push_back(std::move(b));
  }
  auto ids = db.createBuilds(rows);
  std::vector<BuildRow> toStart;
  for (size_t i = 0; i < rows.size(); i++) {
    BuildRow& b = rows[i];
    b.id = ids[i];
    notify({LifecycleEvent::Kind::kBuildQueued, b.jobset, evalId, b.id});
    if (b.reusedFrom) {
      db.setBuildOutputs(b.id, db.buildOutputs(b.reusedFrom));
      notify({LifecycleEvent::Kind::kBuildFinished, b.jobset, evalId, b.id});
      continue;
    }
    toStart.push_back(std::move(b));
  }
  return toStart;
}

void SchedulerService::Impl::startBuild(const BuildRow& b) { startBuilds({b}); }

// One ingestion (Ingestor::ingestAll) for `builds`: a build whose closure
// cannot be ingested is aborted with the reason.
void SchedulerService::Impl::startBuilds(const std::vector<BuildRow>& builds) {
  std::vector<std::string> drvs;
  for (auto& b : builds) drvs.push_back(b.drvPath);
  std::vector<IngestOutcome> outcomes;
  try {
    outcomes = ingestor.ingestAll(drvs);
  } catch (const Error&) {
    outcomes.assign(builds.size(), {IngestResult{}, std::current_exception()});
  }
  for (size_t i = 0; i < builds.size(); i++)
    startIngested(builds[i], outcomes[i]);
}

void SchedulerService::Impl::startIngested(const BuildRow& b,
                                           const IngestOutcome& o) {
  if (o.error) {
    std::string why;
    try {
      std::rethrow_exception(o.error);
    } catch (const std::exception& e) {
      why = e.what();
    }
    logError("build " + std::to_string(b.id) + ": " + why);
    db.finishBuild(b.id, static_cast<int>(StepStatus::kAborted), clock.nowMs(),
                   why);
    notify({LifecycleEvent::Kind::kBuildFinished, b.jobset, b.eval, b.id});
    return;
  }
  const IngestResult& r = o.result;
  if (!r.top) {  // every output valid: built already
    announce(
        {b.id, BuildEvent::Kind::kSucceeded, StepStatus::kSuccess, b.drvPath});
    return;
  }
  steps.setBuildLimits(b);
  BuildSpec spec;
  spec.id = b.id;
  spec.jobset = b.jobset;
  spec.top = *r.top;
  spec.globalPriority = b.globalPriority;
  spec.localPriority = b.localPriority;
  core.addBuild(spec);
  steps.markPending();
}

void SchedulerService::Impl::evaluationStarted(int64_t jobset) {
  StateDb::Transaction txn(db);
  notify({LifecycleEvent::Kind::kEvalStarted, jobset});
  txn.commit();
}

void SchedulerService::Impl::finishEvaluation(Evaluations::Finished& done) {
  const EvalOutcome& o = done.outcome;
  try {
    recordEvaluation(o, done.result, done.request);
  } catch (const SqlError& e) {
    // The database is away: a remote result stays and is imported again.
    if (!e.transient() || !done.result) return finishFailed(done, e);
    logWarn("recording the evaluation of jobset " + std::to_string(o.jobset) +
            " failed (retrying): " + e.what());
  } catch (const std::exception& e) {
    finishFailed(done, e);
  }
}

void SchedulerService::Impl::finishFailed(const Evaluations::Finished& done,
                                          const std::exception& e) {
  logError("recording the evaluation of jobset " +
           std::to_string(done.outcome.jobset) + " failed: " + e.what());
  try {
    if (done.result) deleteEvalResult(db, *done.result);
    if (done.request) failRequest(*done.request, e);
  } catch (const std::exception& again) {
    logError(std::string("and answering for it failed: ") + again.what());
  }
}

// Remote evaluations: a claim new since the last look is an evaluation
// that started (eval.started); the oldest published result is imported
// off this thread.
void SchedulerService::Impl::checkRemoteEvaluations() {
  std::set<std::pair<int64_t, int64_t>> claims;
  for (auto& c : evalClaims(db)) {
    claims.emplace(c.jobset, c.claimedMs);
    if (!remoteClaimsSeen.count({c.jobset, c.claimedMs}))
      evaluationStarted(c.jobset);
  }
  remoteClaimsSeen = std::move(claims);
  if (evaluations.busy()) return;
  auto results = evalResults(db);
  if (results.empty()) return;
  logInfo("importing evaluation result " + std::to_string(results[0].id) +
          " of jobset " + std::to_string(results[0].jobset) + " from " +
          results[0].evaluator + " (" + std::to_string(results[0].bytes) +
          " bytes)");
  evaluations.startImport(results[0]);
}

// One evaluation at a time, off the service thread: on-demand ones first,
// then jobsets whose check interval passed.
void SchedulerService::Impl::checkJobsets() {
  if (auto done = evaluations.takeFinished()) finishEvaluation(*done);
  // Closed pull requests' builds, once their grace period passed.
  cancelBuilds(sweepClosedPulls(db, clock.nowMs() - cfg.pullCloseGrace.count()),
               "cancelled: the pull request was closed");
  if (cfg.remoteEvaluations) return checkRemoteEvaluations();
  if (evaluations.busy() || evaluations.startQueued()) return;
  int64_t now = clock.nowMs();
  for (auto& js : db.jobsets()) {
    if (!js.enabled || js.checkIntervalSec <= 0) continue;
    if (now - js.lastCheckedMs < js.checkIntervalSec * 1000) continue;
    db.setJobsetChecked(js.id, now, std::nullopt);
    evaluations.startScheduled(js);
    return;
  }
}

}  // namespace kiln::scheduler
