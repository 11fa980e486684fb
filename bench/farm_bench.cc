// End-to-end farm benchmarks of issue 4 (bench/README.md), on real
// processes (tests/support/farm.h: one `kiln scheduler`, local
// `kiln worker --private-store` processes; needs root):
//
//   farm_bench throughput [N] [WORKERS] [SLOTS]   (default 10000 4 2)
//     gen-collection.py N (made buildable, bench/buildable-collection.sh)
//     built from an evaluation: completed steps per second and the longest
//     time a worker slot stayed idle while a step it could run was queued
//     (the scheduler's kiln_slot_idle_with_work_* metrics; goal < 50 ms).
//     NIX_REF=M also times `nix-build -j<workers*slots>` of the first M jobs
//     (their closure is themselves; NIX_REF=all: every job) into a chroot
//     store, side by side.
//     BACKENDS=sqlite,postgres runs it once per backend in the same
//     invocation (REPS=n: n rounds, the backends alternating), the
//     scheduler's state in SQLite or in a database of its own on one
//     PostgreSQL server (tests/support/postgres_server.h), and prints the
//     figures side by side with postgres/sqlite ratios: steps/s, dispatch
//     latency p50/p99 (kiln_dispatch_latency_seconds, interpolated in its
//     buckets as Prometheus' histogram_quantile), the longest
//     idle-with-work stretch; default BACKENDS=sqlite.
//   farm_bench makespan [STEPS] [WORKERS] [SLOTS] [UNIT_MS] [WINDOW]
//     (default 120 4 2 1000 12) a synthetic DAG of `sleep` builders (1-4
//     units each, 0-3 dependencies among the WINDOW steps before) whose
//     critical path CP and total work W are known; one warm-up evaluation
//     teaches the scheduler the durations (by pname), the second is timed:
//     makespan / max(CP, W / slots), goal <= 1.10. NIX_REF=1 also times
//     `nix-build -j<slots>` of the same DAG. BACKENDS as for throughput.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>

#include "bench_backends.h"
#include "farm.h"
#include "kiln/common/error.h"
#include "kiln/common/file.h"

namespace kiln::bench {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// What the scheduler's state says of a run (scheduler::StateView).
struct StepTotals {
  int64_t succeeded = 0;
  int64_t attempts = 0;
  int64_t firstStartMs = 0;  ///< of the steps of `drvs` when not empty
  int64_t lastStopMs = 0;
};

StepTotals stepTotals(const test::Farm& farm,
                      const std::set<std::string>& drvs = {}) {
  StepTotals t;
  for (auto& s : farm.steps()) {
    if (s.status == 0) t.succeeded++;
    t.attempts += s.attempts;
    t.lastStopMs = std::max(t.lastStopMs, s.stopMs);
    if (s.startMs > 0 && (drvs.empty() || drvs.count(s.drvPath)) &&
        (t.firstStartMs == 0 || s.startMs < t.firstStartMs))
      t.firstStartMs = s.startMs;
  }
  return t;
}

// The farm's options for `backend`: SQLite under its state directory, or a
// fresh PostgreSQL database.
test::FarmOptions farmOptions(BenchDatabases& databases,
                              const std::string& backend) {
  test::FarmOptions o;
  o.database = databases.freshUrl(backend);
  return o;
}

// The q-quantile of histogram `name` in Prometheus text, interpolated in
// its buckets as histogram_quantile does (NaN when it has no sample).
double histogramQuantile(const std::string& text, const std::string& name,
                         double q) {
  std::vector<std::pair<double, double>> buckets;  // le, cumulative count
  std::string key = name + "_bucket{le=\"";
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) != 0) continue;
    std::string le =
        line.substr(key.size(), line.find('"', key.size()) - key.size());
    double bound = le == "+Inf" ? INFINITY : std::strtod(le.c_str(), nullptr);
    buckets.emplace_back(
        bound, std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr));
  }
  std::sort(buckets.begin(), buckets.end());
  if (buckets.empty() || buckets.back().second <= 0) return NAN;
  double rank = q * buckets.back().second, lo = 0, below = 0;
  for (auto [le, count] : buckets) {
    if (count >= rank) {
      if (std::isinf(le)) return lo;
      return lo + (le - lo) * (rank - below) / std::max(count - below, 1e-9);
    }
    lo = le;
    below = count;
  }
  return lo;
}

