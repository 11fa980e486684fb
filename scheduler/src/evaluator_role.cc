// `kiln evaluator` hosts (evaluator_role.h).
#include "kiln/scheduler/evaluator_role.h"

#include <poll.h>
#include <unistd.h>

#include <functional>
#include <future>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "eval_transfer.h"
#include "evaluations.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"
#include "kiln/common/logging.h"
#include "kiln/common/process.h"
#include "kiln/common/sync.h"
#include "kiln/scheduler/eval_queue.h"
#include "kiln/scheduler/offline_requests.h"
#include "kiln/scheduler/request_queue.h"
#include "kiln/scheduler/requests.h"

namespace kiln::scheduler {

using nlohmann::json;

namespace {

Evaluations::Config evaluationsConfig(const EvaluatorRoleConfig& c) {
  Evaluations::Config e;
  e.stateDir = c.stateDir;
  e.storeDir = c.storeDir;
  e.runner = c.evalRunner;
  e.plugins = std::make_shared<PluginEvaluators>(
      c.plugins ? *c.plugins : plugins::processPlugins(),
      withBuiltinKiln(c.evaluatorConfig, c.kilnBinary));
  e.fetcher = c.inputFetcher ? c.inputFetcher : makeInputFetcher();
  e.database = c.database;
  e.prefetch = false;  // the scheduler parses what it imports
  e.maxSourceBytes = c.maxSourceBytes;
  return e;
}

/// Runs `work` on a thread of its own and calls `meanwhile` every `every`
/// of `clock` until `work` returns; returns its result (or rethrows). The
/// wait goes through the clock: with a FakeClock the test paces the calls.
template <typename T>
T runMeanwhile(const Clock& clock, Clock::Duration every,
               const std::function<T()>& work,
               const std::function<void()>& meanwhile) {
  Sync<bool> done(false);
  auto running = std::async(std::launch::async, [&] {
    struct Mark {  // set when `work` returns or throws
      Sync<bool>& done;
      ~Mark() {
        *done.lock() = true;
        done.notifyAll();
      }
    } mark{done};
    return work();
  });
  for (;;) {
    {
      auto d = done.lock();
      if (d.waitUntil(clock, clock.now() + every, [&] { return *d; })) break;
    }
    meanwhile();
  }
  return running.get();
}

}  // namespace

struct EvaluatorRole::Impl {
  EvaluatorRoleConfig cfg;
  const Clock& clock;
  Evaluations evaluations;
  std::unique_ptr<StateDb> db;

  explicit Impl(EvaluatorRoleConfig c)
      : cfg(std::move(c)),
        clock(cfg.clock ? *cfg.clock : RealClock::instance()),
        evaluations(evaluationsConfig(cfg), clock) {
    if (cfg.name.empty())
      cfg.name = hostName() + ":" + std::to_string(::getpid());
    createDirs(cfg.stateDir + "/eval");
  }

  StateDb& state() {
    if (!db) db = std::make_unique<StateDb>(cfg.database, StateDb::Existing{});
    return *db;
  }

  /// A claim and the commit its request names ("": the branch's head);
  /// the request keeps the commit, so a claim taken over after its lease
  /// ended evaluates the same one.
  struct Claimed {
    EvalClaim claim;
    std::string revision;
  };

  EvalClaim claimOf(int64_t jobset, std::optional<int64_t> request,
                    bool force) const {
    int64_t now = clock.nowMs();
    return {jobset, cfg.name, request, force, now, now + cfg.lease.count()};
  }

