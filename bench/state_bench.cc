// The state layer's write path on both backends (issue 31,
// bench/README.md "PostgreSQL"):
//
//   state_bench record [JOBS] [DEPS]   (default 50000 3)
//     Records one evaluation of JOBS jobs through StateDb the way the
//     scheduler does, on SQLite and on PostgreSQL in the same run
//     (BACKENDS=sqlite,postgres, the default; REPS=n alternates them n
//     times), and prints the seconds of each phase and postgres/sqlite:
//       record: one transaction, as SchedulerService's recordEvaluation
//         and createBuilds: the jobset's check time, the evaluation row,
//         the lookup of earlier finished builds of the jobs' derivations
//         and the build rows (StateDb::finishedBuildsOfDrvs, createBuilds:
//         a few hundred per statement).
//       ingest: one transaction per 32 builds, as Ingestor::ingestAll:
//         the steps and cached failures of the batch's jobs looked up in
//         one statement, then those of their sources, the new steps
//         inserted and their dependency rows (its source and up to DEPS
//         of the 200 jobs before it) a few hundred per statement.
//       estimate: SchedulerService::recordEstimate's work once the
//         evaluation is ingested (eval_estimate.h): the step history, the
//         remaining steps and their dependencies, the estimate's row.
//     The derivations are made-up paths: no store, no scheduler process,
//     only the statements the service sends for such an evaluation.
//
// PostgreSQL is a server of its own (tests/support/postgres_server.h:
// scripts/start-postgres.sh, fsync and synchronous_commit off) on loopback,
// a fresh database for each run; SQLite a fresh file (WAL, synchronous =
// NORMAL) in a temporary folder.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_backends.h"
#include "kiln/common/file.h"
#include "kiln/scheduler/eval_estimate.h"
#include "kiln/scheduler/state_db.h"