// What one throughput run measured.
struct FarmFigures {
  double stepsPerSec = 0;
  int64_t steps = 0;
  double evalSecs = 0;
  double dispatches = 0;
  double dispatchMeanMs = 0, dispatchP50Ms = 0, dispatchP99Ms = 0;
  double longestIdleMs = 0;  ///< kiln_slot_idle_with_work_max_seconds
  double idleP99Ms = 0;      ///< of the idle-with-work stretches
  double loopTurnP99Ms = 0, longestLoopTurnMs = 0;
};

// The scheduler's figures from its /metrics (cumulative since it started).
void readMetrics(const test::Farm& farm, FarmFigures& f) {
  std::string text = farm.metricsText();
  auto get = [&](const std::string& s) {
    return test::prometheusSample(text, s).value_or(NAN);
  };
  f.dispatches = get("kiln_dispatch_latency_seconds_count");
  f.dispatchMeanMs = 1000 * get("kiln_dispatch_latency_seconds_sum") /
                     std::max(1.0, f.dispatches);
  f.dispatchP50Ms =
      1000 * histogramQuantile(text, "kiln_dispatch_latency_seconds", 0.5);
  f.dispatchP99Ms =
      1000 * histogramQuantile(text, "kiln_dispatch_latency_seconds", 0.99);
  f.longestIdleMs = 1000 * get("kiln_slot_idle_with_work_max_seconds");
  f.idleP99Ms =
      1000 * histogramQuantile(text, "kiln_slot_idle_with_work_seconds", 0.99);
  f.loopTurnP99Ms =
      1000 * histogramQuantile(text, "kiln_scheduler_loop_turn_seconds", 0.99);
  f.longestLoopTurnMs = 1000 * get("kiln_scheduler_loop_turn_max_seconds");
}

void startFarm(test::Farm& farm, int workers, unsigned slots) {
  farm.startScheduler();
  for (int i = 0; i < workers; i++)
    farm.addWorker(test::WorkerOptions::withSlots(slots));
  if (!farm.waitForWorkers(workers, 120s))
    throw Error("workers did not join: " + farm.worker(0).log());
}

// Evaluates and waits; returns (evaluation seconds, build seconds).
std::pair<double, double> evalAndBuild(test::Farm& farm, const std::string& js) {
  auto t0 = Clock::now();
  int64_t eval = farm.evaluate("bench", js, std::chrono::seconds(7200));
  double evalSecs = since(t0);
  auto t1 = Clock::now();
  if (!farm.waitForBuilds(eval, 6h)) throw Error("builds did not finish");
  double buildSecs = since(t1);
  auto counts = farm.view()->buildCounts(eval);
  int64_t bad = counts.all - counts.succeeded;
  if (bad) throw Error(std::to_string(bad) + " builds failed");
  return {evalSecs, buildSecs};
}

