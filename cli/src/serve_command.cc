// `kiln serve COLLECTION`: kiln's main job on one machine. Starts a
// scheduler and N local workers (each with its own store mounted at the
// logical store directory, `--private-store`), creates a project and a
// jobset for the collection, evaluates it, reports the builds as they
// finish and keeps serving (re-evaluating when the collection changes)
// until SIGINT/SIGTERM, then stops everything (docs/operations.md). A
// child that dies is restarted with back-off (serve_supervisor.h); the
// scheduler and the workers authenticate each other with CurveZMQ keys kept
// in the state directory, so no other local user can join as a worker.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
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
#include "kiln/common/file.h"
#include "kiln/protocol/keys.h"
#include "kiln/scheduler/service.h"
#include "kiln/scheduler/state_view.h"
#include "kiln/store/signature.h"
#include "notify_options.h"
#include "sandbox_options.h"
#include "serve_supervisor.h"
#include "store_cli.h"

namespace kiln::cli {
namespace {

namespace po = boost::program_options;
using nlohmann::json;
using namespace std::chrono_literals;

std::atomic<bool> gStop{false};
extern "C" void onServeSignal(int) { gStop = true; }

struct ServeOptions {
  std::string collection;
  std::string stateDir;
  std::string storeDir = "/nix/store";
  std::string listen = "tcp://127.0.0.1:7470";
  int metricsPort = 9470;
  std::string webListen = "127.0.0.1:8470";
  unsigned workers = 2;
  unsigned slots = 1;
  int64_t checkInterval = 60;
  SandboxOptions sandbox;  ///< passed to every local worker (default linux)
  std::vector<std::string> notify;  ///< the scheduler's --notify options
  std::string notifySecretFile;     ///< its --notify-secret-file
};

// Prints a supervision line of `child`, if any.
void supervise(SupervisedChild& child) {
  auto line = child.supervise();
  if (!line.empty()) std::cout << "kiln serve: " << line << std::endl;
}

// Waits until the scheduler is ready: it printed "listening" since its
// latest start, which it does once it holds the state directory's lock and
// its socket is bound. Restarts it (with back-off) if it exits meanwhile.
// False if serve was asked to stop first; throws Error after 5 minutes.
bool waitReady(SupervisedChild& sched) {
  auto deadline = std::chrono::steady_clock::now() + 5min;
  while (!gStop) {
    if (sched.running() &&
        sched.logSinceStart().find("listening ") != std::string::npos)
      return true;
    if (std::chrono::steady_clock::now() > deadline) {
      std::string text = sched.logSinceStart();
      throw Error("the scheduler did not start; see " + sched.log() + ":\n" +
                  text.substr(text.size() > 2000 ? text.size() - 2000 : 0));
    }
    supervise(sched);
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

// The CurveZMQ keys of serve's scheduler and workers, and the farm's
// binary-cache signing key (Nix's format: `cache.secret`, `cache.public`),
// in `<state>/serve/keys` (mode 0700; secret keys 0600), made on the first
// run and kept.
class ServeKeys {
 public:
  ServeKeys(const std::string& logs, unsigned workers) : dir_(logs + "/keys") {
    createDirs(dir_);
    if (::chmod(dir_.c_str(), 0700) != 0) throwSysError("chmod " + dir_);
    pair("scheduler");
    cacheKey();
    std::string allowed;
    for (unsigned i = 0; i < workers; i++) {
      std::string name = workerName(i);
      allowed += pair(name) + " " + name + "\n";
    }
    writeFile(dir_ + "/allowed-workers", allowed);
    if (::chmod((dir_ + "/allowed-workers").c_str(), 0600) != 0)
      throwSysError("chmod " + dir_ + "/allowed-workers");
  }
  static std::string workerName(unsigned i) {
    return "local-" + std::to_string(i);
  }
  std::vector<std::string> schedulerArgs() const {
    return {"--secret-key-file", dir_ + "/scheduler.key", "--allowed-workers",
            dir_ + "/allowed-workers", "--cache-secret-key-file",
            dir_ + "/cache.secret"};
  }
  // The public key Nix clients trust the farm's binary cache with.
  std::string cachePublicKey() const {
    return readFile(dir_ + "/cache.public");
  }
  std::vector<std::string> workerArgs(const std::string& name) const {
    return {"--secret-key-file", dir_ + "/" + name + ".key",
            "--server-public-key-file", dir_ + "/scheduler.pub"};
  }

 private:
  // The public key of `name`'s pair, generated if missing.
  std::string pair(const std::string& name) {
    std::string secret = dir_ + "/" + name + ".key";
    if (!pathExists(secret))
      protocol::writeKeyPair(protocol::generateKeyPair(), dir_, name, true);
    return protocol::readSecretKeyFile(secret).publicKey;
  }
  // The binary cache's key pair, generated if missing, named after the
  // host as Nix's keys are (`HOST-kiln-1`).
  void cacheKey() {
    std::string secret = dir_ + "/cache.secret";
    if (pathExists(secret)) return;
    char host[256] = "localhost";
    ::gethostname(host, sizeof host - 1);
    auto key = store::SecretKey::generate(std::string(host) + "-kiln-1");
    writeFile(secret + ".tmp", key.toString(), true);
    if (::chmod((secret + ".tmp").c_str(), 0600) != 0)
      throwSysError("chmod " + secret + ".tmp");
    writeFile(dir_ + "/cache.public", key.toPublicKey().toString(), true);
    if (::rename((secret + ".tmp").c_str(), secret.c_str()) != 0)
      throwSysError("renaming " + secret + ".tmp");
  }
  std::string dir_;
};

// The requests serve makes: the project "serve" and the jobset (once),
// then an evaluation. They are queued in the requests table, never applied
// offline (which would take the scheduler's lock), so a scheduler that is
// restarting answers them when it is back.
class SetUp {
 public:
  SetUp(const ServeOptions& o, const std::string& jobset)
      : db_(o.stateDir + "/scheduler.sqlite"), jobset_(jobset) {
    using scheduler::queueRequest;
    project_ = queueRequest(
        db_, "project-create",
        {{"name", "serve"}, {"description", "collections run by kiln serve"}});
    jobsetReq_ = queueRequest(db_, "jobset-create",
                              {{"project", "serve"},
                               {"name", jobset},
                               {"location", o.collection},
                               {"checkInterval", o.checkInterval}});
    eval_ = queueRequest(db_, "jobset-eval",
                         {{"project", "serve"}, {"jobset", jobset}});
    checkInterval_ = o.checkInterval;
  }
  // Prints the evaluation once it is answered. Throws Error if a request
  // failed for another reason than "exists already".
  void poll() {
    for (int64_t* id : {&project_, &jobsetReq_}) {
      if (!*id) continue;
      try {
        if (scheduler::requestAnswer(db_, *id)) *id = 0;
      } catch (const scheduler::SchedulerStateError&) {  // exists already
        *id = 0;
      }
    }
    if (!eval_) return;
    auto answer = scheduler::requestAnswer(db_, eval_);
    if (!answer) return;
    eval_ = 0;
    std::cout << "evaluation " << answer->value("eval", int64_t(0))
              << " of project serve, jobset " << jobset_
              << " (re-evaluated every " << checkInterval_
              << " s when the collection changes)" << std::endl;
  }

 private:
  scheduler::StateDb db_;
  std::string jobset_;
  int64_t project_ = 0, jobsetReq_ = 0, eval_ = 0, checkInterval_ = 0;
};

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

// The jobset's name: the collection folder's name made a valid one.
std::string jobsetNameOf(const std::string& collection) {
  std::string jobset = baseNameOf(collection);
  for (char& c : jobset)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-')
      c = '_';
  if (jobset.empty() || isdigit(static_cast<unsigned char>(jobset[0])))
    jobset = "c_" + jobset;
  return jobset;
}

// The local workers (not started).
std::vector<std::unique_ptr<SupervisedChild>> makeWorkers(
    const ServeOptions& o, const ServeKeys& keys, const std::string& logs) {
  std::vector<std::unique_ptr<SupervisedChild>> workers;
  for (unsigned i = 0; i < o.workers; i++) {
    std::string name = ServeKeys::workerName(i);
    std::vector<std::string> args{
        "worker",      "--connect",
        o.listen,      "--private-store",
        "--state-dir", o.stateDir + "/workers/" + name,
        "--store-dir", o.storeDir,
        "--worker-id", name,
        "--slots",     std::to_string(o.slots)};
    for (auto& v : {keys.workerArgs(name), sandboxArgs(o.sandbox)})
      args.insert(args.end(), v.begin(), v.end());
    workers.push_back(std::make_unique<SupervisedChild>(
        name, args, logs + "/" + name + ".log", RealClock::instance()));
  }
  return workers;
}

// The web front end's URL, from the scheduler's "listening ... web URL"
// line (the real port, also when --web-listen asked for port 0).
std::string webUrl(SupervisedChild& sched) {
  std::string log = sched.logSinceStart();
  auto at = log.find(" web http://");
  if (at == std::string::npos) return "(not started)";
  at += 5;
  auto end = log.find_first_of(" \n", at);
  return log.substr(at, end == std::string::npos ? end : end - at);
}

void printBanner(const ServeOptions& o, const std::string& logs,
                 const ServeKeys& keys, SupervisedChild& sched,
                 const std::vector<std::unique_ptr<SupervisedChild>>& workers) {
  std::string pids = "scheduler " + std::to_string(sched.pid());
  for (auto& w : workers)
    pids += ", " + w->name() + " " + std::to_string(w->pid());
  std::cout << "kiln serve: " << o.collection << "\n"
            << "  state dir:  " << o.stateDir << "\n"
            << "  scheduler:  " << o.listen << " (CurveZMQ, keys in " << logs
            << "/keys; log " << logs << "/scheduler.log)\n"
            << "  workers:    " << o.workers << " x " << o.slots
            << " slots, private stores under " << o.stateDir << "/workers,"
            << " sandbox " << o.sandbox.name << "\n"
            << "  dashboard:  " << webUrl(sched) << "/\n"
            << "  cache:      " << webUrl(sched)
            << " (binary cache; trusted-public-keys = " << keys.cachePublicKey()
            << ")\n"
            << "  metrics:    http://127.0.0.1:" << o.metricsPort
            << "/metrics\n"
            << "  queue:      kiln queue --state-dir " << o.stateDir << "\n"
            << "  logs:       kiln log --state-dir " << o.stateDir
            << " DRV, and " << logs << "/\n"
            << "  processes:  " << pids << " (restarted if they die)\n"
            << "Ctrl-C stops everything." << std::endl;
}

int serve(ServeOptions o) {
  if (geteuid() != 0)
    throw Error(
        "the local workers use --private-store (a mount namespace "
        "with their store on " +
        o.storeDir +
        "), which needs root; run kiln serve as root, or run "
        "`kiln scheduler` and `kiln worker` yourself "
        "(docs/operations.md)");
  o.stateDir = absPath(o.stateDir);
  std::string logs = o.stateDir + "/serve";
  createDirs(logs);
  ServeKeys keys(logs, o.workers);
  std::vector<std::string> schedArgs{"scheduler",
                                     "--state-dir",
                                     o.stateDir,
                                     "--listen",
                                     o.listen,
                                     "--metrics-port",
                                     std::to_string(o.metricsPort),
                                     "--store-dir",
                                     o.storeDir,
                                     "--web-listen",
                                     o.webListen};
  auto ka = keys.schedulerArgs();
  schedArgs.insert(schedArgs.end(), ka.begin(), ka.end());
  for (auto& n : o.notify) schedArgs.insert(schedArgs.end(), {"--notify", n});
  if (!o.notifySecretFile.empty())
    schedArgs.insert(schedArgs.end(),
                     {"--notify-secret-file", o.notifySecretFile});
  SupervisedChild sched("scheduler", schedArgs, logs + "/scheduler.log",
                        RealClock::instance());
  auto workers = makeWorkers(o, keys, logs);
  sched.start();
  if (waitReady(sched)) {
    for (auto& w : workers) w->start();
    printBanner(o, logs, keys, sched, workers);
    SetUp setUp(o, jobsetNameOf(o.collection));
    Progress progress(o.stateDir);
    while (!gStop) {
      setUp.poll();
      progress.report();
      supervise(sched);
      for (auto& w : workers) supervise(*w);
      std::this_thread::sleep_for(200ms);
    }
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
      "web-listen", po::value(&o.webListen),
      "dashboard and JSON API address (default 127.0.0.1:8470)")(
      "check-interval", po::value(&o.checkInterval),
      "seconds between checks of the collection (default 60; 0 = once)")(
      "notify", po::value(&o.notify)->composing(),
      "the scheduler's notifiers (repeatable): webhook:http://HOST[:PORT]/PATH"
      " or command:CMD (kiln scheduler --help)")(
      "notify-secret-file", po::value(&o.notifySecretFile),
      "file holding the webhook's HMAC-SHA256 key");
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
    // Refused here, not by a scheduler restarted in a loop.
    parseNotifyOptions(o.notify, o.notifySecretFile);
    if (!o.notifySecretFile.empty())
      o.notifySecretFile = absPath(o.notifySecretFile);
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
