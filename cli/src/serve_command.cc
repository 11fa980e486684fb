// `kiln serve COLLECTION`: kiln's main job on one machine. Starts a
// scheduler and N local workers (each with its own store mounted at the
// logical store directory, `--private-store`), creates a project and a
// jobset for the collection, evaluates it, reports the builds as they
// finish and keeps serving (re-evaluating when the collection changes)
// until SIGINT/SIGTERM, then stops everything (docs/operations.md).
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/program_options.hpp>
#include <cctype>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_common.h"
#include "command.h"
#include "sandbox_options.h"
#include "kiln/common/file.h"
#include "kiln/common/process.h"
#include "kiln/scheduler/service.h"
#include "kiln/scheduler/state_view.h"
#include "store_cli.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;
using nlohmann::json;
using namespace std::chrono_literals;

std::atomic<bool> gStop{false};
extern "C" void onServeSignal(int) { gStop = true; }

// A kiln child process (this same executable) with its output in a log
// file, started by the one process spawner (kiln/common/process.h). Its own
// session: Ctrl-C reaches serve only, which stops the workers first and the
// scheduler last. It gets SIGTERM when serve dies; stop() asks it to finish.
class KilnChild {
 public:
  KilnChild(std::string name, const std::vector<std::string>& args,
            const std::string& logFile)
      : name_(std::move(name)), log_(logFile) {
    ProcessSpec spec;
    spec.program = "/proc/self/exe";
    spec.args = {"kiln"};
    spec.args.insert(spec.args.end(), args.begin(), args.end());
    spec.env = currentEnvironment();
    spec.outputFile = logFile;
    spec.deathSignal = SIGTERM;
    child_ = std::make_unique<Process>(spec);
  }
  ~KilnChild() { stop(5s); }
  KilnChild(const KilnChild&) = delete;
  KilnChild& operator=(const KilnChild&) = delete;

  const std::string& name() const { return name_; }
  const std::string& log() const { return log_; }
  /// Whether it still runs; reaps it (and keeps its status) once it exited.
  bool running() { return !waitExit(0ms); }
  /// SIGTERM, then SIGKILL after `grace`; returns the wait status text.
  std::string stop(std::chrono::milliseconds grace) {
    if (!running()) return describeWaitStatus(*status_);
    child_->signal(SIGTERM);
    if (!waitExit(grace)) {
      child_->killTree();
      waitExit(std::chrono::hours(1));
    }
    return describeWaitStatus(status_.value_or(0));
  }

 private:
  // Its wait status once it exited within `timeout`, else nullopt.
  std::optional<int> waitExit(std::chrono::milliseconds timeout) {
    if (!status_) {
      auto ev = child_->next(timeout);
      if (ev.kind == ProcessEvent::Kind::kExited) status_ = ev.status;
    }
    return status_;
  }

  std::string name_;
  std::string log_;
  std::unique_ptr<Process> child_;
  std::optional<int> status_;
};

struct ServeOptions {
  std::string collection;
  std::string stateDir;
  std::string storeDir = "/nix/store";
  std::string listen = "tcp://127.0.0.1:7470";
  int metricsPort = 9470;
  unsigned workers = 2;
  unsigned slots = 1;
  int64_t checkInterval = 60;
  SandboxOptions sandbox;  ///< passed to every local worker (default linux)
};

// Waits until the scheduler printed "listening" (or exited).
void waitListening(KilnChild& sched) {
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!gStop) {
    std::string text = pathExists(sched.log()) ? readFile(sched.log()) : "";
    if (text.find("listening ") != std::string::npos) return;
    if (!sched.running() || std::chrono::steady_clock::now() > deadline)
      throw Error("the scheduler did not start; see " + sched.log() + ":\n" +
                  text.substr(text.size() > 2000 ? text.size() - 2000 : 0));
    std::this_thread::sleep_for(50ms);
  }
}

// Creates the project "serve" and the jobset (once), then evaluates.
int64_t setUpAndEvaluate(const ServeOptions& o, const std::string& jobset) {
  auto request = [&](const std::string& kind, const json& args) {
    return scheduler::submitRequest(o.stateDir, kind, args, 3600s);
  };
  try {
    request("project-create",
            {{"name", "serve"}, {"description", "collections run by kiln serve"}});
  } catch (const scheduler::SchedulerStateError&) {  // exists already
  }
  try {
    request("jobset-create", {{"project", "serve"},
                              {"name", jobset},
                              {"location", o.collection},
                              {"checkInterval", o.checkInterval}});
  } catch (const scheduler::SchedulerStateError&) {
  }
  json r = request("jobset-eval", {{"project", "serve"}, {"jobset", jobset}});
  return r.value("eval", int64_t(0));
}

// Prints a line whenever the builds' counts change.
class Progress {
 public:
  explicit Progress(const std::string& stateDir) : stateDir_(stateDir) {}
  void report() {
    if (!view_) view_ = scheduler::StateView::openIfExists(stateDir_);
    if (!view_) return;
    auto counts = view_->buildCounts();
    int64_t all = counts.all, done = counts.finished, ok = counts.succeeded;
    if (all == all_ && done == done_) return;
    all_ = all;
    done_ = done;
    std::cout << "builds: " << done << "/" << all << " finished, " << ok
              << " succeeded, " << done - ok << " failed"
              << (all > 0 && done == all ? " (all builds finished)" : "")
              << std::endl;
  }

 private:
  std::string stateDir_;
  std::unique_ptr<scheduler::StateView> view_;  // read-only, own connection
  int64_t all_ = -1, done_ = -1;
};

