// Benchmarks of the scheduler's pure policy core (docs/scheduler.md):
//  - DispatchDecision: 100,000 runnable steps over 4 systems (a share of them
//    needing a feature), 64 workers, 60 jobsets; each iteration finishes one
//    running step and times one dispatch decision (nextAssignments(1)).
//    Reports p50/p99/max in microseconds.
//  - Makespan/<shape>: a synthetic DAG with known critical path and total
//    work run on a fake clock; reports makespan / max(critical path,
//    total work / slots) (goal: <= 1.10).
// There is no reference tool to run beside the pure core: Hydra's queue
// runner cannot be driven without its database and builders.

#include <benchmark/benchmark.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "kiln/scheduler/core.h"

namespace kiln::scheduler {
namespace {

using namespace std::chrono_literals;

const char* const kSystems[] = {"x86_64-linux", "aarch64-linux", "i686-linux",
                                "x86_64-darwin"};

// Thread CPU time in microseconds: unaffected by preemption on a busy host.
double threadCpuUs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 +
         static_cast<double>(ts.tv_nsec) / 1e3;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1));
  return v[i];
}

// 64 workers, 16 per system, 4 slots each; every fourth one supports
// big-parallel, one per system has the mandatory feature benchmark.
void addWorkers(SchedulerCore& core) {
  for (int w = 0; w < 64; ++w) {
    WorkerSpec spec;
    spec.name = "w" + std::to_string(w);
    spec.systems = {kSystems[w % 4]};
    if (w % 4 == 0) spec.systems.push_back("i686-linux");
    if (w % 16 < 4) spec.supportedFeatures = {"big-parallel", "kvm"};
    if (w / 4 == 15) spec.mandatoryFeatures = {"benchmark"};
    spec.slots = 4;
    spec.speedFactor = 1.0 + (w % 3) * 0.5;
    core.registerWorker(spec);
  }
}

void fillRunnable(SchedulerCore& core, std::mt19937& rng, int n) {
  std::uniform_int_distribution<int> pct(0, 99), prio(0, 3), js(0, 59);
  for (int i = 0; i < n; ++i) {
    StepSpec s;
    s.drvPath = "/nix/store/" + std::to_string(i) + "-p.drv";
    s.system = kSystems[i % 4];
    int f = pct(rng);
    if (f < 5) s.requiredFeatures = {"big-parallel"};
    if (f == 5) s.requiredFeatures = {"benchmark"};
    s.pname = "pkg" + std::to_string(i % 5000);
    StepId id = core.addStep(s, {});
    core.addBuild(BuildSpec{i, js(rng), id, pct(rng) == 0 ? 1 : 0, prio(rng)});
  }
}

void DispatchDecision(benchmark::State& state) {
  FakeClock clock(TimePoint{std::chrono::hours(1)});
  SchedulerCore core(clock);
  std::mt19937 rng(42);
  for (int p = 0; p < 5000; ++p)
    core.setHistoricalDuration("pkg" + std::to_string(p), 1 + p % 600);
  addWorkers(core);
  fillRunnable(core, rng, 100000);
  std::vector<StepId> running;
  for (const Assignment& a : core.nextAssignments()) running.push_back(a.step);
  std::vector<double> decisions, finishes, cpu;
  for (auto _ : state) {
    std::uniform_int_distribution<size_t> pick(0, running.size() - 1);
    size_t i = pick(rng);
    clock.advance(1s);
    auto t0 = std::chrono::steady_clock::now();
    core.finishStep(running[i], StepResult::success(std::chrono::seconds(
                                    1 + static_cast<int>(i % 600))));
    auto t1 = std::chrono::steady_clock::now();
    double c1 = threadCpuUs();
    auto as = core.nextAssignments(1);
    double c2 = threadCpuUs();
    auto t2 = std::chrono::steady_clock::now();
    cpu.push_back(c2 - c1);
    double us = std::chrono::duration<double, std::micro>(t2 - t1).count();
    decisions.push_back(us);
    finishes.push_back(
        std::chrono::duration<double, std::micro>(t1 - t0).count());
    state.SetIterationTime(us / 1e6);
    if (as.empty()) {
      running[i] = running.back();
      running.pop_back();
    } else {
      running[i] = as[0].step;
    }
    if (running.empty()) break;
  }
  size_t queued = 0;
  for (auto& [sys, n] : core.metrics().queuedBySystem) queued += n;
  state.counters["decision_p50_us"] = percentile(decisions, 0.50);
  state.counters["decision_p99_us"] = percentile(decisions, 0.99);
  state.counters["decision_max_us"] = percentile(decisions, 1.0);
  state.counters["decision_cpu_p99_us"] = percentile(cpu, 0.99);
  state.counters["decision_cpu_max_us"] = percentile(cpu, 1.0);
  state.counters["finish_p99_us"] = percentile(finishes, 0.99);
  state.counters["queued_at_end"] = static_cast<double>(queued);
}
BENCHMARK(DispatchDecision)
    ->UseManualTime()
    ->Iterations(20000)
    ->Unit(benchmark::kMicrosecond);

