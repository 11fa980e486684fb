// SchedulerService: jobset evaluations — when they start (one at a time,
// off the service thread: Evaluations) and how what they produced is
// recorded and ingested on the service thread (docs/scheduler.md,
// "Evaluations"); builds' ingestion (startBuilds), which restarts and
// added builds use too.
#include "kiln/common/fail_point.h"
#include "kiln/common/logging.h"
#include "kiln/scheduler/forge_requests.h"
#include "kiln/scheduler/release_store.h"
#include "kiln/scheduler/source_roots.h"
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

// Aggregate build → constituent build pairs: each aggregate job's
// constituent `.drv`s matched to the builds of the same evaluation with that
// derivation (a `.drv` no job of the evaluation has is left out, as Hydra
// does).
std::vector<std::pair<int64_t, int64_t>> constituentEdges(
    const EvalOutcome& o, const std::vector<BuildRow>& rows,
    const std::vector<int64_t>& ids) {
  std::multimap<std::string, int64_t> byDrv;
  for (size_t i = 0; i < rows.size(); i++)
    byDrv.emplace(rows[i].drvPath, ids[i]);
  std::map<std::string, int64_t> byJob;
  for (size_t i = 0; i < rows.size(); i++) byJob[rows[i].job] = ids[i];
  std::vector<std::pair<int64_t, int64_t>> edges;
  for (auto& j : o.jobs) {
    auto self = byJob.find(j.attr);
    if (!j.aggregate || !j.error.empty() || self == byJob.end()) continue;
    int64_t aggregate = self->second;
    for (auto& c : j.constituents) {
      auto [from, to] = byDrv.equal_range(c);
      for (auto it = from; it != to; ++it)
        if (it->second != aggregate) edges.emplace_back(aggregate, it->second);
    }
  }
  return edges;
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
  if (!o.sources.empty()) {
    setEvalSources(db, evalId, o.sources);
    // Before the commit: a collection never sees the record unrooted (a
    // root of a rolled-back evaluation is dropped by the next sync).
    rootEvalSources(store, evalId, o.sources);
  }
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
  recordEstimate(evalId);
  return evalId;
}

// The expected finish of a new evaluation, once per evaluation, for its
// page to say later how far off it was (eval_estimate.h): queued after the
// turn's other writes (its builds and steps committed), made off the loop.
void SchedulerService::Impl::recordEstimate(int64_t evalId) {
  auto slots = static_cast<unsigned>(core.metrics().totalSlots);
  deferred.run([this, evalId, slots, now = clock.nowMs()] {
    estimates.submit(evalId, slots, now);
  });
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
  recordConstituents(o, rows, ids);
  std::vector<BuildRow> toStart;
  for (size_t i = 0; i < rows.size(); i++) {
    BuildRow& b = rows[i];
    b.id = ids[i];
    notify({LifecycleEvent::Kind::kBuildQueued, b.jobset, evalId, b.id});
    if (b.reusedFrom) {
      db.setBuildOutputs(b.id, db.buildOutputs(b.reusedFrom));
      notify({LifecycleEvent::Kind::kBuildFinished, b.jobset, evalId, b.id});
      maybeAdvanceChannel(b.id, b.createdMs);
      continue;
    }
    toStart.push_back(std::move(b));
  }
  return toStart;
}

void SchedulerService::Impl::recordConstituents(
    const EvalOutcome& o, const std::vector<BuildRow>& rows,
    const std::vector<int64_t>& ids) {
  auto edges = constituentEdges(o, rows, ids);
  if (!edges.empty()) addAggregateConstituents(db, edges);
}

void SchedulerService::Impl::maybeAdvanceChannel(int64_t build, int64_t nowMs) {
  std::optional<ChannelAdvance> a;
  try {
    auto c = channelCandidate(db, build);
    if (!c || heldByRegressions(*c)) return;
    a = recordChannelAdvance(db, *c, nowMs);
  } catch (const SqlError& e) {
    if (e.transient()) throw;  // the whole transaction runs again
    logError("build " + std::to_string(build) +
             ": advancing its jobset's channel failed: " + e.what());
  }
  if (!a) return;
  logInfo("the channel of jobset " + std::to_string(a->jobset) +
          " advanced to evaluation " + std::to_string(a->eval) + " (build " +
          std::to_string(a->build) + ")");
  notify({LifecycleEvent::Kind::kChannelAdvanced, a->jobset, a->eval, a->build},
         nowMs);
}

// The regression gate (docs/release.md): the jobs of the candidate's
// evaluation whose closure or build time grew past the jobset's limits
// against the channel's evaluation are recorded, and hold the channel.
bool SchedulerService::Impl::heldByRegressions(const ChannelCandidate& c) {
  auto js = db.jobset(c.jobset);
  if (!c.current || !js ||
      (js->maxClosureGrowthPct <= 0 && js->maxBuildTimeGrowthPct <= 0))
    return false;
  ClosureSizeFn closure =
      [this](const std::string& path) -> std::optional<int64_t> {
    try {
      int64_t bytes = 0;
      for (auto& p : store.queryRequisites({store.parsePath(path)}))
        if (auto info = store.queryPathInfo(p)) bytes += int64_t(info->narSize);
      return bytes;
    } catch (const Error&) {
      return std::nullopt;  // not (or no longer) in the central store
    }
  };
  auto found =
      findRegressions(db, c.eval, c.current->eval, js->maxClosureGrowthPct,
                      js->maxBuildTimeGrowthPct, closure);
  if (found.empty()) return false;
  recordRegressions(db, c.eval, found);
  logWarn("evaluation " + std::to_string(c.eval) + " of jobset " +
          std::to_string(c.jobset) + " regressed (" +
          std::to_string(found.size()) + " jobs past the limits, first " +
          found[0].job + "): the channel stays at evaluation " +
          std::to_string(c.current->eval));
  return true;
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