// The idle-with-work histogram: count, and how many stretches were <= le.
void printIdle(const test::Farm& farm) {
  std::string text = farm.metricsText();
  auto get = [&](const std::string& s) {
    return test::prometheusSample(text, s).value_or(-1);
  };
  double n = get("kiln_slot_idle_with_work_seconds_count");
  double sum = get("kiln_slot_idle_with_work_seconds_sum");
  std::cout << "slot idle-with-work stretches: " << n << ", mean "
            << (n > 0 ? 1000 * sum / n : 0) << " ms, longest "
            << 1000 * get("kiln_slot_idle_with_work_max_seconds")
            << " ms (goal < 50 ms)\n  buckets (<= ms: count):";
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::string key = "kiln_slot_idle_with_work_seconds_bucket{le=\"";
    if (line.rfind(key, 0) != 0) continue;
    std::string le = line.substr(key.size(), line.find('"', key.size()) - key.size());
    std::string v = line.substr(line.rfind(' ') + 1);
    char ms[32];
    std::snprintf(ms, sizeof ms, "%g", 1000 * std::strtod(le.c_str(), nullptr));
    std::cout << " " << (le == "+Inf" ? le : std::string(ms)) << ":" << v;
  }
  std::cout << "\n  dispatch latency count "
            << get("kiln_dispatch_latency_seconds_count") << ", mean "
            << 1000 * get("kiln_dispatch_latency_seconds_sum") /
                   std::max(1.0, get("kiln_dispatch_latency_seconds_count"))
            << " ms; idle slot-seconds total "
            << get("kiln_idle_worker_seconds_total") << "\n";
  std::cout << "  service loop turns " << get("kiln_scheduler_loop_turn_seconds_count")
            << ", longest " << 1000 * get("kiln_scheduler_loop_turn_max_seconds")
            << " ms (the longest a worker's message could wait unread)\n";
}

// Runs nix-build into a chroot store (always sandboxed by Nix 2.8; the
// sandbox gets /bin and /usr) and returns its wall time.
double nixBuild(const std::string& dir, std::vector<std::string> args) {
  createDirs(dir + "/conf");
  writeFile(dir + "/conf/nix.conf",
            "build-users-group =\nsandbox-paths = /bin /usr /lib /lib64\n");
  args.insert(args.begin(), {"nix-build", "--store", "local?root=" + dir + "/root",
                             "--no-out-link", "--quiet"});
  auto t = Clock::now();
  auto r = test::run(args, "", {"NIX_CONF_DIR=" + dir + "/conf"});
  double secs = since(t);
  if (r.exitCode != 0) throw Error("nix-build failed: " + r.err.substr(0, 2000));
  return secs;
}

// One throughput run on a fresh farm whose state is `options`'.
FarmFigures throughputRun(const std::string& coll, int n, int workers,
                          unsigned slots, const std::string& backend,
                          test::FarmOptions options) {
  test::Farm farm(std::move(options));
  startFarm(farm, workers, slots);
  farm.createJobset("bench", "gen", coll);
  auto [evalSecs, buildSecs] = evalAndBuild(farm, "gen");
  StepTotals totals = stepTotals(farm);
  FarmFigures f;
  f.steps = totals.succeeded;
  f.evalSecs = evalSecs;
  double span = (totals.lastStopMs - totals.firstStartMs) / 1000.0;
  f.stepsPerSec = f.steps / span;
  std::cout << "kiln (" << backend << "): gen-collection " << n << ", "
            << workers << " workers x " << slots << " slots: evaluation "
            << evalSecs << " s, builds " << buildSecs << " s; " << f.steps
            << " steps (" << totals.attempts
            << " attempts) from first start to last stop in " << span
            << " s = " << f.stepsPerSec << " steps/s\n";
  printIdle(farm);
  readMetrics(farm, f);
  std::cout << "  dispatch latency p50 " << f.dispatchP50Ms << " ms, p99 "
            << f.dispatchP99Ms << " ms\n"
            << std::flush;
  return f;
}

// The backends side by side (medians over the rounds) and their ratios.
void printComparison(
    const std::vector<std::string>& backends,
    const std::map<std::string, std::vector<FarmFigures>>& runs) {
  struct Column {
    const char* name;
    double FarmFigures::*field;
  };
  const Column columns[] = {
      {"steps/s", &FarmFigures::stepsPerSec},
      {"dispatch mean ms", &FarmFigures::dispatchMeanMs},
      {"dispatch p50 ms", &FarmFigures::dispatchP50Ms},
      {"dispatch p99 ms", &FarmFigures::dispatchP99Ms},
      {"longest idle-with-work ms", &FarmFigures::longestIdleMs},
      {"idle-with-work p99 ms", &FarmFigures::idleP99Ms},
      {"loop turn p99 ms", &FarmFigures::loopTurnP99Ms},
      {"evaluation s", &FarmFigures::evalSecs},
  };
  auto med = [&](const std::string& b, double FarmFigures::*field) {
    std::vector<double> v;
    for (auto& f : runs.at(b)) v.push_back(f.*field);
    return median(v);
  };
  std::printf("\n%-26s", "median of runs");
  for (auto& b : backends) std::printf(" %12s", b.c_str());
  bool both = runs.count("sqlite") && runs.count("postgres");
  if (both) std::printf(" %16s", "postgres/sqlite");
  std::printf("\n");
  for (auto& c : columns) {
    std::printf("%-26s", c.name);
    for (auto& b : backends) std::printf(" %12.3f", med(b, c.field));
    if (both)
      std::printf(" %15.2fx",
                  med("postgres", c.field) / med("sqlite", c.field));
    std::printf("\n");
  }
  if (both)
    std::printf(
        "(goal, issue 31: steps/s at least 1/1.2 of SQLite's, dispatch p99 "
        "and longest idle-with-work within 1.2x)\n");
}