  std::optional<Claimed> claimRequested();
  std::optional<Claimed> claimScheduled();
  void evaluate(const Claimed& claimed);
  void publish(const EvalClaim& claim, const EvalOutcome& o);
  void waitForWork(const std::atomic<bool>& stop);
  /// Wakes the loop when a request is queued (PostgreSQL; else null).
  std::unique_ptr<SqlListener> requests;
};

// The oldest `jobset-eval` request no evaluator took yet; a request naming
// no jobset (or a malformed revision) is answered here with the reason.
std::optional<EvaluatorRole::Impl::Claimed>
EvaluatorRole::Impl::claimRequested() {
  StateDb& s = state();
  std::set<int64_t> taken;
  for (auto& c : evalClaims(s))
    if (c.request) taken.insert(*c.request);
  for (auto& r : evalResults(s))
    if (r.request) taken.insert(*r.request);
  for (auto& req : s.pendingRequests()) {
    if (req.kind != "jobset-eval" || taken.count(req.id)) continue;
    JobsetRow js;
    bool force = true;
    try {
      json a = json::parse(req.args);
      js = evalJobsetOf(s, a);
      force = !boolArg(a, "ifChanged", false);
    } catch (const std::exception& e) {
      json answer{{"error", e.what()}, {"caller", true}};
      s.completeRequest(req.id, false, answer.dump());
      continue;
    }
    auto claim = claimOf(js.id, req.id, force);
    if (claimEvaluation(s, claim, claim.claimedMs))
      return Claimed{claim, js.revision};
  }
  return std::nullopt;
}

// A jobset whose check interval passed, that no evaluator holds and whose
// last result the scheduler has recorded.
std::optional<EvaluatorRole::Impl::Claimed>
EvaluatorRole::Impl::claimScheduled() {
  StateDb& s = state();
  std::set<int64_t> waiting;
  for (auto& r : evalResults(s)) waiting.insert(r.jobset);
  int64_t now = clock.nowMs();
  for (auto& js : s.jobsets()) {
    if (!js.enabled || js.checkIntervalSec <= 0 || waiting.count(js.id))
      continue;
    if (now - js.lastCheckedMs < js.checkIntervalSec * 1000) continue;
    auto claim = claimOf(js.id, std::nullopt, false);
    if (!claimEvaluation(s, claim, now)) continue;
    s.setJobsetChecked(js.id, now, std::nullopt);
    return Claimed{claim, ""};
  }
  return std::nullopt;
}

// Evaluates on a thread of its own, renewing the claim meanwhile; a claim
// lost (this host was cut off longer than the lease) drops the result.
// A request's revision is fetched and evaluated, not the branch's head.
void EvaluatorRole::Impl::evaluate(const Claimed& claimed) {
  const EvalClaim& claim = claimed.claim;
  auto js = state().jobset(claim.jobset);
  if (!js) {
    releaseEvalClaim(state(), claim.jobset, cfg.name);
    return;
  }
  js->revision = claimed.revision;
  logInfo("evaluating jobset " + js->name + " (" + std::to_string(js->id) +
          (claim.request ? ", request " + std::to_string(*claim.request) : "") +
          (js->revision.empty() ? "" : ", commit " + js->revision) + ")");
  bool mine = true;
  EvalOutcome o = runMeanwhile<EvalOutcome>(
      clock, cfg.lease / 4, [&] { return evaluations.run(*js, claim.force); },
      [&] {
        try {
          if (mine)
            mine = renewEvalClaim(state(), claim.jobset, cfg.name,
                                  clock.nowMs() + cfg.lease.count());
        } catch (const SqlError& e) {
          db.reset();  // reconnects on the next use
          logWarn(std::string("renewing the claim failed (retrying): ") +
                  e.what());
        }
      });
  if (!mine) {
    logWarn("the claim on jobset " + js->name +
            " passed to another evaluator; dropping this result");
    return;
  }
  retryTransient([&] {
    try {
      publish(claim, o);
    } catch (const SqlError&) {
      db.reset();
      throw;
    }
  });
}

// One transaction: the result, its chunks and the claim's end.
void EvaluatorRole::Impl::publish(const EvalClaim& claim,
                                  const EvalOutcome& o) {
  auto start = clock.now();
  StateDb& s = state();
  store::LocalStore own(cfg.stateDir, store::StoreDir(cfg.storeDir));
  StateDb::Transaction txn(s);
  if (!renewEvalClaim(s, claim.jobset, cfg.name,
                      clock.nowMs() + cfg.lease.count())) {
    logWarn("the claim on jobset " + std::to_string(claim.jobset) +
            " passed to another evaluator; dropping this result");
    return;
  }
  EvalResultWriter out(
      s, {0, claim.jobset, claim.request, cfg.name, clock.nowMs(), 0, 0});
  writeEvalStream(o, own, out);
  int64_t id = out.finish();
  releaseEvalClaim(s, claim.jobset, cfg.name);
  txn.commit();
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock.now() - start)
          .count();
  logInfo("published evaluation result " + std::to_string(id) + " of jobset " +
          std::to_string(claim.jobset) + ": " + std::to_string(o.jobs.size()) +
          " jobs" + (o.error.empty() ? "" : " (failed: " + o.error + ")") +
          (o.skipped ? " (inputs unchanged)" : "") +
          (o.sources.empty() ? "" : ", sources " + o.sources) + " in " +
          std::to_string(ms) + " ms");
}

EvaluatorRole::EvaluatorRole(EvaluatorRoleConfig config)
    : impl_(std::make_unique<Impl>(std::move(config))) {}
EvaluatorRole::~EvaluatorRole() = default;

const std::string& EvaluatorRole::name() const { return impl_->cfg.name; }

bool EvaluatorRole::runOnce() {
  auto claim = impl_->claimRequested();
  if (!claim) claim = impl_->claimScheduled();
  if (!claim) return false;
  impl_->evaluate(*claim);
  return true;
}

void EvaluatorRole::run(const std::atomic<bool>& stop) {
  auto warned = impl_->clock.now() - std::chrono::hours(1);
  while (!stop) {
    bool worked = false;
    try {
      worked = runOnce();
    } catch (const SchemaError&) {
      throw;
    } catch (const std::exception& e) {
      impl_->db.reset();
      if (impl_->clock.now() - warned >= std::chrono::seconds(10)) {
        warned = impl_->clock.now();
        logWarn(std::string("evaluator: ") + e.what() + " (retrying)");
      }
    }
    if (worked) continue;
    impl_->waitForWork(stop);
  }
}

// Until the poll interval passed, a `jobset-eval` request was queued (a
// PostgreSQL notification) or `stop` was set.
void EvaluatorRole::Impl::waitForWork(const std::atomic<bool>& stop) {
  if (!requests) {
    try {
      requests = listenForRequests(cfg.database);
    } catch (const std::exception& e) {
      logWarn(std::string("evaluator: no request wake-ups: ") + e.what());
    }
  }
  auto until = clock.now() + cfg.poll;
  while (!stop && clock.now() < until) {
    if (!requests) {
      clock.sleepFor(std::chrono::milliseconds(50));
      continue;
    }
    pollfd p{requests->wakeFd(), POLLIN, 0};
    if (::poll(&p, 1, 50) > 0 && requests->take()) return;
  }
}

}  // namespace kiln::scheduler