namespace kiln::bench {
namespace {

using Clock = std::chrono::steady_clock;
using scheduler::StateDb;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// One made-up job: its derivation, its source's, and earlier jobs it needs.
struct FakeJob {
  std::string attr, name, drv, srcDrv;
  std::vector<int> deps;  // indices of earlier jobs
};

std::string fakeHash(std::mt19937_64& rnd) {
  static const char kAlphabet[] = "0123456789abcdfghijklmnpqrsvwxyz";
  std::string h(32, '0');
  for (auto& c : h) c = kAlphabet[rnd() % 32];
  return h;
}

std::vector<FakeJob> makeJobs(int n, int maxDeps) {
  std::mt19937_64 rnd(31);
  std::vector<FakeJob> jobs(n);
  for (int i = 0; i < n; i++) {
    auto& j = jobs[i];
    j.name = "job" + std::to_string(i) + "-1.0";
    j.attr = "pkgs.job" + std::to_string(i);
    j.drv = "/nix/store/" + fakeHash(rnd) + "-" + j.name + ".drv";
    j.srcDrv = "/nix/store/" + fakeHash(rnd) + "-" + j.name + ".tar.gz.drv";
    int k = i == 0 ? 0 : static_cast<int>(rnd() % (maxDeps + 1));
    for (int d = 0; d < k; d++)
      j.deps.push_back(std::max(0, i - 1 - static_cast<int>(rnd() % 200)));
    std::sort(j.deps.begin(), j.deps.end());
    j.deps.erase(std::unique(j.deps.begin(), j.deps.end()), j.deps.end());
  }
  return jobs;
}

// Builds per ingestion batch: the service's (Ingestor::kBatch).
constexpr size_t kIngestBatch = 32;

struct RecordTimes {
  double record = 0;  // seconds
  double ingest = 0;
  double estimate = 0;  // recordEstimate's queries and insert
  int64_t builds = 0, steps = 0, deps = 0;
};

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Records and ingests `jobs` as one evaluation of a new jobset of `db`.
RecordTimes recordEvaluation(StateDb& db, const std::vector<FakeJob>& jobs) {
  scheduler::ProjectRow p;
  p.name = "bench";
  scheduler::JobsetRow js;
  js.project = db.createProject(p);
  js.name = "big";
  js.location = "/nowhere";
  js.checkIntervalSec = 0;
  js.id = db.createJobset(js);

  RecordTimes t;
  // recordEvaluation + createBuilds: one transaction.
  auto t0 = Clock::now();
  std::vector<int64_t> buildIds;
  int64_t eval = 0;
  {
    StateDb::Transaction txn(db);
    int64_t now = nowMs();
    db.setJobsetChecked(js.id, now, std::string("inputs-hash"));
    scheduler::EvaluationRow e;
    e.jobset = js.id;
    e.inputsHash = "inputs-hash";
    e.timeMs = now;
    e.durationMs = 1000;
    e.jobs = static_cast<int64_t>(jobs.size());
    eval = db.createEvaluation(e, {});
    std::vector<std::string> drvs;
    for (auto& j : jobs) drvs.push_back(j.drv);
    if (!db.finishedBuildsOfDrvs(drvs).empty())
      throw Error("a fresh database has finished builds");
    std::vector<scheduler::BuildRow> rows;
    for (auto& j : jobs) {
      scheduler::BuildRow b;
      b.eval = eval;
      b.jobset = js.id;
      b.job = j.attr;
      b.nixName = j.name;
      b.system = "x86_64-linux";
      b.drvPath = j.drv;
      b.createdMs = nowMs();
      rows.push_back(std::move(b));
    }
    buildIds = db.createBuilds(rows);
    txn.commit();
  }
  t.record = since(t0);
  // What the evaluation's page reads: eval_counts, kept by triggers.
  if (db.buildCounts(eval).all != static_cast<int64_t>(jobs.size()))
    throw Error("eval_counts has " + std::to_string(db.buildCounts(eval).all) +
                " builds, not " + std::to_string(jobs.size()));
  t.builds = static_cast<int64_t>(buildIds.size());

  // Ingestor::ingestAll of kIngestBatch builds at a time, one transaction
  // each: a lookup per level of the closures not in the core (the jobs,
  // then their sources: the earlier jobs they need are in the core, or in
  // the batch), the new steps' rows, their dependencies.
  auto t1 = Clock::now();
  std::vector<int64_t> stepOf(jobs.size(), 0);
  for (size_t at = 0; at < jobs.size(); at += kIngestBatch) {
    size_t end = std::min(jobs.size(), at + kIngestBatch);
    StateDb::Transaction txn(db);
    int64_t now = nowMs();
    std::vector<std::string> tops, srcs;
    for (size_t i = at; i < end; i++) {
      tops.push_back(jobs[i].drv);
      srcs.push_back(jobs[i].srcDrv);
    }
    for (auto* level : {&tops, &srcs})
      for (auto& [drv, found] : db.lookUpSteps(*level, now))
        if (found.step || found.failure)
          throw Error("a fresh database has a step of " + drv);
    std::vector<scheduler::StepRow> rows;  // dependencies first
    for (size_t i = at; i < end; i++) {
      for (auto* drv : {&jobs[i].srcDrv, &jobs[i].drv}) {
        scheduler::StepRow row;
        row.drvPath = *drv;
        row.system = "x86_64-linux";
        row.pname = jobs[i].name;
        row.createdMs = now;
        rows.push_back(std::move(row));
      }
    }
    auto ids = db.insertSteps(rows);
    std::vector<std::pair<int64_t, int64_t>> edges;
    for (size_t i = at; i < end; i++) {
      int64_t src = ids[2 * (i - at)];
      stepOf[i] = ids[2 * (i - at) + 1];
      edges.emplace_back(stepOf[i], src);
      for (int d : jobs[i].deps) edges.emplace_back(stepOf[i], stepOf[d]);
    }
    db.addStepDeps(edges);
    t.steps += static_cast<int64_t>(rows.size());
    t.deps += static_cast<int64_t>(edges.size());
    txn.commit();
  }
  t.ingest = since(t1);
  // SchedulerService::recordEstimate, once the evaluation is ingested:
  // the history query, the remaining steps and their dependencies (two
  // recursive queries), the estimate and its row.
  auto t2 = Clock::now();
  auto e = scheduler::estimateEvaluation(db, eval, 64, nowMs(),
                                         scheduler::evalStepHistory(db, eval));
  int64_t seen = std::min<int64_t>(t.steps, scheduler::kMaxEstimatedSteps);
  if (!e || static_cast<int64_t>(e->steps) != seen)
    throw Error("the estimate saw " + std::to_string(e ? e->steps : 0) +
                " steps, not " + std::to_string(seen));
  scheduler::recordEvalEstimate(db, eval, *e);
  t.estimate = since(t2);
  return t;
}

int record(int n, int maxDeps) {
  auto backends = backendsToRun("sqlite,postgres");
  int reps = repsFromEnv();
  auto jobs = makeJobs(n, maxDeps);
  BenchDatabases databases;
  std::map<std::string, std::vector<double>> recordSecs, ingestSecs,
      estimateSecs;
  for (int rep = 0; rep < reps; rep++) {
    for (auto& backend : backends) {
      TempDir dir("kiln-state-bench");
      auto spec = scheduler::DatabaseSpec::inStateDir(
          dir.path(), databases.freshUrl(backend));
      RecordTimes t;
      {
        StateDb db(spec);
        t = recordEvaluation(db, jobs);
      }
      recordSecs[backend].push_back(t.record);
      ingestSecs[backend].push_back(t.ingest);
      estimateSecs[backend].push_back(t.estimate);
      std::printf(
          "%-8s rep %d: %lld builds recorded in %.2f s; %lld steps, %lld "
          "dependencies ingested in %.2f s; total %.2f s; estimate %.1f ms\n",
          backend.c_str(), rep + 1, static_cast<long long>(t.builds), t.record,
          static_cast<long long>(t.steps), static_cast<long long>(t.deps),
          t.ingest, t.record + t.ingest, t.estimate * 1000);
      std::fflush(stdout);
    }
  }
  std::printf(
      "\none evaluation of %d jobs, median of %d: record | ingest | total "
      "(s)\n",
      n, reps);
  for (auto& b : backends) {
    double r = median(recordSecs[b]), i = median(ingestSecs[b]);
    std::printf("  %-8s %8.2f | %8.2f | %8.2f; estimate %.1f ms\n", b.c_str(),
                r, i, r + i, median(estimateSecs[b]) * 1000);
  }
  if (recordSecs.count("sqlite") && recordSecs.count("postgres")) {
    double rs = median(recordSecs["sqlite"]), is = median(ingestSecs["sqlite"]);
    double rp = median(recordSecs["postgres"]),
           ip = median(ingestSecs["postgres"]);
    std::printf("  postgres/sqlite %5.2fx | %6.2fx | %6.2fx (goal <= 1.2x)\n",
                rp / rs, ip / is, (rp + ip) / (rs + is));
  }
  return 0;
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  using namespace kiln::bench;
  std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "record")
      return record(intArg(argc, argv, 2, 50000), intArg(argc, argv, 3, 3));
  } catch (const std::exception& e) {
    std::cerr << "state_bench: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: [BACKENDS=sqlite,postgres] [REPS=1] state_bench record "
               "[JOBS] [DEPS]\n";
  return 2;
}