int throughput(int n, int workers, unsigned slots) {
  auto backends = backendsToRun("sqlite");
  int reps = repsFromEnv();
  TempDir collDir("kiln-bench-coll");
  std::string coll = collDir.path() + "/collection";
  auto g = test::run({test::sourceDir() + "/bench/buildable-collection.sh",
                      std::to_string(n), coll},
                     "", {"KILN_SHARED_DIR=" + test::sharedDir()});
  if (g.exitCode != 0) throw Error("buildable-collection.sh: " + g.err);
  BenchDatabases databases;
  std::map<std::string, std::vector<FarmFigures>> runs;
  for (int rep = 0; rep < reps; rep++)
    for (auto& b : backends)
      runs[b].push_back(
          throughputRun(coll, n, workers, slots, b, farmOptions(databases, b)));
  if (backends.size() > 1 || reps > 1) printComparison(backends, runs);
  if (const char* ref = std::getenv("NIX_REF")) {
    std::vector<std::string> args = {coll + "/default.nix", "-j",
                                     std::to_string(workers * slots)};
    int m = std::string(ref) == "all" ? n : std::atoi(ref);
    if (m < n)
      for (int i = 0; i < m; i++) args.insert(args.end(), {"-A", "p" + std::to_string(i)});
    double secs = nixBuild(collDir.path() + "/nix", args);
    std::cout << "nix-build -j" << workers * slots << " (chroot store, sandboxed) of "
              << (m < n ? "the first " + std::to_string(m) + " jobs" : "all jobs")
              << ": " << secs << " s = " << m / secs << " derivations/s\n";
  }
  return 0;
}

struct Dag {
  std::vector<int> ms;                 // duration of each node
  std::vector<std::vector<int>> deps;  // earlier nodes
  double cp = 0, work = 0;             // seconds
};

Dag makeDag(int n, int unitMs, int window, unsigned seed) {
  std::mt19937 rnd(seed);
  Dag d;
  std::vector<double> finish(n);
  for (int i = 0; i < n; i++) {
    d.ms.push_back(unitMs * (1 + int(rnd() % 4)));
    std::vector<int> deps;
    int k = i == 0 ? 0 : int(rnd() % 4);
    for (int j = 0; j < k; j++) deps.push_back(std::max(0, i - 1 - int(rnd() % window)));
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    double start = 0;
    for (int p : deps) start = std::max(start, finish[p]);
    finish[i] = start + d.ms[i] / 1000.0;
    d.cp = std::max(d.cp, finish[i]);
    d.work += d.ms[i] / 1000.0;
    d.deps.push_back(deps);
  }
  return d;
}