int serve(ServeOptions o) {
  if (geteuid() != 0)
    throw Error("the local workers use --private-store (a mount namespace "
                "with their store on " + o.storeDir +
                "), which needs root; run kiln serve as root, or run "
                "`kiln scheduler` and `kiln worker` yourself "
                "(docs/operations.md)");
  o.stateDir = absPath(o.stateDir);
  std::string logs = o.stateDir + "/serve";
  createDirs(logs);
  std::string jobset = baseNameOf(o.collection);
  for (char& c : jobset)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') c = '_';
  if (jobset.empty() || isdigit(static_cast<unsigned char>(jobset[0])))
    jobset = "c_" + jobset;

  KilnChild sched("scheduler",
                  {"scheduler", "--state-dir", o.stateDir, "--listen", o.listen,
                   "--insecure-plaintext", "--metrics-port",
                   std::to_string(o.metricsPort), "--store-dir", o.storeDir},
                  logs + "/scheduler.log");
  waitListening(sched);
  std::vector<std::unique_ptr<KilnChild>> workers;
  for (unsigned i = 0; i < o.workers; i++) {
    std::string name = "local-" + std::to_string(i);
    std::vector<std::string> args{
        "worker", "--connect", o.listen, "--insecure-plaintext",
        "--private-store", "--state-dir", o.stateDir + "/workers/" + name,
        "--store-dir", o.storeDir, "--worker-id", name, "--slots",
        std::to_string(o.slots)};
    auto sb = sandboxArgs(o.sandbox);
    args.insert(args.end(), sb.begin(), sb.end());
    workers.push_back(std::make_unique<KilnChild>(name, args,
                                                  logs + "/" + name + ".log"));
  }
  std::cout << "kiln serve: " << o.collection << "\n"
            << "  state dir:  " << o.stateDir << "\n"
            << "  scheduler:  " << o.listen << " (log " << sched.log() << ")\n"
            << "  workers:    " << o.workers << " x " << o.slots
            << " slots, private stores under " << o.stateDir << "/workers,"
            << " sandbox " << o.sandbox.name << "\n"
            << "  metrics:    http://127.0.0.1:" << o.metricsPort << "/metrics\n"
            << "  queue:      kiln queue --state-dir " << o.stateDir << "\n"
            << "  logs:       kiln log --state-dir " << o.stateDir
            << " DRV, and " << logs << "/\n"
            << "Ctrl-C stops everything." << std::endl;
  int64_t eval = 0;
  if (!gStop) eval = setUpAndEvaluate(o, jobset);
  std::cout << "evaluation " << eval << " of project serve, jobset " << jobset
            << " (re-evaluated every " << o.checkInterval
            << " s when the collection changes)" << std::endl;
  Progress progress(o.stateDir);
  while (!gStop) {
    progress.report();
    if (!sched.running()) throw Error("the scheduler exited; see " + sched.log());
    for (auto& w : workers)
      if (!w->running())
        throw Error("worker " + w->name() + " exited; see " + w->log());
    std::this_thread::sleep_for(200ms);
  }
  std::cout << "stopping" << std::endl;
  for (auto& w : workers)
    std::cout << "  " << w->name() << ": " << w->stop(30s) << "\n";
  std::cout << "  scheduler: " << sched.stop(30s) << std::endl;
  return kExitOk;
}

int serveCommand(const std::vector<std::string>& args) {
  po::options_description opts(
      "Usage: kiln serve [options] COLLECTION\n\n"
      "Runs kiln's main job on this machine: a scheduler and --workers local\n"
      "workers (own stores mounted at the logical store dir; needs root),\n"
      "a jobset for the collection folder (project 'serve'), an evaluation,\n"
      "and progress lines until Ctrl-C, which stops everything.\n\nOptions");
  StoreLocation loc;
  ServeOptions o;
  opts.add_options()("help,h", "show this help")(
      "workers", po::value(&o.workers), "local workers (default 2)")(
      "slots", po::value(&o.slots), "slots per worker (default 1)")(
      "listen", po::value(&o.listen),
      "scheduler endpoint (default tcp://127.0.0.1:7470)")(
      "metrics-port", po::value(&o.metricsPort),
      "Prometheus /metrics port on 127.0.0.1 (default 9470)")(
      "check-interval", po::value(&o.checkInterval),
      "seconds between checks of the collection (default 60; 0 = once)");
  loc.addOptions(opts);
  addSandboxOptions(opts, o.sandbox);
  std::vector<std::string> paths;
  po::variables_map vm;
  if (auto rc = parseCommandLine("serve", opts, paths, 1, args, vm)) return *rc;
  if (o.slots == 0 || o.workers > 64) {
    std::cerr << "kiln serve: --slots must be >= 1 and --workers <= 64\n";
    return kExitUsage;
  }
  return guarded("serve", [&] {
    o.collection = absPath(paths[0]);
    if (!pathExists(o.collection + "/default.nix"))
      throw SysError("collection '" + o.collection + "/default.nix'", ENOENT);
    o.stateDir = loc.stateDir.empty() ? defaultStateDir() : loc.stateDir;
    o.storeDir = loc.storeDir;
    signal(SIGINT, onServeSignal);
    signal(SIGTERM, onServeSignal);
    return serve(o);
  });
}

RegisterCommand reg("serve",
                    "run a scheduler and local workers building a collection",
                    serveCommand);

}  // namespace
}  // namespace kiln::cli