// ---- makespan on a synthetic DAG -------------------------------------------

struct Dag {
  std::vector<int> duration;           // seconds
  std::vector<std::vector<int>> deps;  // indices of earlier nodes
  double criticalPath = 0;
  double totalWork = 0;
};

// `n` nodes; each depends on up to `fanIn` nodes among the previous
// `window`; plus a chain of `chain` nodes of `chainDur` seconds threaded
// through the graph.
Dag makeDag(int n, int fanIn, int window, int chain, int chainDur,
            unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dur(1, 30);
  Dag g;
  int every = chain > 0 ? std::max(1, (n + chain) / chain) : 0;
  int prevChain = -1;
  for (int i = 0; i < n + chain; ++i) {
    std::vector<int> d;
    if (i > 0) {
      std::uniform_int_distribution<int> k(0, fanIn);
      std::uniform_int_distribution<int> from(std::max(0, i - window), i - 1);
      for (int j = k(rng); j > 0; --j) d.push_back(from(rng));
    }
    bool onChain = every > 0 && i % every == 0;
    if (onChain && prevChain >= 0) d.push_back(prevChain);
    if (onChain) prevChain = i;
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    g.duration.push_back(onChain ? chainDur : dur(rng));
    g.deps.push_back(d);
  }
  std::vector<double> finish(g.duration.size());
  for (size_t i = 0; i < g.duration.size(); ++i) {
    double start = 0;
    for (int d : g.deps[i]) start = std::max(start, finish[d]);
    finish[i] = start + g.duration[i];
    g.criticalPath = std::max(g.criticalPath, finish[i]);
    g.totalWork += g.duration[i];
  }
  return g;
}

// Runs the DAG on `workers` x `slots` with a fake clock; returns the
// makespan in seconds.
double simulate(const Dag& g, int workers, unsigned slots) {
  FakeClock clock(TimePoint{std::chrono::hours(1)});
  SchedulerCore core(clock);
  std::vector<StepId> ids;
  std::vector<bool> hasRdep(g.duration.size());
  for (size_t i = 0; i < g.duration.size(); ++i) {
    StepSpec s;
    s.drvPath = "/nix/store/n" + std::to_string(i) + ".drv";
    s.system = "x86_64-linux";
    s.pname = "n" + std::to_string(i);
    core.setHistoricalDuration(s.pname, g.duration[i]);
    std::vector<StepId> deps;
    for (int d : g.deps[i]) {
      deps.push_back(ids[d]);
      hasRdep[d] = true;
    }
    ids.push_back(core.addStep(s, deps));
  }
  for (size_t i = 0; i < ids.size(); ++i)
    if (!hasRdep[i])
      core.addBuild(BuildSpec{static_cast<BuildId>(i), 1, ids[i]});
  for (int w = 0; w < workers; ++w)
    core.registerWorker(WorkerSpec{
        "w" + std::to_string(w), {"x86_64-linux"}, {}, {}, slots, 1.0});
  using Ev = std::pair<TimePoint, StepId>;
  std::priority_queue<Ev, std::vector<Ev>, std::greater<>> running;
  TimePoint start = clock.wallNow();
  size_t done = 0;
  while (done < ids.size()) {
    for (const Assignment& a : core.nextAssignments()) {
      int i = std::stoi(core.step(a.step).drvPath.substr(12));
      running.push({clock.wallNow() + std::chrono::seconds(g.duration[i]), a.step});
    }
    if (running.empty()) break;  // would be a deadlock: reported as failure
    TimePoint t = running.top().first;
    clock.set(t);
    while (!running.empty() && running.top().first == t) {
      StepId s = running.top().second;
      running.pop();
      int i = std::stoi(core.step(s).drvPath.substr(12));
      core.finishStep(s,
                      StepResult::success(std::chrono::seconds(g.duration[i])));
      ++done;
    }
  }
  if (done < ids.size()) return -1;
  return std::chrono::duration<double>(clock.wallNow() - start).count();
}

void Makespan(benchmark::State& state, int n, int fanIn, int window, int chain,
              int chainDur) {
  const int workers = 4;
  const unsigned slots = 4;
  Dag g = makeDag(n, fanIn, window, chain, chainDur, 7);
  double makespan = 0;
  for (auto _ : state) makespan = simulate(g, workers, slots);
  double bound = std::max(g.criticalPath, g.totalWork / (workers * slots));
  state.counters["steps"] = static_cast<double>(g.duration.size());
  state.counters["critical_path_s"] = g.criticalPath;
  state.counters["work_per_slot_s"] = g.totalWork / (workers * slots);
  state.counters["makespan_s"] = makespan;
  state.counters["ratio"] = makespan / bound;
}
BENCHMARK_CAPTURE(Makespan, wide, 20000, 3, 400, 0, 0)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Makespan, deep_chain, 3000, 2, 200, 150, 60)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Makespan, balanced, 5000, 2, 100, 100, 50)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Makespan, narrow_window, 8000, 3, 30, 0, 0)
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::scheduler

BENCHMARK_MAIN();