// The DAG as a Nix file; `salt` changes every .drv but not the pnames.
void writeDag(const Dag& d, const std::string& dir, const std::string& salt) {
  std::ostringstream f;
  f << "let mk = { pname, ms, deps }: derivation {\n"
       "  name = pname; inherit pname; system = \"x86_64-linux\";\n"
       "  builder = \"/bin/sh\"; PATH = \"/usr/bin:/bin\"; salt = \""
    << salt
    << "\";\n"
       "  args = [ \"-c\" \"sleep ${ms}; echo ${pname} ${toString deps} > $out\" ];\n"
       "}; in rec {\n";
  for (size_t i = 0; i < d.ms.size(); i++) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.3f", d.ms[i] / 1000.0);
    f << "  n" << i << " = mk { pname = \"n" << i << "\"; ms = \"" << secs
      << "\"; deps = [";
    for (int p : d.deps[i]) f << " n" << p;
    f << " ]; };\n";
  }
  f << "}\n";
  createDirs(dir);
  writeFile(dir + "/default.nix", f.str());
}

void makespanRun(int n, int workers, unsigned slots, int unitMs, int window,
                 const std::string& backend, test::FarmOptions options) {
  Dag dag = makeDag(n, unitMs, std::max(1, window), 7);
  double total = workers * slots;
  double bound = std::max(dag.cp, dag.work / total);
  std::cout << "DAG: " << n << " sleep steps, critical path " << dag.cp
            << " s, total work " << dag.work << " s, work / " << total
            << " slots = " << dag.work / total << " s, bound " << bound << " s\n";
  test::Farm farm(std::move(options));
  writeDag(dag, farm.dir() + "/warm", "warm-up");
  writeDag(dag, farm.dir() + "/timed", "timed");
  startFarm(farm, workers, slots);
  farm.createJobset("bench", "warm", farm.dir() + "/warm");
  farm.createJobset("bench", "timed", farm.dir() + "/timed");
  auto warm = evalAndBuild(farm, "warm");
  std::cout << "warm-up run (durations unknown to the scheduler): "
            << warm.second << " s\n";
  auto t = evalAndBuild(farm, "timed");
  int64_t eval = farm.view()->latestEvaluation();
  int64_t created = 0, done = 0;
  std::set<std::string> drvs;
  for (auto& b : farm.builds(eval)) {
    if (created == 0 || b.createdMs < created) created = b.createdMs;
    done = std::max(done, b.stopMs);
    drvs.insert(b.drvPath);
  }
  int64_t first = stepTotals(farm, drvs).firstStartMs;
  double ms = (done - created) / 1000.0;
  std::cout << "kiln (" << backend << "): makespan " << ms
            << " s (from the builds' creation; " << (done - first) / 1000.0
            << " s from the first start; wait " << t.second
            << " s) = " << ms / bound << " x the bound (goal <= 1.10)\n";
  printIdle(farm);
  if (std::getenv("NIX_REF")) {
    double secs = nixBuild(farm.dir() + "/nix",
                           {farm.dir() + "/timed/default.nix", "-j",
                            std::to_string(workers * slots)});
    std::cout << "nix-build -j" << workers * slots << " (chroot store, sandboxed): "
              << secs << " s = " << secs / bound << " x the bound\n";
  }
}

int makespan(int n, int workers, unsigned slots, int unitMs, int window) {
  BenchDatabases databases;
  for (auto& b : backendsToRun("sqlite"))
    makespanRun(n, workers, slots, unitMs, window, b,
                farmOptions(databases, b));
  return 0;
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) {
  using namespace kiln::bench;
  std::string why;
  if (!kiln::test::Farm::canRun(&why)) {
    std::cerr << "farm_bench: " << why << "\n";
    return 2;
  }
  std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "throughput")
      return throughput(intArg(argc, argv, 2, 10000), intArg(argc, argv, 3, 4),
                        intArg(argc, argv, 4, 2));
    if (mode == "makespan")
      return makespan(intArg(argc, argv, 2, 120), intArg(argc, argv, 3, 4),
                      intArg(argc, argv, 4, 2), intArg(argc, argv, 5, 1000),
                      intArg(argc, argv, 6, 12));
  } catch (const std::exception& e) {
    std::cerr << "farm_bench: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "usage: [BACKENDS=sqlite,postgres] [REPS=n] farm_bench "
               "throughput [N] [WORKERS] [SLOTS]\n"
               "       farm_bench makespan [STEPS] [WORKERS] [SLOTS] [UNIT_MS] "
               "[WINDOW]\n";
  return 2;
}
